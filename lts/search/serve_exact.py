"""The exact optimum of the serve phase, and its trade-off frontier (``search_serve_exact``: what
``lts search --phase serve --method exact`` runs; docs/design.md §8).

Why it is exact. A serve strategy is a coarse part (an instance: tp, ep, pp; and the concurrency
C) and per-op choices x. Three facts reduce the closed loop (``lts.serving.serve``) to the
factorized sums that ``lts.search.exact`` solves:

1. **Memory.** A GPU's bytes at u and at 2u requests are each lp * W_a + M_f over the attention
   list a and the rest list f (``exact._Exact``), so the KV capacity of every x of an instance
   is one array over the (a, f) grid, and so is its running batch n(x) (the engine's hold).
2. **For a fixed running batch n the loop is linear in the two step times.** TTFT, TPOT and the
   request latency are counts of mixed and decode steps (``scheduler.step_counts``: they depend on n,
   the ep groups and the engine alone) times t_mix(x) and t_dec(x), and each step time is
   pp * (lp * A_a + G_f) + overhead, from the tables of the instance at batch n.
3. **Output tokens/s per GPU is n * osl / latency / GPUs**, so for a fixed n the least latency
   wins.

The space therefore splits into rows (instance, n), each with its set X of choices:

- a concurrency C of the grid (a power of two) runs n = C for the x whose n(x) >= C. For the
  other x, requests queue at C; those rows are dominated by the same x at C = its capacity,
  which the grid also holds: the same tokens/s with no wait;
- ``serve.AT_CAPACITY`` runs n = n(x): one row per distinct value n, X = {x : n(x) = n}.

A row's optimum is the least latency over X within the TPOT and TTFT limits. It is taken over the
(a, f) grid less the entries another entry of the same (op2, op7) and memory term dominates in
both step times (``_undominated``: an x with such an entry has a partner with the same n(x)
and at least as good figures, the first by index where they tie), which leaves ~3,900 of the
944,784 choices of a GPT-MoE 1.6T row on average; the row's front is found among the same x.
Rows are visited in order of an upper bound, each bound valid for every x of its row and each
tighter and dearer than the one before (``_Loop.bounds``):

- every row: each step at ``_Exact.least_layer`` (the attention and FFN blocks at their least,
  boundaries and pipeline ends left out), ~4 us a row and step;
- rows that may still help, 512 at a time: each step at ``_Exact.least_exact`` (its least over
  every x);
- rows at the head of the queue, before their solve: each step at its least over the x whose
  attention and rest terms can give the row's running batch (``_Loop.restricted``, from the
  row's factorized times: memory rules the fastest choices out of most rows).

The search stops once no bound can beat the k-th best or add a point to the trade-off frontier
(for each tokens/s per user, the best tokens/s per GPU). The top-k is the best strategy of each
(instance, concurrency) slot (over the x that do not queue there) until k distinct
deployments (instance and x) are surely among them (the k-th best instance's best: one x can be
the best of several concurrencies of its instance), so that ``methods.every_concurrency`` lists k
of them whatever rows the bounds let through. The frontier is collected on the way, from each
row's own front. The top-k and the frontier are confirmed by the evaluator itself, and tests
check both against brute force on small spaces.
"""
from __future__ import annotations

import heapq
import time
from dataclasses import replace

import numpy as np

from ..cost.latency import closed_queue_s, request_s
from ..serving import serve
from ..serving.scheduler import step_counts
from .exact import INVALID_S, _Exact
from ..cost.tables import build_tables
from .problems import SearchResult, ServeProblem, Tracker
from ..specs.strategy import (BATCH, CONCURRENCY, EP, N_COARSE, PP, TP, coarse_of, instance_gpus,
                               with_coarse)

TIGHTEN = 512                   # rows whose bounds are tightened together
GUIDE_TIGHTEN = 256             # the same in the agent's guide (guide_bounds)
WINDOW = 4096                   # rows checked for pruning at once
SOLVE = 64                      # rows solved together
WARM_ROWS = 4096                # rows whose step tables guide_bounds puts in the evaluator caches


class _Capacity:
    """n(x) of one instance over its grid (op2, op7, a, f), kept small: n of every pair of
    a distinct attention-list term and a distinct rest-list term, and which terms each x has."""

    def __init__(self, small, inv_a, inv_f):
        self.small = small                   # [distinct a terms, distinct f terms]
        self.inv_a, self.inv_f = inv_a, inv_f  # [op2, op7, a], [op2, op7, f]: their terms
        self.values = np.unique(small[small > 0])   # the distinct n >= 1 (a superset: pairs of
        # terms from different (op2, op7) are no strategy, and only cost solving a row for none)


MARGIN = 1e-6       # _undominated: how much faster an entry must be to leave another out


