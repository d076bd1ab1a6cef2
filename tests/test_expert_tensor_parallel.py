"""Expert tensor parallelism (the ``etp`` axis, docs/design.md §2-§3): under ffn1/ffn2 = experts
each routed expert split by its intermediate width over etp of the tp ranks, the experts over
the stage's tp x ep / etp expert groups (the engines' moe_tp = etp, moe_ep = tp x ep / etp; no
more GPUs). The vectorized tables against the scalar reference walk on random strategies, the
weights, FLOPs and dispatch bytes in closed form, where lts refuses it, exact against brute
force with etp in the space, the engines that run it, their flags, the measured layouts and
the CLI."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import reference as ref
from generators import synthetic_dense, synthetic_mla, synthetic_moe, synthetic_moe_uniform
from test_costmodel_reference import compare, report
from test_search import brute_force

from lts.cli import cli
from lts.cost.layouts import MODE_EXPERTS, MODE_EXPERTS_T, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.engines.space import check, runnable
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import (ETP, EXPERT_CHOICES, EXPERTS, MEGATRON, OP_COL, Space, coarse_of,
                                format_strategy, make_row, parse_strategy)
from lts.specs.workload import Workload

H100 = load_topology("h100_dgx")
DECODE = Workload("decode", context=4096, tpot_slo_ms=200.0)
PREFILL = Workload("prefill", context=2048, ttft_slo_ms=5000.0)
MIXED = Workload("mixed", context=3000, isl=2048, step_tokens=1024)
MODELS = {"moe": synthetic_moe, "mla": synthetic_mla}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("work", [DECODE, PREFILL, MIXED], ids=["decode", "prefill", "mixed"])
def test_random_etp_strategies_match_reference(name, work):
    """120 random rows with etp in {1, 2, 4, 8}, two in three with ffn1 = ffn2 = experts (where
    etp acts): the vectorized evaluator equals the reference walk on every one, and at least
    five of them are valid with the experts split over etp > 1 ranks."""
    model = MODELS[name]()
    space = Space.for_model(model, 64, max_etp=8)
    assert space.etp == (1, 2, 4, 8)
    rng = np.random.default_rng(sum(map(ord, name + work.phase)))
    rows = space.decode(space.sample(rng, 120))
    split = np.arange(len(rows)) % 3 != 0
    rows[split, OP_COL["ffn1"]] = rows[split, OP_COL["ffn2"]] = EXPERTS
    res = evaluate(model, H100, work, rows)
    assert (res.valid & split & (rows[:, ETP] > 1)).sum() >= 5
    bad = compare(model, H100, work, rows)
    assert not bad, report(rows, bad)


def _tables(model, rows, work=DECODE):
    return build_tables(model, H100, work, np.stack([coarse_of(r) for r in rows]))


def test_etp_keeps_the_weights_and_splits_each_expert():
    """Closed form, uniform routing, tp 4 x ep 2 over 16 experts (8 per ep group): at etp 1
    each rank holds 2 whole experts, at etp 2 4 halves, at etp 4 8 quarters: the same weights
    and the same FLOPs per rank, each expert's GEMM intermediate/etp wide; the ep dispatch
    carries each routed copy to the etp ranks of its expert's group (etp times the bytes)."""
    model = synthetic_moe_uniform()
    f = model.ffn
    rows = [make_row(EXPERT_CHOICES, tp=4, ep=2, etp=e, batch=64) for e in (1, 2, 4)]
    tab = _tables(model, rows)
    s1, m = SLOT["ffn1"], MODE_EXPERTS
    w = tab.weight_bytes[:, s1, m]
    assert w[1] == pytest.approx(w[0], rel=1e-12) and w[2] == pytest.approx(w[0], rel=1e-12)
    shared = 2 * model.hidden * f.shared_intermediate * model.precision.weight_bytes
    routed = 2 * (16 // 2 // 4) * model.hidden * f.expert_intermediate \
        * model.precision.weight_bytes
    assert w[0] == pytest.approx(routed + shared, rel=1e-12)
    c = tab.compute_s[:, s1, m]
    assert c[1] == pytest.approx(c[0], rel=1e-9) and c[2] == pytest.approx(c[0], rel=1e-9)
    a2a = [nb for kind, g, nb, _ in tab.intrinsic[(s1, m)] if g == "ep"]
    assert len(a2a) == 1 and a2a[0][1] == pytest.approx(2 * a2a[0][0], rel=1e-12)
    assert a2a[0][2] == pytest.approx(4 * a2a[0][0], rel=1e-12)
    # on tokens (T): the tp all-to-all to the experts' ranks and back also etp times
    tt = [nb for kind, g, nb, _ in tab.intrinsic[(s1, MODE_EXPERTS_T)] if g == "tp"]
    assert len(tt) == 1 and tt[0][1] == pytest.approx(2 * tt[0][0], rel=1e-12)


def test_etp_fills_the_ranks_whole_experts_leave_idle():
    """GPT-MoE 1.6T (64 experts) at tp 8 x ep 16: whole experts leave half of the 128 ranks of
    a stage without one (the busiest holds 1 of 4 per ep group's 8 ranks); etp 2 splits each
    over two ranks: half the expert weights per GPU, a faster step."""
    model = load_model("moe1.6t")
    rows = np.stack([parse_strategy(f"tp=8,ep=16,pp=4,etp={e},batch=64,ffn1=experts,"
                                    "ffn2=experts") for e in (1, 2)])
    res = evaluate(model, H100, Workload("decode", context=2048, tpot_slo_ms=100.0), rows)
    assert res.step_s[1] < res.step_s[0] and res.memory_bytes[1] < res.memory_bytes[0]


def test_etp_one_costs_as_before_the_axis():
    """etp = 1 rows cost exactly what they cost without any etp row beside them."""
    model = synthetic_moe()
    rows = np.stack([make_row(EXPERT_CHOICES, tp=4, batch=8),
                     make_row(EXPERT_CHOICES, tp=4, etp=2, batch=8),
                     make_row(EXPERT_CHOICES, tp=4, etp=4, batch=8)])
    both = evaluate(model, H100, DECODE, rows)
    alone = evaluate(model, H100, DECODE, rows[:1])
    assert both.step_s[0] == alone.step_s[0] and both.memory_bytes[0] == alone.memory_bytes[0]
    assert both.step_s[1] != both.step_s[0]


def test_etp_without_experts_is_refused():
    """The decision (docs/design.md §2): under the other FFN choices the experts are already
    split over the tp group (Megatron's) or whole on each rank (none), so etp > 1 means nothing
    there: refused, reason experts (costed as etp = 1 it would list every such strategy once
    per etp); the reference walk agrees."""
    model = synthetic_moe()
    rows = np.stack([make_row(MEGATRON, tp=4, etp=e, batch=8) for e in (1, 2, 4)])
    res = evaluate(model, H100, DECODE, rows)
    assert [res.reason_list(i) for i in range(3)] == [[], ["experts"], ["experts"]]
    assert [ref.evaluate(model, H100, DECODE, r)["reasons"] for r in rows] == \
        [[], ["experts"], ["experts"]]


def test_etp_must_divide_tp_and_needs_experts():
    res = evaluate(synthetic_moe(), H100, DECODE,
                   np.stack([make_row(EXPERT_CHOICES, tp=2, etp=4, batch=4),
                             make_row(EXPERT_CHOICES, tp=4, etp=4, batch=4)]))
    assert res.reason_list(0) == ["divisibility"] and res.valid[1]
    dense = np.stack([make_row(tp=4, etp=2, batch=4)])
    r = evaluate(synthetic_dense(), H100, DECODE, dense)
    assert r.reason_list(0) == ["experts"]
    assert ref.evaluate(synthetic_dense(), H100, DECODE, dense[0])["reasons"] == ["experts"]


def test_exact_equals_brute_force_with_etp_in_decode():
    space = Space(tp=(1, 2, 4), ep=(1, 2), pp=(1, 2), batch=(1, 16, 256), etp=(1, 2, 4),
                  choices=(2, 2, 2, 2, 2, 2, 2, 1, 4, 4, 2, 2), gpus=16)
    problem = Problem(synthetic_moe(), H100, Workload("decode", context=4096, tpot_slo_ms=20.0),
                      space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want)
    assert res.best_score == pytest.approx(want, rel=1e-12), format_strategy(res.best)


def test_exact_equals_brute_force_with_etp_in_the_serve_space():
    from lts.engines import ENGINES
    from lts.search.problems import ServeProblem
    choices = (2, 2, 2, 2, 2, 2, 2, 1, 4, 4, 2, 2)
    serve = ServeProblem(synthetic_moe(), H100, 2000, 500, 40, 4000, gpus=8,
                         engine=ENGINES["generic"].profile,
                         space=Space(tp=(1, 2, 4), ep=(1, 2), pp=(1, 2), batch=(1, 8, 64, 0),
                                     etp=(1, 2, 4), choices=choices, gpus=8))
    res = SEARCHERS["exact"](serve, 0, None, top=1)
    want = brute_force(serve)
    assert np.isfinite(want) and res.best_score == pytest.approx(want, rel=1e-12)


def test_engines_that_run_etp():
    """SGLang 0.5.23 (--ep-size below --tp-size) and TensorRT-LLM 1.2.1
    (moe_tensor_parallel_size) run whole experts split over etp ranks; vLLM 0.33.0 does not;
    under another FFN choice no engine writes etp."""
    model = load_model("deepseek-v3")
    row = make_row(EXPERT_CHOICES, tp=8, etp=2)
    assert runnable("sglang", model, row[None])[0] and check("sglang", model, row) == []
    assert runnable("trtllm", model, row[None])[0] and check("trtllm", model, row) == []
    assert not runnable("vllm", model, row[None])[0]
    assert check("vllm", model, row) == [
        "vLLM cannot run etp=2 (each expert split over 2 of the tp ranks, the experts over the "
        "rest): vLLM 0.33.0's MoE layers are either tensor-parallel over all of a stage's DP x "
        "TP ranks or, with --enable-expert-parallel, expert-parallel over all of them with no "
        "tensor split (model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make: "
        "ep_size = tp_size, tp_size = 1), never both"]
    meg = make_row(MEGATRON, tp=8, etp=2)
    assert not runnable("sglang", model, meg[None])[0]
    assert check("sglang", model, meg)[0].startswith("SGLang runs etp=2 only with the experts "
                                                     "split by expert over the group")
    assert check("sglang", load_model("llama3.1-8b"), make_row(tp=8, etp=2)) == [
        "SGLang cannot run etp=2 on a dense model (no experts to split)"]
    assert runnable("generic", model, meg[None])[0]


def _commands(engine, row, model="deepseek-v3"):
    from lts.launch.emit import commands
    m = load_model(model)
    work = Workload("decode", context=4096, gpus=8)
    return "\n".join(c for _, c in commands(engine, m, load_topology("h200_dgx"), work, row,
                                             model)[0])


def test_launch_flags_name_etp():
    """SGLang: --tp-size the stage, --ep-size its expert groups (moe_tp = tp // ep = etp);
    TensorRT-LLM: --ep_size the expert groups and moe_tensor_parallel_size etp in the config."""
    row = make_row(EXPERT_CHOICES, tp=8, etp=2, batch=32)
    sg = _commands("sglang", row)
    assert "--tp-size 8 --ep-size 4" in sg
    assert "--tp-size 8 --ep-size 8" in _commands("sglang", make_row(EXPERT_CHOICES, tp=8,
                                                                     batch=32))
    trt = _commands("trtllm", make_row(EXPERT_CHOICES, tp=4, etp=2, batch=32), "gpt-oss-120b")
    assert "--tp_size 4 --ep_size 2 " in trt and "moe_tensor_parallel_size: 2" in trt
    plain = _commands("trtllm", make_row(EXPERT_CHOICES, tp=4, batch=32), "gpt-oss-120b")
    assert "--tp_size 4 --ep_size 4 " in plain and "moe_tensor_parallel_size" not in plain


HEADER = ("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source,"
          "strategy,engine,engine_version,attention_tp,attention_dp,moe_tp,moe_ep,gemm_quant,"
          "moe_quant")


def test_validate_predicts_experts_split_both_ways(tmp_path):
    """A measured row of attention tp 4 with experts over moe tp 2 x ep 2 (serving_moe.csv's
    TensorRT-LLM rows) is predicted at tp 4, etp 2 with whole experts, no longer skipped."""
    p = tmp_path / "moe.csv"
    p.write_text(HEADER + "\nm,gpt-oss-120b,h100_dgx,4,,,,fp4,4000,1000,80,tpot_ms,47.6,x,,"
                 "trtllm,1.2.0rc6,4,1,2,2,,\n")
    r = CliRunner().invoke(cli, ["validate", str(p), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["skipped"] == []
    row = d["rows"][0]
    assert (row["tp"], row["ep"], row["etp"], row["layout"]) == (4, 1, 2, [4, 1, 2, 2])
    assert row["predicted"] > 0


def test_moe_tp_flag_searches_etp():
    runner = CliRunner()
    args = ["search", "moe1.6t", "h100_dgx", "--json"]
    out = runner.invoke(cli, args + ["--moe-tp", "8"])
    assert out.exit_code == 0, out.output
    top = json.loads(out.output)["top"]
    assert any(r["etp"] > 1 for r in top)
    # (etp > 1 only with whole experts: no strategy listed once per etp)
    assert all(r["etp"] == 1 or r["ops"]["ffn1"] == "experts" for r in top)
    out = runner.invoke(cli, args)
    assert all(r["etp"] == 1 for r in json.loads(out.output)["top"])
    dense = runner.invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--moe-tp", "2"])
    assert dense.exit_code == 2
    assert "--moe-tp: Llama-3.1-8B is dense (expert tensor parallelism splits a MoE model's " \
        "experts)" in dense.output
