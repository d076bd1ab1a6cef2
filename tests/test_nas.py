"""Llama-Nemotron NAS (issue 36): layers without attention (``no_attention``: DeciLM's
attention.no_op, the FFN alone) and dense FFNs of their own widths (``ffn.intermediate_by_layer``),
read and refused with exact messages; weights in closed form; the mean layer's mixer and
attn_norm costs the attention layers' share; never cheaper than the same layers with attention;
the exact solver equals brute force. (The scalar reference walks each layer, skipping the mixer
of a layer without one: tests/test_costmodel_reference.py, ``nas-small``.)"""
import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_nas
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.tables import build_tables
from lts.specs import (SpecError, attention_params, load_model, load_topology, model_from_dict,
                       model_from_hf_config, param_counts)
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import EXACT_WORKS, exact_equals_brute_force, never_costs_more

H = 1024


def nas(**ffn):
    f = dict(kind="dense", gated=True, intermediate_by_layer=[4096, 512])
    f.update(ffn)
    return model_from_dict(dict(name="n", source="t", layers=2, hidden=H, vocab=1000,
                                attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
                                               layer_types=["full_attention", "no_attention"]),
                                ffn=f), "n.toml")


def test_layers_and_widths_read():
    m = synthetic_nas()
    assert (m.bare_layers, m.attention_layers) == (2, 4)
    assert m.ffn.widths == (4096, 1536, 512, 1536, 4096, 512) and m.ffn.intermediate == 4096
    assert m.ffn.width_groups == ((4096, 2), (1536, 2), (512, 2))
    # two attention layers fewer: two attention blocks and two attn_norms fewer than all-attention
    full = dataclasses.replace(m, layer_types=())
    a = sum(attention_params(m).values())
    assert param_counts(full)["params_total"] - param_counts(m)["params_total"] == 2 * (a + H)
    # the KV cache of the attention layers only
    assert kv.request_bytes(m, 1000) == 4 * 1000 * 2 * (4 * 64 * 2)
    # one width alike is no widths at all
    assert nas(intermediate_by_layer=[512, 512]).ffn.widths == ()


W = [4096, 512]


@pytest.mark.parametrize("ffn, key, message", [
    (dict(intermediate_by_layer=[4096]), "ffn.intermediate_by_layer",
     "has 1 entries (expected one a layer: 2)"),
    (dict(intermediate_by_layer=[4096, 0]), "ffn.intermediate_by_layer",
     "[4096, 0] is not a list of widths from 1 to 16,777,216"),
    (dict(intermediate_by_layer=W, intermediate=512), "ffn.intermediate",
     "is set with ffn.intermediate_by_layer (give one of the two)"),
    (dict(intermediate=512, no_ffn_layers=[0]), "ffn.no_ffn_layers",
     "with no_attention layers is not supported (lts costs a layer with a mixer, an FFN or "
     "both, one of the two patterns a model)"),
])
def test_bad_nas_files_are_refused(ffn, key, message):
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="n", source="t", layers=2, hidden=H, vocab=1000,
                             attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
                                            layer_types=["full_attention", "no_attention"]),
                             ffn=dict(kind="dense", gated=True, **ffn)), "n.toml")
    assert str(e.value) == f"n.toml: {key}: {message}"


def test_every_layer_without_attention_is_refused():
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="n", source="t", layers=2, hidden=H, vocab=1000,
                             attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
                                            layer_types=["no_attention"]),
                             ffn=dict(kind="dense", gated=True, intermediate=512)), "n.toml")
    assert str(e.value) == "n.toml: attention.layer_types: every layer is no_attention (lts " \
                           "needs at least one full_attention or sliding_attention layer)"


def test_the_mean_layer_holds_the_attention_layers_share():
    """The qkv op of the mean layer: 4 of 6 layers run it (its FLOPs and weights 2/3 of an
    attention layer's); the FFN's weights the mean of the widths."""
    m = synthetic_nas()
    full = dataclasses.replace(m, layer_types=(),
                               ffn=dataclasses.replace(m.ffn, widths=(), intermediate=4096))
    work = Workload("decode", context=1024)
    coarse = coarse_of(make_row(batch=8))[None]
    a, b = (build_tables(x, load_topology("h100_dgx"), work, coarse) for x in (m, full))
    sl = SLOT["qkv"]
    assert a.weight_bytes[0, sl, MODE_NONE] == pytest.approx(b.weight_bytes[0, sl, MODE_NONE]
                                                             * 4 / 6, rel=1e-12)
    f1 = SLOT["ffn1"]
    mean = (4096 + 1536 + 512) / 3
    assert a.weight_bytes[0, f1, MODE_NONE] == pytest.approx(
        b.weight_bytes[0, f1, MODE_NONE] * mean / 4096, rel=1e-12)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_a_layer_without_attention_never_costs_more(data):
    m = synthetic_nas()
    never_costs_more(data, dataclasses.replace(m, layer_types=()), m)


@pytest.mark.parametrize("work", EXACT_WORKS)
def test_exact_equals_brute_force_with_layers_without_attention(work):
    exact_equals_brute_force(synthetic_nas(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# Llama-3_3-Nemotron-Super-49B-v1's config.json (tests/data/hf/llama-3.3-nemotron-super-49b-v1
# .json: a copy of huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1's); published 49.9B
# (its model card)

NAS = "tests/data/hf/llama-3.3-nemotron-super-49b-v1.json"


def test_nemotron_super_49b_against_its_published_count():
    m = load_model(NAS)
    assert (m.layers, m.bare_layers, m.attention.kv_heads) == (80, 31, 8)
    # round_up(int(2 ffn_mult hidden / 3), 256): ffn_mult 5.25 -> 28672, 0.5 -> 2816
    assert dict(m.ffn.width_groups)[28672] == 49 and dict(m.ffn.width_groups)[2816] == 6
    assert abs(param_counts(m)["params_total"] / 49.9e9 - 1) < 0.03


@pytest.mark.parametrize("change, key, message", [
    (lambda b: b[0]["attention"].update(no_op=False, replace_with_linear=True),
     "block_configs.0.attention.replace_with_linear",
     "true is not supported (attention replaced by a linear layer is not costed by lts)"),
    (lambda b: b[1]["attention"].update(n_heads_in_group=4), "block_configs",
     "2 KV-head groupings (n_heads_in_group [4, 8]): lts costs one attention shape a model"),
    (lambda b: b[6]["ffn"].update(no_op=True), "block_configs.6",
     "has neither attention nor an FFN (an empty layer is not costed by lts)"),
])
def test_what_nas_blocks_hold_that_lts_does_not_cost(tmp_path, change, key, message):
    cfg = json.loads(open(NAS).read())
    change(cfg["block_configs"])
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(SpecError) as e:
        model_from_hf_config(p)
    assert str(e.value) == f"{p}: {key}: {message}"
