"""Property-based tests (hypothesis) of the cost model's invariants (docs/design.md §7).

Models, topologies, workloads and strategies come from tests/generators.py. Every property is a
physical law or an independent oracle, never a restatement of the implementation:
- more FLOP/s, HBM bandwidth or link bandwidth never makes a strategy slower;
- more HBM capacity never makes a valid strategy invalid;
- summed over the shards, the FLOPs of every GEMM (and attention) op equal the model's FLOPs,
  counted from the model's shape alone;
- tp=ep=pp=1 with `none` everywhere communicates nothing;
- the Megatron row has exactly one all-reduce after attention and one after the FFN per layer,
  and nothing else in the tp group;
- results do not depend on the order of the rows; times and memory are finite and >= 0;
- a step takes at least the model's FLOPs / (GPUs x achievable peak).
"""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import reference as ref
from generators import (model_specs, problems, strategy_rows, synthetic_dense, topologies,
                        with_link_factors, workloads)
from lts.cost.model import evaluate
from lts.cost.layouts import CONVERSION, LAYOUT_NAMES, SLOT, SLOT_MODES
from lts.cost.tables import build_tables
from lts.specs.workload import Workload
from lts.specs import attention_params, load_topology, with_expert_placement
from lts.specs.strategy import (BATCH, COL, EXPERTS, N_COARSE, NONE, OPS, TP, coarse_of,
                                coarse_rows, format_strategy, instance_gpus, make_row,
                                parse_strategy)

FEW = settings(max_examples=40)
SOME = settings(max_examples=60)
REL = 1e-12


def step_of(res):
    return res.step_s


def first_failure(rows, mask, *arrays):
    i = int(np.flatnonzero(mask)[0])
    return f"{format_strategy(rows[i])}: " + ", ".join(repr(float(a[i])) for a in arrays)


# ----------------------------------------------------------------------------------------------
# more hardware never hurts

factor = st.floats(1.0, 16.0)


@SOME
@given(problem=problems(), f_peak=factor, f_eff=factor)
def test_more_flops_never_slower(problem, f_peak, f_eff):
    model, topo, work, rows = problem
    faster = dataclasses.replace(
        topo, peak_flops={k: v * f_peak for k, v in topo.peak_flops.items()},
        compute_efficiency=min(1.0, topo.compute_efficiency * f_eff))
    a, b = step_of(evaluate(model, topo, work, rows)), step_of(evaluate(model, faster, work, rows))
    worse = b > a * (1 + REL)
    assert not worse.any(), first_failure(rows, worse, a, b)


@SOME
@given(problem=problems(), f_bw=factor, f_eff=factor)
def test_more_hbm_bandwidth_never_slower(problem, f_bw, f_eff):
    model, topo, work, rows = problem
    faster = dataclasses.replace(topo, hbm_bandwidth_bytes_s=topo.hbm_bandwidth_bytes_s * f_bw,
                                 memory_efficiency=min(1.0, topo.memory_efficiency * f_eff))
    a, b = step_of(evaluate(model, topo, work, rows)), step_of(evaluate(model, faster, work, rows))
    worse = b > a * (1 + REL)
    assert not worse.any(), first_failure(rows, worse, a, b)


# ops whose `none` (and FFN1 `experts`) choice picks R or T by comparing conversion costs
PICKING_OPS = ("qkv", "scores", "context", "out_proj", "router", "ffn1", "ffn2", "lm_head")


def fix_layouts(rows):
    """Map every R/T-picking choice (none, experts) of PICKING_OPS to dim 0 or dim 1."""
    rows = rows.copy()
    for op in PICKING_OPS:
        col = N_COARSE + OPS.index(op)
        rows[:, col] = rows[:, col] % 2
    return rows


link_factors = st.lists(factor, min_size=3, max_size=3)


@SOME
@given(problem=problems(), f_bw=link_factors, f_eff=link_factors)
def test_more_link_bandwidth_never_slower_when_layouts_are_fixed(problem, f_bw, f_eff):
    """With every op on dim 0 / dim 1 the layouts do not depend on the topology, so every
    conversion and collective is costed on the same groups and can only get cheaper."""
    model, topo, work, rows = problem
    rows = fix_layouts(rows)
    faster = with_link_factors(topo, bandwidth=f_bw, efficiency=f_eff)
    a, b = step_of(evaluate(model, topo, work, rows)), step_of(evaluate(model, faster, work, rows))
    worse = b > a * (1 + REL)
    assert not worse.any(), first_failure(rows, worse, a, b)


