"""Disaggregated serving: a pool of prefill instances and a pool of decode instances, each with
its own strategy, against one pool that does both (docs/design.md §8; issue 12).

- **Prefill pool:** the exact optimum of the prefill phase (``exact.search_exact``) at a context of
  ``isl``: batches of whole prompts, no decode tokens beside them. As in the one-pool model the
  clients are a closed loop, their requests paced by completions; a request waits for the pass
  in progress (half of one on average) and then its own: its TTFT is 1.5 passes plus the KV
  transfer (``latency.pool_ttft_s``), so the pass may take (TTFT limit - transfer) / 1.5.
  (Random arrivals at a pool near saturation would wait longer.)
- **Decode pool:** the exact optimum of the decode phase at the final context ``isl + osl`` (the
  KV memory a request holds at its end, as one pool reserves it) under the TPOT limit: steps of
  decode tokens only, no prefill between them.
- **Transfer:** each request's KV cache (``kv.request_bytes`` of isl tokens) crosses the
  innermost link tier that spans both pools, split over the GPUs of the smaller instance.
- **Rate matching:** a prefill instance completes batch / pass requests per second, a decode
  instance batch / (osl x step); x prefill and y decode instances serve min(x r_p, y r_d)
  requests/s. For every x that fits the GPU budget the best y is tried (``pair``); the best
  output tokens/s per GPU used wins (ties: fewer GPUs).

Each pool's strategy is the optimum of its own phase (the most tokens/s per GPU); the pairing is
then exhaustive. **The recommendation is the closed loop's** (issue 24): every rate-matched pair
is run through ``serving.two_pool`` at the concurrency that fills its decode pool (the prefill
queue, the pass, the KV transfer, the engine's two-pool handoff, the decode step of the running
batch), and the most output tokens/s per GPU of the budget within the SLOs wins: its figures are
what ``lts estimate`` and ``lts validate`` compute for that deployment. Sizing for a request
rate stays rate matching (an open rate, no clients). ``disaggregate`` also traces the two-pool frontier: the same under tighter TPOT
limits, then their Pareto front. Both pools run on the engine profile's topology (its collective efficiency) with
the engine's time per step added; with an engine named, each pool is the optimum of the engine's
space. ``pool_candidates`` keeps each problem's pool strategies, so that sizing for a request
rate (``search.methods.size_disagg``) pairs the same ones.

**Each pool obeys its engine's memory rule** (issue 21). Per GPU, a pool strategy holds M bytes:
weights, the pool's KV cache K (prefill: the batch's prompts of isl tokens; decode: the batch at
isl + osl) and workspace; it fits when K <= ``EngineProfile.kv_pool_bytes``(M - K, tp * pp), the
rule the one-pool closed loop sizes its KV pool by. Every rule there is affine in the fixed bytes
F = M - K, pool(F) = c(tp*pp) - s F (s = 1, or TensorRT-LLM's free fraction), so the rule is
M + (1/s - 1) K <= c(tp*pp) / s (``memory_rule``). The generic engine's rule ("reserve": HBM less
the topology's reserve) is the topology's own check: its pools are plain ``Problem``s as before.
For the others (``EnginePool``) the check is made the solvers' own, rather than filtered after
them: the pool's topology reserves all but the largest limit L over the space's tp * pp, and its
tables (the ones ``exact.search_exact`` solves on) hold the KV cache scaled by 1/s and, per
coarse row, the margin L - c(tp*pp)/s added to the workspace. Each strategy's memory on them is
M + (1/s - 1) K + margin, so ``exact``'s per-strategy test W <= ``usable`` and
``cost.model.finish``'s are the engine's rule exactly: no strategy breaking it is returned and
none meeting it is missed (a post-filter of the per-row optima could miss the second best of a
row; a scalar usable cannot follow SGLang's tp * pp). The figures (memory per GPU included) are
costed on the model's own tables.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace

import numpy as np

from ..cost.model import Result, evaluate, tables_for
from ..engines.profiles import EngineProfile
from ..engines import GENERIC, chunked
from .exact import search_exact
from .exact_engine import search_engine_exact
from ..cost.latency import pool_pass_limit, pool_ttft_s
from ..cost.tables import Tables
from ..serving import serve, two_pool
from ..serving.serve import bisect_largest
from ..serving.pareto import pareto_front
from .problems import Problem, ServeProblem
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import BATCH, N_COARSE, PP, TP, Space, instance_gpus
from ..specs.workload import Workload

@dataclass
class Disagg:
    """A disaggregated deployment: ``prefill`` and ``decode`` (one-row Results of their phase),
    how many instances of each, the GPUs used, and the figures of the whole."""
    prefill: object
    decode: object
    prefill_instances: int
    decode_instances: int
    gpus: int
    requests_per_s: float
    tokens_per_s_per_gpu: float         # output tokens/s per GPU used
    ttft_s: float                       # the closed loop's (best_pair); rate matching: 1.5
                                        # passes + KV transfer + handoff + time per request
    tpot_s: float
    transfer_s: float
    tokens_per_s_per_cluster_gpu: float = 0.0   # per GPU of the budget (the objective; 0:
                                                # not within a budget, e.g. sizing)
    concurrency: int = 0                # clients of the closed loop the figures are from (0:
                                        # rate matching, e.g. sizing)
    decode_topology: str | None = None  # the decode pool's topology where not the prefill's


def decoder(problem: ServeProblem) -> ServeProblem:
    """The problem the decode pool is solved on: ``problem.decode_problem`` (the same request
    on another topology, another GPU type: ``lts search --decode-topology``), else itself."""
    return getattr(problem, "decode_problem", None) or problem


def transfer_s(problem: ServeProblem, gpus_used: int, shard_gpus: int) -> float:
    """Seconds to move one request's KV cache (isl tokens) from its prefill to its decode
    instance (``serving.two_pool.transfer_s`` on the engine's view of the topology; across two
    topologies ``transfer_between_s``)."""
    dec = decoder(problem)
    if dec is not problem:
        return float(two_pool.transfer_between_s(
            problem.model, problem.engine.topology(problem.topo), dec.engine.topology(dec.topo),
            problem.isl, shard_gpus))
    return float(two_pool.transfer_s(problem.model, problem.engine.topology(problem.topo),
                                     problem.isl, gpus_used, shard_gpus))


def fixed_s(problem: ServeProblem, move: float) -> float:
    """A two-pool request's time beside its pass: the KV transfer, the engine's handoff
    between the pools and its time per request (HTTP, tokenization), as ``two_pool`` counts."""
    return move + problem.engine.handoff_s + problem.engine.request_overhead_s


def closed_loop(problem: ServeProblem, pairs, concurrency=None) -> two_pool.TwoPoolResult:
    """The two-pool closed loop (``serving.two_pool``) of deployments ``pairs`` [(prefill,
    decode, x, y)] at ``concurrency`` clients [N] (default: as many as their decode pool holds,
    y instances of the decode strategy's batch): what ``lts estimate`` and ``lts validate``
    compute for them."""
    pre = np.stack([p.strategies[0] for p, _, _, _ in pairs])
    dec = np.stack([d.strategies[0] for _, d, _, _ in pairs])
    x = np.array([x for _, _, x, _ in pairs])
    y = np.array([y for _, _, _, y in pairs])
    conc = y * dec[:, BATCH] if concurrency is None else concurrency
    other = decoder(problem)
    two = other is not problem
    return two_pool.estimate(problem.model, problem.topo, problem.engine, pre, x, pre[:, BATCH],
                             dec, y, dec[:, BATCH], problem.isl, problem.osl, conc,
                             problem.work.gpus, getattr(problem, "spec", None),
                             other.topo if two else None, other.engine if two else None,
                             getattr(problem, "prefix", None))


def _meets(problem: ServeProblem, loop) -> np.ndarray:
    """The loop's deployments within the problem's SLOs [N] bool."""
    ok = loop.valid.copy()
    if problem.ttft_slo_ms and math.isfinite(problem.ttft_slo_ms):
        ok &= loop.ttft_s <= problem.ttft_slo_ms * 1e-3
    if problem.tpot_slo_ms and math.isfinite(problem.tpot_slo_ms) and problem.osl > 1:
        ok &= loop.tpot_s <= problem.tpot_slo_ms * 1e-3
    return ok


def loop_concurrency(problem: ServeProblem, pairs) -> tuple:
    """(concurrency [N], loop result) of deployments ``pairs``: the most clients up to what
    their decode pool holds that meet the SLOs (TTFT and TPOT rise with the clients, output
    tokens/s does not fall: the largest such C serves the most), found by bisection
    (``serving.serve.bisect_largest``); where not even one client meets them, C = 1 (the
    result says it fails)."""
    full = np.array([y * d.strategies[0][BATCH] for _, d, _, y in pairs], dtype=np.float64)
    loop = closed_loop(problem, pairs, full)
    ok = _meets(problem, loop)
    lo = bisect_largest(lambda take, c: _meets(problem, closed_loop(problem,
                                                                   [pairs[i] for i in take], c)),
                        np.where(ok, full, 0.0), np.where(ok, full + 1, full))
    conc = np.maximum(lo, 1.0)
    redo = np.flatnonzero(conc != full)          # (the others' figures are the first call's)
    if len(redo):
        loop = loop.with_rows(redo, closed_loop(problem, [pairs[i] for i in redo], conc[redo]))
    return conc, loop


def memory_rule(engine: EngineProfile, topo: TopologySpec, parallel) -> tuple:
    """The engine's memory rule as a limit on a pool strategy's memory per GPU: (kv_scale,
    limits [shape of ``parallel`` = tp * pp]) such that M bytes per GPU of which K are KV cache
    fit exactly when M + (kv_scale - 1) K <= limit. ``kv_pool_bytes`` is affine in the fixed
    bytes F = M - K, c - s F: K <= c - s (M - K) is M + (1/s - 1) K <= c / s."""
    c = np.broadcast_to(np.asarray(engine.kv_pool_bytes(topo, 0.0, parallel), dtype=np.float64),
                        np.shape(parallel))
    slope = (c - engine.kv_pool_bytes(topo, topo.hbm_bytes, parallel)) / topo.hbm_bytes
    s = round(float(np.max(slope)), 12)     # 1, or a fraction (TensorRT-LLM's 0.9): exact
    return 1.0 / s, c / s


class EnginePool(Problem):
    """One pool's phase under its engine's memory rule (the module docstring): ``tables`` are
    the rule's, what every solver checks memory on; ``figures`` the model's own, what is
    reported. ``tables`` given: either a pool's rule tables (reused as they are) or the model's
    own for the same phase."""

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload,
                 engine: EngineProfile, tables=True, engine_space: str = GENERIC,
                 space: Space | None = None):
        self.engine, self.engine_topo = engine, topo
        space = space or Space.for_model(model, work.budget(topo), **work.cp_space())
        parallel = np.array(sorted({t * p for t in space.tp for p in space.pp}))
        self.kv_scale, limits = memory_rule(engine, topo, parallel)
        self.limit = float(limits.max())
        ruled = isinstance(tables, Tables) and "figures" in tables.extra
        super().__init__(model, replace(topo, hbm_reserve_bytes=topo.hbm_bytes - self.limit),
                         work, space, tables=tables, engine_space=engine_space,
                         whole_budget=False)
        if self.tables is not None and not ruled:
            self.tables = self.rule_tables(self.tables)
        self.figures = None if self.tables is None else self.tables.extra.get("figures",
                                                                              self.tables)

    def rule_tables(self, tables: Tables) -> Tables:
        """Tables whose memory per GPU is the rule's: KV x ``kv_scale`` and each coarse row's
        margin below ``limit`` on the workspace (``tables`` itself where both change nothing)."""
        _, limits = memory_rule(self.engine, self.engine_topo,
                                tables.coarse[:, TP] * tables.coarse[:, PP])
        margin = self.limit - limits
        if self.kv_scale == 1.0 and not margin.any():
            return tables
        extra = {"figures": tables, **{k: v for k, v in tables.extra.items() if k == "ids_bytes"}}
        return replace(tables, kv_bytes=tables.kv_bytes * self.kv_scale,
                       kv_layer_bytes=tables.kv_layer_bytes * self.kv_scale,
                       workspace_bytes=tables.workspace_bytes + margin, extra=extra)

    def _figures(self, rows, figures: Tables, ruled: Tables, g) -> Result:
        """Rows [N, WIDTH] (values, rows ``g`` of both tables) costed on the model's own tables,
        valid only where the rule's tables find them valid too."""
        res = evaluate(self.model, self.topo, self.work, rows, tables=figures, coarse_index=g)
        if ruled is not figures:
            res.reasons |= evaluate(self.model, self.topo, self.work, rows, tables=ruled,
                                    coarse_index=g).reasons
            res.valid = res.reasons == 0
        return self.restrict(res)

    def evaluate(self, idx: np.ndarray, count: bool = True) -> Result:
        idx = np.atleast_2d(idx)
        if count:
            self.calls += len(idx)
        g = self.coarse_index(idx)
        rows = np.array(idx, dtype=np.int64)
        rows[:, :N_COARSE] = self.grid[g]                   # = self.space.decode(idx)
        return self._figures(self._canonical(rows), self.figures, self.tables, g)

    def evaluate_rows(self, rows) -> Result:
        rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
        tables, g = tables_for(self.model, self.topo, self.work, rows)
        return self._figures(rows, tables, self.rule_tables(tables), g)


def pool_problem(problem: ServeProblem, work: Workload, tables=None) -> Problem:
    """One pool's phase as an exact-search problem: the engine's topology with the engine's
    time per step added to each step, under the engine's memory rule (``EnginePool``; the
    generic engine's is the topology's own) (``tables``: built for the same phase, to reuse)."""
    topo = problem.engine.topology(problem.topo)
    topo = replace(topo, step_overhead_s=topo.step_overhead_s + problem.engine.step_overhead_s)
    tables = True if tables is None else tables
    # the pools share the budget (``pair`` counts it), so each is scored per GPU it uses, in
    # the engine's space when one is named
    if problem.engine.memory == "reserve":
        return Problem(problem.model, topo, work, tables=tables,
                       engine_space=problem.engine_space, whole_budget=False)
    return EnginePool(problem.model, topo, work, problem.engine, tables, problem.engine_space)


def best_pool(pool: Problem, max_gpus: int | None = None):
    """The exact optimum of one pool's phase (instances of at most ``max_gpus`` GPUs): a one-row
    Result, or None if nothing is feasible."""
    solve = search_exact if pool.engine_space == GENERIC else search_engine_exact
    sr = solve(pool, top=1, max_gpus=max_gpus)
    return None if sr.best is None else sr.evaluated


def pools(pool: Problem) -> list:
    """Distinct best strategies of one pool's phase (one-row Results), one per instance size
    bound: the whole budget first; the per-GPU optimum at a bound of b GPUs is that one for every
    b at least its size, so only the instance sizes (``instance_gpus`` of the space) below its size
    are solved again, each as a bound, on the same problem (``search_exact(max_gpus=b)``: its
    tables and bounds are built once). ``pool``: the phase at the whole budget
    (``pool_problem``)."""
    full = best_pool(pool)
    if full is None:
        return []
    sp = pool.space
    sizes = np.unique(instance_gpus(sp.full_grid()))
    out = [full]
    for b in sizes[sizes < int(full.gpus[0])]:
        res = best_pool(pool, int(b))
        if res is not None and not any(np.array_equal(res.strategies[0], r.strategies[0])
                                       for r in out):
            out.append(res)
    return out


def spec_factor(problem: ServeProblem, decode) -> float:
    """A decode pool strategy's TPOT with speculative decoding (``problem.spec``) over its
    plain one: its step's verification of k + 1 tokens and k draft steps over the plain step
    (both at the pool's context, isl + osl), divided by the mean accepted length; 1 without."""
    spec = getattr(problem, "spec", None)
    if spec is None:
        return 1.0
    dec = decoder(problem)
    row = decode.strategies[:1]
    ctx = problem.isl + problem.osl
    plain, verify = (dec.evaluator(Workload("decode", ctx, tpot_slo_ms=serve.NO_SLO,
                                            gpus=dec.work.gpus, query_tokens=q),
                                   row).step_s[0] for q in (1, spec.tokens + 1))
    drafts = serve.draft_s(dec.draft, spec, problem.isl, problem.osl, dec.work.gpus, row)[0]
    return float((verify + drafts) / plain / spec.accepted_length)


def decode_tpot(problem: ServeProblem, decode) -> float:
    """The decode pool strategy's TPOT (``spec_factor`` times its plain one)."""
    return float(decode.tpot_s[0]) * spec_factor(problem, decode)


def pool_rates(problem: ServeProblem, prefill, decode) -> tuple:
    """Requests/s one instance of each pool completes: (prefill: batch / pass, decode:
    batch / (osl x TPOT), ``decode_tpot``)."""
    return (float(prefill.strategies[0][BATCH] / prefill.ttft_s[0]),
            float(decode.strategies[0][BATCH] / (problem.osl * decode_tpot(problem, decode))))


def deployment(problem: ServeProblem, prefill, decode, x: int, y: int) -> Disagg:
    """x instances of the prefill pool's strategy and y of the decode pool's, as a Disagg: the
    rate the slower pool serves, its output tokens/s per GPU, and a request's TTFT (1.5 passes
    and the KV transfer over the tier spanning the GPUs used) and TPOT."""
    g_p, g_d = int(prefill.gpus[0]), int(decode.gpus[0])
    r_p, r_d = pool_rates(problem, prefill, decode)
    used, served = x * g_p + y * g_d, min(x * r_p, y * r_d)
    move = transfer_s(problem, used, min(g_p, g_d))
    other = decoder(problem)
    return Disagg(prefill, decode, x, y, used, served, served * problem.osl / used,
                  pool_ttft_s(float(prefill.ttft_s[0]), fixed_s(problem, move)),
                  decode_tpot(problem, decode), move,
                  decode_topology=other.topo.name if other is not problem else None)


PAIR_XS = 1 << 16      # prefill instance counts ``pair`` tries one by one (a budget's worth)


def pair(problem: ServeProblem, prefill, decode, budget: int | None = None):
    """The best instance counts of two pool strategies within the budget (default: the
    problem's): (output tokens/s per GPU of the budget, GPUs used, prefill instances, decode
    instances, requests/s), or None.

    The objective is the one pool's: output tokens/s per GPU of the budget, i.e. the rate
    served, GPUs left idle counted. For x prefill instances the served rate min(x r_p, y r_d)
    rises with y up to the balance y = x r_p / r_d and stays there, so the best y is the
    balance's floor or ceiling within the budget; ties go to the fewest GPUs.

    Every x up to what the budget holds is tried, except on a budget of more than PAIR_XS
    prefill instances (a cluster of millions of GPUs): then the x around the continuous
    balance x* = budget / (g_p + g_d r_p / r_d), where the served rate peaks (it rises as
    x r_p below x* and falls with the decode instances y_max left above it, level over runs of
    g_d / g_p values of x), so the work does not grow with the GPUs."""
    budget = budget or problem.work.budget(problem.topo)
    g_p, g_d = int(prefill.gpus[0]), int(decode.gpus[0])
    r_p, r_d = pool_rates(problem, prefill, decode)
    top = (budget - g_d) // g_p
    if top < 1:
        return None
    lo, hi = 1, top
    if top > PAIR_XS:
        centre, pad = budget / (g_p + g_d * r_p / r_d), 2 * math.ceil(g_d / g_p) + 16
        lo, hi = max(1, math.floor(centre) - pad), min(top, math.ceil(centre) + pad)
    x = np.arange(lo, hi + 1, dtype=np.float64)
    y_max = np.floor((budget - x * g_p) / g_d)
    balance = x * r_p / r_d
    xs, ys = np.concatenate([x, x]), np.clip(np.concatenate([np.floor(balance),
                                                              np.ceil(balance)]), 1.0,
                                             np.concatenate([y_max, y_max]))
    served = np.minimum(xs * r_p, ys * r_d)
    used = xs * g_p + ys * g_d
    per_gpu = served * problem.osl / budget
    # the best, and of those equal to rounding, the fewest GPUs
    near = np.flatnonzero(per_gpu >= per_gpu.max() * (1 - 1e-12))
    j = int(near[np.argmin(used[near])])
    return float(per_gpu[j]), int(used[j]), int(xs[j]), int(ys[j]), float(served[j])


def _prefill_limit(problem: ServeProblem):
    """The prefill pass's time limit in ms (0: none), or None when no pass can meet the TTFT
    limit: the transfer depends on the placement, so the slowest case (the whole budget, one GPU
    sending) bounds the pass; the chosen placement is then costed exactly."""
    ttft = problem.ttft_slo_ms
    if not (ttft and math.isfinite(ttft)):
        return 0.0
    limit = pool_pass_limit(ttft, fixed_s(problem, transfer_s(
        problem, problem.work.budget(problem.topo), 1)) * 1e3)
    return limit if limit > 0 else None


def best_pair(problem: ServeProblem, prefills, decodes, budget: int | None = None) -> Disagg | None:
    """The best deployment of the pools' strategies within ``budget`` GPUs (default: the
    problem's), as a Disagg (None: no pair fits). Each pair of strategies gets its instance
    counts by rate matching (``pair``); every such deployment is then run through the two-pool
    closed loop at the most clients its decode pool holds within the SLOs
    (``loop_concurrency``) and the one with the most output tokens/s per GPU of the budget
    wins (ties: the fewest GPUs). Its figures are the loop's."""
    budget = budget or problem.work.budget(problem.topo)
    cands = []
    for prefill in prefills:
        for decode in decodes:
            got = pair(problem, prefill, decode, budget)
            if got is not None:
                cands.append((prefill, decode, got[2], got[3]))
    if not cands:
        return None
    conc, loop = loop_concurrency(problem, cands)
    ok = _meets(problem, loop)
    if not ok.any():
        return None
    score = np.where(ok, loop.output_tokens_per_s / budget, -np.inf)
    near = np.flatnonzero(score >= score.max() * (1 - 1e-12))
    j = int(near[np.argmin(loop.gpus[near])])
    prefill, decode, x, y = cands[j]
    other = decoder(problem)
    return Disagg(prefill, decode, x, y, int(loop.gpus[j]), float(loop.requests_per_s[j]),
                  float(loop.output_tokens_per_s_per_gpu[j]), float(loop.ttft_s[j]),
                  float(loop.tpot_s[j]), float(loop.transfer_s[j]), float(score[j]),
                  int(conc[j]), other.topo.name if other is not problem else None)


def decode_pool(problem: ServeProblem, tpot_ms: float | None = None, tables=None,
                gpus: int | None = None) -> Problem:
    """The decode pool's problem under a TPOT limit (default: the problem's own): the decode
    step at the final context isl + osl, i.e. the memory a request holds at its end (as one pool
    reserves it), its time a little above the mean context's. ``gpus``: instances of at most
    that many GPUs (default: the budget)."""
    tpot = problem.tpot_slo_ms if tpot_ms is None else tpot_ms
    tpot = tpot if tpot and math.isfinite(tpot) else 1e9
    dec = decoder(problem)          # (another topology where the search names one)
    return pool_problem(dec, Workload("decode", problem.isl + problem.osl, tpot_slo_ms=tpot,
                                      gpus=gpus or dec.work.budget(dec.topo),
                                      max_cp=getattr(problem, "max_cp", 1),
                                      max_etp=getattr(problem, "max_etp", 1)), tables)


def prefill_pool(problem: ServeProblem, limit_ms: float | None = None,
                 gpus: int | None = None) -> Problem | None:
    """The prefill pool's problem: whole prompts of isl tokens, each pass within the TTFT's
    share (``_prefill_limit``, by default computed here; None: no pass can meet it).
    ``gpus``: instances of at most that many GPUs (default: the budget)."""
    limit = _prefill_limit(problem) if limit_ms is None else limit_ms
    if limit is None:
        return None
    return pool_problem(problem, chunked(Workload("prefill", problem.isl, ttft_slo_ms=limit,
                                                  gpus=gpus or problem.work.budget(problem.topo),
                                                  cached=getattr(problem, "cached", 0),
                                                  max_cp=getattr(problem, "max_cp", 1),
                                                  max_etp=getattr(problem, "max_etp", 1)),
                                         problem.engine))


_CANDIDATES = weakref.WeakKeyDictionary()    # problem -> (its settings, pool_candidates)


def pool_candidates(problem: ServeProblem) -> tuple:
    """(prefill pool strategies, decode pool strategies, the decode pool's problem or None):
    ``pools`` of each phase under the problem's SLOs, none when no pass meets the TTFT limit or
    osl is 1 (nothing for a decode pool to do). Kept per problem and its settings, so that the
    frontier and the sizing pair the same strategies without solving them again."""
    key = (problem.model, problem.topo, problem.isl, problem.osl, problem.tpot_slo_ms,
           problem.ttft_slo_ms, problem.engine, problem.engine_space,
           problem.work.budget(problem.topo), getattr(problem, "spec", None),
           decoder(problem).topo.name, getattr(problem, "prefix", None))
    kept = _CANDIDATES.get(problem)
    if kept is not None and kept[0] == key:
        return kept[1]
    limit = _prefill_limit(problem)
    if problem.osl < 2 or limit is None:
        out = [], [], None
    else:
        decode = decode_pool(problem)
        decodes = pools(decode)
        if decodes and getattr(problem, "spec", None) is not None and problem.tpot_slo_ms:
            # speculative decoding: a plain step may take the TPOT limit times what the spec
            # makes of it (spec_factor, at the plain optimum); those pools too
            relaxed = problem.tpot_slo_ms / spec_factor(problem, decodes[0])
            decodes = decodes + [d for d in pools(decode_pool(problem, relaxed, decode.tables))
                                 if not any(np.array_equal(d.strategies[0], e.strategies[0])
                                            for e in decodes)]
        out = pools(prefill_pool(problem, limit)) if decodes else [], decodes, decode
    _CANDIDATES[problem] = (key, out)
    return out


def disaggregate(problem: ServeProblem, tpot_limits_ms=()) -> tuple:
    """(the best disaggregated deployment within the GPU budget and the SLOs or None, and the
    frontier: the best deployment under each TPOT limit of ``tpot_limits_ms`` and the problem's
    own, as Disaggs in order of rising tokens/s per user, each the most output tokens/s per GPU
    at or beyond its tokens/s per user).

    Each pool's strategies come from ``pools`` (its phase's exact optimum per instance size
    bound; the prefill pools do not depend on the TPOT limit, the decode pools' tables are built
    once); every prefill and decode pair is tried with its best instance counts (``pair``)."""
    prefills, decodes, decode = pool_candidates(problem)
    best = best_pair(problem, prefills, decodes)
    if best is None:
        return None, []
    points = [best]
    factor = spec_factor(problem, decodes[0]) if decodes else 1.0
    for ms in sorted(set(tpot_limits_ms)):
        # the same tables (and exact bounds) as the SLO's decode pool: only the limit differs
        # (a plain step's, with speculative decoding: spec_factor)
        d = best_pair(problem, prefills, pools(decode_pool(problem, ms / factor, decode.tables)))
        if d is not None:
            points.append(d)
    front = pareto_front([1 / d.tpot_s for d in points], [d.tokens_per_s_per_gpu for d in points],
                         [d.gpus for d in points])
    return best, [points[i] for i in front]
