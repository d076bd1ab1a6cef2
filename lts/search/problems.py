"""What a search works on and what it returns (docs/design.md §4).

- ``Problem``: a model, a cluster, a workload and the strategy space; evaluates index rows with
  tables built once per coarse row and counts the evaluator calls.
- ``ServeProblem``: the serve phase (``lts.serving.serve``'s closed loop) as a problem.
- ``Tracker``: the best-so-far curve and the top-k of a search, in memory bounded by the coarse
  grid.
- ``SearchResult``: what every method returns; it carries its top-k evaluated (``evaluated``, a
  ``Result``), so nothing evaluates them again for display.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace

import numpy as np

from ..cost.model import Result, evaluate
from ..engines import ENGINES, GENERIC
from ..engines.space import project, runnable
from ..cost.tables import REASON_BIT, Tables, build_tables
from ..serving import serve
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import (CONCURRENCY, EXPERTS, MEGATRON, N_COARSE, OP_COL, OPS, WIDTH,
                               Space, coarse_of, coarse_rows, instance_index)
from ..specs.workload import Workload


def fill(budget: int, gpus) -> np.ndarray:
    """The share of a budget of B GPUs that copies of instances of ``gpus`` GPUs keep busy:
    floor(B / g) * g / B (1 where g divides B, 0 above B)."""
    g, b = np.asarray(gpus, dtype=np.float64), float(budget)
    return np.floor(b / g) * g / b


class Problem:
    """A model, a cluster, a workload and the space; evaluates index rows and counts the calls.

    Coarse tables are built once for every coarse row of the space (instances over the
    GPU budget included: they are reported invalid for ``budget``), so each evaluation is a walk.
    ``step_work`` is the step the per-op breakdowns show (here the workload itself).

    ``engine_space``: ``generic`` (the paper's whole per-op space) or an engine (``vllm``,
    ``sglang``, ``trtllm``; ``lts.engines.space``): then every index row stands for the engine's
    variant it projects onto (``canonical``) and rows the engine cannot lay out are invalid
    (reason ``engine``), so every method ranks only what that engine runs as written. The
    tables do not depend on it: ``in_space`` searches the same problem in another space.

    The objective (``score``) is output tokens/s per GPU of the device budget: as many copies
    of an instance as the budget holds, GPUs the copies leave idle counted (``fill``);
    ``whole_budget=False`` scores per GPU used (a pool of a two-pool deployment).
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload,
                 space: Space | None = None, tables=True, engine_space: str = GENERIC,
                 whole_budget: bool = True):
        self.model, self.topo, self.work = model, topo, work
        self.engine_space = engine_space
        self.whole_budget = whole_budget
        self.step_work = work
        self.space = space or Space.for_model(model, work.budget(topo), **work.cp_space())
        sp = self.space
        self.grid = sp.full_grid()                          # [G, N_COARSE], the first axis slowest
        self.grid_shape = sp.sizes[:N_COARSE]
        if isinstance(tables, Tables):      # another problem's: the same model, topology, step
            self.tables = tables
        else:
            self.tables = build_tables(model, topo, work, self.grid) if tables else None
        self.calls = 0
        self.usable = topo.hbm_bytes - topo.hbm_reserve_bytes

    @property
    def phase(self) -> str:
        """The phase searched: decode or prefill (``ServeProblem``: serve)."""
        return self.work.phase

    @property
    def step_topo(self) -> TopologySpec:
        """The topology the per-op breakdowns of one step are costed on."""
        return self.topo

    def coarse_index(self, idx: np.ndarray) -> np.ndarray:
        """Index rows [N, WIDTH] -> row of the coarse grid [N] (an index out of range raises)."""
        return np.ravel_multi_index(tuple(coarse_of(idx).T), self.grid_shape)

    def instance_index(self, g) -> np.ndarray:
        """Rows g [N] of the coarse grid -> one key per instance (every coarse axis but the
        batch: ``strategy.instance_index``), in the grid's order."""
        return instance_index(g, self.grid_shape)

    def evaluate(self, idx: np.ndarray, count: bool = True) -> Result:
        """Evaluate index rows [N, WIDTH] (one index per entry); counts N evaluator calls."""
        idx = np.atleast_2d(idx)
        if count:
            self.calls += len(idx)
        g = self.coarse_index(idx)
        rows = np.array(idx, dtype=np.int64)                # choices: index = value
        rows[:, :N_COARSE] = self.grid[g]                   # = self.space.decode(idx)
        return self.restrict(evaluate(self.model, self.topo, self.work, self._canonical(rows),
                                      tables=self.tables, coarse_index=g))

    def evaluate_rows(self, rows) -> Result:
        """Evaluate strategy rows [N, WIDTH] (values, not indices); no call is counted."""
        return self.restrict(evaluate(self.model, self.topo, self.work, np.atleast_2d(rows)))

    @property
    def in_engine_space(self) -> bool:
        """Whether the search is limited to what one engine runs (``engine_space`` names a
        released engine, not ``generic``)."""
        return self.engine_space != GENERIC

    def restrict(self, res: Result) -> Result:
        """``res`` with the rows the engine of ``engine_space`` does not run as written made
        invalid (reason ``engine``), in place."""
        if self.in_engine_space:
            bad = ~runnable(self.engine_space, self.model, res.strategies)
            res.valid &= ~bad
            res.reasons |= np.where(bad, REASON_BIT["engine"], 0).astype(res.reasons.dtype)
        return res

    @contextmanager
    def in_space(self, engine: str = GENERIC):
        """The same problem over another engine's space for the duration (by default the whole
        per-op space: the headroom)."""
        saved, self.engine_space = self.engine_space, engine
        try:
            yield self
        finally:
            self.engine_space = saved

    def fill(self, gpus) -> np.ndarray:
        """The share of the device budget B that copies of instances of ``gpus`` GPUs keep
        busy: floor(B / g) * g / B (1 where g divides B, 0 above B); 1 everywhere for a
        problem whose instances do not fill the budget alone (``whole_budget=False``: the pools
        of a two-pool deployment, sized together)."""
        if not self.whole_budget:
            return np.ones_like(np.asarray(gpus, dtype=np.float64))
        return fill(self.work.budget(self.topo), gpus)

    def per_cluster_gpu(self, res: Result) -> np.ndarray:
        """Tokens/s per GPU of the device budget: the instance's per-GPU rate x ``fill``."""
        return res.tokens_per_s_per_gpu * self.fill(res.gpus)

    def fixed_choice_rows(self, choices) -> np.ndarray:
        """Index rows [G, WIDTH]: every coarse row of the grid with the per-op ``choices``."""
        return coarse_rows(np.indices(self.grid_shape).reshape(N_COARSE, -1).T, choices)

    def canonical(self, idx: np.ndarray) -> np.ndarray:
        """The strategy an index row stands for.

        MoE: FFN1 and FFN2 split the experts together or not at all (the cost model rejects a
        lone `experts`), so a row where either picks `experts` stands for both doing so: no call
        is spent on a pairing that is never a strategy, for every method alike. Dense: the
        router's choice cannot matter and is set to Megatron's.
        """
        return self._canonical(np.array(np.atleast_2d(idx), copy=True))

    def _canonical(self, idx: np.ndarray) -> np.ndarray:
        """``canonical`` in place."""
        if self.model.is_moe:
            c1, c2 = OP_COL["ffn1"], OP_COL["ffn2"]
            either = (idx[:, c1] == EXPERTS) | (idx[:, c2] == EXPERTS)
            idx[either, c1] = idx[either, c2] = EXPERTS
        else:
            idx[:, OP_COL["router"]] = MEGATRON[OPS.index("router")]
        return project(self.engine_space, self.model, idx)

    def score(self, res: Result) -> np.ndarray:
        """Objective: tokens/s per GPU of the budget (``per_cluster_gpu``) of valid strategies,
        -inf for invalid ones."""
        return np.where(res.valid, self.per_cluster_gpu(res), -np.inf)