COUNTEREXAMPLE = (synthetic_dense(), load_topology("h100_dgx"), Workload("decode", context=4096),
                  parse_strategy("tp=32,ep=1,pp=1,batch=256,context=none,out_proj=1,ffn1=0,"
                                 "ffn2=none", is_moe=False)[None])


# regression (fixed): not monotone in link bandwidth: a `none` op picks R or T by the cost of the
# conversion alone (cost.model rt_pick: 'whichever conversion is cheaper'). On tp=32 over 8-GPU
# nodes the F->R all-gather takes 7+3 latency steps and the F->T all-to-all 7+24; with 2x NVLink
# bandwidth the all-gather of the scores becomes the cheaper one, so `context` runs replicated on
# all 32 ranks (201 us) instead of on its own tokens (9 us): TPOT 1.49 ms -> 2.12 ms. The pick
# should include the op's own cost and what follows (a DP over the chain of layouts)
@FEW
@example(problem=COUNTEREXAMPLE, f_bw=[2.0, 1.0, 1.0], f_eff=[1.0, 1.0, 1.0])
@given(problem=problems(), f_bw=link_factors, f_eff=link_factors)
def test_more_link_bandwidth_never_slower(problem, f_bw, f_eff):
    model, topo, work, rows = problem
    faster = with_link_factors(topo, bandwidth=f_bw, efficiency=f_eff)
    a, b = step_of(evaluate(model, topo, work, rows)), step_of(evaluate(model, faster, work, rows))
    worse = b > a * (1 + REL)
    assert not worse.any(), first_failure(rows, worse, a, b)


@SOME
@given(problem=problems(), lo=st.floats(0.1, 1.0), hi=st.floats(0.1, 1.0))
def test_higher_in_engine_collective_efficiency_never_slower(problem, lo, hi):
    """``collective_efficiency`` (fitted on serving measurements) only scales link rates."""
    model, topo, work, rows = problem
    lo, hi = min(lo, hi), max(lo, hi)
    a = step_of(evaluate(model, dataclasses.replace(topo, collective_efficiency=lo), work, rows))
    b = step_of(evaluate(model, dataclasses.replace(topo, collective_efficiency=hi), work, rows))
    worse = b > a * (1 + REL)
    assert not worse.any(), first_failure(rows, worse, a, b)


@FEW
@given(problem=problems(), p=st.sampled_from([1.0, 2.0, 3.0, 8.0]))
def test_smooth_roofline_lies_between_max_and_sum(problem, p):
    """(c^p + m^p)^(1/p) is at least max(c, m) and at most c + m (p >= 1): the step with a
    smooth roofline is no faster than with the hard max, and no slower than with the sum
    (p = 1; kernel overheads and collectives are the same in all three)."""
    model, topo, work, rows = problem
    step = {q: step_of(evaluate(model, dataclasses.replace(topo, roofline_exponent=q), work, rows))
            for q in (0.0, p, 1.0)}
    low = step[p] < step[0.0] * (1 - REL)
    high = step[p] > step[1.0] * (1 + REL)
    assert not low.any(), first_failure(rows, low, step[p], step[0.0])
    assert not high.any(), first_failure(rows, high, step[p], step[1.0])


def test_roofline_time_closed_forms():
    from lts.cost.tables import roofline_time
    c, m = np.array([0.0, 1.0, 3.0, 2.0]), np.array([0.0, 1.0, 4.0, 0.0])
    assert np.array_equal(roofline_time(c, m, 0.0), [0.0, 1.0, 4.0, 2.0])
    assert np.allclose(roofline_time(c, m, 2.0), [0.0, math.sqrt(2.0), 5.0, 2.0])
    assert np.allclose(roofline_time(c, m, 3.0), [0.0, 2.0 ** (1 / 3), (27 + 64) ** (1 / 3), 2.0])


@SOME
@given(problem=problems(), f=st.floats(1.0, 100.0))
def test_more_hbm_capacity_never_invalidates(problem, f):
    model, topo, work, rows = problem
    bigger = dataclasses.replace(topo, hbm_bytes=topo.hbm_bytes * f)
    a, b = evaluate(model, topo, work, rows), evaluate(model, bigger, work, rows)
    lost = a.valid & ~b.valid
    assert not lost.any(), first_failure(rows, lost, a.memory_bytes, b.memory_bytes)
    assert np.array_equal(a.memory_bytes, b.memory_bytes)


# ----------------------------------------------------------------------------------------------
# FLOPs summed over the shards == the model's FLOPs

