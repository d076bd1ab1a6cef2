"""``lts bench``: how fast this machine evaluates and searches, all in process.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..cost.model import breakdown, evaluate
from .exact import search_exact
from .problems import Problem
from .methods import search_ppo
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import megatron_row
from ..specs.workload import Workload


@dataclass
class Bench:
    """The JSON of ``lts bench`` (these names): seconds, and strategies per second."""
    model: str
    topology: str
    evaluations: int
    evaluations_per_s: float           # evaluate() over ``evaluations`` random rows, the coarse
                                       # grid's tables and fused pieces built (a search's state)
    evaluations_per_s_fusing: float    # the same rows, the fused pieces built in the call
    evaluations_per_s_cold: float      # the same rows, grouped and all tables built in the call
    estimate_wall_s: float             # one breakdown (what ``lts estimate`` costs)
    search_wall_s: float | None = None     # ppo, budget 4000 calls, seed 0 (None: not measured)
    exact_wall_s: float | None = None      # the exact optimum


def measure(model: ModelSpec, topo: TopologySpec, evaluations: int = 1_000_000, seed: int = 0,
            searches: bool = True) -> Bench:
    """Time the evaluator on ``evaluations`` uniform random strategies (``seed``) of the decode
    workload, one estimate, and (``searches``) a 4000-call ppo search and the exact search.

    The evaluator is timed three times on the same rows, each the median of three calls: with the
    tables of the space's coarse grid and their fused pieces built and each row's coarse index
    given (the state a search is in once it has asked 32 strategies of each row it visits:
    ``cost.model.FusedRows``); with the fused pieces built inside the call; and cold, from strategy
    rows alone (grouping the coarse rows and building all their tables inside the call)."""
    work = Workload()
    problem = Problem(model, topo, work)
    idx = problem.space.sample(np.random.default_rng(seed), evaluations)
    strategies, g = problem.space.decode(idx), problem.coarse_index(idx)

    def per_s(fresh=False, **kw):
        """Strategies per second of evaluate(strategies, **kw): the median of three calls after
        one untimed call of the same size (the first call in a process also pays for the memory
        the allocator maps for its arrays); ``fresh``: the fused pieces dropped before each."""
        evaluate(model, topo, work, strategies, **kw)
        times = []
        for _ in range(3):
            if fresh:
                problem.tables.extra.pop("fused", None)
            t0 = time.perf_counter()
            evaluate(model, topo, work, strategies, **kw)
            times.append(time.perf_counter() - t0)
        return evaluations / float(np.median(times))

    warm = per_s(tables=problem.tables, coarse_index=g)
    fusing = per_s(fresh=True, tables=problem.tables, coarse_index=g)
    cold = per_s()
    t0 = time.perf_counter()
    breakdown(model, topo, work, megatron_row(8, 1, 1, 64))
    out = Bench(model.name, topo.name, evaluations, warm, fusing, cold, time.perf_counter() - t0)
    if searches:
        problem = Problem(model, topo, work)
        t0 = time.perf_counter()
        search_ppo(problem, 4000, np.random.default_rng(0))
        out.search_wall_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        search_exact(problem)
        out.exact_wall_s = time.perf_counter() - t0
    return out
