"""Search methods over the strategy space, all scored by the same cost model (DESIGN.md §4).

Every method gets a ``Problem`` (model, topology, workload, space), a budget of evaluator calls
and a ``np.random.Generator``, and returns a ``SearchResult``: the best valid strategy seen and a
ranked top-k of distinct strategies. ``SEARCHERS`` maps method names to functions.

- ``random``: uniform sampling.
- ``random-walk``: from the current point resample one random entry, always accept (PAPER.md §8).
- ``anneal``: one-entry mutation, Metropolis acceptance on raw tokens/s/GPU, T0 = 100 cosine-annealed
  to 0 over the budget; invalid proposals are rejected but consume budget.
- ``megatron``: Megatron's per-op sharding, exhaustive over tp/ep/pp/batch.
- ``exact``: the true optimum of the cost model over the whole space (see ``exact``).
- ``ppo``: the paper's agent (``lts.ppo``, ``lts.policy``).

Imports: costmodel, serve, strategy, specs.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .costmodel import (NORM_OF, PP, TP, EP, BATCH, Gather, Result, Workload, build_tables,
                        evaluate, piece_attn, piece_between, piece_ffn, piece_first, piece_last,
                        piece_send, stage_max, stage_memory)
from . import serve
from .specs import ModelSpec, TopologySpec
from .strategy import EXPERTS, MEGATRON, N_COARSE, OP_COL, OPS, Space


class Problem:
    """A model, a cluster, a workload and the space; evaluates index rows and counts the calls.

    Coarse tables are built once for every (tp, ep, pp, batch) of the space (instances over the
    GPU budget included: they are reported invalid for ``budget``), so each evaluation is a walk.
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload,
                 space: Space | None = None, tables: bool = True):
        self.model, self.topo, self.work = model, topo, work
        self.space = space or Space.for_model(model, work.budget(topo))
        sp = self.space
        tp, ep, pp, b = np.meshgrid(sp.tp, sp.ep, sp.pp, sp.batch, indexing="ij")
        self.grid = np.stack([tp.ravel(), ep.ravel(), pp.ravel(), b.ravel()], 1).astype(np.int64)
        self.grid_shape = tp.shape
        self.tables = build_tables(model, topo, work, self.grid) if tables else None
        self.calls = 0
        self.usable = topo.hbm_bytes - topo.hbm_reserve_bytes

    def coarse_index(self, idx: np.ndarray) -> np.ndarray:
        """Index rows [N, 16] -> row of the coarse grid [N]."""
        return np.ravel_multi_index(tuple(idx[:, i] for i in range(N_COARSE)), self.grid_shape)

    def evaluate(self, idx: np.ndarray, count: bool = True) -> Result:
        """Evaluate index rows [N, 16] (one index per entry); counts N evaluator calls."""
        idx = self.canonical(idx)
        if count:
            self.calls += len(idx)
        return evaluate(self.model, self.topo, self.work, self.space.decode(idx),
                        tables=self.tables, coarse_index=self.coarse_index(idx))

    def evaluate_rows(self, rows) -> Result:
        """Evaluate strategy rows [N, 16] (values, not indices); no call is counted."""
        return evaluate(self.model, self.topo, self.work, np.atleast_2d(rows))

    def fixed_choice_rows(self, choices) -> np.ndarray:
        """Index rows [G, 16]: every (tp, ep, pp, batch) of the grid with the per-op ``choices``."""
        g = np.indices(self.grid_shape).reshape(N_COARSE, -1).T
        return np.concatenate([g, np.tile(np.asarray(choices, dtype=np.int64), (len(g), 1))], 1)

    def canonical(self, idx: np.ndarray) -> np.ndarray:
        """The strategy an index row stands for.

        MoE: FFN1 and FFN2 split the experts together or not at all (the cost model rejects a
        lone `experts`), so a row where either picks `experts` stands for both doing so: no call
        is spent on a pairing that is never a strategy, for every method alike. Dense: the
        router's choice cannot matter and is set to Megatron's.
        """
        idx = np.array(np.atleast_2d(idx), copy=True)
        if self.model.is_moe:
            c1, c2 = OP_COL["ffn1"], OP_COL["ffn2"]
            either = (idx[:, c1] == EXPERTS) | (idx[:, c2] == EXPERTS)
            idx[either, c1] = idx[either, c2] = EXPERTS
        else:
            idx[:, OP_COL["router"]] = MEGATRON[OPS.index("router")]
        return idx

    def score(self, res: Result) -> np.ndarray:
        """Objective: tokens/s/GPU of valid strategies, -inf for invalid ones."""
        return np.where(res.valid, res.tokens_per_s_per_gpu, -np.inf)


