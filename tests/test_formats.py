"""Weight formats, their scale bytes and compute classes, the groups a checkpoint leaves
unquantized, and the KV-cache type apart from the weights (issue 22, item 2)."""
import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from test_serve import serve_cases
from lts.cli import cli
from lts.cost.tables import build_tables
from lts.cost.layouts import MODE_NONE, SLOT
from lts.serving.serve import serve
from lts.specs import (WEIGHT_GROUPS, SpecError, load_model, load_topology, param_counts,
                       with_precision)
from lts.specs import weight_bytes, weight_params
from lts.specs.model import PrecisionSpec
from lts.specs.strategy import megatron_row
from lts.specs.units import WEIGHT_FORMATS
from lts.specs.workload import Workload

# ----------------------------------------------------------------------------------------------
# bytes per weight with scales: closed forms

@pytest.mark.parametrize("fmt, nbytes", [
    ("bf16", 2.0), ("fp16", 2.0), ("fp32", 4.0), ("fp8", 1.0), ("int8", 1.0),
    # one fp32 (4 B) per 128 x 128 block (DeepSeek-V3 report §3.3.1)
    ("fp8_block", 1 + 4 / (128 * 128)),
    # 4-bit e2m1 + one 1-byte e4m3 scale per 16 (NVIDIA NVFP4)
    ("nvfp4", 0.5 + 1 / 16),
    # 4-bit e2m1 + one 1-byte e8m0 scale per 32 (OCP MX v1.0)
    ("mxfp4", 0.5 + 1 / 32),
    # 4-bit + an fp16 scale per group of 128 (+ a 4-bit zero: AWQ, GPTQ)
    ("w4a16", 0.5 + 2 / 128), ("w4a16_zp", 0.5 + 2.5 / 128),
    # groups of 32 with a bf16 scale (Kimi-K2.5)
    ("w4a16_g32", 0.5 + 2 / 32),
])
def test_bytes_per_weight_include_the_scales(fmt, nbytes):
    assert WEIGHT_FORMATS[fmt][0] == nbytes
    assert PrecisionSpec(fmt).weight_bytes == nbytes


@pytest.mark.parametrize("fmt, h100, b200", [
    ("bf16", "bf16", "bf16"), ("fp8", "fp8", "fp8"), ("fp8_block", "fp8", "fp8"),
    ("int8", "fp8", "fp8"),
    # fp4 cores where the GPU has them; Hopper dequantizes into bf16 math (not fp8)
    ("nvfp4", "bf16", "fp4"), ("mxfp4", "bf16", "fp4"),
    ("w4a16", "bf16", "bf16"), ("w4a16_zp", "bf16", "bf16"), ("int4", "bf16", "bf16"),
    ("fp4", "bf16", "fp4"),
])
def test_compute_class_per_format(fmt, h100, b200):
    assert load_topology("h100_dgx").peak_class(fmt) == h100
    assert load_topology("b200_dgx").peak_class(fmt) == b200
    assert load_topology("a100_dgx").peak_class(fmt) == "bf16"


def test_weight_params_by_group_sum_to_the_total():
    for name in ("deepseek-v3", "llama3.1-8b", "mixtral-8x7b", "qwen3-235b-a22b"):
        m = load_model(name)
        groups = weight_params(m)
        assert set(groups) == set(WEIGHT_GROUPS)
        assert sum(groups.values()) == pytest.approx(param_counts(m)["params_total"], rel=1e-12)


def test_weight_bytes_closed_form_with_unquantized_groups():
    m = load_model("mixtral-8x7b", "nvfp4")
    p = weight_params(m)
    b = weight_bytes(m)
    kept = p["embedding"] + p["lm_head"] + p["router"] + p["norm"]
    assert b["total"] == pytest.approx(kept * 2 + (p["attention"] + p["experts"]) * 0.5625)
    assert b["router"] == p["router"] * 2 and b["experts"] == p["experts"] * 0.5625


# ----------------------------------------------------------------------------------------------
# --precision and --kv-cache-dtype

def test_legacy_precisions_set_the_kv_cache_too_and_keep_every_group():
    for fmt in ("bf16", "fp16", "fp32", "fp8", "int8"):
        p = load_model("llama3.1-8b", fmt).precision
        assert (p.weights, p.kv_cache, p.unquantized) == (fmt, fmt, ())


