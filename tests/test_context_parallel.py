"""Context parallelism (the ``cp`` axis, docs/design.md §2-§3): a prefill pass's prompt tokens
split over cp more GPUs, the step's new cache entries all-gathered over them per layer. The
vectorized tables against the scalar reference walk on random strategies, the exact search
against brute force with cp in the space, the all-gather's bytes in closed form, where lts
refuses it, the engines that run it, and the flag."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import reference as ref
from generators import (synthetic_block_sparse, synthetic_compressed, synthetic_dense,
                        synthetic_linear, synthetic_mla, synthetic_moe, synthetic_sparse,
                        synthetic_window)
from test_costmodel_reference import compare, report
from test_search import brute_force

from lts.cli import cli
from lts.cost.layouts import MODE_DIM0, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.engines.space import check, runnable
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import CP, Space, coarse_of, format_strategy, make_row
from lts.specs.workload import Workload

H100, H200 = load_topology("h100_dgx"), load_topology("h200_dgx")
PREFILL = Workload("prefill", context=4096, ttft_slo_ms=5000.0)
MODELS = {"dense": synthetic_dense, "moe": synthetic_moe, "mla": synthetic_mla,
          "sparse": synthetic_sparse, "window": synthetic_window,
          "compressed": synthetic_compressed, "block-sparse": synthetic_block_sparse}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("work", [PREFILL, Workload("prefill", context=4096, cached=1024)],
                         ids=["prefill", "prefill-cached"])
def test_random_cp_strategies_match_reference(name, work):
    random_rows_match(MODELS[name](), work, name, CP, max_cp=8)


def random_rows_match(model, work, seed: str, col: int, least_valid: int = 0, **limits):
    """120 random rows of the model's space with the context-parallel ``limits``, most with
    column ``col`` above 1 (at least ``least_valid`` of them valid): the vectorized evaluator
    equals the reference walk on every one."""
    space = Space.for_model(model, 64, **limits)
    rows = space.decode(space.sample(np.random.default_rng(sum(map(ord, seed))), 120))
    assert (rows[:, col] > 1).mean() > 0.5
    if least_valid:
        assert (evaluate(model, H100, work, rows).valid & (rows[:, col] > 1)).sum() >= least_valid
    bad = compare(model, H100, work, rows)
    assert not bad, report(rows, bad)


@pytest.mark.parametrize("model, work", [
    (synthetic_dense(), Workload("decode", context=4096)),
    (synthetic_linear(), PREFILL),
], ids=["decode", "linear-attention"])
def test_cp_is_refused_where_lts_does_not_cost_it(model, work):
    """A decode step (its context parallelism is the dcp axis: the tp ranks' own, not more
    GPUs) and a linear-attention layer's recurrent state: invalid, reason context-parallel; the same
    rows at cp = 1 are not refused for it. The reference walk agrees."""
    rows = np.stack([make_row(tp=2, cp=cp, batch=4) for cp in (1, 2, 4)])
    res = evaluate(model, H100, work, rows)
    assert ["context-parallel" in res.reason_list(i) for i in range(3)] == [False, True, True]
    assert [ref.evaluate(model, H100, work, r)["reasons"] for r in rows] == \
        [res.reason_list(i) for i in range(3)]


def test_the_all_gather_carries_each_ranks_new_entries():
    """Closed form: a GQA prefill of one 4,096-token prompt at tp 2, cp 2: each rank computes
    2,048 tokens' K and V of its tp half of the KV heads and gathers the other rank's, so the
    all-gather's result is 4,096 tokens x (K + V bytes) / 2 per layer, over the cp group."""
    model = synthetic_dense()
    a = model.attention
    coarse = np.stack([coarse_of(make_row(tp=2, cp=cp)) for cp in (1, 2)])
    tab = build_tables(model, H100, Workload("prefill", context=4096), coarse)
    recs = [r for r in tab.intrinsic[(SLOT["scores"], MODE_DIM0)] if r[1] == "cp"]
    assert len(recs) == 1
    kind, _, nbytes, t = recs[0]
    per_token = 2 * a.kv_heads * a.head_dim * model.precision.kv_bytes       # K and V
    assert kind == "all-gather"
    assert nbytes[1] == pytest.approx(4096 * per_token / 2, rel=1e-12)
    assert nbytes[0] == 0.0 and t[0] == 0.0 and t[1] > 0.0