def model_flops(model, work, tp, ep, pp, batch):
    """FLOPs of one instance of each op on one tp group, from the model's shape alone."""
    a, f, h = model.attention, model.ffn, model.hidden
    decode = work.phase == "decode"
    seqs = math.ceil(math.ceil(batch / pp) / ep)
    rows = seqs * (1 if decode else work.context)
    ctx_attn = work.context if decode else (work.context + 1) / 2
    up = f.n_mats - 1
    att = attention_params(model)
    qk, v = _attention_dims(a, decode)
    out = {"qkv": 2 * rows * att["qkv"], "out_proj": 2 * rows * att["o"],
           "scores": 2 * rows * a.heads * qk * ctx_attn, "context": 2 * rows * a.heads * v * ctx_attn,
           "lm_head": 2 * seqs * h * model.vocab}
    if model.is_moe:
        routed = f.top_k * h * f.expert_intermediate + h * f.shared_intermediate
        out.update(router=2 * rows * h * f.experts, ffn1=2 * rows * routed * up,
                   ffn2=2 * rows * routed)
        if f.dense_layers:
            out.update(ffn1_dense=2 * rows * h * f.intermediate * up,
                       ffn2_dense=2 * rows * h * f.intermediate)
    else:
        out.update(ffn1=2 * rows * h * f.intermediate * up, ffn2=2 * rows * h * f.intermediate)
    return out, seqs


def _attention_dims(a, decode):
    """(qk, v) head widths of the scores and context ops: MLA decodes absorbed (the latent + rope
    key, values from the latent) and prefills un-absorbed unless sparse (qk_nope + qk_rope,
    v_head_dim per head); GQA head_dim both."""
    if a.kind != "mla":
        return a.head_dim, a.head_dim
    if decode or a.sparse:
        return a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
    return a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim


def split_dims(model, slot, choice, lin, decode=True):
    """The dimensions a mode divides over tp (None: a mode with replicated parts)."""
    a, f, h = model.attention, model.ffn, model.hidden
    moe = model.is_moe and slot in ("ffn1", "ffn2")
    inter = (f.expert_intermediate, f.shared_intermediate) if moe else (f.intermediate,)
    inter = tuple(i for i in inter if i)
    qk, v = _attention_dims(a, decode)
    if choice == NONE:
        return ("seqs",) if lin == 1 else ()
    if choice == EXPERTS:
        return ("experts_per_ep", "seqs") if moe else ("seqs",)
    table = {
        "qkv": ((h,), None if a.kind == "mla" else (a.heads, a.kv_heads)),
        "out_proj": ((a.heads,), (h,)), "router": ((h,), (f.experts,)),
        "lm_head": ((h,), (model.vocab,)), "scores": ((a.heads,), (qk,)),
        "context": ((a.heads,), (v,)),
        "ffn1": ((h,), inter), "ffn2": (inter, (h,)),
        "ffn1_dense": ((h,), (f.intermediate,)), "ffn2_dense": ((f.intermediate,), (h,)),
    }
    return table[slot][choice]