class ServeProblem(Problem):
    """The serve phase as a search problem: the objective is output tokens/s per GPU of the
    closed loop (``lts.serving.serve``) at concurrency C = the batch column, requests of ``isl`` input and
    ``osl`` output tokens, under an engine profile.

    The concurrency head holds the powers of two and, last, ``serve.AT_CAPACITY``: as many
    requests as the strategy's KV cache holds (the largest concurrency that does not queue), so
    a search without a TTFT limit need not stop at a power of two above the capacity.

    One evaluator call costs a strategy in the closed loop (its memory, then a decode step and a
    mixed step of its running batch). The grid's coarse tables are built once; a running batch
    the KV cache caps is off the grid, and its tables are built when first met (``serve.warm``,
    ``cost.model.TableCache``). ``work`` is the decode step at the final context isl+osl (the
    engine's context length); ``step_work`` the decode step at the mean context (per-op
    breakdowns), costed on the engine's topology (``step_topo``). Its exact search is
    ``lts.search.serve_exact``.
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, isl: int, osl: int,
                 tpot_slo_ms: float | None = None, ttft_slo_ms: float | None = None,
                 gpus: int = 0, space: Space | None = None, engine=None,
                 engine_space: str = GENERIC, spec=None, prefix=None, max_cp: int = 1,
                 max_etp: int = 1):
        self.prefix = prefix          # prefix caching (serving.prefix), or None
        # context parallelism up to this: a prefill pass's cp (the prefill pool of two pools),
        # a decode or mixed step's dcp (one pool, the decode pool of two) (cost.tables)
        self.max_cp = int(max_cp)
        # expert tensor parallelism up to this (the etp axis, every pool: ``Workload.max_etp``)
        self.max_etp = int(max_etp)
        # two pools on two GPU types: the decode pool's problem on its topology (set by the
        # caller, ``search.disagg.decoder``), else None
        self.decode_problem = None
        self.cached = prefix.cached(isl) if prefix is not None else 0
        work = serve.memory_workload(isl, osl, gpus, self.cached)
        if space is None:      # concurrencies: the powers of two, then each strategy's capacity
            space = Space.for_model(model, work.budget(topo), max_dcp=self.max_cp,
                                    max_etp=self.max_etp)
            space = replace(space, batch=space.batch + (serve.AT_CAPACITY,))
        super().__init__(model, topo, work, space, tables=False, engine_space=engine_space)
        self.isl, self.osl = int(isl), int(osl)
        self.tpot_slo_ms, self.ttft_slo_ms = tpot_slo_ms, ttft_slo_ms
        self.engine = engine or ENGINES[GENERIC].profile
        self.step_work = serve.decode_workload(isl, osl, gpus)
        self.evaluator = serve.Evaluator(model, self.engine.topology(topo), cached=True)
        # speculative decoding (serving.spec): the draft costed beside the target, cached too
        self.spec = spec
        self.draft = serve.Evaluator(spec.draft, self.engine.topology(topo), cached=True) \
            if spec is not None else None
        serve.warm(self.evaluator, self.engine, self.grid, isl, osl, gpus, spec, self.cached)

    @property
    def phase(self) -> str:
        return "serve"

    @property
    def offloads(self) -> bool:
        """Whether the cached prefixes have a host tier (``serving.offload``)."""
        return serve.offloads(self.prefix, self.isl)

    @property
    def step_topo(self) -> TopologySpec:
        return self.engine.topology(self.topo)

    def serve_rows(self, rows) -> serve.ServeResult:
        """The closed-loop figures of strategy rows [N, WIDTH] (values); no call is counted."""
        return serve.serve(self.model, self.topo, np.atleast_2d(rows), self.isl, self.osl,
                           tpot_slo_ms=self.tpot_slo_ms, ttft_slo_ms=self.ttft_slo_ms,
                           gpus=self.work.gpus, engine=self.engine, evaluator=self.evaluator,
                           attention_dp=self.in_engine_space, spec=self.spec, draft=self.draft,
                           prefix=self.prefix)

    def evaluate(self, idx: np.ndarray, count: bool = True) -> Result:
        idx = self.canonical(idx)
        if count:
            self.calls += len(idx)
        return self.restrict(serve.as_result(self.serve_rows(self.space.decode(idx))))

    def evaluate_rows(self, rows) -> Result:
        return self.restrict(serve.as_result(self.serve_rows(rows)))

    def best_concurrency(self, rows) -> Result:
        """Strategy rows [N, WIDTH] (values) each at its integer concurrency with the most output
        tokens/s within the SLOs (``serve.best_concurrency``; the concurrency column is ignored); no
        call is counted."""
        res = serve.serve(self.model, self.topo, np.atleast_2d(rows), self.isl, self.osl,
                          best_batch=True, tpot_slo_ms=self.tpot_slo_ms,
                          ttft_slo_ms=self.ttft_slo_ms, gpus=self.work.gpus, engine=self.engine,
                          evaluator=self.evaluator, attention_dp=self.in_engine_space,
                          spec=self.spec, draft=self.draft, prefix=self.prefix)
        return self.restrict(serve.as_result(res))

    def score(self, res: Result) -> np.ndarray:
        """Output tokens/s per GPU of the budget; requests beyond the KV cache add nothing but
        queueing, so of two concurrencies with the same running batch the smaller one wins (by
        a part in 1e9)."""
        queued = 1.0 - res.running / res.strategies[:, CONCURRENCY]
        return np.where(res.valid, self.per_cluster_gpu(res) * (1.0 - 1e-9 * queued), -np.inf)


def take(res: Result, rows) -> Result:
    """Rows of a Result (``slice(0, 1)``: the first, kept one-row)."""
    return Result(*(None if v is None else v[rows]
                    for v in (getattr(res, f.name) for f in fields(res))))


@dataclass
class SearchResult:
    method: str
    best: np.ndarray | None          # strategy row [WIDTH] (values, not indices), None if none
                                     # valid
    best_score: float                # tokens/s/GPU (-inf if none valid)
    top: np.ndarray                  # [k, WIDTH] strategy rows, best first (distinct, valid)
    top_scores: np.ndarray
    evaluations: int
    wall_s: float
    improvements: tuple = ()         # (call index, best-so-far) at each call that raised the best
    tracked: int = 0                 # calls the tracker saw
    stats: dict = field(default_factory=dict)
    evaluated: Result | None = None  # ``top`` evaluated (Problem.evaluate_rows), None if empty
    coarse_best: np.ndarray | None = None   # [G', WIDTH]: the best valid strategy of every
                                            # coarse row the search found one for
                                            # (serve exact: also every frontier strategy)

    @property
    def history(self) -> np.ndarray:
        """The best-so-far after each call (-inf before the first valid one), [tracked]."""
        h = np.full(self.tracked, -np.inf)
        for i, v in self.improvements:
            h[i:] = v
        return h


class Tracker:
    """Keeps the best-so-far curve and the top-k of a search: the best valid strategy of each of
    the k best distinct coarse rows, as the exact search reports them.

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
        """The SearchResult: the top-k ranked (best score, then earliest call) and evaluated."""
        ranked = sorted(self.by_coarse.values(), key=lambda r: (-r[0], r[1]))[:self.k]
        sp = self.problem.space
        top = sp.decode(np.array([r[2] for r in ranked])) if ranked else \
            np.zeros((0, WIDTH), np.int64)
        scores = np.array([r[0] for r in ranked])
        evaluated = self.problem.evaluate_rows(top) if len(top) else None
        every = sp.decode(np.array([r[2] for r in self.by_coarse.values()])) if ranked else None
        return SearchResult(method, top[0] if len(top) else None,
                            float(scores[0]) if len(scores) else -math.inf, top, scores,
                            self.problem.calls, time.perf_counter() - t0,
                            tuple(self.improvements), self.seen, stats or {}, evaluated, every)
