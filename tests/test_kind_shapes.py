"""Attention shapes by layer kind (issue 22): [attention.sliding] / [attention.full] give the layers
of one kind their own heads, KV heads, head widths, a V of its own width (MiMo-V2-Flash) or none
(k_eq_v: Gemma 4's full layers), read and refused with exact messages; each kind's bytes per
token, weights and FLOPs in closed form; a window never costs more than full attention in the
same shapes; the exact solver equals brute force on a model with two shapes. (The scalar
reference walks each layer in its own shape: tests/test_costmodel_reference.py, model
``shapes-small``.)"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_shapes
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.tables import build_tables
from lts.search.exact import _Exact
from lts.specs import SpecError, attention_params, load_topology, model_from_dict, param_counts
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force, never_costs_more

H100 = load_topology("h100_dgx")
H, W = 1024, 512
# synthetic_shapes: sliding layers Q 16 x 64, K 4 x 64, V 4 x 48, sinks; full layers Q 16 x 128,
# K 2 x 128, V made by k_proj (cached apart: 2 x 128)
SLIDE_K, SLIDE_V = 4 * 64 * 2, 4 * 48 * 2
FULL_K = FULL_V = 2 * 128 * 2


def shapes(**att):
    base = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, sliding_window=W,
                layer_types=["sliding_attention", "full_attention"])
    base.update(att)
    return model_from_dict(dict(name="s", source="test", layers=4, hidden=H, vocab=1000,
                                attention=base,
                                ffn=dict(kind="dense", gated=True, intermediate=4096)), "s.toml")


# ----------------------------------------------------------------------------------------------
# reading

def test_kind_tables_from_a_model_file():
    m = synthetic_shapes()
    a = m.attention
    assert (a.heads, a.kv_heads, a.head_dim, a.v_dim, a.sinks, a.k_eq_v) == (16, 4, 64, 48, True,
                                                                             False)
    full = m.kind_attention(None)
    assert (full.heads, full.kv_heads, full.head_dim, full.v_dim, full.sinks, full.k_eq_v) == \
        (16, 2, 128, 128, False, True)
    assert m.kind_attention(W) is a
    # a table that sets nothing is the model's shape; no table, one shape
    assert shapes(full={}).kind_attention(None) == dataclasses.replace(shapes().attention)
    assert shapes().attention.kinds == ()


@pytest.mark.parametrize("att, key, message", [
    (dict(layer_types=["sliding_attention"], full=dict(heads=8)), "attention.full",
     "is set but the model has no full_attention layers"),
    (dict(layer_types=["full_attention"], sliding=dict(heads=8)), "attention.sliding",
     "is set but the model has no sliding_attention layers"),
    (dict(full=dict(kv_heads=3)), "attention.full.kv_heads",
     "3 does not divide attention.full.heads = 16"),
    (dict(full=dict(window=3)), "attention.full.window", "unknown key"),
    (dict(full=dict(k_eq_v=True, v_head_dim=32)), "attention.full.k_eq_v",
     "true needs v_head_dim = head_dim (64): V is made by k_proj"),
    (dict(k_eq_v=True, v_head_dim=32), "attention.k_eq_v",
     "true needs v_head_dim = head_dim (64): V is made by k_proj"),
    (dict(full=dict(head_dim=0)), "attention.full.head_dim", "0 must be > 0"),
    (dict(full=7), "attention.full", "7 is not a table"),
])
def test_bad_kind_tables_are_refused(att, key, message):
    with pytest.raises(SpecError) as e:
        shapes(**att)
    assert e.value.key == key and message in str(e.value)


def test_kind_tables_are_gqa_only():
    att = dict(kind="mla", heads=16, kv_heads=16, head_dim=192, kv_lora_rank=512,
               qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
               sliding=dict(heads=8), sliding_window=W)
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="s", source="t", layers=2, hidden=H, vocab=10, attention=att,
                             ffn=dict(kind="dense", gated=True, intermediate=64)), "s.toml")
    assert (e.value.key, str(e.value).split(": ")[-1]) == (
        "attention.sliding", "is only supported with gqa attention")


# ----------------------------------------------------------------------------------------------
# closed forms

def test_weights_of_each_kind():
    m = synthetic_shapes()
    slide = attention_params(m)
    full = attention_params(m, m.kind_attention(None))
    assert slide == {"qkv": H * (16 * 64 + 4 * 64 + 4 * 48), "o": 16 * 48 * H, "bias": 16}
    assert full == {"qkv": H * (16 * 128 + 2 * 128), "o": 16 * 128 * H}      # no v_proj
    expert, shared = 3 * H * 512, 3 * H * 768
    moe = 8 * expert + shared + H * 8
    assert param_counts(m)["params_total"] == 4 * sum(slide.values()) + 4 * sum(full.values()) \
        + 8 * (2 * H + moe) + 2 * 16000 * H + H


@pytest.mark.parametrize("context", [100, W, 4096, 131072])
def test_each_kind_holds_its_own_bytes(context):
    m = synthetic_shapes()
    assert kv.layer_token_bytes(m) == [(SLIDE_K, SLIDE_V), (FULL_K, FULL_V)] * 4
    assert not kv.uniform(m)
    with pytest.raises(ValueError, match="op tables"):
        kv.token_bytes(m)
    held = 4 * min(context, W) * (SLIDE_K + SLIDE_V) + 4 * context * (FULL_K + FULL_V)
    assert kv.request_bytes(m, context) == held
    # the tables' mean layer holds the same per layer (one sequence, one GPU)
    tab = build_tables(m, H100, Workload("decode", context), np.array([[1, 1, 1, 1]]))
    assert tab.kv_layer_bytes[0, MODE_NONE, MODE_NONE] * 8 == pytest.approx(held, rel=1e-12)


@pytest.mark.parametrize("context", [100, 4096])
def test_each_kind_attends_in_its_own_shape(context):
    """Decode, one sequence on one GPU: the scores and context ops are the mean of the two kinds,
    each with its own heads, widths and cache; the projections' weights too."""
    m = synthetic_shapes()
    tab = build_tables(m, H100, Workload("decode", context), np.array([[1, 1, 1, 1]]))
    peak = H100.peak_for("bf16") * H100.compute_efficiency_for("bf16")
    hbm = H100.hbm_bandwidth_bytes_s * H100.memory_efficiency
    held = min(context, W)

    def op(slot):
        sl = SLOT[slot]
        return (tab.compute_s[0, sl, MODE_NONE] * peak, tab.memory_s[0, sl, MODE_NONE] * hbm,
                tab.weight_bytes[0, sl, MODE_NONE])

    fl, by, _ = op("scores")
    assert fl == pytest.approx((2 * 16 * 64 * held + 2 * 16 * 128 * context) / 2, rel=1e-12)
    assert by == pytest.approx((held * SLIDE_K + 16 * 64 * 2 * 2
                                + context * FULL_K + 16 * 128 * 2 * 2) / 2, rel=1e-12)
    fl, by, _ = op("context")
    assert fl == pytest.approx((2 * 16 * 48 * held + 2 * 16 * 128 * context) / 2, rel=1e-12)
    assert by == pytest.approx((held * SLIDE_V + 16 * 48 * 2 * 2
                                + context * FULL_V + 16 * 128 * 2 * 2) / 2, rel=1e-12)
    _, _, w = op("qkv")
    assert w == (attention_params(m)["qkv"] + attention_params(m, m.kind_attention(None))["qkv"]) \
        / 2 * 2
    _, _, w = op("out_proj")
    assert w == (16 * 48 * H + 16 * 128 * H) / 2 * 2


