"""Read every HuggingFace config.json of a folder as lts does and compare each model's total with
its published parameter count: the acceptance sweep of issues 22 and 36 (a maintainer's script;
the configs are not shipped).

    python scripts/config_sweep.py DIR        # DIR: folders holding config.json (and
                                              # hf_quant_config.json), or NAME_config.json files
                                              # beside NAME_hf_quant_config.json

A public serving tool bundles 86 such files (ai-dynamo/aiconfigurator at 095f58a5,
aic-core/src/aiconfigurator_core/model_configs/); ``fetch`` that repository and point DIR at the
folder, or at a copy laid out as folders. Prints one line per config: family, whether lts reads
it, its total (the parts the published figure counts: the MTP layers apart, the vision tower
apart unless the card counts it), the published total and the difference; exits 1 when a config
is refused or a total is more than 3% off.
"""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lts.specs import load_model, param_counts  # noqa: E402
from lts.specs.errors import LtsError  # noqa: E402

# published totals by model (a regular expression on the config's name), each from its model
# card or report, as the tests cite them (tests/test_hf.py, test_hf_families.py, test_kind_shapes.py,
# test_llama4.py, test_latent_moe.py, test_compressed.py, test_kda.py, test_msa.py, test_nas.py,
# test_head_gate.py); "+mtp": the figure counts the MTP layers (DeepSeek-V3.2's 685B, MiMo-7B's
# 7.83B)
PUBLISHED = [
    (r"MiniMax-M2\.[57]", 230e9, ""), (r"MiniMax-M3", 428e9, ""),
    (r"Qwen3-0\.6B", 0.6e9, ""), (r"Qwen3-1\.7B", 1.7e9, ""), (r"Qwen3-8B", 8.2e9, ""),
    (r"Qwen3-32B", 32.8e9, ""), (r"Qwen3-VL-32B", 32.8e9, ""), (r"Qwen3-VL-8B", 8.2e9, ""),
    (r"Qwen3-VL-4B", 4.0e9, ""), (r"Qwen3-VL-2B", 1.7e9, ""),
    (r"Qwen3(-VL)?-30B-A3B", 30.5e9, ""), (r"Qwen3(-VL)?-235B-A22B", 235e9, ""),
    (r"Qwen3-Coder-480B", 480e9, ""), (r"Qwen3\.5-397B", 397e9, ""),
    (r"Qwen3\.5-122B", 122e9, ""), (r"Qwen3\.[56]-27B", 27e9, ""),
    (r"Qwen3\.[56]-35B-A3B", 35e9, ""), (r"MiMo-7B", 7.83e9, "+mtp"),
    (r"MiMo-V2-Flash", 309e9, ""), (r"DeepSeek-V3\.2", 685e9, "+mtp"),
    (r"DeepSeek-(R1|V3|V3\.1)\b", 671e9, ""), (r"DeepSeek-V4-Pro", 1.6e12, ""),
    (r"DeepSeek-V4-Flash", 284e9, ""), (r"gemma-4-26B|Gemma-4-26B", 25.2e9, ""),
    (r"Gemma-4-31B", 30.7e9, ""), (r"Llama-4-Maverick", 400e9, ""),
    (r"Llama-4-Scout", 109e9, ""), (r"Llama-3\.1-405B", 405e9, ""),
    (r"Llama-3\.1-70B", 70.6e9, ""), (r"Llama-3\.1-8B", 8.03e9, ""),
    (r"Mixtral-8x22B", 141e9, ""), (r"Mixtral-8x7B", 46.7e9, ""),
    (r"Kimi-K2", 1.04e12, ""), (r"Kimi-K3", 2.8e12, ""), (r"GLM-5", 744e9, ""),
    (r"Nemotron-Super-49B", 49.9e9, ""), (r"Nemotron-3-Nano-30B|Nemotron-3\.5-Lightning-30B",
                                          31.6e9, ""),
    (r"Nemotron-3-Super-120B", 120e9, ""), (r"Nemotron-3-Ultra-550B", 550e9, ""),
    (r"Nemotron-H-56B", 56e9, ""), (r"gpt-oss-120b", 116.83e9, ""),
    (r"gpt-oss-20b", 20.9e9, ""), (r"Step-3\.7-Flash", 196e9, ""),
]
TOLERANCE = 0.03


def folders(root: Path, tmp: Path):
    """(name, folder holding config.json) of every model under ``root``."""
    for p in sorted(root.iterdir()):
        if p.is_dir() and (p / "config.json").is_file():
            yield p.name, p
        elif p.name.endswith("_config.json") and not p.name.endswith("_hf_quant_config.json"):
            name = p.name[:-len("_config.json")]
            d = tmp / name
            d.mkdir()
            shutil.copy(p, d / "config.json")
            q = p.with_name(f"{name}_hf_quant_config.json")
            if q.is_file():
                shutil.copy(q, d / "hf_quant_config.json")
            yield name, d


def main(argv) -> int:
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in folders(Path(argv[1]), Path(tmp)):
            try:
                m = load_model(d)
            except LtsError as e:
                print(f"{name:52s} REFUSED {str(e).splitlines()[0]}")
                bad += 1
                continue
            c = param_counts(m)
            pub = next(((v, how) for rx, v, how in PUBLISHED if re.search(rx, name)), None)
            total = c["params_total"] + (c["params_mtp"] if pub and pub[1] == "+mtp" else 0)
            parts = [f"MTP {c['params_mtp'] / 1e9:.2f}B apart" if c["params_mtp"] and not
                     (pub and pub[1]) else "", "vision tower apart" if "vision" in m.source
                     else ""]
            line = f"{name:52s} {total / 1e9:9.2f}B"
            if pub is None:
                line += "  (no published figure)"
            else:
                diff = total / pub[0] - 1
                bad += abs(diff) > TOLERANCE
                line += f"  published {pub[0] / 1e9:g}B {diff:+.1%}"
            print(line + "".join(f"; {p}" for p in parts if p))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
