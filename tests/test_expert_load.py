"""The busiest expert-parallel rank's load (lts.cost.expert_load), redundant experts and wide EP.

Closed forms and laws of ``busiest`` (one rank: the mean; uniform load: the mean; it grows as the
experts split finer; EPLB never exceeds the static placement; more redundant copies never raise
it), checked against independent re-implementations of the collector's generator and of EPLB's
greedy replication; then what the cost model and the command line do with it (memory of the
copies, divisibility over ep, the ep degrees the search reaches, the link tiers of wide ep
groups, exact == brute force with EPLB, exit codes and messages of the flags).
"""
import heapq
import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_moe, synthetic_moe_eplb, synthetic_moe_uniform
from lts.cli import cli
from lts.cost import collectives as coll
from lts.cost import expert_load as el
from lts.cost.model import breakdown, evaluate
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import load_model, load_topology, with_expert_placement
from lts.specs.strategy import Space, ep_values, make_row, parse_strategy
from lts.specs.units import WEIGHT_FORMATS
from lts.specs.workload import Workload
from test_search import brute_force

H100, GB200 = load_topology("h100_dgx"), load_topology("gb200_nvl72")
DSV3 = load_model("deepseek-v3")
DERANDOMIZED = settings(derandomize=True, max_examples=40, deadline=None)


def ffn(experts=256, top_k=8, redundant=0, eplb=False, load="power_law"):
    """A MoE FFNSpec of DeepSeek-V3's layer with these experts and placement."""
    return replace(DSV3.ffn, experts=experts, top_k=top_k, redundant_experts=redundant,
                   eplb=eplb or bool(redundant), expert_load=load)


# ----------------------------------------------------------------------------------------------
# closed forms

@pytest.mark.parametrize("tokens", [1, 7, 64, 1000, 4096, 65536, 2e7])
def test_one_rank_and_uniform_load_carry_the_mean(tokens):
    """I = 1 exactly on one rank (it holds every expert: all the pairs are its own), under
    uniform routing at any ep, and for a dense FFN."""
    for f in (ffn(), ffn(redundant=32)):
        assert el.busiest(f, f.slots, tokens) == 1.0
    for per_rank in (1, 4, 32):
        assert el.busiest(ffn(load="uniform"), per_rank, tokens) == 1.0
        assert el.busiest(ffn(redundant=16, load="uniform"), per_rank, tokens) == 1.0


