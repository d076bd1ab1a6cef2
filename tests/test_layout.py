"""Engine layouts (attention tp/dp, MoE tp/ep) -> lts strategies (engines.space.from_layout) and
the measurement columns that carry them (`lts validate`, shared/data/serving_moe.csv)."""
import json

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.engines.space import from_layout
from lts.specs import load_model
from lts.specs.units import ACCEPTED_FORMATS
from lts.specs.strategy import DP_ATTENTION, EXPERT_CHOICES, MEGATRON

MOE = load_model("minimax-m2.5")
DENSE = load_model("llama3.1-8b")


@pytest.mark.parametrize("layout, want", [
    ((1, 1, 1, 1), (1, 1, MEGATRON, 1)),
    ((4, 1, 4, 1), (4, 1, MEGATRON, 1)),          # tensor-parallel attention and experts
    ((4, 1, 1, 4), (4, 1, EXPERT_CHOICES, 1)),    # whole experts over the tp group
    ((1, 4, 1, 4), (1, 4, MEGATRON, 1)),          # attention DP, experts spread over the ranks
    ((1, 4, 4, 1), (4, 1, DP_ATTENTION, 1)),      # attention DP, experts tensor-parallel
    ((1, 16, 4, 4), (4, 4, DP_ATTENTION, 1)),     # attention DP over 16, experts tp 4 x ep 4
    ((2, 2, 2, 2), (2, 2, MEGATRON, 1)),          # tp 2 inside 2 DP groups, experts tp 2 ep 2
    ((2, 2, 1, 4), (2, 2, EXPERT_CHOICES, 1)),
    ((4, 4, 1, 16), (4, 4, EXPERT_CHOICES, 1)),
    # experts split both ways inside the attention group: lts's etp (moe_tp = etp, moe_ep =
    # tp x ep / etp): serving_moe.csv's TensorRT-LLM rows, SGLang --tp-size 8 --ep-size 4
    ((4, 1, 2, 2), (4, 1, EXPERT_CHOICES, 2)),
    ((8, 1, 2, 4), (8, 1, EXPERT_CHOICES, 2)),
    ((4, 2, 2, 4), (4, 2, EXPERT_CHOICES, 2)),
])
def test_layouts_lts_costs(layout, want):
    tp, ep, choices, etp = from_layout(MOE, *layout)
    assert (tp, ep, tuple(choices), etp) == want
    assert tp * ep == layout[0] * layout[1]       # the same GPUs
    assert (etp, tp * ep // etp) == (layout[2], layout[3]) or choices != EXPERT_CHOICES \
        or etp == 1


@pytest.mark.parametrize("layout, message", [
    ((2, 2, 4, 1), "attention tp 2 x dp 2 with experts over moe tp 4 x ep 1 is not a layout lts "
                   "costs (each expert's tensor split, moe_tp 4, must divide the attention tp 2: "
                   "lts's etp)"),
    ((4, 1, 2, 1), "attention_tp x attention_dp = 4 GPUs but moe_tp x moe_ep = 2"),
    ((0, 1, 1, 1), "every size must be at least 1"),
])
def test_layouts_refused(layout, message):
    with pytest.raises(ValueError) as e:
        from_layout(MOE, *layout)
    assert str(e.value) == message


def test_dense_layouts():
    assert from_layout(DENSE, 8, 1, 8, 1) == (8, 1, MEGATRON, 1)
    with pytest.raises(ValueError, match="attention_dp 2 on a dense model"):
        from_layout(DENSE, 4, 2, 8, 1)


HEADER = ("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source,"
          "strategy,engine,engine_version,attention_tp,attention_dp,moe_tp,moe_ep,gemm_quant,"
          "moe_quant")


def _validate(tmp_path, *rows):
    p = tmp_path / "moe.csv"
    p.write_text("\n".join((HEADER,) + rows) + "\n")
    return CliRunner().invoke(cli, ["validate", str(p), "--json"], catch_exceptions=False)


def test_validate_reads_layouts_and_quantization(tmp_path):
    r = _validate(
        tmp_path,
        "dp,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,16,tpot_ms,20,x,,vllm,0.19.0,1,4,1,4,fp8,fp8",
        "tp,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,16,tpot_ms,20,x,,vllm,0.19.0,4,1,4,1,fp8,fp8",
        "fp4,minimax-m2.5,b200_dgx,4,,,,fp4,1024,128,16,tpot_ms,20,x,,vllm,,4,1,4,1,nvfp4,nvfp4",
        "oss,gpt-oss-120b,h200_dgx,1,1,1,1,fp4,1024,128,16,tpot_ms,5,x,\"tp=1,ep=1,pp=1\",vllm,,"
        "1,1,1,1,nvfp4,nvfp4",
        "mix,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,16,tpot_ms,20,x,,vllm,,4,2,8,1,fp8,fp8")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    rows = {row["id"]: row for row in d["rows"]}
    assert (rows["dp"]["tp"], rows["dp"]["ep"], rows["dp"]["layout"]) == (1, 4, [1, 4, 1, 4])
    assert (rows["tp"]["tp"], rows["tp"]["ep"]) == (4, 1)
    assert rows["tp"]["engine_version"] == "0.19.0"
    # the block-fp8 checkpoint costed as it ships, its KV cache the model's, not fp8
    assert (rows["tp"]["weights"], rows["tp"]["kv_cache"]) == ("fp8_block", "bf16")
    assert (rows["fp4"]["weights"], rows["fp4"]["kv_cache"]) == ("nvfp4", "bf16")
    assert rows["oss"]["weights"] == "mxfp4"         # an fp4 kind: gpt-oss's own MXFP4
    skipped = {s["id"]: s["reason"] for s in d["skipped"]}
    assert skipped == {"mix": "layout 4/2/8/1 (attention tp/dp, moe tp/ep): attention tp 4 x "
                              "dp 2 with experts over moe tp 8 x ep 1 is not a layout lts costs "
                              "(each expert's tensor split, moe_tp 8, must divide the attention "
                              "tp 4: lts's etp)"}
    assert set(d["summary"]["by_model"]) == {"minimax-m2.5", "gpt-oss-120b"}


@pytest.mark.parametrize("quants, reason", [
    ("fp8,nvfp4", "gemm_quant 'fp8' and moe_quant 'nvfp4' differ: lts costs one format for the "
                  "quantized weights"),
    ("int3,int3", f"gemm_quant: 'int3' is not a weight format lts knows (expected one of "
                  f"{ACCEPTED_FORMATS}; any case, - or _); did you mean int8?"),
])
def test_validate_bad_quantization_skips_the_row(tmp_path, quants, reason):
    p = tmp_path / "moe.csv"
    p.write_text(HEADER + "\nq,minimax-m2.5,h200_dgx,4,4,1,1,fp8,1024,128,16,tpot_ms,20,x,,vllm,,"
                 f"4,1,4,1,{quants}\n")
    r = CliRunner().invoke(cli, ["validate", str(p)])
    assert r.exit_code == 1         # its one row skipped: nothing predicted
    assert r.output == f"Error: no row of {p} could be predicted (1 skipped; row 1: {reason})\n"


def test_validate_by_prints_residuals(tmp_path):
    r = _validate(
        tmp_path,
        "a,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,16,tpot_ms,20,x,,vllm,0.19.0,4,1,4,1,fp8,fp8",
        "b,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,32,tpot_ms,20,x,,vllm,0.19.0,4,1,4,1,fp8,fp8",
        "c,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,32,ttft_ms,90,x,,vllm,0.19.0,4,1,4,1,fp8,fp8")
    assert "residuals" not in json.loads(r.output)
    p = str(tmp_path / "moe.csv")
    r = CliRunner().invoke(cli, ["validate", p, "--json", "--by", "concurrency"])
    d = json.loads(r.output)
    rows = {row["id"]: row for row in d["rows"]}
    groups = d["residuals"]["groups"]
    assert d["residuals"]["by"] == ["concurrency"]
    assert [(g["metric"], g["key"], g["count"]) for g in groups] == [
        ("tpot_ms", {"concurrency": 16}, 1), ("tpot_ms", {"concurrency": 32}, 1),
        ("ttft_ms", {"concurrency": 32}, 1)]
    assert groups[0]["median_log2_ratio"] == rows["a"]["log2_ratio"]
    assert groups[2]["median_abs_log2_ratio"] == abs(rows["c"]["log2_ratio"])
    bad = CliRunner().invoke(cli, ["validate", p, "--by", "tp,colour"])
    assert bad.exit_code == 2
    assert "Invalid value for '--by': 'tp,colour': expected distinct row keys of model, " \
        "topology, engine, profile, precision, weights, gpus, tp, ep, pp, cp, isl, osl, " \
        "concurrency, comma-separated" in bad.output


def test_validate_partial_layout_skips_the_row(tmp_path):
    r = _validate(
        tmp_path,
        "q,minimax-m2.5,h200_dgx,4,4,1,1,fp8,1024,128,16,tpot_ms,20,x,,vllm,,4,,4,1,fp8,fp8",
        "a,minimax-m2.5,h200_dgx,4,,,,fp8,1024,128,16,tpot_ms,20,x,,vllm,0.19.0,4,1,4,1,fp8,fp8")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [row["id"] for row in d["rows"]] == ["a"]
    assert [(s["id"], s["row"], s["reason"]) for s in d["skipped"]] == [
        ("q", 1, "attention_dp: empty, but attention_tp is given (the layout is all of "
                 "attention_tp, attention_dp, moe_tp, moe_ep or none)")]


def test_validate_by_empty_is_a_usage_error(tmp_path):
    p = tmp_path / "moe.csv"
    p.write_text(HEADER + "\n")
    r = CliRunner().invoke(cli, ["validate", str(p), "--by", " "])
    assert r.exit_code == 2 and "Invalid value for '--by': ' ': expected row keys" in r.output
