"""The exact optimum over an engine's space (``search_engine_exact``): what ``--method exact``
runs when an engine is named (docs/design.md §9).

An engine runs at most three per-op shardings at each coarse row (``engines.space.variants``:
Megatron's and, for a MoE, the expert-parallel and the data-parallel-attention variants), so its
whole space is the coarse grid times those variants where the engine lays them out: a few
thousand strategies at most. It is enumerated:
every runnable strategy is costed, in chunks, and the best of each coarse row is kept
(``Tracker``). That is exact by construction; ``tests/test_engine_space.py`` checks it against
an independent enumeration of the same space through the scalar evaluator path.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..engines.space import runnable_mask, variants
from .problems import Problem, SearchResult, ServeProblem, Tracker, take
from ..specs.strategy import TP, WIDTH, instance_gpus, with_coarse

CHUNK = 4096          # strategies per evaluator call


def engine_rows(problem: Problem, max_gpus: int | None = None) -> np.ndarray:
    """Index rows of every strategy the problem's engine runs as written, within the GPU budget
    (and instances of at most ``max_gpus``) [N, WIDTH]."""
    model = problem.model
    gpus = instance_gpus(problem.grid)
    fits = gpus <= min(problem.work.budget(problem.topo), max_gpus or gpus.max(initial=0))
    # at tp = 1 every variant is one deployment: Megatron's choices stand for it
    one = problem.grid[:, TP] == 1
    out = [problem.fixed_choice_rows(v)[fits & runnable_mask(problem.engine_space, model,
                                                             problem.grid, v)
                                        & (~one | (k == 0))]
           for k, v in enumerate(variants(model))]
    return np.concatenate(out)


def search_engine_exact(problem: Problem, budget: int = 0, rng=None, top: int = 10,
                        progress=None, max_gpus: int | None = None) -> SearchResult:
    """Every strategy the engine runs, costed: the optimum of the engine's space and the best of
    each of the next coarse rows (the top-k); ``max_gpus``: only instances of at most that many
    GPUs. ``budget`` and ``rng`` are unused; no evaluator call is counted (as for ``exact``).
    The serve phase: ``_serve``."""
    if isinstance(problem, ServeProblem):
        return _serve(problem, top, progress, max_gpus)
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


def _serve(problem: ServeProblem, top: int, progress=None,
           max_gpus: int | None = None) -> SearchResult:
    """The serve phase over every integer concurrency: each instance (every coarse axis but
    the concurrency) and per-op variant the engine runs at its best integer concurrency within
    the SLOs (``ServeProblem.best_concurrency``, checked against every integer in tests); the
    top-k are the best of distinct (instance, variant). The trade-off frontier's candidates
    (``coarse_best``) are those optima and every strategy of the concurrency grid (the powers
    of two and the KV capacity) that is valid."""
    t0 = time.perf_counter()
    grid = problem.space.decode(engine_rows(problem, max_gpus))
    every = problem.evaluate_rows(grid) if len(grid) else None
    if progress:
        progress(0)
    units = np.unique(with_coarse(grid, batch=1), axis=0)    # the concurrency: found below
    res = problem.best_concurrency(units) if len(units) else None
    if progress:
        progress(0)
    scores = problem.score(res) if res is not None else np.zeros(0)
    order = np.argsort(-scores, kind="stable")
    order = order[np.isfinite(scores[order])][:top]
    found = res.strategies[order] if len(order) else np.zeros((0, WIDTH), np.int64)
    frontier = [found]
    if every is not None and every.valid.any():
        frontier.append(every.strategies[every.valid])
    coarse_best = np.unique(np.concatenate(frontier), axis=0) if len(order) else None
    return SearchResult("exact", found[0] if len(found) else None,
                        float(scores[order[0]]) if len(order) else -math.inf, found,
                        scores[order], problem.calls, time.perf_counter() - t0,
                        evaluated=take(res, order) if len(order) else None,
                        coarse_best=coarse_best,
                        stats={"engine": problem.engine_space,
                               "strategies_covered": int(len(units)),
                               "concurrency": "every integer"})
