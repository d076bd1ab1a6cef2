"""Mamba-2 layers (issue 22): the [mamba] table and its errors, the state a request holds
(closed form, and it does not grow with the context), the SSM's FLOPs and bytes per token in
decode (the recurrent update) and prefill (chunked SSD, linear in the length), the parameters,
and the exact solver equal to brute force on a model mixing mamba and full-attention layers. The
op-by-op comparison with tests/reference.py runs in test_costmodel_reference.py (model
mamba-small)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_mamba
from lts.cost import kv
from lts.cost.layouts import MODE_DIM0, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables, ssd_flops
from lts.specs import SpecError, linear_params, load_topology, model_from_dict, param_counts
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force
# one recurrent layer's op less the attention layers' share, and the model without them
from test_linear_attention import (_linear_part as _mamba_part, check_state_is_constant,
                                   full_only)

H100 = load_topology("h100_dgx")
NH, P, N, G, K, Q = 16, 64, 128, 2, 4, 128       # the Mamba-2 shapes of model_dict
INTER = NH * P
BC = 2 * G * N                                    # B and C
CHANNELS = INTER + BC                             # conv1d over x, B, C
REC = NH * P * N * 4.0                            # the SSM state, fp32
CONV = (K - 1) * CHANNELS * 2.0                   # the conv state, bf16 (the KV type)
IO = (2 * INTER + BC + NH) * 2.0                  # x, B, C, dt in, y out (bf16)


def model_dict(**att):
    return dict(name="m", source="test", layers=4, hidden=1024, vocab=16000,
                attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64,
                               layer_types=["mamba"] * 3 + ["full_attention"], **att),
                mamba=dict(heads=NH, head_dim=P, state_size=N, groups=G, conv_kernel=K,
                           chunk_size=Q),
                ffn=dict(kind="dense", gated=True, intermediate=2048))


def _with(change):
    d = model_dict()
    change(d)
    return d


# ----------------------------------------------------------------------------------------------
# the representation and its errors

def test_mamba_layers_from_a_model_file():
    m = model_from_dict(model_dict(), "m.toml")
    assert m.linear_layers == 3 and m.kind_groups == (("linear_attention", 3), (None, 1))
    assert (m.linear.intermediate, m.linear.conv_channels, m.linear.in_proj_out) == \
        (INTER, CHANNELS, 2 * INTER + BC + NH)
    d = model_dict()
    del d["mamba"]["chunk_size"]
    assert model_from_dict(d, "m.toml").linear.chunk_size == 256     # HF Mamba2Config default


@pytest.mark.parametrize("change, key, message", [
    (lambda d: d.pop("mamba"), "mamba", "missing table (attention.layer_types has mamba layers)"),
    (lambda d: d["attention"].update(layer_types=["full_attention"]), "mamba",
     "is set but attention.layer_types has no mamba layers"),
    (lambda d: d["attention"].update(layer_types=["mamba"]), "attention.layer_types",
     "every layer is mamba (lts needs at least one full_attention or sliding_attention layer)"),
    (lambda d: d["attention"].update(layer_types=["mamba", "linear_attention",
                                                           "full_attention", "full_attention"]),
     "attention.layer_types",
     "has both linear_attention and mamba layers (lts costs one recurrent kind a model)"),
    (lambda d: d["mamba"].update(groups=3), "mamba.groups", "3 does not divide mamba.heads = 16"),
    (lambda d: d["mamba"].update(conv_kernel=0), "mamba.conv_kernel", "0 must be > 0"),
    (lambda d: d["mamba"].update(expand=2), "mamba.expand", "unknown key"),
    (lambda d: d["attention"].update(kind="mla", heads=16, kv_heads=16, head_dim=96,
                                     kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                                     v_head_dim=64), "attention.layer_types",
     "mamba layers with mla attention are not supported (gqa only)"),
])
def test_bad_mamba_is_refused(change, key, message):
    with pytest.raises(SpecError) as e:
        model_from_dict(_with(change), "m.toml")
    assert str(e.value) == f"m.toml: {key}: {message}"


# ----------------------------------------------------------------------------------------------
# the state a request holds

def test_state_bytes_closed_form():
    m = model_from_dict(model_dict(), "m.toml")
    assert kv.state_bytes(m) == (REC, CONV)
    kv_tok = 2 * 2 * 64 * 2.0                     # K and V of 2 heads of 64, bf16, a token
    for ctx in (1, 4096, 131072):
        assert kv.request_bytes(m, ctx) == 3 * (REC + CONV) + 1 * ctx * kv_tok
    fp8 = model_dict()
    fp8["precision"] = dict(kv_cache="fp8")       # the conv state in the KV type, the SSM's fp32
    assert kv.state_bytes(model_from_dict(fp8, "m.toml")) == (REC, CONV / 2)


@st.composite
def mamba_models(draw):
    groups = draw(st.sampled_from([1, 2, 8]))
    heads = groups * draw(st.sampled_from([1, 2, 4]))
    pattern = draw(st.sampled_from([["mamba", "full_attention"],
                                    ["mamba"] * 3 + ["full_attention"],
                                    ["full_attention", "mamba"]]))
    d = dict(name="h", source="test", layers=len(pattern) * draw(st.integers(1, 3)),
             hidden=draw(st.sampled_from([256, 1024])), vocab=1000,
             attention=dict(kind="gqa", heads=8, kv_heads=draw(st.sampled_from([1, 2, 8])),
                            head_dim=64, layer_types=pattern),
             mamba=dict(heads=heads, head_dim=draw(st.sampled_from([32, 64])),
                        state_size=draw(st.sampled_from([64, 128])), groups=groups,
                        conv_kernel=draw(st.integers(2, 4)),
                        chunk_size=draw(st.sampled_from([128, 256]))),
             ffn=dict(kind="dense", gated=True, intermediate=512),
             precision=dict(kv_cache=draw(st.sampled_from(["bf16", "fp8"]))))
    return model_from_dict(d, "h.toml")


@settings(max_examples=40, deadline=None)
@given(mamba_models(), st.integers(1, 200_000), st.integers(1, 200_000))
def test_a_requests_state_does_not_grow_with_context(m, c1, c2):
    """request bytes minus the attention layers' KV is the mamba layers' state at any context;
    the tables hold the same state per sequence at both contexts (SSM + conv)."""
    check_state_is_constant(m, c1, c2)


# ----------------------------------------------------------------------------------------------
# the SSM's FLOPs and bytes per token

def test_ssd_flops_closed_form():
    g = model_from_dict(model_dict(), "m.toml").linear
    assert ssd_flops(g, prefill=False) == NH * 5 * P * N            # decay, dt x B^T, h C
    assert ssd_flops(g, prefill=True) == NH * (4 * P * N + 2 * Q * P) + G * 2 * Q * N


def test_decode_reads_and_writes_the_state_once_a_token():
    m = model_from_dict(model_dict(), "m.toml")
    row = np.array([make_row()])
    for ctx in (100, 100_000):
        fl, by, held = _mamba_part(m, Workload("decode", ctx), row)
        assert fl == pytest.approx(NH * 5 * P * N, rel=1e-9)
        assert by == pytest.approx(2 * REC + IO, rel=1e-9)
        assert held == pytest.approx(REC, rel=1e-9)
        fl, by, held = _mamba_part(m, Workload("decode", ctx), row, "context")
        assert fl == pytest.approx(2 * K * CHANNELS, rel=1e-9)
        assert by == pytest.approx(2 * CONV + (2 * CHANNELS + 3 * INTER) * 2.0, rel=1e-9)
        assert held == pytest.approx(CONV, rel=1e-9)


@pytest.mark.parametrize("length", [128, 1000, 32768])
def test_prefill_costs_linear_in_length(length):
    m = model_from_dict(model_dict(), "m.toml")
    fl, by, held = _mamba_part(m, Workload("prefill", length), np.array([make_row()]))
    per_tok = NH * (4 * P * N + 2 * Q * P) + G * 2 * Q * N
    assert fl == pytest.approx(length * per_tok, rel=1e-9)
    # the final state written, each chunk's state written and read, the token io
    assert by == pytest.approx(REC + length * (IO + 2 * REC / Q), rel=1e-9)
    assert held == pytest.approx(REC, rel=1e-9)


def test_heads_split_under_tp_like_qkv():
    """tp 2: z, x, dt by heads and B, C by groups halve, as the column-parallel in_proj's."""
    m = model_from_dict(model_dict(), "m.toml")
    one, two = (_mamba_part(m, Workload("decode", 100), np.array([make_row(tp=tp)]))
                for tp in (1, 2))
    # mode none is the whole op on every rank; the DIM0 (heads) mode halves it
    tab = [build_tables(m, H100, Workload("decode", 100), coarse_of(make_row(tp=tp))[None])
           for tp in (1, 2)]
    w = [t.weight_bytes[0, SLOT["qkv"], MODE_DIM0] for t in tab]
    full = 1024 * 20 * 64 * 2.0                  # the attention layer's q, k, v weights (bf16)
    lin = 1024 * (2 * INTER + BC + NH) * 2.0
    assert w[0] == pytest.approx((3 * lin + full) / 4, rel=1e-12)
    assert w[1] == pytest.approx((3 * lin / 2 + 1024 * (16 * 64 / 2 + 2 * 64) * 2.0) / 4,
                                 rel=1e-12)
    assert one[2] == two[2]          # mode none holds the whole state at any tp