def _undominated(m, d, group):
    """Which of the entries [I, K] (an attention or a rest list of each (op2, op7) i, with their
    mixed-step times m and decode-step times d) a row's solve needs: an entry is left out where
    another of the same i and the same memory term ``group`` has the same (m, d) and comes
    first, or is at most as slow in both steps and faster by ``MARGIN`` (relative) in one.
    Every x with a left-out entry then has a partner, with the other entry, of the same running
    batch n(x) and at least as good a latency, TPOT and TTFT (floating-point sums and products
    by the same positive terms are monotone): the first by index among equal figures, or
    faster by far more than rounding can undo. So the row's best and its own front are found
    among the entries kept, the same strategies as over the whole grid; entries within the
    margin of each other (the same cost summed in another order) are all kept, for the index
    to decide between them as before. ``keep`` [I, K] bool."""
    I, K = m.shape
    # the margin's test m' < m (1 - MARGIN) holds for times >= 0 (a cost table never gives
    # less): NaN or a negative time keeps every entry
    if not ((m >= 0).all() and (d >= 0).all()):
        return np.ones((I, K), dtype=bool)
    um, rm = np.unique(m, return_inverse=True)
    ud, rd = np.unique(d, return_inverse=True)
    rm, rd = rm.reshape(-1), rd.reshape(-1)
    R = max(len(um), len(ud)) + 1
    seg = (np.arange(I)[:, None] * (int(group.max()) + 1) + group).reshape(-1)
    # (term, m, d), then the index (a stable sort): the entries in the order that decides
    order = np.argsort((seg * R + rm) * R + rd, kind="stable")
    s, om, od = seg[order], rm[order], rd[order]
    start = np.r_[True, s[1:] != s[:-1]]
    same = np.r_[False, ~start[1:] & (om[1:] == om[:-1]) & (od[1:] == od[:-1])]
    # the skyline of each term: the entries faster in d than every entry before them (one
    # running minimum over the whole order, each term's keys below the one before)
    key = od - (np.cumsum(start) - 1) * R
    before = np.r_[np.iinfo(np.int64).max, np.minimum.accumulate(key)[:-1]]
    sky = order[(key < before) | start]                 # by term, m rising, d falling
    sky_m = seg[sky] * R + rm[sky]                      # rising
    sky_d = seg[sky] * R + (R - 1 - rd[sky])            # rising
    # the skyline entries of k's term with d' <= d(k) start at lo and those with m' <= m(k)
    # end before hi; faster by the margin: m' < m(k)(1 - MARGIN) before hi_m, d' < ... from lo_d
    base = seg * R
    hi = np.searchsorted(sky_m, base + rm, side="right")
    hi_m = np.searchsorted(sky_m, base + np.searchsorted(um, m.reshape(-1) * (1 - MARGIN)))
    lo = np.searchsorted(sky_d, base + (R - 1 - rd))
    lo_d = np.searchsorted(sky_d, base + R - np.searchsorted(ud, d.reshape(-1) * (1 - MARGIN)))
    out = (lo < hi_m) | (lo_d < hi)
    out[order[same]] = True
    return ~out.reshape(I, K)


