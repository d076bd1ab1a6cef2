"""Search over the strategy space: the registry of methods and the library entry points
(docs/design.md §4). Every method is scored by the same cost model.

Every method gets a ``Problem`` (model, topology, workload, space; ``lts.search.problems``), a budget of
evaluator calls and a ``np.random.Generator``, and returns a ``SearchResult``: the best valid
strategy seen and a ranked top-k of distinct strategies, evaluated. ``SEARCHERS`` maps method
names to functions:

- ``ppo``, ``ppo-paper``: the paper's agent (``lts.agent``), adapted here (``ppo``
  is aimed by upper bounds on each coarse row from the exact solvers, ``guide``);
- ``random``, ``random-walk``, ``anneal``, ``megatron``: the baselines (``lts.search.baselines``);
- ``exact``: the true optimum of the cost model (``lts.search.exact``; in an engine's space
  ``lts.search.exact_engine``; the serve phase ``lts.search.serve_exact``).

Entry points: ``run`` (one search and what ``lts search`` shows beside it: the Megatron
baseline's best and why the best wins), ``compare`` (every method over seeds, ``lts compare``)
and ``run_seeds`` (one method over seeds, as ``compare`` runs it). Each result is computed once
and carried; the CLI and ``scripts/search_quality.py`` only render them.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .baselines import search_anneal, search_megatron, search_random, search_random_walk
from ..cost.model import Result, breakdown
from .disagg import Disagg, deployment, disaggregate, pool_candidates, pool_rates
from ..serving.pareto import pareto_front
from ..engines.space import engine_form, runnable
from .exact import guide_bounds, search_exact
from .exact_engine import engine_rows, search_engine_exact
from .serve_exact import guide_bounds as serve_guide_bounds, search_serve_exact
from .names import METHODS
from .problems import Problem, SearchResult, ServeProblem, Tracker, take
from ..specs.strategy import (AT_CAPACITY, BATCH, CONCURRENCY, MEGATRON, N_COARSE, OP_COL, WIDTH,
                               agent_columns, coarse_of, coarse_rows, presets)



# ----------------------------------------------------------------------------------------------
# the paper's agent

def search_ppo(problem: Problem, budget: int, rng, top: int = 10, progress=None,
               cfg=None) -> SearchResult:
    """The paper's agent (lts.agent.ppo): PPO over an elite history, chunks with fresh networks
    (PPOConfig: lts's tuned defaults unless ``cfg`` is given), aimed by ``guide``'s bounds and
    seeded by ``seed_rows`` (no evaluator call for either).

    In an engine's space (``Problem.engine_space``) the whole space's bounds stay above the
    engine's best, so they alone never prove it optimal: there (``_EngineSpace``) rows the
    engine runs nothing of are -inf, the sweep tries the engine's strategies (each coarse row's
    first, Megatron's where the engine runs it, then the others) instead of Megatron's alone,
    and a row all of whose (at most three) strategies were tried takes its best as its bound.
    Its serve phase proves the ``top`` best rows of the concurrency grid before it stops (the
    best at an integer concurrency between the grid's is often another row's)."""
    from ..agent import ppo     # the policy network is only needed here
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    cfg = cfg or ppo.PPOConfig()
    bound = None
    engine = _EngineSpace(problem) if problem.in_engine_space else None
    if cfg.bound_mask or cfg.bound_restarts or cfg.seed_points:
        bound = np.array(guide(problem), dtype=np.float64).reshape(problem.grid_shape)
        if engine is not None:      # an engine's space: none where the engine runs nothing
            engine.mask(bound.ravel())
    # strategies of a coarse row the bound proves empty (over the GPU budget, weights that never
    # fit, SLOs no choice meets): invalid, counted as calls but not costed (the serve phase
    # would build step tables for each new running batch of such rows)
    empty = ~np.isfinite(bound.ravel()) if bound is not None else None

    def evaluate(idx):
        raw, valid = np.zeros(len(idx)), np.zeros(len(idx), dtype=bool)
        score = np.full(len(idx), -np.inf)
        live = np.arange(len(idx)) if empty is None else \
            np.flatnonzero(~empty[problem.coarse_index(idx)])
        problem.calls += len(idx) - len(live)
        if len(live):
            res = problem.evaluate(idx[live])
            raw[live], valid[live], score[live] = (problem.per_cluster_gpu(res), res.valid,
                                                   problem.score(res))
        tr.add(idx, score)
        if engine is not None and bound is not None:     # ppo.train reads the bound as it goes
            engine.tried(idx, raw, valid, bound.ravel())
        return raw, valid

    # the expert split (router, FFN1, FFN2 of a MoE) is where restarts must be free to switch
    switch = tuple(OP_COL[op] for op in ("router", "ffn1", "ffn2")) if problem.model.is_moe else ()
    seed = seed_rows(problem, cfg.seed_points, bound) if cfg.seed_points else None
    # Megatron's choices at each coarse row (the baseline; none where the space lacks them); an
    # engine's space: its strategies (Megatron's first), every coarse row's one before the rest
    if engine is not None:
        sweep = engine.stages()
    else:
        sweep = problem.fixed_choice_rows(MEGATRON) if within(problem, MEGATRON) else None
    # an engine's serve phase: its exact optimum is over every integer concurrency and the top
    # found on the grid is refined (every_concurrency), so the grid's top k are proved first
    prove_top = top if engine is not None and isinstance(problem, ServeProblem) else 1
    # the agent's heads: the layout's columns but an added axis the space fixes (agent_columns)
    cols = agent_columns(problem.space)
    at = {int(c): j for j, c in enumerate(cols)}
    heads = evaluate
    if len(cols) < WIDTH:
        def with_fixed(a):             # the fixed axis back in, at its one value (index 0)
            rows = np.zeros((len(a), WIDTH), dtype=np.int64)
            rows[:, cols] = a
            return evaluate(rows)
        heads = with_fixed
        seed = None if seed is None else seed[:, cols]
        sweep = None if sweep is None else [r[:, cols] for r in
                                            ([sweep] if isinstance(sweep, np.ndarray) else sweep)]

    _, _, _, stats = ppo.train(
        heads, tuple(np.asarray(problem.space.sizes)[cols]), budget, rng, cfg,
        on_calls=progress, switch_heads=tuple(at[c] for c in switch), keep=False, seed=seed,
        bound=bound, groups=tuple(tuple(at[c] for c in g) for g in GROUPS), sweep=sweep,
        prove_top=prove_top, coarse=int((cols < N_COARSE).sum()), step_head=at[BATCH])
    ended = ("budget spent" if not stats.proved else "on the proof that nothing is feasible"
             if not np.isfinite(tr.best) else "on the proof of optimality" if prove_top == 1
             else f"on the proof of the {prove_top} best on the concurrency grid")
    return tr.result("ppo", t0, {"updates": stats.updates, "restarts": stats.restarts,
                                 "early_exits": stats.early_exits, "ended": ended})


# per-op heads whose choices pay off together (the agent's climbs also move each at once): the
# attention block, whose ops hand their layouts to each other; the scores and the context (one's
# output is the other's input); FFN1 and FFN2 (a MoE's expert split takes both); the two norms of
# a layer (sequence parallelism splits both)
GROUPS = tuple(tuple(OP_COL[op] for op in g) for g in (
    ("qkv", "scores", "context", "out_proj"), ("scores", "context"), ("ffn1", "ffn2"),
    ("attn_norm", "ffn_norm")))


def guide(problem: Problem) -> np.ndarray:
    """An upper bound on the tokens/s/GPU of every strategy of each coarse row [G] (-inf: none
    can be valid), no evaluator call: ``exact.guide_bounds``, for the serve phase
    ``serve_exact.guide_bounds``."""
    return (serve_guide_bounds if isinstance(problem, ServeProblem) else guide_bounds)(problem)


def seed_rows(problem: Problem, k: int, bound=None):
    """Index rows for the agent to try first: the per-op choices of the schemes engines ship
    (``strategy.presets``; in an engine's space the strategies it runs there) at the k coarse
    rows of highest upper bound (``bound``, by default ``guide``) and at the best-bound row of
    each of the k best instances (every coarse axis but the batch). None when no row can be
    valid."""
    ub = guide(problem) if bound is None else np.asarray(bound).ravel()
    order = np.argsort(-ub, kind="stable")
    order = order[np.isfinite(ub[order])]
    firsts = np.sort(np.unique(problem.instance_index(order), return_index=True)[1])[:k]
    top = order[np.union1d(np.arange(min(k, len(order))), firsts)]
    if AT_CAPACITY in problem.space.values[CONCURRENCY]:
        # serve: also each one's best fixed concurrency
        fixed = order[problem.grid[order, CONCURRENCY] != AT_CAPACITY]
        instances = np.unique(problem.instance_index(top))
        firsts = np.unique(problem.instance_index(fixed), return_index=True)
        top = np.union1d(top, fixed[firsts[1][np.isin(firsts[0], instances)]])
    if problem.in_engine_space:
        rows = _engine_strategies(problem)
        rows = rows[np.isin(problem.coarse_index(rows), top)]
        return rows if len(rows) else None
    coarse = np.stack(np.unravel_index(top, problem.grid_shape), axis=1)
    variants = [v for v in presets(problem.model.is_moe) if within(problem, v)]
    if not variants or not len(coarse):
        return None
    return np.concatenate([coarse_rows(coarse, v) for v in variants])


def within(problem: Problem, choices) -> bool:
    """Whether per-op ``choices`` are in the problem's space (a test space may hold fewer)."""
    return all(c < n for c, n in zip(choices, problem.space.choices))


def _engine_strategies(problem: Problem) -> np.ndarray:
    """Index rows of every strategy the problem's engine runs within the GPU budget
    (``exact_engine.engine_rows``: Megatron's choices first), those the space holds."""
    rows = engine_rows(problem)
    return rows[(rows[:, N_COARSE:] < np.asarray(problem.space.choices)).all(axis=1)]


class _EngineSpace:
    """An engine's space for the agent: its strategies (``rows``, ``_engine_strategies``) and
    which of them the search has tried. The engine runs at most three strategies at
    a coarse row, so once all of a row's are tried its best is known: ``tried`` lowers the row's
    bound to it, and the agent's proof of optimality (no bound above the best found) can be
    reached in a space where the whole space's bounds stay above the engine's best."""

    def __init__(self, problem: Problem):
        rows = _engine_strategies(problem)
        self.problem, self.rows = problem, rows
        self.g = problem.coarse_index(rows)                   # each strategy's coarse row
        self.order = np.argsort(self._keys(rows), kind="stable")
        self.sorted = self._keys(rows)[self.order]
        self.seen = np.zeros(len(rows), dtype=bool)
        self.left = np.bincount(self.g, minlength=len(problem.grid))    # untried per row
        self.none = self.left == 0                            # rows the engine runs nothing of
        self.best = np.full(len(problem.grid), -np.inf)       # best valid per row so far

    def _keys(self, idx: np.ndarray) -> np.ndarray:
        """One integer per index row: its coarse row, then its per-op choices."""
        choices = self.problem.space.choices
        fine = np.ravel_multi_index(tuple(idx[:, N_COARSE:].T), choices)
        return self.problem.coarse_index(idx) * int(np.prod(choices)) + fine

    def stages(self) -> list:
        """The sweep's stages: each coarse row's first strategy (Megatron's where the engine
        runs it), then the others."""
        _, first = np.unique(self.g, return_index=True)
        rest = np.ones(len(self.rows), dtype=bool)
        rest[first] = False
        return [self.rows[first], self.rows[rest]]

    def mask(self, bound: np.ndarray) -> None:
        """-inf in ``bound`` [G] (in place) where the engine runs no strategy of the row
        (degrees it cannot lay out, instances over the GPU budget)."""
        bound[self.none] = -np.inf

    def tried(self, idx: np.ndarray, raw: np.ndarray, valid: np.ndarray,
              bound: np.ndarray) -> None:
        """Index rows ``idx`` were evaluated (``raw`` the objective where ``valid``): the bound
        [G] of each row all of whose strategies are now tried becomes its best (in place)."""
        if not len(self.sorted):
            return
        k = self._keys(self.problem.canonical(idx))
        pos = np.minimum(np.searchsorted(self.sorted, k), len(self.sorted) - 1)
        hit = self.sorted[pos] == k
        j = self.order[pos[hit]]
        np.maximum.at(self.best, self.g[j], np.where(valid[hit], raw[hit], -np.inf))
        j = np.unique(j[~self.seen[j]])
        self.seen[j] = True
        np.subtract.at(self.left, self.g[j], 1)
        done = np.unique(self.g[j])
        done = done[self.left[done] == 0]
        bound[done] = np.minimum(bound[done], self.best[done])


def search_ppo_paper(problem: Problem, budget: int, rng, top: int = 10,
                     progress=None) -> SearchResult:
    """The paper's agent with the paper's settings (PPOConfig.paper())."""
    from ..agent import ppo
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
    "exact": lambda problem, *args, **kw: _exact_for(problem)(problem, *args, **kw),
}


assert tuple(SEARCHERS) == METHODS, "search.names.METHODS names every searcher, in order"


def _exact_for(problem: Problem):
    """The exact solver of a problem: enumeration of an engine's space; else the closed-loop
    solver (serve) or the per-op dynamic programme (decode, prefill) over the whole space."""
    if problem.in_engine_space:
        return search_engine_exact
    return search_serve_exact if isinstance(problem, ServeProblem) else search_exact


# ----------------------------------------------------------------------------------------------
# lts search: one search and what is shown beside it

@dataclass
class Versus:
    """The best strategy against Megatron's per-op choices at the same coarse row: one step
    of each (``cost.model.breakdown``: a one-row Result and its per-op list). Serve phase: one
    decode step of each one's running batch at the mean context, and ``megatron_serve`` the
    closed loop of Megatron's choices (the objective there is not that step's)."""
    step: Result
    ops: list
    megatron_step: Result
    megatron_ops: list
    megatron_serve: Result | None = None


def versus_megatron(problem: Problem, best: Result) -> Versus | None:
    """``Versus`` for the first row of ``best`` (None when it is Megatron's own choice)."""
    row = best.strategies[0]
    mrow = coarse_rows(coarse_of(row))[0]
    if np.array_equal(row, mrow):
        return None
    brow, mstep, mserve = row, mrow, None
    if isinstance(problem, ServeProblem):       # one decode step of each one's running batch
        mserve = problem.evaluate_rows(mrow[None])
        brow, mstep = row.copy(), mrow.copy()
        brow[BATCH], mstep[BATCH] = int(best.running[0]), int(mserve.running[0])
    bres, bops = breakdown(problem.model, problem.step_topo, problem.step_work, brow)
    mres, mops = breakdown(problem.model, problem.step_topo, problem.step_work, mstep)
    return Versus(bres, bops, mres, mops, mserve)


@dataclass
class SearchRun:
    """Everything ``lts search`` shows: the search (``result``, its top-k evaluated in
    ``result.evaluated``), the Megatron baseline (the same object for ``--method megatron``) and
    why the best wins (``versus``). When nothing is feasible only ``result`` is set."""
    problem: Problem
    method: str
    budget: int
    seed: int
    result: SearchResult
    wall_s: float                          # the search itself
    megatron: SearchResult | None = None
    versus: Versus | None = None
    candidates: Result | None = None       # serve: each coarse row's best, evaluated
    pareto: Result | None = None           # serve: the frontier of ``candidates``
    sizing: "Sizing | None" = None         # serve with a request rate: the fewest GPUs
    sizing_disagg: "SizingDisagg | None" = None     # the same with two pools
    disagg: object = None                  # serve: the best prefill + decode pools (disagg.Disagg)
    disagg_pareto: list = field(default_factory=list)   # serve: two pools' frontier (Disaggs)
    any_sharding: SearchResult | None = None   # engine named: the same method over the whole
                                               # per-op space (the headroom)
    percentile: object = None              # serve with --slo-percentile: the top checked by
                                           # simulation (search.percentile.PercentileCheck)

    @property
    def found(self) -> bool:
        return self.result.best is not None

    @property
    def top(self) -> Result | None:
        """The top-k evaluated (serve: the batch column holds the concurrency itself)."""
        return self.result.evaluated

    @property
    def best(self) -> Result | None:
        """The best strategy evaluated, one row."""
        return take(self.top, slice(0, 1)) if self.found else None

    @property
    def best_any_sharding(self) -> Result | None:
        """The best of the whole per-op space, one row, when an engine was named and it beats
        the engine's best (else None)."""
        a = self.any_sharding
        if a is None or a.best is None or (self.found and a.best_score <= self.result.best_score):
            return None
        p = self.problem
        if runnable(p.engine_space, p.model, engine_form(p.model, a.best))[0]:
            # the engine runs that deployment (in the whole space it is costed with lts's
            # generic scheduler, in the engine's as the engine schedules it): nothing is missing
            return None
        return take(a.evaluated, slice(0, 1))

    @property
    def headroom(self) -> float | None:
        """The whole space's best over the engine's best, in tokens/s per GPU of the budget
        (None: no engine named, or the engine runs the best already)."""
        if self.best_any_sharding is None or not self.found:
            return None
        return self.any_sharding.best_score / self.result.best_score

    @property
    def megatron_best(self) -> Result | None:
        """The Megatron baseline's best, one row (None: Megatron has no feasible strategy)."""
        mega = self.megatron
        return take(mega.evaluated, slice(0, 1)) if mega is not None and mega.best is not None \
            else None


def run(problem: Problem, method: str = "ppo", budget: int = 4000, seed: int = 0,
        top: int = 10, progress=None, request_rate: float | None = None) -> SearchRun:
    """Search ``problem`` with ``method`` (``np.random.default_rng(seed)``, ``budget`` evaluator
    calls, the ``top`` best distinct coarse rows), then the Megatron baseline and ``Versus``;
    for the serve phase also the trade-off (``pareto``) and, given ``request_rate`` (requests
    per second), the fewest GPUs that serve it (``sizing``), both among the strategies found;
    also two pools (``disagg``, their frontier and, given the rate, ``sizing_disagg``).

    ``progress(n)`` is called after n evaluator calls of the search (0: still working).
    """
    t0 = time.perf_counter()
    sr = every_concurrency(problem, SEARCHERS[method](problem, budget,
                                                      np.random.default_rng(seed), top=top,
                                                      progress=progress))
    out = SearchRun(problem, method, budget, seed, sr, time.perf_counter() - t0)
    # a host tier for the cached prefixes (serving.offload) is costed in one pool of an
    # engine's space: neither the whole per-op space's exact solver nor two pools hold it
    offload = isinstance(problem, ServeProblem) and problem.offloads
    if problem.in_engine_space and not offload:   # the headroom: the same search, every sharding
        calls, problem.calls = problem.calls, 0
        with problem.in_space():
            out.any_sharding = every_concurrency(problem, SEARCHERS[method](
                problem, budget, np.random.default_rng(seed), top=1, progress=progress))
        problem.calls = calls
    serving = isinstance(problem, ServeProblem)
    if sr.best is not None:
        out.megatron = sr if method == "megatron" else every_concurrency(
            problem, search_megatron(problem, budget, None, top=1))
        if serving and out.megatron is not sr:
            # at their best integer concurrencies Megatron's best can pass the search's top
            # (found on the concurrency grid): it is a strategy of the space, so it joins them
            _join_best(problem, sr, out.megatron, top)
    if serving and sr.coarse_best is not None:
        res = problem.evaluate_rows(sr.coarse_best)
        out.candidates = take(res, np.flatnonzero(res.valid))
        out.pareto = frontier(out.candidates)
        if request_rate is not None:
            out.sizing = size(problem, out.candidates, request_rate)
    if serving and not offload:     # two pools, also where one pool has nothing feasible
        limits = () if out.pareto is None else tpot_limits(out.pareto.tpot_s * 1e3)
        out.disagg, out.disagg_pareto = disaggregate(problem, limits)
        if request_rate is not None:
            out.sizing_disagg = size_disagg(problem, request_rate)
    if sr.best is None:
        return out
    out.versus = versus_megatron(problem, sr.evaluated)
    return out


def _join_best(problem: Problem, sr: SearchResult, other: SearchResult, top: int) -> None:
    """``other``'s best joins ``sr``'s top strategies (in place) where it beats their best."""
    if other.best is None or other.best_score <= sr.best_score:
        return
    rows = np.unique(np.concatenate([other.top[:1], sr.top]), axis=0)
    res = problem.evaluate_rows(rows)
    scores = problem.score(res)
    order = np.argsort(-scores, kind="stable")[:top]
    sr.top, sr.top_scores = rows[order], scores[order]
    sr.best, sr.best_score, sr.evaluated = sr.top[0], float(sr.top_scores[0]), take(res, order)
    sr.coarse_best = np.unique(np.concatenate([sr.coarse_best, rows]), axis=0) \
        if sr.coarse_best is not None else rows
    sr.stats["concurrency"] = str(sr.stats.get("concurrency", "")) + " (and Megatron's best)"


def every_concurrency(problem: Problem, sr: SearchResult) -> SearchResult:
    """The serve phase: ``sr`` with each of its top strategies at its best integer concurrency
    within the SLOs (``ServeProblem.best_concurrency``: searches try the powers of two and the KV
    capacity), re-ranked, strategies that meet again merged; the refined rows join the frontier's
    candidates (``coarse_best``). Never lower: the concurrency a search found is among those
    tried. Other phases, and a result over every integer already: ``sr`` as it is."""
    if not isinstance(problem, ServeProblem) or sr.best is None or \
            str(sr.stats.get("concurrency", "")).startswith("every integer"):
        return sr
    res = problem.best_concurrency(_distinct_top(problem, sr))
    scores = problem.score(res)
    _, first = np.unique(res.strategies, axis=0, return_index=True)
    first = first[np.isfinite(scores[first])]
    order = first[np.argsort(-scores[first], kind="stable")]
    if not len(order):          # (cannot happen: the found concurrencies are valid)
        return sr
    sr.top, sr.top_scores = res.strategies[order], scores[order]
    sr.best, sr.best_score, sr.evaluated = sr.top[0], float(sr.top_scores[0]), take(res, order)
    sr.coarse_best = sr.top if sr.coarse_best is None else \
        np.unique(np.concatenate([sr.coarse_best, sr.top]), axis=0)
    sr.stats["concurrency"] = "every integer for the top strategies"
    return sr


def _distinct_top(problem: ServeProblem, sr: SearchResult) -> np.ndarray:
    """The strategies to refine: the best of each of the top len(sr.top) distinct deployments
    (every coarse axis but the concurrency, and the per-op choices) among every coarse row's
    best the search found (``coarse_best``): its top list counts one deployment once per
    concurrency, and above the KV capacity those only queue, so it can hold few distinct ones."""
    cands = sr.top if sr.coarse_best is None else np.unique(
        np.concatenate([sr.top, sr.coarse_best]), axis=0)
    scores = problem.score(problem.evaluate_rows(cands))
    keys = np.delete(cands, CONCURRENCY, axis=1)
    order = np.argsort(-scores, kind="stable")
    _, first = np.unique(keys[order], axis=0, return_index=True)
    best = order[np.sort(first)]                    # each deployment's best, best first
    best = best[np.isfinite(scores[best])][:max(len(sr.top), 1)]
    return cands[best] if len(best) else sr.top


def tpot_limits(tpot_ms, most: int = 6) -> tuple:
    """At most ``most`` TPOT limits (ms) spread over the one-pool frontier's TPOTs: where the
    two-pool frontier is traced. Evenly in log TPOT from the least to the largest, so that a
    frontier whose points crowd at one end still gets limits across its whole range."""
    tpot_ms = np.unique(np.asarray(tpot_ms, dtype=np.float64)[np.isfinite(tpot_ms)])
    if len(tpot_ms) <= most:
        return tuple(tpot_ms)
    return tuple(np.geomspace(tpot_ms[0], tpot_ms[-1], most))


def frontier(found: Result) -> Result | None:
    """The serving trade-off among ``found`` (serve results within the SLOs): for each tokens/s
    per user reached (1 / TPOT), the best output tokens/s per GPU, as rows in order of tokens/s
    per user (None: no row)."""
    per_user, per_gpu = 1.0 / found.tpot_s, found.tokens_per_s_per_gpu
    ok = np.flatnonzero(found.valid & np.isfinite(per_user) & np.isfinite(per_gpu))
    if not len(ok):
        return None
    # of equal points the least TTFT: a concurrency beyond the KV cache queues for nothing
    return take(found, ok[pareto_front(per_user[ok], per_gpu[ok], found.ttft_s[ok])])


def replicas(problem: Problem, res: Result) -> np.ndarray:
    """Instances of each strategy the device budget holds: floor(GPUs / instance size) [N]."""
    return np.floor(problem.work.budget(problem.topo) / res.gpus)


@dataclass
class Sizing:
    """The fewest GPUs that serve ``request_rate`` requests/s within the SLOs: ``instances``
    copies of ``result`` (one row), ``gpus`` in all; ``fits``: within the device budget."""
    request_rate: float
    result: Result
    instances: int
    gpus: int
    fits: bool


def size(problem: ServeProblem, found: Result, request_rate: float) -> Sizing | None:
    """The strategy of ``found`` whose instances serve ``request_rate`` requests/s on the fewest
    GPUs. An instance in the closed loop completes output tokens/s / osl requests per second;
    ceil(rate / that) instances are needed. Ties: the higher output tokens/s per GPU, then the
    least TTFT (a concurrency beyond the KV cache queues for nothing)."""
    if not len(found):
        return None
    per_instance = found.tokens_per_s / problem.osl              # requests/s
    instances = np.ceil(request_rate / per_instance)
    gpus = instances * found.gpus
    i = int(np.lexsort((found.ttft_s, -found.tokens_per_s_per_gpu, gpus))[0])
    return Sizing(float(request_rate), take(found, slice(i, i + 1)), int(instances[i]),
                  int(gpus[i]), bool(gpus[i] <= problem.work.budget(problem.topo)))


@dataclass
class SizingDisagg:
    """The fewest GPUs that serve ``request_rate`` requests/s within the SLOs with two pools:
    ``deployment`` (a ``disagg.Disagg``: x prefill and y decode instances, ``gpus`` in all);
    ``fits``: within the device budget."""
    request_rate: float
    deployment: Disagg
    fits: bool

    @property
    def gpus(self) -> int:
        return self.deployment.gpus


def size_disagg(problem: ServeProblem, request_rate: float) -> SizingDisagg | None:
    """The pair of pool strategies (``disagg.pool_candidates``) and instance counts that serve
    ``request_rate`` requests/s on the fewest GPUs, the counts not bound by the budget. x
    prefill and y decode instances serve min(x r_p, y r_d) requests/s (``disagg.pool_rates``),
    so each pair's fewest are x = ceil(rate / r_p), y = ceil(rate / r_d); a pair whose TTFT
    (1.5 passes and the KV transfer over the tier the x + y instances span) exceeds the limit
    is skipped (fewer instances never span a slower tier). Ties: the higher rate served, then
    the least TTFT. None: no pool strategies, or no pair meets the TTFT limit."""
    prefills, decodes, _ = pool_candidates(problem)
    ttft_ms = problem.ttft_slo_ms
    best = None
    for prefill in prefills:
        for decode in decodes:
            x, y = (_enough(request_rate, r) for r in pool_rates(problem, prefill, decode))
            d = deployment(problem, prefill, decode, x, y)
            if ttft_ms and d.ttft_s > ttft_ms * 1e-3:
                continue
            key = (d.gpus, -d.requests_per_s, d.ttft_s)
            if best is None or key < best[0]:
                best = key, d
    if best is None:
        return None
    return SizingDisagg(float(request_rate), best[1],
                        bool(best[1].gpus <= problem.work.budget(problem.topo)))


def _enough(rate: float, per_instance: float) -> int:
    """The fewest instances of ``per_instance`` requests/s each that serve ``rate``."""
    n = max(math.ceil(rate / per_instance), 1)
    return n + 1 if n * per_instance < rate else n      # rate / per_instance rounded down


# ----------------------------------------------------------------------------------------------
# lts compare: every method over seeds

def best_scores(runs) -> np.ndarray:
    """Each run's best tokens/s/GPU, 0 where it found nothing feasible [len(runs)]."""
    return np.array([max(r.best_score, 0.0) for r in runs])


def run_seeds(problem: Problem, method: str, seeds, budget: int, top: int = 1, progress=None,
              on_run=None, searcher=None) -> list:
    """One run of ``method`` per seed, each with ``np.random.default_rng(seed)`` and the call
    count reset, as ``lts compare`` runs it; ``searcher`` replaces ``SEARCHERS[method]`` (e.g. a
    ``search_ppo`` with its own PPOConfig); ``on_run(label)`` is called before each run."""
    searcher = searcher or SEARCHERS[method]
    out = []
    for seed in seeds:
        problem.calls = 0
        if on_run:
            on_run(f"{method} seed {seed}")
        out.append(searcher(problem, budget, np.random.default_rng(seed), top=top,
                            progress=progress))
    return out


@dataclass
class MethodSummary:
    """One method's line of ``lts compare`` (the JSON ``methods`` entries: these names)."""
    method: str
    seeds: int
    mean_tokens_per_s_per_gpu: float
    best_tokens_per_s_per_gpu: float
    fraction_of_exact_mean: float
    fraction_of_exact_best: float
    wall_s_mean: float
    table1: float | None             # mean ÷ random walk's mean (None without random-walk)
    figure3: float | None            # best ÷ Megatron's best (None if Megatron has none)


def summarize(method: str, runs, exact: float, megatron: float = -np.inf,
              random_walk: float | None = None) -> MethodSummary:
    """Mean and best over the runs of their best tokens/s/GPU (infeasible: 0), as fractions of
    the ``exact`` optimum and against Megatron's best and random walk's mean."""
    scores = best_scores(runs)
    mean, best = float(scores.mean()), float(scores.max())
    return MethodSummary(method, len(scores), mean, best, float((scores / exact).mean()),
                         best / exact, float(np.mean([r.wall_s for r in runs])),
                         mean / random_walk if random_walk else None,
                         best / megatron if np.isfinite(megatron) and megatron > 0 else None)


@dataclass
class Comparison:
    """What ``lts compare`` shows: every run (method -> [SearchResult]; exact and megatron one
    each) and a ``MethodSummary`` per method (the stochastic ones, then megatron, exact). When
    the exact search finds nothing feasible, no other run is made and ``summaries`` is empty."""
    problem: Problem
    seeds: int
    budget: int
    runs: dict
    summaries: list

    @property
    def exact(self) -> SearchResult:
        return self.runs["exact"][0]

    @property
    def megatron(self) -> SearchResult:
        return self.runs["megatron"][0]


def compare(problem: Problem, methods, seeds: int, budget: int, progress=None,
            on_run=None) -> Comparison:
    """``exact`` and ``megatron`` once, then each of ``methods`` for seeds 0..seeds-1 with
    ``budget`` evaluator calls (``run_seeds``); top-1 each. Serve in an engine's space: every
    result's top 10 at its best integer concurrency (``every_concurrency``), since the engine's exact
    optimum is over every integer; in the whole space the exact serve solver is exact over the
    concurrency grid (the powers of two and the KV capacity), so the results are compared there
    (refined, another strategy than exact's could pass it)."""
    refining = problem.in_engine_space and isinstance(problem, ServeProblem)
    refine = (lambda sr: every_concurrency(problem, sr)) if refining else (lambda sr: sr)
    top = 10 if refining else 1      # the best integer concurrency may be another row's
    runs = {}
    for method in ("exact", "megatron"):
        problem.calls = 0
        if on_run:
            on_run(method)
        runs[method] = [refine(SEARCHERS[method](problem, budget, np.random.default_rng(0),
                                                 top=top))]
    out = Comparison(problem, seeds, budget, runs, [])
    if out.exact.best is None:
        return out
    for method in methods:
        runs[method] = [refine(r) for r in run_seeds(problem, method, range(seeds), budget,
                                                     top=top, progress=progress,
                                                     on_run=on_run)]
    rw = float(np.mean(best_scores(runs["random-walk"]))) if "random-walk" in runs else None
    out.summaries = [summarize(method, runs[method], out.exact.best_score,
                               out.megatron.best_score, rw)
                     for method in list(methods) + ["megatron", "exact"]]
    return out