def test_projection_weights_and_parameters():
    m = model_from_dict(model_dict(), "m.toml")
    h = 1024
    p = linear_params(m)
    assert p == {"qkv": h * (2 * INTER + BC + NH), "o": INTER * h, "conv": CHANNELS * (K + 1),
                 "other": 3 * NH + INTER}
    att = 1024 * (16 + 2 * 2) * 64 + 16 * 64 * 1024
    embed = 16000 * h * 2 + h
    ffn = 3 * h * 2048
    assert param_counts(m)["params_total"] == 3 * sum(p.values()) + att + 4 * (2 * h + ffn) + embed


def test_uneven_pipeline_split_is_refused():
    """8 layers, three mamba then one full, twice: pp 4 and 8 give stages different kinds."""
    model = synthetic_mamba()
    rows = np.array([make_row(pp=pp, batch=8) for pp in (1, 2, 4, 8)])
    res = evaluate(model, H100, Workload("decode", 4096), rows)
    assert [("divisibility" in res.reason_list(i)) for i in range(4)] == [False, False, True, True]


def test_mamba_layers_hold_less_than_full_attention_at_long_context():
    m = synthetic_mamba()
    rows = np.array([make_row(tp=2, batch=64)])
    work = Workload("decode", 131072)
    a, b = evaluate(m, H100, work, rows), evaluate(full_only(m), H100, work, rows)
    assert a.memory_bytes[0] < b.memory_bytes[0]


# ----------------------------------------------------------------------------------------------
# the exact solver on mamba and full attention layers

@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_on_mamba_and_full_layers(work):
    exact_equals_brute_force(synthetic_mamba(), work, pp=(1, 2, 4))   # pp 4: uneven, refused