def test_the_busiest_rank_grows_with_ep_and_eplb_evens_it_out():
    """DeepSeek-V3's layer at 4,096 tokens: the busiest of ep ranks carries I x the mean, I
    growing with ep (1.5 at ep 8, 3.7 at ep 64, the hottest expert alone at ep 256); EPLB leaves
    it at the mean while a rank's slots outweigh the heaviest expert, and 32 redundant copies keep
    ep 72 within a few percent of it."""
    tok = 4096.0
    got = [float(el.busiest(ffn(), 256 // ep, tok)) for ep in (2, 8, 64, 256)]
    assert got == sorted(got) and got[0] > 1.0
    assert 1.3 < got[1] < 1.7 and 3.0 < got[2] < 4.5 and got[3] > 6.0
    assert el.busiest(ffn(eplb=True), 32, tok) == pytest.approx(1.0)       # ep 8
    assert 1.5 < el.busiest(ffn(eplb=True), 4, tok) < got[2]              # ep 64: hot experts
    assert el.busiest(ffn(redundant=32), 4, tok) < 1.1                     # 288 slots, ep 72


def _collector_busiest(experts, top_k, ep, tokens, draws, rng):
    """An independent re-implementation of the collector's generator (aiconfigurator
    collector/helper.py _generate_power_law_distribution, alpha 1.01): loads drawn from the
    power law, scaled to T k and rounded to whole pairs, capped at T, experts in contiguous
    blocks; the mean busiest block over the mean block."""
    out = []
    a = 1.0 - el.ALPHA
    for _ in range(draws):
        lo, hi = (1.0, 0.8 * tokens) if tokens * top_k > experts else (0.01, 2.0)
        x = ((hi ** a - lo ** a) * rng.random(experts) + lo ** a) ** (1.0 / a)
        x = np.minimum(np.round(x / x.sum() * tokens * top_k), tokens)
        x[np.argsort(x)[:int(tokens * top_k - x.sum())]] += 1      # the rounding's remainder
        out.append(x.reshape(ep, -1).sum(axis=1).max() / (x.sum() / ep))
    return float(np.mean(out))


@pytest.mark.parametrize("experts,top_k,ep,tokens", [(256, 8, 8, 1024), (256, 8, 64, 8192),
                                                     (128, 8, 16, 4096), (8, 2, 4, 2048)])
def test_the_model_is_the_collectors_generator(experts, top_k, ep, tokens):
    """The fixed-seed Monte Carlo equals an independent draw of the collector's generator
    within the noise of 400 draws (and its rounding to whole pairs: 8%)."""
    want = _collector_busiest(experts, top_k, ep, tokens, 400, np.random.default_rng(7))
    got = float(el.busiest(ffn(experts, top_k), experts // ep, tokens))
    assert got == pytest.approx(want, rel=0.08)


def _greedy_heaviest(x, slots):
    """The collector's compute_expert_replication: each extra slot to the expert with the
    largest load per copy; the heaviest copy's load."""
    copies = np.ones(len(x))
    heap = [(-v, e) for e, v in enumerate(x)]
    heapq.heapify(heap)
    for _ in range(slots - len(x)):
        _, e = heapq.heappop(heap)
        copies[e] += 1
        heapq.heappush(heap, (-x[e] / copies[e], e))
    return float((x / copies).max())


def test_the_heaviest_slot_is_the_greedy_replications():
    """The bisection's replication is the greedy's optimum, draw by draw."""
    x = el.expert_pairs(256, 8)[12]             # 4,096 tokens
    for slots in (256, 257, 288, 320, 512):
        got = el.heaviest_slot(256, 8, slots)[12]
        want = [_greedy_heaviest(x[d], slots) for d in range(8)]
        np.testing.assert_allclose(got[:8], want, rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# laws (hypothesis, derandomized)

SHAPES = [(8, 2), (16, 2), (64, 6), (128, 8), (160, 6), (256, 8), (384, 8)]


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@DERANDOMIZED
@given(shape=st.sampled_from(SHAPES), data=st.data(),
       tokens=st.floats(1.0, 2e6, allow_nan=False))
def test_finer_splits_never_lighten_the_busiest_rank(shape, data, tokens):
    """I >= 1, and ep -> ep x d (each rank's experts split in d): the busiest of the finer ranks
    carries at least 1/d of the coarser busiest block, so I never falls."""
    experts, top_k = shape
    ep = data.draw(st.sampled_from(_divisors(experts)))
    d = data.draw(st.sampled_from(_divisors(experts // ep)))
    f = ffn(experts, top_k)
    coarse, fine = (float(el.busiest(f, experts // e, tokens)) for e in (ep, ep * d))
    assert 1.0 <= coarse <= fine + 1e-12


@DERANDOMIZED
@given(shape=st.sampled_from(SHAPES), data=st.data(),
       tokens=st.floats(1.0, 2e6, allow_nan=False))
def test_redundant_slots_never_raise_the_busiest_rank(shape, data, tokens):
    """At a fixed number of ranks: EPLB never exceeds the static placement, and more redundant
    copies never raise its busiest rank (the heaviest copy only falls as copies are added)."""
    experts, top_k = shape
    ranks = data.draw(st.sampled_from(_divisors(experts)))
    extra = [r for r in range(0, experts + 1, ranks)]          # slots that divide over ranks
    r1, r2 = sorted(data.draw(st.lists(st.sampled_from(extra), min_size=2, max_size=2)))
    static = float(el.busiest(ffn(experts, top_k), experts // ranks, tokens))
    fewer, more = (float(el.busiest(ffn(experts, top_k, r, eplb=True), (experts + r) // ranks,
                                    tokens)) for r in (r1, r2))
    assert 1.0 <= more <= fewer + 1e-12 and fewer <= static + 1e-12


# ----------------------------------------------------------------------------------------------
# the cost model

def test_ep_1_costs_as_uniform_routing():
    """At ep = 1 with the experts' tensor split (Megatron) one rank group holds every expert:
    the power law costs what uniform routing does."""
    rows = np.stack([make_row(tp=tp, batch=b) for tp in (1, 2, 8) for b in (1, 64, 4096)])
    for work in (Workload("decode", context=4096), Workload("prefill", context=2048)):
        a = evaluate(synthetic_moe(), H100, work, rows)
        b = evaluate(synthetic_moe_uniform(), H100, work, rows)
        np.testing.assert_array_equal(a.step_s, b.step_s)
        np.testing.assert_array_equal(a.memory_bytes, b.memory_bytes)


def test_skew_slows_wide_ep_and_redundant_copies_take_memory():
    """DeepSeek-V3 at ep 64 on an NVL72 rack: the skewed load is slower than uniform routing
    (more pairs on the busiest rank, and its dispatch bytes I times the mean); with 32 redundant
    copies a GPU of ep 32 holds 9 experts' weights where it held 8."""
    work = Workload("decode", context=4096)
    row = make_row(ep=64, batch=2048)[None]
    skew = evaluate(DSV3, GB200, work, row)
    flat = evaluate(with_expert_placement(DSV3, load="uniform"), GB200, work, row)
    assert skew.step_s[0] > flat.step_s[0] * 1.05
    _, ops = breakdown(DSV3, GB200, work, row[0])
    ffn1 = next(o for o in ops if o["name"] == "ffn1")
    assert ffn1["expert_load"] > 3.0
    a2a = ffn1["collectives"][0]
    _, ops_u = breakdown(with_expert_placement(DSV3, load="uniform"), GB200, work, row[0])
    assert a2a["bytes"] == pytest.approx(next(o for o in ops_u if o["name"] == "ffn1")
                                         ["collectives"][0]["bytes"] * ffn1["expert_load"])
    m32 = with_expert_placement(DSV3, 32)
    w = {m: next(o for o in breakdown(m, GB200, work, make_row(ep=32, batch=2048))[1]
                 if o["name"] == "ffn1")["weight_bytes"] for m in (DSV3, m32)}
    f = DSV3.ffn                # one more expert's gate and up projections (and the shared)
    one = DSV3.hidden * f.expert_intermediate * 2 * \
        WEIGHT_FORMATS[DSV3.precision.format_of("experts")][0]
    assert w[m32] - w[DSV3] == pytest.approx(one)


def test_expert_copies_must_divide_over_ep():
    """288 copies divide over 72 and 96, not over 64 (reason divisibility)."""
    m32 = with_expert_placement(DSV3, 32)
    rows = np.stack([make_row(ep=ep, batch=1024) for ep in (64, 72, 96)])
    res = evaluate(m32, GB200, Workload("decode", context=4096, tpot_slo_ms=1e9), rows)
    assert "divisibility" in res.reason_list(0)
    assert "divisibility" not in res.reason_list(1) + res.reason_list(2)


def test_the_space_reaches_wide_ep():
    """ep: the divisors of the expert copies that are powers of two or multiples of 8, up to the
    budget: 256 experts reach 128 and 256 over InfiniBand; with 32 redundant, 72 (a rack), 144,
    288 but not 64."""
    assert ep_values(DSV3, 10**6) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert ep_values(with_expert_placement(DSV3, 32), 10**6) == \
        (1, 2, 4, 8, 16, 24, 32, 48, 72, 96, 144, 288)
    assert ep_values(with_expert_placement(DSV3, 32), 72)[-1] == 72
    assert ep_values(load_model("llama3.1-8b"), 64) == (1,)
    assert Space.for_model(with_expert_placement(DSV3, 32), 72).ep[-1] == 72


@pytest.mark.parametrize("topo,ep,over_ib", [(GB200, 64, 0), (GB200, 72, 0), (GB200, 144, 72),
                                             (H100, 8, 0), (H100, 64, 56), (H100, 256, 248)])
def test_wide_ep_groups_take_the_right_link_tier(topo, ep, over_ib):
    """An ep group of tp = 1 ranks: inside one NVL72 rack up to 72 (NVLink only), beyond it the
    ranks of other racks over InfiniBand; on 8-GPU H100 nodes every rank beyond the node's 7
    peers over InfiniBand (the all-to-all's peers per tier)."""
    levels = coll.levels(topo.engine_links, ep, 1)
    assert float(levels[-1][1]) == over_ib
    assert float(levels[0][1]) == min(ep, topo.engine_links[0].span_gpus) - 1


# ----------------------------------------------------------------------------------------------
# exact == brute force with the new features

@pytest.mark.parametrize("make", [synthetic_moe_eplb, synthetic_moe_uniform])
def test_exact_equals_brute_force_with_eplb(make):
    """24 expert copies (8 redundant) under EPLB over ep 1, 3, 6 (and 16 experts, uniform load,
    over ep 1, 2, 4): the exact solver's optimum is brute force's."""
    model = make()
    ep = (1, 3, 6) if model.ffn.slots == 24 else (1, 2, 4)
    space = Space(tp=(1, 2), ep=ep, pp=(1, 2), batch=(1, 64, 512),
                  choices=(2, 2, 2, 2, 2, 2, 3, 2, 4, 4, 2, 2), gpus=64)
    problem = Problem(model, H100, Workload("decode", context=4096, tpot_slo_ms=30), space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want) and res.best_score == pytest.approx(want, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# the command line

def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("args,message", [
    (["llama3.1-8b", "--eplb"],
     "Invalid value for '--eplb': needs a MoE model (Llama-3.1-8B has no routed experts)"),
    (["llama3.1-8b", "--redundant-experts", "8"],
     "Invalid value for '--redundant-experts': needs a MoE model (Llama-3.1-8B has no routed "
     "experts)"),
    (["deepseek-v3", "--redundant-experts", "300"],
     "Invalid value for '--redundant-experts': 300 is not between 0 and the model's 256 experts "
     "(at most one extra copy of each)"),
    (["deepseek-v3", "--redundant-experts", "-1"],
     "Invalid value for '--redundant-experts': -1 is not in the range 0<=x<=65536."),
    (["deepseek-v3", "--expert-load", "zipf"],
     "Invalid value for '--expert-load': 'zipf' is not one of 'power-law', 'uniform'."),
])
@pytest.mark.parametrize("command", ["estimate", "search"])
def test_bad_expert_flags_exit_2(args, message, command):
    model, *flags = args
    extra = ["--strategy", "tp=8"] if command == "estimate" else ["--gpus", "8"]
    r = run(command, model, "h100_dgx", *extra, *flags)
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == f"Error: {message}"


def test_estimate_with_redundant_experts():
    """ep 72 on an NVL72 rack with 32 redundant experts is valid and faster per GPU than ep 64
    without (the busiest rank near the mean); ep 64 with them is invalid (exit 1); the JSON's
    MoE ops carry the busiest rank's load."""
    base = ["estimate", "deepseek-v3", "gb200_nvl72", "--json", "--strategy"]
    r64 = run(*base, "tp=1,ep=64,batch=4096")
    r72 = run(*base, "tp=1,ep=72,batch=4096", "--redundant-experts", "32")
    bad = run(*base, "tp=1,ep=64,batch=4096", "--redundant-experts", "32")
    d64, d72, dbad = (json.loads(r.output) for r in (r64, r72, bad))
    assert r72.exit_code == 0 and d72["valid"]
    assert d72["tokens_per_s_per_gpu"] > d64["tokens_per_s_per_gpu"]
    loads = {d["ep"]: next(o["expert_load"] for o in d["ops"] if o["name"] == "ffn1")
             for d in (d64, d72)}
    assert loads[72] < 1.1 < 3.0 < loads[64]
    assert bad.exit_code == 1 and "divisibility" in dbad["reasons"]
    eplb = json.loads(run(*base, "tp=1,ep=64,batch=4096", "--eplb").output)
    assert eplb["tokens_per_s_per_gpu"] > d64["tokens_per_s_per_gpu"]


def test_search_reaches_ep_72_and_emits_the_balancer():
    """A search of DeepSeek-V3 on one NVL72 rack with 32 redundant experts finds an ep that
    divides the 288 copies, and SGLang's command balances them."""
    r = run("search", "deepseek-v3", "gb200_nvl72", "--gpus", "72", "--redundant-experts", "32",
            "--top", "3", "--emit", "sglang", "--json")
    d = json.loads(r.output)
    assert r.exit_code == 0 and 288 % d["best"]["ep"] == 0
    text = " ".join(c["command"] for c in d["emit"]["commands"])
    assert "--enable-eplb" in text and "--ep-num-redundant-experts 32" in text


def test_experts_choice_splits_over_tp_times_ep():
    """ffn1/ffn2 = experts spreads whole experts over tp x ep ranks: its load is the busiest of
    tp x ep blocks (the same as tp = 1 at ep = tp x ep)."""
    work = Workload("decode", context=4096)
    a = breakdown(DSV3, GB200, work, parse_strategy("tp=8,ep=8,batch=2048,ffn1=experts,"
                                                    "ffn2=experts"))[1]
    b = breakdown(DSV3, GB200, work, make_row(ep=64, batch=2048))[1]
    la, lb = (next(o["expert_load"] for o in ops if o["name"] == "ffn1") for ops in (a, b))
    assert la == pytest.approx(lb) and la > 3.0
