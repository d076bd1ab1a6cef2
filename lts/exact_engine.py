"""The exact optimum over an engine's space (``search_engine_exact``): what ``--method exact``
runs when an engine is named (DESIGN.md §9).

An engine runs at most two per-op shardings at each coarse row (``enginespace``: Megatron's and,
for a MoE, the expert-parallel variant), so its whole space is the coarse grid times those
variants where the engine lays them out: a few thousand strategies at most. It is enumerated:
every runnable strategy is costed, in chunks, and the best of each coarse row is kept
(``Tracker``). That is exact by construction; ``tests/test_engine_space.py`` checks it against
an independent enumeration of the same space through the scalar evaluator path.

Imports: enginespace, problems, strategy.
"""
from __future__ import annotations

import time

import numpy as np

from .enginespace import runnable_mask
from .problems import Problem, SearchResult, Tracker
from .strategy import EP, EXPERT_CHOICES, MEGATRON, PP, TP

CHUNK = 4096          # strategies per evaluator call


def engine_rows(problem: Problem, max_gpus: int | None = None) -> np.ndarray:
    """Index rows of every strategy the problem's engine runs as written, within the GPU budget
    (and instances of at most ``max_gpus``) [N, 16]."""
    model = problem.model
    gpus = problem.grid[:, TP] * problem.grid[:, EP] * problem.grid[:, PP]
    fits = gpus <= min(problem.work.budget(problem.topo), max_gpus or gpus.max(initial=0))
    out = [problem.fixed_choice_rows(v)[fits & runnable_mask(problem.engine_space, model,
                                                             problem.grid, v)]
           for v in ((MEGATRON, EXPERT_CHOICES) if model.is_moe else (MEGATRON,))]
    return np.concatenate(out)


def search_engine_exact(problem: Problem, budget: int = 0, rng=None, top: int = 10,
                        progress=None, max_gpus: int | None = None) -> SearchResult:
    """Every strategy the engine runs, costed: the optimum of the engine's space and the best of
    each of the next coarse rows (the top-k); ``max_gpus``: only instances of at most that many
    GPUs. ``budget`` and ``rng`` are unused; no evaluator call is counted (as for ``exact``)."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    idx = engine_rows(problem, max_gpus)
    for i in range(0, len(idx), CHUNK):
        chunk = idx[i:i + CHUNK]
        tr.add(chunk, problem.score(problem.evaluate(chunk, count=False)))
        if progress:
            progress(0)
    return tr.result("exact", t0, {"engine": problem.engine_space,
                                   "strategies_covered": int(len(idx))})