def test_new_formats_keep_the_kv_cache_and_leave_embedding_head_router_norms():
    p = load_model("deepseek-v3", "fp4").precision            # fp4 is NVFP4 now
    assert p.weights == "nvfp4" and p.kv_cache == "bf16"
    assert p.unquantized == ("embedding", "router", "lm_head", "norm")
    assert load_model("deepseek-v3", "int4").precision.weights == "w4a16"


def test_kv_cache_dtype_apart_from_the_weights():
    p = load_model("llama3.1-8b", "nvfp4", "fp8").precision
    assert (p.weights, p.kv_cache) == ("nvfp4", "fp8")
    assert load_model("llama3.1-8b", "fp8", "bf16").precision.kv_cache == "bf16"
    assert load_model("llama3.1-8b", None, "auto").precision == load_model("llama3.1-8b").precision
    with pytest.raises(SpecError, match=r"^--kv-cache-dtype: 'fp4' is not one of auto, bf16, fp8$"):
        with_precision(load_model("llama3.1-8b"), None, "fp4")


def test_cli_kv_cache_dtype_flag():
    run = CliRunner().invoke
    base = ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1,batch=8", "--json"]
    a = json.loads(run(cli, base).output)
    b = json.loads(run(cli, base + ["--kv-cache-dtype", "fp8"]).output)
    # 32 layers x 2 (K, V) x 8 kv heads x 128 x 16,384 tokens x 8 requests: 16 GiB in bf16, 8 in fp8
    assert a["memory_gib_per_gpu"] - b["memory_gib_per_gpu"] == pytest.approx(8.0, abs=0.01)
    bad = run(cli, base + ["--kv-cache-dtype", "fp4"])
    assert bad.exit_code == 2 and "'fp4' is not one of 'auto', 'bf16', 'fp8'" in bad.output


# ----------------------------------------------------------------------------------------------
# the op tables cost each group in its format

def test_tables_cost_unquantized_groups_at_bf16():
    topo = load_topology("b200_dgx")
    work = Workload("decode", 1024, 50.0)
    row = np.array([[1, 1, 1, 8]])
    q = load_model("mixtral-8x7b", "nvfp4")
    everything = dataclasses.replace(q, precision=dataclasses.replace(q.precision, unquantized=()))
    tq, te = (build_tables(m, topo, work, row) for m in (q, everything))
    w = lambda t, slot: t.weight_bytes[0, SLOT[slot], MODE_NONE]     # noqa: E731
    for slot in ("lm_head", "router"):
        assert w(tq, slot) == pytest.approx(w(te, slot) * 2 / 0.5625)
        # bf16 math for the kept groups: their FLOP-bound time at the bf16 rate
        assert tq.compute_s[0, SLOT[slot], MODE_NONE] > te.compute_s[0, SLOT[slot], MODE_NONE]
    for slot in ("qkv", "ffn1", "ffn2"):
        assert w(tq, slot) == w(te, slot)
    # the sum over one layer of each op's weights and the embedding/head equals weight_bytes
    total = (w(tq, "embedding") + w(tq, "lm_head") + w(tq, "final_norm")
             + q.layers * sum(w(tq, s) for s in ("attn_norm", "ffn_norm", "qkv", "out_proj",
                                                  "router", "ffn1", "ffn2")))
    assert total == pytest.approx(weight_bytes(q)["total"], rel=1e-12)


# ----------------------------------------------------------------------------------------------
# a smaller KV type never holds fewer requests (hypothesis)

@settings(max_examples=40)
@given(case=serve_cases(), weights=st.sampled_from(["bf16", "fp8_block", "nvfp4", "w4a16"]))
def test_a_smaller_kv_dtype_never_holds_fewer_requests(case, weights):
    model, topo, row, isl, osl, engine = case
    wide = with_precision(model, weights, "bf16")
    narrow = with_precision(model, weights, "fp8")
    a = serve(wide, topo, row, isl, osl, engine=engine)
    b = serve(narrow, topo, row, isl, osl, engine=engine)
    assert b.kv_capacity[0] >= a.kv_capacity[0] and b.running[0] >= a.running[0]
    assert b.valid[0] or not a.valid[0]


def test_fp8_kv_about_doubles_the_requests_a_pool_holds():
    m = load_model("llama3.1-70b")
    topo = load_topology("h100_dgx")
    row = megatron_row(8, 1, 1, 64)[None]
    a = serve(m, topo, row, 4000, 1000)
    b = serve(with_precision(m, None, "fp8"), topo, row, 4000, 1000)
    # the pool less a workspace that grows with the batch: a little under twice the requests
    assert 1.95 * a.kv_capacity[0] <= b.kv_capacity[0] <= 2 * a.kv_capacity[0] + 1
