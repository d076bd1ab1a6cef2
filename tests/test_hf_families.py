"""Families added for issue 22's real configs (lts/specs/hf.py): Qwen3-VL (qwen3_vl,
qwen3_vl_moe: the text model from text_config, the vision tower counted apart), MiMo (Qwen2 with
MTP layers sharing the embedding and head), their totals
against the published ones within 2%, closed forms of the counted parts, exact refusals.

tests/data/hf/qwen3-vl-*.json: verbatim copies of huggingface.co/Qwen/Qwen3-VL-<size>-Instruct
config.json (235B-A22B, 30B-A3B, 32B, 8B, 4B, 2B); mimo-7b-base.json: huggingface.co/XiaomiMiMo/
MiMo-7B-Base config.json.
"""
import json

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.specs import load_model, param_counts
from lts.specs.hf import qwen3_vl_vision_params, vision_params

DATA = "tests/data/hf"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_error_line(r, path, key):
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    prefix = f"Error: {path}: {key}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def write(tmp_path, base, top=None, **text):
    cfg = json.load(open(f"{DATA}/{base}.json"))
    cfg.get("text_config", cfg).update(text)
    cfg.update(top or {})
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


# ----------------------------------------------------------------------------------------------
# Qwen3-VL

# published totals, text model and vision tower together, the "Model size" of the
# huggingface.co/Qwen/Qwen3-VL-<size>-Instruct pages (safetensors): 8B 8.77B (quoted by
# haimaker.ai/models/qwen/qwen3-vl-8b-instruct "8.8B parameters" and aisight.pl "about 8.77
# billion"), 4B 4.44B (codersera.com's Qwen3-VL-4B guide: "4.44 billion parameters"); 236B, 31B,
# 33B and 2.1B as those pages round them
QWEN3_VL = {"qwen3-vl-235b-a22b": (236e9, "moe"), "qwen3-vl-30b-a3b": (31e9, "moe"),
            "qwen3-vl-32b": (33e9, "dense"), "qwen3-vl-8b": (8.77e9, "dense"),
            "qwen3-vl-4b": (4.44e9, "dense"), "qwen3-vl-2b": (2.1e9, "dense")}


@pytest.mark.parametrize("stem", sorted(QWEN3_VL))
def test_qwen3_vl_total_with_vision_within_2pct_of_published(stem):
    published, kind = QWEN3_VL[stem]
    m = load_model(f"{DATA}/{stem}.json")
    vision = vision_params(json.load(open(f"{DATA}/{stem}.json"))["vision_config"])
    total = param_counts(m)["params_total"] + vision
    assert abs(total / published - 1) < 0.02, (total, published)
    assert m.ffn.kind == kind and m.attention.kind == "gqa"
    assert f"its vision tower (vision_config) has {vision / 1e9:.2f}B parameters, outside the " \
           "totals and not costed" in m.source


def test_qwen3_vl_text_model_is_qwen3s_shape(tmp_path):
    """The text_config read as a plain qwen3 / qwen3_moe config gives the same model (the 4B's
    tie_word_embeddings true is read from the top level as well)."""
    for stem, family in (("qwen3-vl-8b", "qwen3"), ("qwen3-vl-30b-a3b", "qwen3_moe"),
                         ("qwen3-vl-4b", "qwen3")):
        cfg = json.load(open(f"{DATA}/{stem}.json"))
        text = {**cfg["text_config"], "model_type": family,
                "tie_word_embeddings": cfg["tie_word_embeddings"]}
        p = tmp_path / f"{stem}.json"
        p.write_text(json.dumps(text))
        a, b = load_model(f"{DATA}/{stem}.json"), load_model(p)
        for f in ("layers", "hidden", "vocab", "tie_embeddings", "attention", "ffn", "precision"):
            assert getattr(a, f) == getattr(b, f), (stem, f)
    assert load_model(f"{DATA}/qwen3-vl-4b.json").tie_embeddings