def test_one_shape_tables_are_unchanged():
    """A kind table that repeats the model's shape costs exactly what no table does."""
    work = Workload("decode", 4096)
    rows = np.array([[2, 1, 1, 8], [1, 1, 2, 64]])
    a = build_tables(shapes(), H100, work, rows)
    b = build_tables(shapes(full=dict(heads=16)), H100, work, rows)
    assert np.allclose(a.time_s, b.time_s, rtol=1e-12, equal_nan=True)
    assert np.allclose(a.kv_layer_bytes, b.kv_layer_bytes, rtol=1e-12)
    assert np.allclose(a.weight_bytes, b.weight_bytes, rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# a window never costs more than full attention, each kind in its own shape

@st.composite
def windowed_shapes(draw):
    """(synthetic_shapes whose sliding layers attend to everything, the same with a window)."""
    m = synthetic_shapes()
    window = draw(st.sampled_from([1, 16, 500, 4096]))
    never = dataclasses.replace(m.attention, window=10 ** 12)
    return dataclasses.replace(m, attention=never), \
        dataclasses.replace(m, attention=dataclasses.replace(m.attention, window=window))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_window_never_costs_more_than_full_attention_in_its_shape(data):
    never_costs_more(data, *data.draw(windowed_shapes()))


# ----------------------------------------------------------------------------------------------
# the exact solver

def test_exact_solver_takes_two_shapes():
    _Exact(synthetic_shapes(), [1] * 12)          # no longer refused


@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_on_two_shapes(work):
    exact_equals_brute_force(synthetic_shapes(), work, pp=(1, 2, 8))

