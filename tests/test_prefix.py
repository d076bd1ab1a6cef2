"""Prefix caching (lts.serving.prefix, issue 24): the attention sums after a cached prefix by
brute force, the loop with cached prompt tokens, the shared prefixes' memory, the exact serve
search against brute force with a prefix cache, and the flags' refusals."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from lts.cost import kv
from lts.engines import ENGINES
from lts.search.methods import SEARCHERS
from lts.search.problems import ServeProblem
from lts.serving import serve
from lts.serving.prefix import PrefixCache
from lts.specs import load_model, load_topology
from lts.specs.strategy import parse_strategy
from test_serve_exact import CASES, every_strategy
from test_validate import run

LLAMA, H100 = load_model("llama3.1-70b"), load_topology("h100_dgx")


@given(st.integers(0, 300), st.integers(1, 300), st.one_of(st.none(), st.integers(1, 200)))
def test_mean_keys_after_a_prefix_is_the_sum_over_its_queries(start, length, window):
    w = window or 10**9
    brute = sum(min(i, w) for i in range(start + 1, start + length + 1)) / length
    assert float(kv.mean_keys_after(window, start, length)) == pytest.approx(brute, rel=1e-9)


@given(st.integers(0, 400), st.integers(1, 12), st.integers(1, 40),
       st.one_of(st.none(), st.integers(1, 300)))
def test_chunk_reads_after_a_prefix_by_brute_force(cached, chunks, size, window):
    """Chunk j of a prompt's new tokens reads the cached prefix and j chunks, at most its own
    chunk and the window before it; in chunks, averaged over the chunks."""
    isl = chunks * size
    w = window if window is not None else 10**9
    brute = sum(min(cached + j * size, size + w) for j in range(1, chunks + 1)) / chunks / size
    got = float(kv.chunk_reads(window, chunks, isl, cached))
    assert got == pytest.approx(brute, rel=1e-9)


def test_cached_tokens_leave_the_last_one_to_prefill():
    assert PrefixCache(0.6).cached(4000) == 2400
    assert PrefixCache(1.0).cached(4000) == 3999 and PrefixCache(0.0).cached(10) == 0
    with pytest.raises(ValueError, match="prefix hit 1.5: expected 0 to 1"):
        PrefixCache(1.5)


ROW = np.array([parse_strategy("tp=8,batch=64")])
VLLM = ENGINES["vllm"].profile.for_gpu(H100)


def loop(prefix, isl=4000, osl=500, row=ROW):
    return serve.serve(LLAMA, H100, row, isl, osl, engine=VLLM, prefix=prefix)


def test_no_hits_is_no_cache():
    a, b = loop(None), loop(PrefixCache(0.0))
    assert a.ttft_s[0] == b.ttft_s[0] and a.tpot_s[0] == b.tpot_s[0]
    assert a.kv_capacity[0] == b.kv_capacity[0]


def test_hits_cut_the_prefill_and_one_shared_prefix_frees_memory():
    """60% of each prompt cached: fewer tokens to prefill, so fewer steps hold a prefill chunk
    (TTFT and TPOT fall; a step's chunk still fills the token budget, now with more prompts, and
    attends to their prefixes too) and, with one shared prefix, more requests fit; a prefix per
    request holds as much as no sharing."""
    none, hit = loop(None), loop(PrefixCache(0.6))
    assert hit.ttft_s[0] < none.ttft_s[0] and hit.tpot_s[0] < none.tpot_s[0]
    assert hit.mixed_step_s[0] >= none.mixed_step_s[0]
    assert hit.kv_capacity[0] > none.kv_capacity[0]
    many = loop(PrefixCache(0.6, prefixes=int(none.kv_capacity[0])))
    assert many.kv_capacity[0] <= none.kv_capacity[0]
    # the decode step reads each request's whole context: the same step at the same batch
    assert hit.decode_step_s[0] == pytest.approx(none.decode_step_s[0])


@pytest.mark.parametrize("case", ["dense-generic", "moe-trtllm"])
def test_serve_exact_with_a_prefix_cache_equals_brute_force(case):
    model, topo, isl, osl, tpot, ttft, engine, space = CASES[case]
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine,
                     prefix=PrefixCache(0.5, prefixes=3))
    res, score = every_strategy(p)
    assert res.valid.any()
    exact = SEARCHERS["exact"](p, 0, None, top=3)
    assert exact.best_score == pytest.approx(score.max(), rel=1e-12)


SERVE = ("estimate", "llama3.1-70b", "h100_dgx", "--strategy", "tp=8", "--phase", "serve",
         "--isl", "4000", "--osl", "500")


def test_prefix_flags_refuse():
    r = run(*SERVE, "--prefixes", "4")
    assert r.exit_code == 2 and "--prefixes: only with --prefix-hit" in r.output
    r = run("estimate", "llama3.1-70b", "h100_dgx", "--strategy", "tp=8", "--prefix-hit", "0.5")
    assert r.exit_code == 2 and "--prefix-hit: only with --phase serve" in r.output
    r = run(*SERVE, "--prefix-hit", "1.5")
    assert r.exit_code == 2 and "1.5 is not in the range 0<=x<=1" in r.output


def test_estimate_and_search_report_the_prefix_cache():
    d = json.loads(run(*SERVE, "--prefix-hit", "0.6", "--json").output)
    assert d["prefix_cache"] == {"hit": 0.6, "prefixes": 1, "cached_tokens": 2400}
    r = run("search", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "4000", "--osl", "500", "--prefix-hit", "0.6", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["workload"]["prefix_cache"]["cached_tokens"] == 2400 and d["disagg"] is not None
    text = run("search", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--phase", "serve",
               "--isl", "4000", "--osl", "500", "--prefix-hit", "0.6").output
    text = " ".join(text.split())          # rich folds long lines
    assert "2400 prompt tokens cached (1 prefix)" in text


def test_two_pools_prefill_only_the_uncached_tokens():
    """A two-pool deployment with 60% of each prompt cached: the prefill pass is shorter (only
    the new tokens, attending to the prefix), so of the 8 clients more are decoding at a time
    (the decode-bound loop's output barely moves: a larger batch makes each step slower)."""
    pools = ("estimate", "deepseek-v3", "h200_dgx", "--phase", "serve", "--isl", "4000", "--osl",
             "1000", "--prefill", "tp=1,ep=8,batch=8", "--decode", "tp=8,batch=64", "--gpus",
             "16", "--concurrency", "8", "--json")
    plain, hit = (json.loads(run(*pools, *extra).output) for extra in ((), ("--prefix-hit",
                                                                              "0.6")))
    assert hit["prefill_pass_ms"] < 0.6 * plain["prefill_pass_ms"]
    assert hit["ttft_ms"] < plain["ttft_ms"]
    assert hit["running"] > plain["running"]
    assert hit["prefix_cache"]["cached_tokens"] == 2400


def test_emit_gives_the_engine_the_whole_context():
    """With a prefix cache a request still carries isl + osl tokens: the engine's limit."""
    r = run("search", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "4000", "--osl", "500", "--emit", "vllm", "--prefix-hit", "0.6", "--json")
    cmds = " ".join(c["command"] for c in json.loads(r.output)["emit"]["commands"])
    assert "--max-model-len 4500" in cmds and "--enable-prefix-caching" in cmds