class ServeProblem(Problem):
    """The serve phase as a search problem: the objective is output tokens/s per GPU of the
    closed loop (``lts.serve``) at concurrency C = the batch column, requests of ``isl`` input and
    ``osl`` output tokens, under an engine profile.

    The concurrency head holds the powers of two and, last, ``serve.AT_CAPACITY``: as many
    requests as the strategy's KV cache holds (the largest concurrency that does not queue), so
    a search without a TTFT limit need not stop at a power of two above the capacity.

    One evaluator call costs a strategy in the closed loop (its memory, then a decode step and a
    mixed step of its running batch). The grid's coarse tables are built once; a running batch
    the KV cache caps is off the grid, and its tables are built when first met (``serve.warm``,
    ``costmodel.TableCache``). ``work`` is the decode step at the final context isl+osl (the
    engine's context length); ``step_work`` the decode step at the mean context (per-op
    breakdowns). The exact search does not apply: its factorization costs
    one phase (see ``search_exact``).
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, isl: int, osl: int,
                 tpot_slo_ms: float | None = None, ttft_slo_ms: float | None = None,
                 gpus: int = 0, space: Space | None = None, engine=None):
        work = serve.memory_workload(isl, osl, gpus)
        if space is None:      # concurrencies: the powers of two, then each strategy's capacity
            space = Space.for_model(model, work.budget(topo))
            space = replace(space, batch=space.batch + (serve.AT_CAPACITY,))
        super().__init__(model, topo, work, space, tables=False)
        self.isl, self.osl = int(isl), int(osl)
        self.tpot_slo_ms, self.ttft_slo_ms = tpot_slo_ms, ttft_slo_ms
        self.engine = engine or serve.GENERIC
        self.step_work = serve.decode_workload(isl, osl, gpus)
        self.evaluator = serve.Evaluator(model, self.engine.topology(topo), cached=True)
        serve.warm(self.evaluator, self.engine, self.grid, isl, osl, gpus)

    def serve_rows(self, rows) -> serve.ServeResult:
        """The closed-loop figures of strategy rows [N, 16] (values); no call is counted."""
        return serve.serve(self.model, self.topo, np.atleast_2d(rows), self.isl, self.osl,
                           tpot_slo_ms=self.tpot_slo_ms, ttft_slo_ms=self.ttft_slo_ms,
                           gpus=self.work.gpus, engine=self.engine, evaluator=self.evaluator)

    def evaluate(self, idx: np.ndarray, count: bool = True) -> Result:
        idx = self.canonical(idx)
        if count:
            self.calls += len(idx)
        return serve.as_result(self.serve_rows(self.space.decode(idx)))

    def evaluate_rows(self, rows) -> Result:
        return serve.as_result(self.serve_rows(rows))

    def score(self, res: Result) -> np.ndarray:
        """Output tokens/s/GPU; requests beyond the KV cache add nothing but queueing, so of
        two concurrencies with the same running batch the smaller one wins (by a part in 1e9)."""
        queued = 1.0 - res.running / res.strategies[:, BATCH]
        return np.where(res.valid, res.tokens_per_s_per_gpu * (1.0 - 1e-9 * queued), -np.inf)


@dataclass
class SearchResult:
    method: str
    best: np.ndarray | None          # strategy row [16] (values, not indices), None if none valid
    best_score: float                # tokens/s/GPU (-inf if none valid)
    top: np.ndarray                  # [k, 16] strategy rows, best first (distinct, valid)
    top_scores: np.ndarray
    evaluations: int
    wall_s: float
    improvements: tuple = ()         # (call index, best-so-far) at each call that raised the best
    tracked: int = 0                 # calls the tracker saw
    stats: dict = field(default_factory=dict)

    @property
    def history(self) -> np.ndarray:
        """The best-so-far after each call (-inf before the first valid one), [tracked]."""
        h = np.full(self.tracked, -np.inf)
        for i, v in self.improvements:
            h[i:] = v
        return h


# the most evaluator calls a method accepts: what runs in about 10 minutes on a 2-core machine
# (random and random-walk evaluate in vectorized chunks, ~1 M calls/s; anneal and ppo make a
# Python step per call or per 32 calls, ~3,000 calls/s); memory does not grow with the budget
MAX_BUDGET = {"random": 10_000_000, "random-walk": 10_000_000, "anneal": 1_000_000,
              "ppo": 1_000_000, "ppo-paper": 1_000_000}
CHUNK = 65536        # rows per vectorized evaluation in random and random-walk


class Tracker:
    """Keeps the best-so-far curve and the top-k of a search: the best valid strategy of each of
    the k best distinct (tp, ep, pp, batch), as the exact search reports them.

    Memory is bounded by the coarse grid, not the budget: per coarse row only its best strategy
    (the first seen among equals) and the call at which it was seen; the curve as its
    improvements. ``add`` is vectorized: a Python step per distinct coarse row of a batch."""

    def __init__(self, problem: Problem, k: int):
        self.problem, self.k = problem, k
        self.by_coarse = {}     # coarse grid index -> (score, call index, index row)
        self.best = -np.inf
        self.seen = 0           # calls added so far
        self.improvements = []

    def add(self, idx: np.ndarray, scores: np.ndarray) -> None:
        idx = self.problem.canonical(np.atleast_2d(idx))
        scores = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        n = len(scores)
        if n == 0:
            return
        run = np.maximum.accumulate(np.concatenate([[self.best], scores]))
        for i in np.flatnonzero(run[1:] > run[:-1]):
            self.improvements.append((self.seen + int(i), float(run[i + 1])))
        self.best = float(run[-1])
        ok = np.flatnonzero(np.isfinite(scores))
        if len(ok):
            keys = self.problem.coarse_index(idx[ok])
            order = np.lexsort((ok, -scores[ok], keys))     # per key: best score, then earliest
            first = order[np.r_[True, keys[order][1:] != keys[order][:-1]]]
            for j in first:
                key, score, at = int(keys[j]), float(scores[ok[j]]), self.seen + int(ok[j])
                cur = self.by_coarse.get(key)
                if cur is None or score > cur[0]:
                    self.by_coarse[key] = (score, at, idx[ok[j]].copy())
        self.seen += n

    def result(self, method: str, t0: float, stats=None) -> SearchResult:
        ranked = sorted(self.by_coarse.values(), key=lambda r: (-r[0], r[1]))[:self.k]
        sp = self.problem.space
        top = sp.decode(np.array([r[2] for r in ranked])) if ranked else np.zeros((0, 16), np.int64)
        scores = np.array([r[0] for r in ranked])
        return SearchResult(method, top[0] if len(top) else None,
                            float(scores[0]) if len(scores) else -math.inf, top, scores,
                            self.problem.calls, time.perf_counter() - t0,
                            tuple(self.improvements), self.seen, stats or {})


# ----------------------------------------------------------------------------------------------
# baselines

def search_random(problem: Problem, budget: int, rng, top: int = 10, progress=None) -> SearchResult:
    """Uniform sampling of ``budget`` strategies, evaluated in vectorized chunks."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    for start in range(0, budget, CHUNK):
        n = min(CHUNK, budget - start)
        idx = problem.space.sample(rng, n)
        tr.add(idx, problem.score(problem.evaluate(idx)))
        if progress:
            progress(n)
    return tr.result("random", t0)


