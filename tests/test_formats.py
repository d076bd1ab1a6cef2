"""Weight formats, their scale bytes and compute classes, the groups a checkpoint leaves
unquantized, and the KV-cache type apart from the weights (issue 22, item 2)."""
import dataclasses
import functools
import json
import re
from pathlib import Path

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
from lts.specs.strategy import coarse_of, make_row
from lts.specs.units import (ACCEPTED_FORMATS, FORMAT_ALIASES, REFUSED_FORMATS,
                             WEIGHT_FORMATS, weight_format)
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
    # int4 + an fp16 scale per group of 128, fp8 activations (TensorRT-LLM's W4A8_AWQ)
    ("w4a8", 0.5 + 2 / 128),
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
    # int4 weights turned into fp8 on fp8 cores; no fp8 cores (A100): bf16
    ("w4a8", "fp8", "fp8"), ("w4afp8", "fp8", "fp8"),
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
    row = coarse_of(make_row(batch=8))[None]
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
    row = make_row(tp=8, batch=64)[None]
    a = serve(m, topo, row, 4000, 1000)
    b = serve(with_precision(m, None, "fp8"), topo, row, 4000, 1000)
    # the pool less a workspace that grows with the batch: a little under twice the requests
    assert 1.95 * a.kv_capacity[0] <= b.kv_capacity[0] <= 2 * a.kv_capacity[0] + 1


# ----------------------------------------------------------------------------------------------
# the other names of each format (issue 36, item 2): one table (units.FORMAT_ALIASES) read by a
# model file, --precision and a measurement row, in any case, "-" for "_"

# every name, with how it is written in the tests: as listed, upper case, with hyphens
SPELLINGS = sorted({(name, fmt) for name, fmt in [*((f, f) for f in WEIGHT_FORMATS),
                                                  *FORMAT_ALIASES.items()]})
WRITTEN = [(name, fmt) for name, fmt in SPELLINGS] + \
    [(name.upper(), fmt) for name, fmt in SPELLINGS if name.upper() != name][:5] + \
    [(name.replace("_", "-"), fmt) for name, fmt in SPELLINGS if "_" in name][:5] + \
    [("Fp8-Block", "fp8_block"), ("INT4-WO", "w4a16_g32"), (" awq ", "w4a16_zp")]
UNKNOWN = (f"'int3' is not a weight format lts knows (expected one of {ACCEPTED_FORMATS}; any "
           "case, - or _); did you mean int8?")


def test_the_spellings_the_issue_and_the_kernel_tables_name():
    """Issue 36's list and every gemm_dtype / moe_dtype of shared/data/kernels (read there
    with pyarrow: bfloat16, fp8, fp8_block, nvfp4, int4_wo, int8_wo, sq, w4a16_mxfp4,
    w4a8_mxfp4_mxfp8, w4afp8) each mean one format or are refused by name."""
    want = {"int4_wo": "w4a16_g32", "w4a16": "w4a16", "int4": "w4a16", "awq": "w4a16_zp",
            "gptq": "w4a16_zp", "fp8_block": "fp8_block", "fp8_blockwise": "fp8_block",
            "block_fp8": "fp8_block", "fp8": "fp8", "fp8_per_tensor": "fp8", "float8": "fp8",
            "e4m3": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4",
            "mxfp4_mxfp8": "mxfp4", "w4a8": "w4a8", "w4a8_awq": "w4a8", "w4afp8": "w4a8",
            "int8": "int8", "w8a8": "int8", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16",
            "float16": "fp16", "sq": "int8", "w4a16_mxfp4": "mxfp4",
            "w4a8_mxfp4_mxfp8": "mxfp4"}
    assert {k: weight_format(k) for k in want} == want
    for name in ("int8_wo", "fp8_pb_wo"):
        with pytest.raises(ValueError, match=f"^'{name}' is {re.escape(REFUSED_FORMATS[name])}, "
                                             "not a format lts costs \\(expected one of "):
            weight_format(name)


def _model_file(tmp_path, weights: str, sub: str = "m"):
    """llama3.1-8b's model file with ``precision.weights`` written ``weights`` (one folder a
    spelling, the same file name: ``models --show`` of two is comparable)."""
    src = (Path(__file__).resolve().parents[1] / "models" / "llama3.1-8b.toml").read_text()
    assert 'weights = "bf16"' in src
    (tmp_path / sub).mkdir(exist_ok=True)
    p = tmp_path / sub / "llama.toml"
    p.write_text(src.replace('weights = "bf16"', f"weights = {json.dumps(weights)}", 1))
    return p