def test_cp_cuts_a_long_prompts_ttft():
    """Llama-3.1-70B, one 131,072-token prompt on H200: tp 8 x cp 2 on 16 GPUs prefills faster
    than tp 8 on 8 and than tp 16 on 16 (its all-reduces cross nodes), and holds the whole
    prompt's cache on every rank (the same cache bytes as cp 1)."""
    model = load_model("llama3.1-70b")
    work = Workload("prefill", context=131072, gpus=16)
    rows = np.stack([make_row(tp=8), make_row(tp=8, cp=2), make_row(tp=16)])
    res = evaluate(model, H200, work, rows)
    assert res.valid.all()
    assert res.ttft_s[1] < res.ttft_s[0] and res.ttft_s[1] < res.ttft_s[2]


@pytest.mark.parametrize("model, phase", [(synthetic_dense(), "prefill"),
                                          (synthetic_mla(), "prefill")], ids=["dense", "mla"])
def test_exact_equals_brute_force_with_cp(model, phase):
    space = Space(tp=(1, 2, 4), ep=(1,), pp=(1, 2), batch=(1, 4), cp=(1, 2, 4),
                  choices=(2, 2, 2, 3, 3, 2, 2, 1, 3, 3, 2, 2), gpus=16)
    work = Workload(phase, context=65536, ttft_slo_ms=20.0)
    problem = Problem(model, H100, work, space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want)
    assert res.best_score == pytest.approx(want, rel=1e-12), format_strategy(res.best)
    assert int(res.best[CP]) > 1       # the TTFT limit needs it: the answer is a cp row


def test_exact_equals_brute_force_with_cp_in_decode_and_serve_spaces():
    """cp in the space of a decode step and of the serve phase's one pool (whose steps decode):
    every cp > 1 row is refused, and the exact searches still equal brute force over the whole
    space, cp rows included."""
    from lts.engines import ENGINES
    from lts.search.problems import ServeProblem
    model = synthetic_dense()
    choices = (2, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2)
    decode = Problem(model, H100, Workload("decode", context=4096, tpot_slo_ms=15),
                     Space(tp=(1, 2, 4), ep=(1,), pp=(1, 2), batch=(1, 16, 256), cp=(1, 2),
                           choices=choices, gpus=16))
    serve = ServeProblem(model, H100, 2000, 200, 15, 400, gpus=8,
                         engine=ENGINES["generic"].profile,
                         space=Space(tp=(1, 2), ep=(1,), pp=(1, 2), batch=(1, 8, 64, 0),
                                     cp=(1, 2), choices=choices, gpus=8))
    for problem in (decode, serve):
        res = SEARCHERS["exact"](problem, 0, None, top=1)
        want = brute_force(problem)
        assert np.isfinite(want) and res.best_score == pytest.approx(want, rel=1e-12)
        assert int(res.best[CP]) == 1


def test_engines_that_run_cp():
    """vLLM 0.33.0 runs prefill context parallelism for MLA models only; SGLang's runs inside
    its tp group and TensorRT-LLM has none for these models: each says why."""
    mla, gqa = load_model("deepseek-v3"), load_model("llama3.1-70b")
    row = make_row(tp=8, cp=2)
    assert runnable("vllm", mla, row[None])[0] and check("vllm", mla, row) == []
    assert not runnable("vllm", gqa, row[None])[0]
    assert check("vllm", gqa, row)[0].startswith("vLLM cannot run cp=2 on gqa attention: vLLM "
                                                 "0.33.0 runs --prefill-context-parallel-size")
    for engine in ("sglang", "trtllm"):
        assert not runnable(engine, mla, row[None])[0]
        assert "cp=2" in check(engine, mla, row)[0]
    assert runnable("generic", gqa, row[None])[0]


def test_max_cp_flag():
    runner = CliRunner()
    # a decode step: --max-cp bounds dcp (tests/test_decode_context_parallel.py), never cp
    out = runner.invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--max-cp", "2", "--json"])
    assert out.exit_code == 0, out.output
    assert all(r["cp"] == 1 for r in json.loads(out.output)["top"])
    out = runner.invoke(cli, ["search", "llama3.1-70b", "h200_dgx", "--phase", "prefill",
                              "--context", "131072", "--gpus", "16", "--ttft-slo-ms", "7000",
                              "--max-cp", "4", "--json"])
    assert out.exit_code == 0, out.output
    best = json.loads(out.output)["best"]
    assert best["cp"] > 1 and best["tp"] * best["ep"] * best["pp"] * best["cp"] <= 16