@SOME
@given(model=model_specs(), topo=topologies(), work=workloads(), data=st.data())
def test_flops_summed_over_shards_equal_model_flops(model, topo, work, data):
    """compute_s * achievable peak = FLOPs; tp x FLOPs of a sharded mode >= the unsharded
    FLOPs, with equality when tp divides every dimension the mode splits. Under uniform routing:
    the default skewed load gives the busiest expert-parallel rank I >= 1 times its share of the
    routed pairs (cost.expert_load; tests/test_expert_load.py), which no sum over shards holds."""
    if model.is_moe:
        model = with_expert_placement(model, load="uniform")
    row = data.draw(strategy_rows(model, topo))
    tp, ep, pp, batch = (int(row[COL[n]]) for n in ("tp", "ep", "pp", "batch"))
    # the routed experts at the dense rate (a grouped GEMM's rate depends on the tokens per
    # expert, tests/test_gemm_formats.py): one rate turns every op's time back into FLOPs
    topo = dataclasses.replace(topo, grouped={})
    tab = build_tables(model, topo, work, coarse_of(row)[None])
    w = model.precision.weights
    peak = topo.peak_for(w) * topo.compute_efficiency_for(w)
    # attention math at its own rate: the activations' type, fp8 over an fp8 KV cache
    att = model.precision.attention_dtype
    attn_peak = topo.peak_for(att) * topo.compute_efficiency_for(att)
    want, seqs = model_flops(model, work, tp, ep, pp, batch)
    for slot, full in want.items():
        rate = attn_peak if slot in ("scores", "context") else peak
        flops = tab.compute_s[0, SLOT[slot]] * rate                 # [modes]
        for m, (choice, lin, lout) in enumerate(SLOT_MODES[slot]):
            what = f"{slot} mode {m} ({choice}, {LAYOUT_NAMES[lin]}->{LAYOUT_NAMES[lout]}) tp={tp}"
            if choice == NONE and lin == 0:                         # unsharded: the model's FLOPs
                assert flops[m] == pytest.approx(full, rel=1e-9), what
                continue
            assert tp * flops[m] >= full * (1 - 1e-9), what
            dims = split_dims(model, slot, choice, lin, work.phase == "decode")
            if dims is None:
                continue
            sizes = {"seqs": seqs, "experts_per_ep": model.ffn.experts // ep}
            if all(sizes.get(d, d) % tp == 0 for d in dims):
                assert tp * flops[m] == pytest.approx(full, rel=1e-9), what


# ----------------------------------------------------------------------------------------------
# communication patterns

@FEW
@given(model=model_specs(), topo=topologies(), work=workloads(),
       batch=st.sampled_from([1, 3, 64, 4096]))
def test_one_gpu_with_none_everywhere_communicates_nothing(model, topo, work, batch):
    row = make_row([NONE] * len(OPS), batch=batch)[None]
    res, w, tab = evaluate(model, topo, work, row, return_walk=True)
    assert all(float(t[0]) == 0.0 for *_, t, _scope in w.convs)
    for slot, mode in w.modes.items():
        assert tab.intrinsic_s[0, SLOT[slot], int(mode[0])] == 0.0, slot
    assert float(w.send_s[0]) == 0.0 and np.all(tab.final_s == 0.0)
    assert ref.evaluate(model, topo, work, row[0], ref.COMPAT)["collectives"] == []


IN_LAYER = ("layer", "ffn", "ffn_dense", "between")
LAYER_SLOTS = ("attn_norm", "qkv", "scores", "context", "out_proj", "ffn_norm", "router", "ffn1",
               "ffn2", "router_dense", "ffn1_dense", "ffn2_dense")


@FEW
@given(model=model_specs(), topo=topologies(), work=workloads(), data=st.data())
def test_megatron_has_one_allreduce_after_attention_and_one_after_the_ffn(model, topo, work, data):
    coarse = data.draw(strategy_rows(model, topo))[:N_COARSE]
    coarse[TP] = max(coarse[TP], 2)          # a tp group to talk in (may exceed the budget)
    row = coarse_rows(coarse)[0][None]
    res, w, tab = evaluate(model, topo, work, row, return_walk=True)
    inserted = sorted((feeds, CONVERSION.get((int(src[0]), int(dst[0]))), scope)
                      for feeds, point, src, dst, t, scope in w.convs
                      if scope in IN_LAYER and float(t[0]) > 0)
    assert inserted == [("attn_norm", "all-reduce", "between"),
                        ("ffn_norm", "all-reduce", "layer")], inserted
    for slot in LAYER_SLOTS:
        if slot in w.modes:
            recs = tab.intrinsic.get((SLOT[slot], int(w.modes[slot][0])), [])
            assert all(float(t[0]) == 0.0 for kind, group, nb, t in recs if group == "tp"), slot
    # the scalar walk agrees: per layer one all-reduce into each norm (the first layer's comes from
    # the vocab-parallel embedding); then the final norm's all-reduce and the logits' all-gather
    tp_colls = sorted((c["op"], c["kind"], c["count"])
                      for c in ref.evaluate(model, topo, work, row[0], ref.COMPAT)["collectives"]
                      if c["group"] == "tp")
    L = model.layers
    assert tp_colls == sorted([("attn_norm", "all-reduce", L), ("ffn_norm", "all-reduce", L),
                               ("final_norm", "all-reduce", 1), ("lm_head", "all-gather", 1)])


# ----------------------------------------------------------------------------------------------
# well-formed results

RESULT_FIELDS = ("valid", "reasons", "tokens_per_s_per_gpu", "tokens_per_s", "tpot_s", "ttft_s",
                 "step_s", "memory_bytes", "gpus")


@SOME
@given(problem=problems(), data=st.data())
def test_results_do_not_depend_on_row_order(problem, data):
    model, topo, work, rows = problem
    perm = np.array(data.draw(st.permutations(range(len(rows)))))
    a, b = evaluate(model, topo, work, rows), evaluate(model, topo, work, rows[perm])
    for f in RESULT_FIELDS:
        assert np.array_equal(getattr(a, f)[perm], getattr(b, f), equal_nan=True), f


@SOME
@given(problem=problems())
def test_times_and_memory_are_finite_and_nonnegative(problem):
    model, topo, work, rows = problem
    res, w, tab = evaluate(model, topo, work, rows, return_walk=True)
    t = res.tpot_s if work.phase == "decode" else res.ttft_s
    other = res.ttft_s if work.phase == "decode" else res.tpot_s
    for name, x in (("time", t), ("step", res.step_s), ("memory", res.memory_bytes),
                    ("tokens/s", res.tokens_per_s), ("tokens/s/gpu", res.tokens_per_s_per_gpu)):
        bad = ~np.isfinite(x) | (x < 0)
        assert not bad.any(), (name, first_failure(rows, bad, x))
    assert np.isnan(other).all()
    pieces = [w.attn_s, w.ffn_s, w.ffn_dense_s, w.first_s, w.last_s, w.send_s,
              *w.op_s.values(), *(c[4] for c in w.convs)]
    for x in pieces:
        assert np.all(np.isfinite(x)) and np.all(x >= 0)


@SOME
@given(problem=problems())
def test_step_takes_at_least_the_flops_over_all_gpus(problem):
    """pp x slowest stage >= the sum of the stages >= the GEMM FLOPs of all tokens / (GPUs x
    achievable peak); prefill's (2pp-1) x slowest is larger still."""
    model, topo, work, rows = problem
    res = evaluate(model, topo, work, rows)
    f, h = model.ffn, model.hidden
    att = sum(attention_params(model).values())
    if model.is_moe:
        per_layer_ffn = [f.n_mats * h * f.intermediate] * f.dense_layers + \
            [f.n_mats * h * (f.top_k * f.expert_intermediate + f.shared_intermediate)
             + h * f.experts] * model.moe_layers
    else:
        per_layer_ffn = [f.n_mats * h * f.intermediate] * model.layers
    per_token = model.layers * att + sum(per_layer_ffn)
    tps = 1 if work.phase == "decode" else work.context
    batch = rows[:, BATCH].astype(float)
    flops = 2.0 * batch * tps * per_token + 2.0 * batch * h * model.vocab
    gpus = instance_gpus(rows)
    w = model.precision.weights
    # the fastest rate any GEMM runs at: dense, or the experts' grouped GEMM at its best size
    e = model.precision.format_of("experts")
    peak = max(topo.peak_for(w) * topo.compute_efficiency_for(w),
               topo.peak_for(e) * max(topo.grouped_efficiency(e)[1]))
    bound = flops / (gpus * peak)
    low = res.step_s < bound * (1 - 1e-9)
    assert not low.any(), first_failure(rows, low, res.step_s, bound)


@settings(max_examples=60)
@given(st.sampled_from(["deepseek-v3", "kimi-k3", "glm-5"]), st.integers(0, 2**32 - 1))
def test_slowest_and_fullest_stage_equal_every_stage_tried(name, seed):
    """``stage_max`` and ``stage_memory`` try four stages (first, second, second-to-last, last)
    and add the last stage's LM head once; brute force over every stage of every pipeline
    depth gives the same slowest stage and fullest memory."""
    from lts.cost.model import dense_in_stage, stage_max, stage_memory
    from lts.specs import load_model
    m = load_model(name)
    rng = np.random.default_rng(seed)
    pp = rng.choice([1, 2, 3, 4, 5, 6, 8], size=(12, 1, 1)).astype(float)
    lp = np.floor(m.layers / pp)
    between, ffn, ffn_d, first, last, send = (rng.random(s) * 10.0 ** rng.uniform(-6, -2)
                                              for s in [(12, 3, 1), (12, 1, 4), (12, 1, 4),
                                                        (12, 3, 1), (12, 1, 4), (12, 1, 1)])
    got_t = stage_max(m, lp, pp, 0.0, between, ffn, ffn_d, first, last, send)
    got_m = stage_memory(m, lp, pp, between, ffn, ffn_d, first, last, send)
    for r in range(12):
        P = int(pp[r, 0, 0])
        times, mems = [], []
        for s in range(P):
            nd = dense_in_stage(m, float(P), float(s))
            times.append(lp[r] * between[r] + (lp[r] - nd) * ffn[r] + nd * ffn_d[r]
                         + (s == 0) * (first[r] - between[r]) + (s == P - 1) * last[r])
            mems.append(lp[r] * between[r] + (lp[r] - nd) * ffn[r] + nd * ffn_d[r]
                        + (s == 0) * first[r] + (s == P - 1) * last[r])
        want_t = np.max(times, axis=0) + (send[r] if P > 1 else 0.0)
        want_m = np.max(mems, axis=0) + send[r]
        assert np.allclose(got_t[r], want_t, rtol=1e-12, atol=0)
        assert np.allclose(got_m[r], want_m, rtol=1e-12, atol=0)
