"""Llama 4 (issue 22): the llama4 / llama4_text families read from config.json (text_config;
the vision tower counted apart), models/llama4-maverick.toml and models/llama4-scout.toml equal
to their configs and within 2% of the published totals, chunked attention's KV at 131,072 tokens
against the same model with every layer full attention, exact refusals naming the config key."""
import dataclasses
import json

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.cost import kv
from lts.specs import load_model, param_counts
from lts.specs.hf import llama4_vision_params
from lts.specs.model import Chunk

DATA = "tests/data/hf"
# copies of the configs (the gated originals quoted in public code; see the TOML headers)
MAVERICK, SCOUT = f"{DATA}/llama4-maverick.json", f"{DATA}/llama4-scout.json"


@pytest.mark.parametrize("name, config", [("llama4-maverick", MAVERICK),
                                          ("llama4-scout", SCOUT)])
def test_config_equals_toml(name, config):
    m, h = load_model(name), load_model(config)
    for f in ("layers", "hidden", "vocab", "tie_embeddings", "attention", "ffn", "precision",
              "layer_types"):
        assert getattr(m, f) == getattr(h, f), f
    assert "vision tower (vision_config) has 0.87B parameters, outside the totals" in h.source


@pytest.mark.parametrize("name, total, active", [
    # model cards: huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct (17B activated,
    # 400B total) and huggingface.co/meta-llama/Llama-4-Scout-17B-16E (17B activated, 109B total)
    ("llama4-maverick", 400e9, 17e9), ("llama4-scout", 109e9, 17e9)])
def test_published_counts(name, total, active):
    c = param_counts(load_model(name))
    assert abs(c["params_total"] / total - 1) < 0.02
    assert abs(c["params_active"] / active - 1) < 0.02


def test_maverick_shape_closed_form():
    m = load_model("llama4-maverick")
    h = 5120
    attn = 2 * h * 40 * 128 + 2 * h * 8 * 128
    moe = 128 * 3 * h * 8192 + 3 * h * 8192 + h * 128          # experts, shared, router
    dense = 3 * h * 16384
    want = 48 * (attn + 2 * h) + 24 * moe + 24 * dense + 2 * 202048 * h + h
    assert param_counts(m)["params_total"] == want == 400_711_848_960
    assert m.layer_moe == (False, True) * 24
    assert m.kind_groups == ((Chunk(8192), 36), (None, 12))
    assert m.layer_windows[3] is None and m.layer_windows[0] == Chunk(8192)


def test_vision_tower_closed_form():
    # Scout's per-tensor listing (huggingface.co/meta-llama/Llama-4-Scout-17B-16E, transformers
    # 4.51.0): a block 4 x 1408^2 + 2 x 1408 x 5632 + 9 x 1408 + 5632 = 23,807,872; class
    # embedding 1408, position table 812,416, patch embedding 827,904, pre/post LayerNorms
    # 4 x 1408, adapter fc1 23,068,672 and fc2 16,777,216, projector 20,971,520
    v = json.load(open(SCOUT))["vision_config"]
    want = 34 * 23_807_872 + 1408 + 812_416 + 827_904 + 4 * 1408 + 23_068_672 + 16_777_216
    assert llama4_vision_params(v) == want
    assert llama4_vision_params(v, 5120) == want + 20_971_520 == 871_932_416


def test_maverick_kv_at_131072_against_full_attention():
    """36 chunked layers hold one chunk of 8192 tokens, the 12 global ones the whole context:
    7.125 GiB a request at 131,072 tokens against 24 GiB with every layer full attention."""
    m = load_model("llama4-maverick")
    full = dataclasses.replace(m, layer_types=(),
                               attention=dataclasses.replace(m.attention, chunk=None))
    token = 2 * 8 * 128 * 2                        # K and V, 8 kv heads of 128, bf16
    assert kv.request_bytes(m, 131072) == (36 * 8192 + 12 * 131072) * token == 7.125 * 2**30
    assert kv.request_bytes(full, 131072) == 48 * 131072 * token == 24 * 2**30
    assert kv.request_bytes(m, 4096) == kv.request_bytes(full, 4096)


def write(tmp_path, base, **text):
    cfg = json.load(open(base))
    cfg["text_config"].update(text)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_defaults_and_text_only_config(tmp_path):
    # no no_rope_layers and no interleave_moe_layer_step: HF defaults (interval 4, step 1)
    p = write(tmp_path, MAVERICK, interleave_moe_layer_step=None)
    m = load_model(p)
    assert m.ffn.moe_every == 1 and m.moe_layers == 48
    assert m.layer_types == ("chunked_attention",) * 3 + ("full_attention",) * 1 + \
        ("chunked_attention",) * 3 + ("full_attention",) + m.layer_types[8:]
    # a text-only checkpoint (Llama4ForCausalLM, model_type llama4_text)
    cfg = json.load(open(SCOUT))["text_config"]
    (tmp_path / "t.json").write_text(json.dumps(cfg))
    t = load_model(tmp_path / "t.json")
    assert param_counts(t) == param_counts(load_model("llama4-scout"))


@pytest.mark.parametrize("changes, want", [
    (dict(moe_layers=[0, 2]), "text_config.moe_layers: [0, 2] is not every "
                              "interleave_moe_layer_step-th layer (2); lts costs MoE on a regular "
                              "pattern only"),
    (dict(attention_bias=True), "text_config.attention_bias: true is not supported (expected "
                                "false: Llama 4's q/k/v/o projections have no biases)"),
    (dict(no_rope_layers=[1, 0]), "text_config.no_rope_layers: [1, 0] is not one 0 or 1 a layer "
                                  "(expected 48 entries)"),
    (dict(attention_chunk_size=None), "text_config.attention_chunk_size: null is not supported "
                                      "(expected an integer: no_rope_layers has RoPE layers, "
                                      "which chunk)"),
    (dict(sliding_window=4096), "text_config.sliding_window: 4096 is not supported (expected "
                                "null: Llama 4 chunks its local attention)"),
    (dict(interleave_moe_layer_step=5), "text_config.interleave_moe_layer_step: 5 does not divide "
                                        "num_hidden_layers = 48"),
])
def test_bad_configs_are_refused(tmp_path, changes, want):
    p = write(tmp_path, MAVERICK, **changes)
    res = CliRunner().invoke(cli, ["estimate", str(p), "h100_dgx", "--strategy", "tp=8"])
    assert res.exit_code == 1 and res.output == f"Error: {p}: {want}\n", res.output


def test_models_show_names_the_kinds():
    res = CliRunner().invoke(cli, ["models", "--show", "llama4-maverick", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["layer_kinds"] == {"chunked_attention": 36, "full_attention": 12}
    res = CliRunner().invoke(cli, ["models", "--show", "llama4-maverick", "--no-color"])
    assert "chunked_attention layers attend within chunks of 8192 tokens" in \
        " ".join(res.output.split())
