"""``lts bench``: how fast this machine evaluates and searches, all in process.

Imports: costmodel, problems, exact, search (the ppo adapter), specs (types), strategy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .costmodel import breakdown, evaluate
from .exact import search_exact
from .problems import Problem
from .search import search_ppo
from .specs import ModelSpec, TopologySpec
from .strategy import Space, megatron_row
from .workload import Workload


@dataclass
class Bench:
    """The JSON of ``lts bench`` (these names): seconds, and strategies per second."""
    model: str
    topology: str
    evaluations: int
    evaluations_per_s: float           # one evaluate() call over ``evaluations`` random rows
    estimate_wall_s: float             # one breakdown (what ``lts estimate`` costs)
    search_wall_s: float | None = None     # ppo, 4000 calls, seed 0 (None: not measured)
    exact_wall_s: float | None = None      # the exact optimum


def measure(model: ModelSpec, topo: TopologySpec, evaluations: int = 1_000_000, seed: int = 0,
            searches: bool = True) -> Bench:
    """Time the evaluator on ``evaluations`` uniform random strategies (``seed``) of the decode
    workload, one estimate, and (``searches``) a 4000-call ppo search and the exact search."""
    work = Workload()
    space = Space.for_model(model, work.budget(topo))
    rng = np.random.default_rng(seed)
    strategies = space.decode(space.sample(rng, evaluations))
    evaluate(model, topo, work, strategies[:1000])          # warm up
    t0 = time.perf_counter()
    evaluate(model, topo, work, strategies)
    eval_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    breakdown(model, topo, work, megatron_row(8, 1, 1, 64))
    out = Bench(model.name, topo.name, evaluations, evaluations / eval_s,
                time.perf_counter() - t0)
    if searches:
        problem = Problem(model, topo, work)
        t0 = time.perf_counter()
        search_ppo(problem, 4000, np.random.default_rng(0))
        out.search_wall_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        search_exact(problem)
        out.exact_wall_s = time.perf_counter() - t0
    return out