def _mutate(space: Space, rng, row: np.ndarray) -> np.ndarray:
    """Resample one uniformly chosen entry to a different value."""
    out = row.copy()
    sizes = np.array(space.sizes)
    entry = rng.choice(np.flatnonzero(sizes > 1))
    out[entry] = (row[entry] + rng.integers(1, sizes[entry])) % sizes[entry]
    return out


def search_random_walk(problem: Problem, budget: int, rng, top: int = 10,
                       progress=None) -> SearchResult:
    """Random walk: one-entry mutation, always accepted (the trajectory does not depend on the
    scores, so each chunk of it is drawn first and evaluated in one vectorized call)."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    row = problem.space.sample(rng, 1)[0]
    for start in range(0, budget, CHUNK):
        n = min(CHUNK, budget - start)
        rows = np.empty((n, len(problem.space.sizes)), dtype=np.int64)
        for i in range(n):
            if start or i:
                row = _mutate(problem.space, rng, row)
            rows[i] = row
        tr.add(rows, problem.score(problem.evaluate(rows)))
        if progress:
            progress(n)
    return tr.result("random-walk", t0)


def search_anneal(problem: Problem, budget: int, rng, top: int = 10, progress=None,
                  t0_temp: float = 100.0) -> SearchResult:
    """Simulated annealing (PAPER.md §8): one-entry mutation, Metropolis acceptance
    exp((f_new - f_cur) / T) on raw tokens/s/GPU, T = T0 * (1 + cos(pi * i / budget)) / 2.
    Invalid proposals are rejected; every proposal costs one evaluator call. Starts from a random
    point (resampled until valid, each draw counted)."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    sp = problem.space
    cur, f_cur, i = None, -np.inf, 0
    while i < budget and not np.isfinite(f_cur):
        cur = sp.sample(rng, 1)[0]
        f_cur = float(problem.score(problem.evaluate(cur[None]))[0])
        tr.add(cur[None], [f_cur])
        i += 1
    while i < budget:
        temp = t0_temp * 0.5 * (1 + math.cos(math.pi * i / budget))
        prop = _mutate(sp, rng, cur)
        f = float(problem.score(problem.evaluate(prop[None]))[0])
        tr.add(prop[None], [f])
        if np.isfinite(f) and (f >= f_cur or
                               (temp > 0 and rng.random() < math.exp((f - f_cur) / temp))):
            cur, f_cur = prop, f
        i += 1
        if progress and i % 200 == 0:
            progress(200)
    return tr.result("anneal", t0)


