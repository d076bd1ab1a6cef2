"""Record the JSON of a fixed set of commands, or check a checkout against a recording: the
"behaviour unchanged" test of a refactor.

    python scripts/golden.py record DIR      # run every command, write DIR/<name>.json
    python scripts/golden.py check DIR       # run again, compare with DIR, list what differs
                                             # (each differing output: DIR/<name>.new.json)

The commands: ``lts search`` on the paper's six scenarios (moe1.2t and moe1.6t on h100_dgx at
contexts 16k, 32k and 64k), exact and ``--method ppo`` with seeds 0-2; ``lts search --phase
serve`` on every serve problem of ``scripts/benchmark.py`` (all halves; the engine's space where
the problem names one), exact and ppo (seed 0);
``lts estimate`` (decode, prefill, serve); ``lts compare`` (decode and serve, small budgets);
``lts validate`` on both calibration files. Wall-clock fields (``wall_s``, ``mean_wall_s``,
...) are dropped before comparing, nothing else is: a changed float is a difference.
"""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from benchmark import FRESH, FRESH2, FRESH3, PROBLEMS  # noqa: E402

SHARED = Path("..") / "shared" / "data"     # as the README writes it; commands run in ROOT


def commands() -> dict:
    out = {}
    for model in ("moe1.2t", "moe1.6t"):
        for ctx in (16384, 32768, 65536):
            base = ["search", model, "h100_dgx", "--context", str(ctx)]
            out[f"search-{model}-{ctx}-exact"] = base
            for seed in (0, 1, 2):
                out[f"search-{model}-{ctx}-ppo-s{seed}"] = base + ["--method", "ppo",
                                                                    "--seed", str(seed)]
    for name, model, precision, topo, phase, s in PROBLEMS + FRESH + FRESH2 + FRESH3:
        if phase != "serve":
            continue
        args = ["search", model, topo, "--phase", "serve", "--isl", str(s["isl"]),
                "--osl", str(s["osl"]), "--gpus", str(s["gpus"])]
        if "tpot" in s:
            args += ["--tpot-slo-ms", str(s["tpot"])]
        if "ttft" in s:
            args += ["--ttft-slo-ms", str(s["ttft"])]
        if precision:
            args += ["--precision", precision]
        if "engine" in s:
            args += ["--engine", s["engine"]]
        out[name] = args
        out[f"{name}-ppo"] = args + ["--method", "ppo"]
    strategy = "tp=8,ep=16,pp=4,batch=64"
    out["estimate-decode"] = ["estimate", "moe1.6t", "h100_dgx", "--strategy", strategy]
    out["estimate-prefill"] = ["estimate", "llama3.1-70b", "h100_dgx", "--phase", "prefill",
                               "--strategy", "tp=8,batch=4", "--gpus", "8"]
    out["estimate-serve"] = ["estimate", "llama3.1-70b", "h100_dgx", "--phase", "serve",
                             "--strategy", "tp=4,batch=32", "--gpus", "8", "--engine", "vllm"]
    out["compare-decode"] = ["compare", "mixtral-8x7b", "h100_dgx", "--gpus", "8", "--seeds", "2",
                             "--budget", "300"]
    out["compare-serve"] = ["compare", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--seeds", "2",
                            "--budget", "300", "--phase", "serve", "--engine", "vllm"]
    for f in ("calibration.csv", "serving_calibration.csv"):
        out[f"validate-{f[:-4]}"] = ["validate", str(SHARED / f)]
    return out


def strip(x):
    """Drop wall-clock fields, recursively."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if "wall" not in k}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def run(args) -> str:
    p = subprocess.run([sys.executable, str(ROOT / "lts.py"), *args, "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        return json.dumps({"exit": p.returncode, "stderr": p.stderr[-400:]})
    return json.dumps(strip(json.loads(p.stdout)), indent=1, sort_keys=True)


def main(argv) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "check"):
        print(__doc__)
        return 2
    mode, folder = argv[0], Path(argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    cmds = commands()
    with ThreadPoolExecutor(2) as pool:
        texts = dict(zip(cmds, pool.map(run, cmds.values())))
    bad = 0
    for name, text in texts.items():
        path = folder / f"{name}.json"
        if mode == "record":
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            bad += 1
            (folder / f"{name}.new.json").write_text(text)     # beside it, to diff
            print(f"DIFFERS {name}: lts {' '.join(cmds[name])}")
    if mode == "check":
        print(f"{len(texts) - bad} of {len(texts)} identical")
    else:
        print(f"recorded {len(texts)} in {folder}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