def test_qwen3_vl_vision_tower_closed_form():
    """Qwen3-VL-8B's tower: h 1152, I 4304, 27 blocks, patch 16 x 16 x 2 frames, 2304 positions,
    merge 2 x 2 (hm 4608), out 4096, three deepstack mergers."""
    v = json.load(open(f"{DATA}/qwen3-vl-8b.json"))["vision_config"]
    h, i, hm, out = 1152, 4304, 4608, 4096
    block = 4 * h * h + 2 * h * i + 9 * h + i
    embed = 3 * 2 * 16 * 16 * h + h + 2304 * h
    merger = hm * hm + hm + out * hm + out
    want = embed + 27 * block + 2 * h + merger + 3 * (2 * hm + merger)
    assert qwen3_vl_vision_params(v) == vision_params(v) == want == 576_388_336
    assert qwen3_vl_vision_params({**v, "depth": None}) is None


def test_qwen3_vl_wrong_text_model_is_refused(tmp_path):
    p = write(tmp_path, "qwen3-vl-30b-a3b", model_type="qwen3_vl_text")
    assert one_error_line(run("models", "--show", p), p, "text_config.model_type") == \
        "'qwen3_vl_text' is not the text model of a qwen3_vl_moe config (expected " \
        "qwen3_vl_moe_text)"


# ----------------------------------------------------------------------------------------------
# MiMo

def test_mimo_is_qwen2_with_mtp_counted_apart(tmp_path):
    """MiMo-7B-Base: 36 Qwen2 layers (GQA 32/8 of 128, SwiGLU 11008), vocab 151,680 untied, and
    one MTP layer (modeling_mimo.py MiMoMTPLayers: a Qwen2 attention and MLP, input_proj
    [2h -> h], five RMSNorms) using the model's embedding and LM head (no copies)."""
    m = load_model(f"{DATA}/mimo-7b-base.json")
    h, v = 4096, 151680
    attn = h * (32 + 2 * 8) * 128 + 32 * 128 * h
    layer = attn + 3 * h * 11008 + 2 * h
    c = param_counts(m)
    assert c["params_total"] == 36 * layer + 2 * v * h + h == 7_622_397_952
    assert c["params_mtp"] == layer + 2 * h * h + 3 * h == 210_784_256
    assert m.mtp_layers == 1 and m.mtp_shared_embeddings
    assert m.source.endswith("; 1 multi-token-prediction layer (num_nextn_predict_layers) "
                             "counted apart (params_mtp), not run")
    # published: the model card (huggingface.co/XiaomiMiMo/MiMo-7B-Base) and the report (arXiv
    # 2505.07608) name it 7B; its checkpoint, text model and MTP layer in bf16, is 15.67 GB (the
    # four shards of a MiMo-7B-Base fine-tune, huggingface.co/CodeDPO/mimo-7b-base-combined-
    # 100steps: 4.99 + 4.97 + 4.47 + 1.24 GB), 7.83B parameters; copies of the embedding and
    # head in the MTP module would add 2.5 GB
    assert abs((c["params_total"] + c["params_mtp"]) / 7.835e9 - 1) < 0.02
    # the same config as qwen2 is the same model without MTP
    cfg = json.load(open(f"{DATA}/mimo-7b-base.json"))
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**cfg, "model_type": "qwen2"}))
    q = load_model(p)
    assert param_counts(q)["params_total"] == c["params_total"] and q.mtp_layers == 0


def test_mtp_shared_embeddings_toml_key(tmp_path):
    """A model file's mtp_shared_embeddings = true: params_mtp holds no embedding and head
    copies (DeepSeek-V3's own: 2 x 129,280 x 7168 fewer)."""
    base = load_model("deepseek-v3")
    text = open(base.path).read().replace("\nmtp_layers = 1", "\nmtp_shared_embeddings = true"
                                          "\nmtp_layers = 1")
    p = tmp_path / "m.toml"
    p.write_text(text)
    shared = load_model(p)
    assert shared.mtp_shared_embeddings and not base.mtp_shared_embeddings
    assert param_counts(base)["params_mtp"] - param_counts(shared)["params_mtp"] == \
        2 * 129280 * 7168
    assert param_counts(base)["params_total"] == param_counts(shared)["params_total"]