def search_megatron(problem: Problem, budget: int, rng, top: int = 10,
                    progress=None) -> SearchResult:
    """Megatron's per-op sharding fixed, exhaustive over tp/ep/pp/batch (the paper's heuristic
    baseline). Ignores the budget: the coarse grid is small."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    idx = problem.fixed_choice_rows(MEGATRON)
    tr.add(idx, problem.score(problem.evaluate(idx)))
    if progress:
        progress(budget)
    return tr.result("megatron", t0)


# ----------------------------------------------------------------------------------------------
# the exact optimum

INVALID_S = 1e30      # the time of an invalid option inside the exact search


def _grid(*sizes):
    """All combinations of range(n) for each size, as one flat array per position."""
    combos = np.array(list(itertools.product(*[range(n) for n in sizes])), dtype=np.int64)
    return [combos[:, i] for i in range(len(sizes))]


class _Exact:
    """Factorized costs of every fine strategy for a block of coarse rows.

    Why this is exact. Fix the coarse part (tp, ep, pp, batch). Every layer makes the same choices,
    and the cost model's step is built from pieces (costmodel.piece_*), each depending on few
    choices: the attention block on ops 2-7, the FFN block on ops 7-10, the layer boundary on the
    FFN output layout and ops 2 and 7, the first stage's extra on ops 1-2, the last stage's on the
    FFN output layout and ops 7, 11, 12. The slowest stage is lp * attn + (terms free of ops 3-6),
    because every stage holds lp layers and so lp attention blocks; memory is likewise
    lp * (attention weights + KV) + (terms free of ops 3-6). Hence for fixed ops (2, 7) the
    problem splits into an attention list a (81 options of ops 3-6: time A_a, memory W_a) and a
    rest list f (options of ops 1, 8-12: time G_f, memory M_f), and the optimum is

        min over a, f of lp*A_a + G_f   subject to   lp*W_a + M_f <= usable HBM,

    which is solved by enumerating both lists (81 x ~1300 per (op 2, op 7) pair): memory is the
    second criterion of a dynamic programme over the chain of layouts, and nothing is pruned
    except by bounds that are valid for every strategy of a coarse row. Throughput per GPU is
    batch / (steps * slowest * gpus), decreasing in the slowest stage, so for a coarse row the
    feasible minimum time is its best strategy. Coarse rows are visited in order of an upper
    bound on their throughput (the unconstrained minimum time) and the search stops when the
    bound falls below the k-th best found. A test checks the result equals brute force on spaces
    small enough to enumerate.
    """

    def __init__(self, problem: Problem):
        p = problem
        self.p, self.model = p, p.model
        n = p.space.choices
        self.n = n
        # attention side: (op2, op3, op4, op5, op6, op7)
        self.a = _grid(n[1], n[2], n[3], n[4], n[5], n[6])
        # FFN side: (op7, op8, op9, op10)
        self.f = _grid(n[6], n[7], n[8], n[9])
        self.once1 = _grid(n[0], n[1])                 # (op1, op2)
        self.once2 = _grid(n[10], n[11])               # (op11, op12)

    def block(self, g):
        """Times and memories of both lists for coarse rows g [C]."""
        model, tab = self.model, self.p.tables
        n = self.n
        gg = np.asarray(g)[:, None]
        x = Gather(tab, gg)
        A, Aw, _ = piece_attn(x, model, *self.a)                       # [C, |a|]
        c7, c8, c9, c10 = self.f
        l7 = NORM_OF[c7]
        ffn, ffn_w, out, ok = piece_ffn(x, model, l7, c8, c9, c10)     # [C, |f|]
        # an unmatched `experts` pair is invalid: a huge finite time (inf would give 0 * inf = nan
        # in stages that hold no MoE layer)
        ffn = np.where(ok, ffn, INVALID_S)
        if model.is_moe and model.ffn.dense_layers:
            ffn_d, ffn_dw, _, _ = piece_ffn(x, model, l7, c8, c9, c10, dense=True)
        else:
            ffn_d, ffn_dw = np.zeros_like(ffn), np.zeros_like(ffn)
        # broadcast axes: [C, op1, op2, f, (op11, op12)]
        o1, o2 = self.once1
        first, emb_w = piece_first(x, o1, NORM_OF[o2])                  # [C, op1*op2]
        first = first.reshape(len(g), n[0], n[1], 1, 1)
        emb_w = emb_w.reshape(len(g), n[0], n[1], 1, 1)
        l2 = NORM_OF[np.arange(n[1])][None, None, :, None, None]
        out5, l75 = out[:, None, None, :, None], l7[None, None, None, :, None]
        between = piece_between(Gather(tab, gg[:, :, None, None, None]), out5, l75, l2)
        c11, c12 = self.once2
        xl = Gather(tab, gg[:, :, None, None, None])
        last, tail_w, _ = piece_last(xl, out5, l75, c11[None, None, None, None, :],
                                     c12[None, None, None, None, :])
        send = piece_send(Gather(tab, gg[:, :, None, None, None]), out5, l75)
        lp = tab.layers_per_stage[gg][:, :, None, None, None]
        pp = tab.coarse[gg, PP][:, :, None, None, None].astype(np.float64)
        f5 = (slice(None), None, None, slice(None), None)
        G = stage_max(model, lp, pp, 0.0, between, ffn[f5], ffn_d[f5], first, last, send)
        M = stage_memory(model, lp, pp, 0.0, ffn_w[f5], ffn_dw[f5], emb_w, tail_w,
                         tab.workspace_bytes[gg][:, :, None, None, None])
        G, M = np.broadcast_arrays(G, M)
        # regroup by (op2, op7): attention [C, op2, op7, a'], rest [C, op2, op7, f']
        C = len(g)
        n2, n7 = n[1], n[6]
        A = A.reshape(C, n2, -1, n7).transpose(0, 1, 3, 2)
        Aw = Aw.reshape(C, n2, -1, n7).transpose(0, 1, 3, 2)
        # G: [C, op1, op2, (op7, op8, op9, op10), (op11, op12)] -> [C, op2, op7, rest]
        nf = len(c7) // n7
        G = G.reshape(C, n[0], n2, n7, nf, -1).transpose(0, 2, 3, 1, 4, 5).reshape(C, n2, n7, -1)
        M = M.reshape(C, n[0], n2, n7, nf, -1).transpose(0, 2, 3, 1, 4, 5).reshape(C, n2, n7, -1)
        return lp.reshape(C), A, Aw, G, M

    def decode(self, g, i2, i7, ia, irest):
        """Indices of the optimum back to a full index row."""
        n = self.n
        a = np.unravel_index(ia, (n[2], n[3], n[4], n[5]))
        o1, f8, f9, f10, o11, o12 = np.unravel_index(irest, (n[0], n[7], n[8], n[9], n[10], n[11]))
        coarse = np.unravel_index(g, self.p.grid_shape)
        return np.array([*coarse, o1, i2, *a, i7, f8, f9, f10, o11, o12], dtype=np.int64)


def search_exact(problem: Problem, budget: int = 0, rng=None, top: int = 10,
                 progress=None, block: int = 4) -> SearchResult:
    """The optimum of the cost model over the whole space, and the best strategy of each of the
    next best coarse rows (the top-k). See ``_Exact`` for why it is exact."""
    if isinstance(problem, ServeProblem):
        raise ValueError("the exact search costs one phase (decode or prefill); the serve phase "
                         "sums a prefill and decode steps at several contexts")
    t0 = time.perf_counter()
    p = problem
    ex = _Exact(p)
    tab = p.tables
    work = p.work
    coarse = tab.coarse.astype(np.float64)
    gpus = coarse[:, TP] * coarse[:, EP] * coarse[:, PP]
    pp = coarse[:, PP]
    steps = pp if work.phase == "decode" else 2 * pp - 1
    c0 = p.topo.step_overhead_s            # engine time per forward pass, added to each step
    tokens = coarse[:, BATCH] * (1.0 if work.phase == "decode" else work.context)
    slo = work.tpot_slo_ms * 1e-3 if work.phase == "decode" else (work.ttft_slo_ms * 1e-3 or np.inf)
    cand = np.flatnonzero(tab.fixed_invalid == 0)
    # phase 1: an upper bound on each coarse row's throughput (unconstrained minimum time) and a
    # lower bound on its memory
    ub = np.full(len(coarse), -np.inf)
    for i in range(0, len(cand), 256):
        g = cand[i:i + 256]
        lp, A, Aw, G, M = ex.block(g)
        t_min = (lp[:, None, None] * A.min(-1) + G.min(-1)).min((1, 2))
        t_min = np.where(t_min < INVALID_S, t_min, np.inf)
        m_min = (lp[:, None, None] * Aw.min(-1) + M.min(-1)).min((1, 2))
        ok = (m_min <= p.usable) & (steps[g] * t_min + c0 <= slo) & np.isfinite(t_min)
        ub[g] = np.where(ok, tokens[g] / ((steps[g] * t_min + c0) * gpus[g]), -np.inf)
        if progress:
            progress(0)
    order = cand[np.argsort(-ub[cand], kind="stable")]
    order = order[np.isfinite(ub[order])]
    # phase 2: exact per coarse row, best bounds first, until the bound cannot beat the k-th best
    found = []        # (score, index row)
    visited = 0
    for i in range(0, len(order), block):
        g = order[i:i + block]
        kth = sorted(s for s, _ in found)[-top] if len(found) >= top else -np.inf
        if ub[g[0]] <= kth:
            break
        lp, A, Aw, G, M = ex.block(g)
        T = lp[:, None, None, None, None] * A[..., :, None] + G[..., None, :]
        W = lp[:, None, None, None, None] * Aw[..., :, None] + M[..., None, :]
        T = np.where((W <= p.usable) & (T < INVALID_S), T, np.inf).reshape(len(g), -1)
        best = T.argmin(axis=1)
        t_best = T[np.arange(len(g)), best]
        visited += len(g)
        for j, gj in enumerate(g):
            if not np.isfinite(t_best[j]) or steps[gj] * t_best[j] + c0 > slo:
                continue
            i2, i7, ia, irest = np.unravel_index(best[j], A.shape[1:3] + (A.shape[3], G.shape[3]))
            score = tokens[gj] / ((steps[gj] * t_best[j] + c0) * gpus[gj])
            found.append((score, ex.decode(gj, i2, i7, ia, irest)))
        if progress:
            progress(0)
    found.sort(key=lambda r: -r[0])
    found = found[:top]
    tr = Tracker(p, top)
    if found:
        idx = np.array([r[1] for r in found])
        res = p.evaluate(idx, count=False)      # confirm with the evaluator itself
        tr.add(idx, p.score(res))
    n_space = int(np.prod(p.space.choices)) * len(cand)
    return tr.result("exact", t0, {"coarse_rows": int(len(cand)), "coarse_rows_solved": visited,
                                   "strategies_covered": n_space})


def search_ppo(problem: Problem, budget: int, rng, top: int = 10, progress=None,
               cfg=None) -> SearchResult:
    """The paper's agent (lts.ppo): PPO over an elite history, chunks with fresh networks
    (PPOConfig: lts's tuned defaults unless ``cfg`` is given)."""
    from . import ppo     # the policy network is only needed here
    t0 = time.perf_counter()
    tr = Tracker(problem, top)

    def evaluate(idx):
        res = problem.evaluate(idx)
        score = problem.score(res)
        tr.add(idx, score)
        return res.tokens_per_s_per_gpu, res.valid

    # the expert split (router, FFN1, FFN2 of a MoE) is where restarts must be free to switch
    switch = tuple(OP_COL[op] for op in ("router", "ffn1", "ffn2")) if problem.model.is_moe else ()
    _, _, _, stats = ppo.train(evaluate, problem.space.sizes, budget, rng, cfg or ppo.PPOConfig(),
                               on_calls=progress, switch_heads=switch, keep=False)
    return tr.result("ppo", t0, {"updates": stats.updates, "restarts": stats.restarts,
                                 "early_exits": stats.early_exits})


def search_ppo_paper(problem: Problem, budget: int, rng, top: int = 10,
                     progress=None) -> SearchResult:
    """The paper's agent with the paper's settings (PPOConfig.paper())."""
    from . import ppo
    res = search_ppo(problem, budget, rng, top, progress, cfg=ppo.PPOConfig.paper())
    res.method = "ppo-paper"
    return res


SEARCHERS = {
    "ppo": search_ppo,
    "ppo-paper": search_ppo_paper,
    "random": search_random,
    "random-walk": search_random_walk,
    "anneal": search_anneal,
    "megatron": search_megatron,
    "exact": search_exact,
}