@pytest.mark.parametrize("written, fmt", WRITTEN)
def test_every_spelling_in_a_model_file(tmp_path, written, fmt):
    """precision.weights (and precision.formats) in any spelling: the format it means, and
    ``lts models --show`` says the same as of the file that names the format itself."""
    assert load_model(str(_model_file(tmp_path, written))).precision.weights == fmt
    run = CliRunner().invoke
    show = [run(cli, ["models", "--show", str(_model_file(tmp_path, w, sub)), "--json"])
            for w, sub in ((written, "a"), (fmt, "b"))]
    assert show[0].exit_code == 0, show[0].output
    assert show[0].output.replace(str(tmp_path / "a"), str(tmp_path / "b")) == show[1].output
    mixed = str(_model_file(tmp_path, "bf16")).replace("llama.toml", "mixed.toml")
    Path(mixed).write_text(Path(_model_file(tmp_path, "bf16")).read_text().replace(
        "[precision]", f"[precision]\nformats = {{attention = {json.dumps(written)}}}", 1))
    assert load_model(mixed).precision.formats == (("attention", fmt),)


def test_an_unknown_spelling_in_a_model_file_is_one_line(tmp_path):
    p = _model_file(tmp_path, "int3")
    with pytest.raises(SpecError) as e:
        load_model(str(p))
    assert str(e.value) == f"{p}: precision.weights: {UNKNOWN}"


_ESTIMATE = ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1,batch=8", "--json"]


@functools.lru_cache(maxsize=None)
def _estimate(precision: str) -> str:
    r = CliRunner().invoke(cli, _ESTIMATE + ["--precision", precision])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("written, fmt", WRITTEN)
def test_every_spelling_of_the_precision_flag(written, fmt):
    """--precision in any spelling: estimate's output is the format's own."""
    assert _estimate(written) == _estimate(fmt)


def test_an_unknown_precision_flag_is_one_line():
    run = CliRunner().invoke
    r = run(cli, _ESTIMATE + ["--precision", "int3"])
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == f"Error: Invalid value for '--precision': {UNKNOWN}"
    r = run(cli, _ESTIMATE + ["--precision", "fp8-pb-wo"])
    assert r.exit_code == 2 and r.output.splitlines()[-1].startswith(
        "Error: Invalid value for '--precision': 'fp8-pb-wo' is fp8 weights in 128 x 128 blocks, "
        "weight-only (ModelOpt's FP8_PB_WO), not a format lts costs (expected one of ")


def test_every_spelling_in_a_measurement_row(tmp_path):
    """A row's precision, gemm_quant and moe_quant in any spelling: the row is predicted with
    the format it means, its prediction the format's own; an unknown one skips its row."""
    head = ("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source,"
            "engine,gemm_quant,moe_quant")
    rows = [head]
    for i, (written, fmt) in enumerate(WRITTEN):
        for col, cells in (("p", (written, "", "")), ("q", ("", written, written)),
                           ("pc", (fmt, "", "")), ("qc", ("", fmt, fmt))):
            rows.append(f"{col}{i},llama3.1-8b,h100_dgx,1,1,1,1,{cells[0]},512,128,8,tpot_ms,10,x,"
                        f"vllm,{cells[1]},{cells[2]}")
    rows.append("bad,llama3.1-8b,h100_dgx,1,1,1,1,,512,128,8,tpot_ms,10,x,vllm,int3,int3")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    r = CliRunner().invoke(cli, ["validate", str(tmp_path / "m.csv"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    got = {row["id"]: row for row in d["rows"]}
    assert len(got) == 4 * len(WRITTEN)
    for i, (written, fmt) in enumerate(WRITTEN):
        assert got[f"p{i}"]["weights"] == got[f"q{i}"]["weights"] == fmt, written
        assert got[f"p{i}"]["predicted"] == got[f"pc{i}"]["predicted"], written
        assert got[f"q{i}"]["predicted"] == got[f"qc{i}"]["predicted"], written
    assert d["skipped"] == [{"id": "bad", "row": len(rows) - 1, "model": "llama3.1-8b",
                             "topology": "h100_dgx", "reason": f"gemm_quant: {UNKNOWN}"}]