def _unique_pairs(x, y):
    """The distinct pairs (x, y) of two equal-shaped arrays, as ((x', y') [U], inverse shaped
    like x): each array's distinct values first (float sorts; a pair list has few of them)."""
    (ux, jx), (uy, jy) = _distinct(x), _distinct(y)
    if len(uy) == 1:                                # the pairs are one array's values
        return (ux, np.repeat(uy, len(ux))), jx.reshape(x.shape)
    if len(ux) == 1:
        return (np.repeat(ux, len(uy)), uy), jy.reshape(x.shape)
    code, inverse = np.unique(jx * len(uy) + jy, return_inverse=True)
    return (ux[code // len(uy)], uy[code % len(uy)]), inverse.reshape(x.shape)


def _distinct(x):
    """np.unique(x, return_inverse=True), at once where x is constant (most pair lists)."""
    lo = x.min()
    if lo == x.max():
        return np.array([lo]), np.zeros(x.shape, dtype=np.int64)
    return np.unique(x, return_inverse=True)


class _Loop:
    """The closed loop of one ServeProblem in the factorized form (module docstring)."""

    def __init__(self, problem: ServeProblem):
        p = self.p = problem
        self.ex = _Exact(p.model, p.space.choices)
        self.engine, self.topo = p.engine, p.evaluator.topo
        gpus = p.work.gpus
        self.decode_work, self.mixed_work = serve.step_workloads(p.isl, p.osl, p.engine, gpus,
                                                                 p.spec, p.cached)
        self.memory = p.evaluator.cache(serve.memory_workload(p.isl, p.osl, gpus, p.cached))
        self.prefix_memory = p.evaluator.cache(serve.prefix_workload(p.cached, gpus)) \
            if p.cached else None
        # the time of a step outside the kernels: the topology's and the engine's (serve.py)
        self.overhead = self.topo.step_overhead_s + p.engine.step_overhead_s
        # an engine's space schedules the data-parallel-attention rows per rank (serve.py
        # _closed_loop): their bounds take the better of both schedules
        self.dp_mixed_work = replace(self.mixed_work, attn_dp_tp=True) \
            if p.in_engine_space and p.model.is_moe else None
        self.tpot_limit = p.tpot_slo_ms * 1e-3 if p.tpot_slo_ms and p.osl > 1 else np.inf
        self.ttft_limit = p.ttft_slo_ms * 1e-3 if p.ttft_slo_ms else np.inf
        self.held = {}                  # row -> the tables of its two steps (tight bounds)

    def draft_s(self, coarse) -> np.ndarray:
        """Speculative decoding's draft steps of each row (coarse rows at batch n) [R] (0
        without): the same for every x of a row (``serve.draft_rows``: the draft runs Megatron's
        sharding)."""
        coarse = np.atleast_2d(coarse)
        if self.p.spec is None or not len(coarse):
            return np.zeros(len(coarse))
        return serve.draft_s(self.p.draft, self.p.spec, self.p.isl, self.p.osl, self.p.work.gpus,
                             coarse)

    def counts(self, n, dp):
        """(mixed steps to the first token, mixed and decode steps after it) for batches n over
        dp attention-DP ranks (the ep groups)."""
        first, mid_mix, mid_dec = step_counts(self.engine, self.mixed_work,
                                                    np.asarray(n, dtype=np.float64), dp)
        return first, mid_mix, mid_dec

    def capacities(self, instances) -> list:
        """A ``_Capacity`` of each instance (coarse rows [T, N_COARSE], the batch column
        ignored; n = 0 where not one request fits)."""
        instances = np.asarray(instances, dtype=np.int64)
        u = instance_gpus(instances)
        one, two = with_coarse(instances, batch=u), with_coarse(instances, batch=2 * u)
        idx = self.memory.index(np.concatenate([one, two]))
        tab, T = self.memory.tables, len(instances)
        lp, _, w1, _, m1 = self.ex.block(tab, idx[:T])
        _, _, w2, _, m2 = self.ex.block(tab, idx[T:])
        # a speculative draft's memory beside the target (serve.capacity): one pair per instance
        d_fixed, d_request = np.zeros(T), np.zeros(T)
        if self.p.spec is not None and T:
            d_fixed, d_request = serve.draft_memory(self.p.draft, self.p.isl, self.p.osl,
                                                    self.p.work.gpus, one)
        # cached prefixes (serve.shared_prefix_bytes): a request's KV at the prefix's context,
        # per x as the grid's, held prefixes x ep times
        if self.prefix_memory is not None and T:
            idc = self.prefix_memory.index(np.concatenate([one, two]))
            tc = self.prefix_memory.tables
            lpc, _, w1c, _, m1c = self.ex.block(tc, idc[:T])
            _, _, w2c, _, m2c = self.ex.block(tc, idc[T:])
            share = self.p.prefix.prefixes * instances[:, EP] / u
        out = []
        for i in range(T):
            # serve.capacity on the grid: from the bytes at u and 2u requests, the fixed bytes
            # (2 * one - two) and the KV bytes per request ((two - one) / u), each a sum of an
            # attention term and a rest term; of each list only the distinct terms are costed
            fa, pa = lp[i] * (2 * w1[i] - w2[i]), lp[i] * (w2[i] - w1[i])
            fm, pm = 2 * m1[i] - m2[i], m2[i] - m1[i]
            if self.prefix_memory is not None:
                fa = fa + share[i] * lpc[i] * (w2c[i] - w1c[i])
                fm = fm + share[i] * (m2c[i] - m1c[i])
            (fa, pa), ia = _unique_pairs(fa, pa)
            (fm, pm), jf = _unique_pairs(fm, pm)
            fixed = fa[:, None] + fm[None, :] + d_fixed[i]
            per_request = (pa[:, None] + pm[None, :]) / u[i] + d_request[i]
            pool = self.engine.kv_pool_bytes(self.topo, fixed, instances[i, TP] * instances[i, PP])
            cap = np.floor(np.maximum(pool, 0.0) / per_request)
            out.append(_Capacity(self.engine.holds(cap).astype(np.int32), ia, jf))
        return out

    def choices(self, row, capacity: _Capacity, at_capacity: bool, block) -> np.ndarray:
        """The choices X of row ``row`` (a coarse row at batch n) that can be its best or on
        its own front (ascending indices into the flat grid (op2, op7, a, f)): those whose
        running batch n(x) is n (an at-capacity row) or at least n (a concurrency n), among the
        attention entries a and the rest entries f that no other entry of the same (op2, op7)
        and the same memory term dominates (``_undominated``, on the row's factorized times
        ``block``; a step the row never takes does not count). The running batches of the few
        pairs left are read from the instance's small capacity table."""
        (_, Am, Gm), (_, Ad, Gd) = block
        na, nf = Am.shape[-1], Gm.shape[-1]
        n = row[BATCH]
        first, mid_mix, mid_dec = (np.asarray(c).item() for c in self.counts(n, row[EP]))
        if mid_dec == 0:        # no decode step (osl 1): only the mixed step's time counts
            Ad, Gd = np.zeros_like(Ad), np.zeros_like(Gd)
        if first + mid_mix == 0:
            Am, Gm = np.zeros_like(Am), np.zeros_like(Gm)
        inv_a = capacity.inv_a.reshape(-1, na)                      # [(op2, op7), a]
        inv_f = capacity.inv_f.reshape(-1, nf)                      # [(op2, op7), f]
        keep_a = _undominated(Am.reshape(-1, na), Ad.reshape(-1, na), inv_a)
        keep_f = _undominated(Gm.reshape(-1, nf), Gd.reshape(-1, nf), inv_f)
        out = []
        for i in range(len(inv_a)):
            a, f = np.flatnonzero(keep_a[i]), np.flatnonzero(keep_f[i])
            runs = capacity.small[inv_a[i, a][:, None], inv_f[i, f][None, :]]
            ra, rf = np.nonzero(runs == n if at_capacity else runs >= n)
            out.append((i * na + a[ra]) * nf + f[rf])
        return np.concatenate(out)

    def bounds(self, rows, coarse, gpus, tight: bool, chunk: int = 2048, cached: bool = False,
               layer: bool = False):
        """Upper bounds on the output tokens/s per GPU of rows ``rows`` (their coarse rows, at
        batch n, in ``coarse`` [R, N_COARSE]), and lower bounds on their TPOT, latency and TTFT
        (without a queue): every step at its least time over all x (``_Exact.least_exact``; with
        ``tight=False`` a bound below it: ``_Exact.least_layer`` with ``layer``, else the
        cheapest, ``_Exact.least``). Tables are
        built chunk by chunk, or with ``cached`` taken from (and added to) the problem's
        evaluator caches; with ``tight`` they are held for the rows' solves. -inf where no x
        can meet the SLOs."""
        least = []
        drafts = self.draft_s(coarse)
        for k, work in enumerate((self.mixed_work, self.decode_work)):
            s = np.empty(len(rows))
            for i in range(0, len(rows), chunk):
                part = coarse[i:i + chunk]
                if cached:
                    cache = self.p.evaluator.cache(work)
                    g = cache.index(part)       # (may grow the tables: first)
                    tab = cache.tables
                else:
                    tab = build_tables(self.p.model, self.topo, work, part)
                    g = np.arange(len(part))
                if tight:
                    s[i:i + chunk] = self.ex.least_exact(tab, g)
                    for j, r in zip(g, rows[i:i + chunk]):
                        self.held.setdefault(int(r), [None, None])[k] = (tab, j)
                else:
                    s[i:i + chunk] = (self.ex.least_layer if layer else self.ex.least)(tab, g)
            least.append(np.where(s < INVALID_S, coarse[:, PP] * s + self.overhead + drafts,
                                  np.inf))
        latency, tpot, ttft = self.figures(coarse[:, BATCH], coarse[:, EP], *least)
        if self.dp_mixed_work is not None and len(coarse):
            # the same rows with every tp rank its own scheduler (the DP-attention variant in
            # an engine's space): the cheap least mixed step of that workload, dp = tp * ep
            s = np.concatenate([self.ex.least(build_tables(self.p.model, self.topo,
                                                           self.dp_mixed_work, part),
                                              np.arange(len(part)))
                                for part in np.array_split(coarse, max(1, -(-len(coarse) // chunk)))])
            t_mix = np.where(s < INVALID_S, coarse[:, PP] * s + self.overhead + drafts, np.inf)
            other = self.figures(coarse[:, BATCH], coarse[:, EP] * coarse[:, TP], t_mix, least[1])
            latency, tpot, ttft = (np.minimum(a, b) for a, b in zip((latency, tpot, ttft), other))
        ok = (tpot <= self.tpot_limit) & (ttft <= self.ttft_limit) & np.isfinite(latency)
        return (np.where(ok, coarse[:, BATCH] * self.p.osl / latency / gpus, -np.inf), tpot,
                latency, ttft)

    def blocks(self, rs, coarse) -> list:
        """The factorized step times of rows ``rs`` (their coarse rows, at batch n, in ``coarse``):
        per row, (lp, A [op2, op7, a], G [op2, op7, f]) of the mixed and the decode step, from
        the tables ``bounds`` held for it (then let go), one ``block`` for the rows held in the
        same tables (a block's cost is mostly per call)."""
        held = [self.held.pop(int(r)) for r in rs]
        out = [[None, None] for _ in rs]
        for k in range(2):
            groups = {}
            for i, h in enumerate(held):
                groups.setdefault(id(h[k][0]), []).append(i)
            for members in groups.values():
                tab = held[members[0]][k][0]
                lp, A, _, G, _ = self.ex.block(tab, [held[i][k][1] for i in members],
                                               memory=False)
                for i, lp_i, A_i, G_i in zip(members, lp, A, G):
                    out[i][k] = (lp_i, np.ascontiguousarray(A_i), G_i)
        return out

    def step_s(self, row, s):
        """A step's time of row ``row`` (a coarse row at batch n) from its slowest stage s."""
        return np.where(s < INVALID_S, row[PP] * s + self.overhead + self.draft_s(row)[0], np.inf)

    def times_at(self, row, block, x):
        """(t_mix, t_dec) of row ``row`` at its choices x (indices into the flat grid (op2,
        op7, a, f)) from its ``blocks``."""
        out = []
        for lp, A, G in block:
            if len(x) > A.size * G.shape[-1] // 8:      # most of the grid: all of it at once
                s = (lp * A[..., :, None] + G[..., None, :]).ravel()[x]
            else:                                       # a few choices: gathered
                i27, ia, jf = np.unravel_index(x, (A.shape[0] * A.shape[1], A.shape[2],
                                                   G.shape[2]))
                s = lp * A.reshape(-1, A.shape[2])[i27, ia] + G.reshape(-1, G.shape[2])[i27, jf]
            out.append(self.step_s(row, s))
        return out

    def restricted(self, row, block, capacity: _Capacity, at_capacity: bool):
        """Lower bounds on the (latency, TPOT, TTFT) of row ``row`` over its own choices alone
        (n(x) = n, or >= n): an x of the row pairs an attention term and a rest term whose
        running batch is n, so its attention side is one of the attention lists' entries with
        such a term and its rest side one of the rest lists' entries with such a term; each
        step is at least the least of the first times lp plus the least of the second, per
        (op2, op7). Far tighter than the row's bound over every x when its memory rules out
        the fastest choices, and far cheaper than the row's solve."""
        n = row[BATCH]
        hit = capacity.small == n if at_capacity else capacity.small >= n
        ta, tf = hit.any(axis=1), hit.any(axis=0)
        steps = []
        for lp, A, G in block:
            a_min = np.where(ta[capacity.inv_a], A, np.inf).min(axis=-1)     # [op2, op7]
            f_min = np.where(tf[capacity.inv_f], G, np.inf).min(axis=-1)
            steps.append(self.step_s(row, np.atleast_1d((lp * a_min + f_min).min())))
        return self.figures(n, row[EP], *steps)

    def figures(self, n, dp, t_mix, t_dec):
        """(latency, TPOT, TTFT) of a running batch n over dp attention-DP ranks:
        ``serve._closed_loop``'s ``latency.request_s`` with no queue (TPOT 0 at osl 1)."""
        ttft, tpot, latency = request_s(*self.counts(n, dp), t_mix, t_dec, self.p.osl,
                                        self.engine.request_overhead_s, one_token_tpot=0.0)
        return latency, tpot, ttft


def _front(tpot, score):
    """Indices of the points no other beats in both TPOT (lower) and score (higher)."""
    order = np.lexsort((-score, tpot))
    best = np.maximum.accumulate(score[order])
    keep = np.r_[True, best[1:] > best[:-1]]
    return order[keep]


def _front_at(front_tpot, front_score, tpot):
    """The best score of a frontier (sorted by TPOT, scores rising) at TPOT <= tpot [N]."""
    i = np.searchsorted(front_tpot, tpot, side="right") - 1
    return np.where(i >= 0, front_score[np.maximum(i, 0)] if len(front_score) else -np.inf,
                    -np.inf)


def search_serve_exact(problem: ServeProblem, budget: int = 0, rng=None, top: int = 10,
                       progress=None) -> SearchResult:
    """The optimum of the serve phase over the whole space (every coarse axis, the concurrency
    among them, and every per-op choice), the best strategy of each of the next best coarse
    rows (the top-k), and every strategy on the trade-off frontier (``SearchResult.coarse_best``).
    See the module docstring for why it is exact; ``budget`` and ``rng`` are unused. A host
    tier for the cached prefixes (``serving.offload``) is not in its capacity grid: refused."""
    if problem.offloads:
        raise ValueError("the exact per-op serve search holds every cached prefix on the GPU: "
                         "a host tier is searched in an engine's space")
    t0 = time.perf_counter()
    p, loop = problem, _Loop(problem)
    sp, osl = p.space, p.osl
    concs = sp.values[CONCURRENCY]
    if serve.AT_CAPACITY not in concs:
        # without it, a strategy whose KV cache holds fewer requests than every concurrency of
        # the space only queues, and the rows below would miss it
        raise ValueError("the exact serve search needs the AT_CAPACITY concurrency in the "
                         "space (ServeProblem adds it by default)")
    instances, caps, rows, coarse, gpus = _rows(p, loop, progress)

    # bounds, cheap then tight (module docstring); rows are visited best bound first
    ub, tpot = (loop.bounds(np.arange(len(rows)), coarse, gpus, tight=False, layer=True,
                            chunk=4096)[:2]
                if len(rows)
                else (np.zeros(0),) * 2)
    order = np.argsort(-ub, kind="stable")
    order, pos = order[np.isfinite(ub[order])], 0       # rows with cheap bounds, best first
    heap = []                                           # rows with tight bounds: (-bound, row)
    if progress:
        progress(0)
    by_instance = {}             # instance -> the best of its slots' bests so far
    kth = -np.inf                # the k-th best of by_instance
    # each row's slot and the best score found in each slot so far: a row whose bound does not
    # beat its own slot's best cannot change the top-k (a slot enters it with its best row)
    n_cols = len(concs)
    slot_of = rows[:, 0] * n_cols + rows[:, 2] if len(rows) else np.zeros(0, dtype=np.int64)
    slot_best = np.full(len(instances) * n_cols, -np.inf)
    found = []                   # (score, index row)
    front_tpot, front_score, front_idx = np.zeros(0), np.zeros(0), []
    solved = 0

    def useless(r, bound=None, least_tpot=None):
        """Whether rows r can neither enter the top-k (their bound is at most the k-th best, or
        at most their own slot's best) nor add a point to the frontier: a front point at TPOT
        <= a row's least TPOT with a score >= its bound dominates all of it. (Stays true: the
        k-th best, each slot's best and the frontier only rise.) ``bound`` and ``least_tpot``:
        a row's tighter ones than ``ub`` and ``tpot`` hold."""
        bound = ub[r] if bound is None else bound
        least_tpot = tpot[r] if least_tpot is None else least_tpot
        return ((bound <= kth) | (bound <= slot_best[slot_of[r]])) & \
            (_front_at(front_tpot, front_score, least_tpot) >= bound)

    def take(r, x, t_mix, t_dec):
        """Row r solved at its choices x: its best point into the top-k and its own front into
        the frontier."""
        nonlocal kth, front_tpot, front_score, front_idx
        t, n, col, _ = rows[r]
        lat, tp_, tt = loop.figures(n, coarse[r, 1], t_mix, t_dec)
        good = np.isfinite(lat)               # (masks, not gathers: x can be most of a grid)
        if np.isfinite(loop.tpot_limit):
            good &= tp_ <= loop.tpot_limit
        if np.isfinite(loop.ttft_limit):
            good &= tt <= loop.ttft_limit
        if not good.any():
            return
        score = np.where(good, n * osl / lat / gpus[r], -np.inf)
        j = int(np.argmax(score))
        # the row's own front: its best point and those of lower TPOT; each joins the frontier
        # only where no point found so far has a TPOT as low and a score as high
        maybe = np.flatnonzero(good & (tp_ < tp_[j]))
        maybe = np.r_[maybe[score[maybe] > _front_at(front_tpot, front_score, tp_[maybe])], j]
        keep = maybe[_front(tp_[maybe], score[maybe])]
        front_tpot = np.concatenate([front_tpot, tp_[keep]])
        front_score = np.concatenate([front_score, score[keep]])
        front_idx += [_index_row(loop, sp, instances[t], col, x[k]) for k in keep]
        merged = _front(front_tpot, front_score)
        front_tpot, front_score = front_tpot[merged], front_score[merged]
        front_idx = [front_idx[k] for k in merged]
        if score[j] > slot_best[slot_of[r]]:
            slot_best[slot_of[r]] = float(score[j])
            # the k-th best over the instances of each instance's best slot: the search must go
            # on until k distinct deployments (instance and per-op choices) are among the
            # slots' bests, and one deployment can be the best of several slots of its instance
            # (concurrencies) but never of another instance's; an instance's best only rises,
            # so this threshold does too and never passes the k-th distinct deployment's score
            by_instance[int(t)] = max(by_instance.get(int(t), -np.inf), float(score[j]))
            if len(by_instance) >= top:
                kth = sorted(by_instance.values(), reverse=True)[top - 1]
            found.append((float(score[j]), _index_row(loop, sp, instances[t], col, x[j])))

    while True:
        while pos < len(order):       # skip the cheap rows that cannot help, a window at once
            skip = useless(order[pos:pos + WINDOW])
            if not skip.all():
                pos += int(np.argmin(skip))
                break
            pos += len(skip)
        while heap and useless(heap[0][1]):
            loop.held.pop(heapq.heappop(heap)[1], None)
        cheap = ub[order[pos]] if pos < len(order) else -np.inf
        if not heap and cheap == -np.inf:
            break
        if not heap or cheap > -heap[0][0]:
            # tighten the bounds of the next rows that can still help, then queue them
            batch = []
            while pos < len(order) and len(batch) < TIGHTEN:
                win = order[pos:pos + WINDOW]
                useful = np.flatnonzero(~useless(win))[:TIGHTEN - len(batch)]
                batch += list(win[useful])
                pos += int(useful[-1]) + 1 if len(batch) == TIGHTEN else len(win)
            batch = np.array(batch)
            ub[batch], tpot[batch] = loop.bounds(batch, coarse[batch], gpus[batch],
                                                 tight=True)[:2]
            for q in batch:
                if np.isfinite(ub[q]):
                    heapq.heappush(heap, (-ub[q], int(q)))
                else:
                    loop.held.pop(int(q), None)
            if progress:
                progress(0)
            continue
        # the next rows in the order the loop takes them (the heap's, while no cheap row's
        # bound beats theirs), solved together, each then taken as if alone: a row that
        # cannot help by then is passed over (the state only rises: the same rows, the same
        # results as one at a time)
        batch = [heapq.heappop(heap)[1]]
        while heap and len(batch) < SOLVE and -heap[0][0] >= cheap:
            q = heapq.heappop(heap)[1]
            if useless(q):
                loop.held.pop(q, None)
            else:
                batch.append(q)
        for r, block in zip(batch, loop.blocks(batch, coarse[batch])):
            if r != batch[0] and useless(r):
                continue
            # a bound over the row's own choices, from its factorized times, before the solve
            t, n, _, at_cap = rows[r]
            lat, tp_, tt = loop.restricted(coarse[r], block, caps[t], at_cap)
            bound = n * osl / lat[0] / gpus[r] if (tp_[0] <= loop.tpot_limit
                                                  and tt[0] <= loop.ttft_limit) else -np.inf
            if useless(r, bound, tp_[0]):
                continue
            solved += 1
            x = loop.choices(coarse[r], caps[t], at_cap, block)
            take(r, x, *loop.times_at(coarse[r], block, x))
            if progress:
                progress(0)

    tr = Tracker(p, top)
    if found:
        idx = np.array([f[1] for f in found])
        tr.add(idx, p.score(p.evaluate(idx, count=False)))      # confirmed by the evaluator
    result = tr.result("exact", t0, {"rows": int(len(rows)), "rows_solved": solved,
                                     "frontier_points": len(front_idx)})
    if front_idx:
        front = sp.decode(p.canonical(np.array(front_idx)))
        every = front if result.coarse_best is None else np.concatenate([front,
                                                                        result.coarse_best])
        result.coarse_best = np.unique(every, axis=0)
    return result


def _rows(p: ServeProblem, loop: _Loop, progress=None):
    """The rows (module docstring) of the instances within the GPU budget whose weights can
    fit: (instances [T, N_COARSE] (coarse rows, the batch column 1), their ``_Capacity`` [T],
    rows [R, 4] = (instance, n, concurrency column, at capacity?), their coarse rows at batch
    n [R, N_COARSE] and GPUs [R])."""
    sp = p.space
    concs = sp.values[CONCURRENCY]
    cap_col = concs.index(serve.AT_CAPACITY)
    instances = np.unique(with_coarse(p.grid, batch=1), axis=0)
    instances = instances[instance_gpus(instances) <= p.work.budget(p.topo)]
    # (may grow the tables: first)
    unit = loop.memory.index(with_coarse(instances, batch=instance_gpus(instances)))
    instances = instances[loop.memory.tables.fixed_invalid[unit] == 0]
    rows, caps = [], []
    powers = np.array([c for c in concs if c != serve.AT_CAPACITY], dtype=np.int64)
    pow_cols = np.array([concs.index(c) for c in powers], dtype=np.int64)
    for i in range(0, len(instances), 32):
        for t, cap in zip(range(i, i + 32), loop.capacities(instances[i:i + 32])):
            caps.append(cap)
            ns = cap.values
            fit = powers <= (ns[-1] if len(ns) else 0)
            rows.append(np.c_[np.full(fit.sum(), t), powers[fit], pow_cols[fit],
                              np.zeros(fit.sum(), dtype=np.int64)])
            rows.append(np.c_[np.full(len(ns), t), ns, np.full(len(ns), cap_col),
                              np.ones(len(ns), dtype=np.int64)])
        if progress:
            progress(0)
    rows = np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 4), dtype=np.int64)
    coarse = with_coarse(instances[rows[:, 0]], batch=rows[:, 1])
    # each row's GPUs as the objective counts them: the budget over the copies it holds, so that
    # tokens/s over these is tokens/s per GPU of the budget (``Problem.fill``)
    gpus = instance_gpus(coarse).astype(np.float64)
    return instances, caps, rows, coarse, gpus / p.fill(gpus)


def guide_bounds(problem: ServeProblem, tighten: int = GUIDE_TIGHTEN, keep: int = 64,
                 rounds: int = 4, warm: int = WARM_ROWS) -> np.ndarray:
    """An upper bound on the output tokens/s per GPU of every strategy of each coarse row of the
    problem's grid (instance, concurrency column) [G] (-inf: none can be valid), for the
    agent to aim with; no evaluator call. A strategy x at concurrency C runs n = min(C, n(x))
    requests, so its row's bound is the best of the row (instance, n = C) and of the at-capacity
    rows of n < C whose queue, (C - n) / n request latencies (``serve._closed_loop``), can keep
    within the TTFT limit; the ``AT_CAPACITY`` column's is the best of all at-capacity rows.
    Rows have cheap bounds (``_Loop.bounds``), then tight ones ``tighten`` rows at a time, best
    first, until the best ``keep`` rows are all tight (at most ``rounds`` times)."""
    p, loop = problem, _Loop(problem)
    sp = p.space
    concs = sp.values[CONCURRENCY]
    out = np.full(len(p.grid), -np.inf)
    if serve.AT_CAPACITY not in concs:
        return out
    instances, _, rows, coarse, gpus = _rows(p, loop)
    if not len(rows):
        return out
    # the two steps of up to ``warm`` rows, best bound first, go into the evaluator's caches:
    # the tight bounds below and the agent's calls then build no tables for them (a build costs
    # ~6-10 ms however few its rows; a row ~8 KB per step). All rows when they are few enough,
    # as the cheap bounds are taken; else the best ones after, built again.
    few = len(rows) <= warm
    ub, _, latency, ttft = loop.bounds(np.arange(len(rows)), coarse, gpus, tight=False,
                                       cached=few)
    if not few:
        first = np.argsort(-ub, kind="stable")[:warm]
        for work in (loop.mixed_work, loop.decode_work):
            p.evaluator.cache(work).index(coarse[first])
    tight = np.zeros(len(rows), dtype=bool)
    for _ in range(rounds):      # tighten the best rows until the best `keep` are all tight
        order = np.argsort(-ub, kind="stable")
        order = order[np.isfinite(ub[order])]
        if tight[order[:keep]].all():
            break
        top = order[~tight[order]][:tighten]
        ub[top], _, latency[top], ttft[top] = loop.bounds(top, coarse[top], gpus[top], tight=True,
                                                          cached=True)
        tight[top] = True
        loop.held.clear()                               # (kept there for solves; none here)
    # each row onto the grid: its own (instance, concurrency column); at-capacity rows also onto
    # every larger power-of-two concurrency whose queue keeps within the TTFT limit
    first, step = _grid_rows(sp, instances)
    base = first[rows[:, 0]]
    np.maximum.at(out, base + rows[:, 2] * step, ub)
    at_cap, n = rows[:, 3] == 1, coarse[:, BATCH].astype(np.float64)
    for col, c in enumerate(concs):
        if c != serve.AT_CAPACITY:
            queued = at_cap & (n < c) & (ttft + closed_queue_s(c, n, latency) <= loop.ttft_limit)
            np.maximum.at(out, base[queued] + col * step, ub[queued])
    return out


def _grid_rows(sp, instances) -> tuple:
    """(each instance's row of the space's coarse grid at the first concurrency [T], the grid's
    step from one concurrency column to the next): an instance's row at column c is its first
    plus c steps. ``instances``: coarse rows [T, N_COARSE], their concurrency column ignored."""
    shape = sp.sizes[:N_COARSE]
    at = [[0 if c == CONCURRENCY else values.index(int(v))
           for c, (values, v) in enumerate(zip(sp.values, coarse_of(row)))] for row in instances]
    first = np.ravel_multi_index(tuple(np.array(at, dtype=np.int64).reshape(-1, N_COARSE).T),
                                 shape)
    return first, int(np.prod(shape[CONCURRENCY + 1:]))


def _index_row(loop: _Loop, sp, instance, col, flat) -> np.ndarray:
    """The index row [WIDTH] of choice ``flat`` of the grid (op2, op7, a, f) of an instance at
    concurrency column ``col``."""
    n = loop.ex.n
    a_len, f_len = n[2] * n[3] * n[4] * n[5], n[0] * n[7] * n[8] * n[9] * n[10] * n[11]
    i2, i7, ia, irest = np.unravel_index(int(flat), (n[1], n[6], a_len, f_len))
    first, step = _grid_rows(sp, [instance])
    return loop.ex.decode(sp.sizes[:N_COARSE], int(first[0] + int(col) * step),
                          i2, i7, ia, irest)
