"""Decode context parallelism (the ``dcp`` axis, docs/design.md §2-§3): in a decode or mixed
step under the heads split, the KV cache's tokens split over dcp of the tp ranks (no more GPUs),
the queries and their log-sum-exp all-gathered and the partial outputs reduce-scattered each
layer. The vectorized tables against the scalar reference walk on random strategies, the
exchange's bytes and the cache in closed form, where lts refuses it, exact against brute force
with dcp in the space, the engines that run it, their flags, and the CLI."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import reference as ref
from generators import (synthetic_compressed, synthetic_dense, synthetic_linear, synthetic_mla,
                        synthetic_moe, synthetic_sparse, synthetic_window)
from test_context_parallel import random_rows_match
from test_search import brute_force

from lts.cli import cli
from lts.cost.layouts import MODE_DIM0, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.engines.space import check, runnable
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import CP, DCP, EXPERT_CHOICES, Space, coarse_of, format_strategy, make_row
from lts.specs.workload import Workload

H100, H200 = load_topology("h100_dgx"), load_topology("h200_dgx")
DECODE = Workload("decode", context=8192, tpot_slo_ms=200.0)
# a mixed step: decoders beside a prefill chunk that reads its prompt's earlier cache
MIXED = Workload("mixed", context=3000, isl=2048, step_tokens=1024)
MODELS = {"dense": synthetic_dense, "moe": synthetic_moe, "mla": synthetic_mla,
          "sparse": synthetic_sparse}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("work", [DECODE, MIXED], ids=["decode", "mixed"])
def test_random_dcp_strategies_match_reference(name, work):
    random_rows_match(MODELS[name](), work, name, DCP, least_valid=5, max_dcp=8)


def test_dcp_splits_the_cache_and_adds_three_collectives():
    """Closed form, MLA decode at tp 8: dcp 8 holds an eighth of the latent cache per rank
    (dcp 1 replicates it on every rank) and reads an eighth of it; the scores op all-gathers
    the decoders' queries over all heads (8 ranks x heads/8 after the gather) in the latent
    width and their fp32 log-sum-exp; the context op reduce-scatters kv_lora-wide outputs."""
    model = synthetic_mla()
    a = model.attention
    seqs, ctx = 16, 8192
    coarse = np.stack([coarse_of(make_row(tp=8, dcp=d, batch=seqs)) for d in (1, 8)])
    tab = build_tables(model, H100, Workload("decode", context=ctx), coarse)
    held = tab.kv_bytes[:, SLOT["scores"], MODE_DIM0]
    assert held[1] == pytest.approx(held[0] / 8, rel=1e-12)
    assert tab.memory_s[1, SLOT["scores"], MODE_DIM0] < tab.memory_s[0, SLOT["scores"], MODE_DIM0]
    ab = model.precision.act_bytes
    gathered = [nb for k, g, nb, _ in tab.intrinsic[(SLOT["scores"], MODE_DIM0)]
                if g == "dcp" and k == "all-gather"]
    assert len(gathered) == 2
    q = seqs * a.heads * (a.kv_lora_rank + a.qk_rope_head_dim) * ab
    assert gathered[0][1] == pytest.approx(q, rel=1e-12)
    assert gathered[1][1] == pytest.approx(seqs * a.heads * 4.0, rel=1e-12)
    assert gathered[0][0] == 0.0
    rs = [(k, nb) for k, g, nb, _ in tab.intrinsic[(SLOT["context"], MODE_DIM0)] if g == "dcp"]
    assert [k for k, _ in rs] == ["reduce-scatter"]
    assert rs[0][1][1] == pytest.approx(seqs * a.heads * a.kv_lora_rank * ab, rel=1e-12)


def test_dcp_one_costs_as_before_the_axis():
    """dcp = 1 rows cost exactly what the same rows cost without any dcp row beside them."""
    model = synthetic_mla()
    rows = np.stack([make_row(tp=4, batch=8), make_row(tp=4, dcp=2, batch=8),
                     make_row(tp=4, dcp=4, batch=8)])
    both = evaluate(model, H100, DECODE, rows)
    alone = evaluate(model, H100, DECODE, rows[:1])
    assert both.step_s[0] == alone.step_s[0] and both.memory_bytes[0] == alone.memory_bytes[0]


@pytest.mark.parametrize("model, work, row", [
    (synthetic_mla(), Workload("prefill", context=4096), make_row(tp=4, dcp=2)),
    (synthetic_window(), DECODE, make_row(tp=4, dcp=2)),
    (synthetic_linear(), DECODE, make_row(tp=4, dcp=2)),
    (synthetic_compressed(), DECODE, make_row(tp=4, dcp=2)),
    (synthetic_mla(), DECODE, make_row(tp=4, cp=2, dcp=2)),
], ids=["prefill", "window", "linear", "compressed", "with-cp"])
def test_dcp_is_refused_where_lts_does_not_cost_it(model, work, row):
    """A prefill pass, a sliding window, a recurrent state, compressed attention, and dcp beside
    cp: invalid for "context-parallel"; dcp = 1 is not refused for it. The reference agrees."""
    rows = np.stack([row, row.copy()])
    rows[1, DCP] = 1
    res = evaluate(model, H100, work, rows)
    assert "context-parallel" in res.reason_list(0)
    if row[CP] == 1:     # (with cp > 1 a decode step refuses the cp itself)
        assert "context-parallel" not in res.reason_list(1)
    assert ref.evaluate(model, H100, work, rows[0])["reasons"] == res.reason_list(0)


def test_dcp_must_divide_tp():
    res = evaluate(synthetic_mla(), H100, DECODE, np.stack([make_row(tp=2, dcp=4, batch=4),
                                                          make_row(tp=4, dcp=4, batch=4)]))
    assert "divisibility" in res.reason_list(0) and "divisibility" not in res.reason_list(1)


def test_dcp_lets_a_long_context_fit():
    """DeepSeek-V3 decoding 32 requests at 131,072 tokens on 8 H200 with tensor-parallel
    attention: the latent cache replicated on 8 ranks does not fit; split over them it does."""
    model = load_model("deepseek-v3")
    rows = np.stack([make_row(EXPERT_CHOICES, tp=8, batch=32),
                     make_row(EXPERT_CHOICES, tp=8, dcp=8, batch=32)])
    res = evaluate(model, H200, Workload("decode", context=131072, gpus=8), rows)
    assert "memory" in res.reason_list(0) and res.valid[1]
    assert res.memory_bytes[1] < res.memory_bytes[0]


@pytest.mark.parametrize("model", [synthetic_dense(), synthetic_mla()], ids=["dense", "mla"])
def test_exact_equals_brute_force_with_dcp_in_decode(model):
    space = Space(tp=(1, 2, 4), ep=(1,), pp=(1, 2), batch=(1, 16, 256), dcp=(1, 2, 4),
                  choices=(2, 2, 2, 3, 3, 2, 2, 1, 3, 3, 2, 2), gpus=16)
    problem = Problem(model, H100, Workload("decode", context=65536, tpot_slo_ms=30.0), space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want)
    assert res.best_score == pytest.approx(want, rel=1e-12), format_strategy(res.best)


def test_exact_equals_brute_force_with_dcp_in_the_serve_space():
    from lts.engines import ENGINES
    from lts.search.problems import ServeProblem
    model = synthetic_mla()
    choices = (2, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2)
    serve = ServeProblem(model, H100, 16000, 500, 40, 4000, gpus=8,
                         engine=ENGINES["generic"].profile,
                         space=Space(tp=(1, 2, 4), ep=(1,), pp=(1, 2), batch=(1, 8, 64, 0),
                                     dcp=(1, 2, 4), choices=choices, gpus=8))
    res = SEARCHERS["exact"](serve, 0, None, top=1)
    want = brute_force(serve)
    assert np.isfinite(want) and res.best_score == pytest.approx(want, rel=1e-12)


def test_engines_that_run_dcp():
    """vLLM 0.33.0 and SGLang 0.5.23 run dcp under tensor-parallel attention; vLLM splits a gqa
    model's KV only where its KV heads are duplicated; TensorRT-LLM's helix is not lts's dcp;
    data-parallel attention has no tp group of heads to split."""
    mla, gqa = load_model("deepseek-v3"), load_model("llama3.1-70b")
    row = make_row(EXPERT_CHOICES, tp=8, dcp=4)
    assert runnable("vllm", mla, row[None])[0] and check("vllm", mla, row) == []
    assert runnable("sglang", mla, row[None])[0]
    assert not runnable("trtllm", mla, row[None])[0]
    assert check("trtllm", mla, row)[0].startswith(
        "TensorRT-LLM cannot run dcp=4 on mla attention: TensorRT-LLM's decode context "
        "parallelism is helix")
    g8, g16 = make_row(tp=8, dcp=2), make_row(tp=16, dcp=2)     # 8 KV heads of 64
    assert not runnable("vllm", gqa, g8[None])[0] and runnable("vllm", gqa, g16[None])[0]
    assert check("vllm", gqa, g8)[0] == (
        "vLLM cannot run dcp=2 at tp=8 with 8 KV heads of 64 query heads: it splits only "
        "duplicated KV heads (tp above the KV heads, dcp at most tp / KV heads, query heads per "
        "KV head a multiple of dcp: vllm 0.33.0 config/model.py verify_with_parallel_config)")
    assert runnable("sglang", gqa, g8[None])[0]
    from lts.specs.strategy import DP_ATTENTION
    assert not runnable("sglang", mla, make_row(DP_ATTENTION, tp=8, dcp=2)[None])[0]


def test_launch_flags_name_dcp():
    from lts.launch.emit import commands
    model = load_model("deepseek-v3")
    row = make_row(EXPERT_CHOICES, tp=8, dcp=8, batch=32)
    work = Workload("decode", context=131072, gpus=8)

    def text(engine, r):
        return "\n".join(c for _, c in commands(engine, model, H200, work, r, "deepseek-v3")[0])
    assert "--decode-context-parallel-size 8" in text("vllm", row)
    assert "--dcp-size 8" in text("sglang", row)
    plain = make_row(EXPERT_CHOICES, tp=8, batch=32)
    assert "context-parallel" not in text("vllm", plain) and "dcp" not in text("sglang", plain)


def test_max_cp_flag_searches_dcp_in_decode():
    runner = CliRunner()
    out = runner.invoke(cli, ["search", "deepseek-v3", "h200_dgx", "--context", "131072",
                              "--gpus", "8", "--max-cp", "8", "--engine", "vllm", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["best"]["cp"] == 1 and "dcp" in d["best"]
    assert any(r["dcp"] > 1 for r in d["top"])
    out = runner.invoke(cli, ["search", "deepseek-v3", "h200_dgx", "--context", "131072",
                              "--gpus", "8", "--engine", "vllm", "--json"])
    assert all(r["dcp"] == 1 for r in json.loads(out.output)["top"])
