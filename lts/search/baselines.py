"""The baseline searches (docs/paper.md §8), each ``(problem, budget, rng, top, progress)`` ->
``SearchResult``:

- ``random``: uniform sampling.
- ``random-walk``: from the current point resample one random entry, always accept.
- ``anneal``: one-entry mutation, Metropolis acceptance on raw tokens/s/GPU, T0 = 100
  cosine-annealed to 0 over the budget; invalid proposals are rejected but consume budget.
- ``megatron``: Megatron's per-op sharding, exhaustive over the coarse rows (``search_fixed``:
  any fixed per-op choices, optionally on part of the grid; ``lts.launch.emit`` uses it for what an
  engine runs).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .problems import Problem, SearchResult, Tracker
from ..specs.strategy import MEGATRON, Space

CHUNK = 65536        # rows per vectorized evaluation in random and random-walk


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
    """Simulated annealing (docs/paper.md §8): one-entry mutation, Metropolis acceptance
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


def search_fixed(problem: Problem, choices, top: int = 10, where=None, count: bool = True,
                 method: str = "megatron") -> SearchResult:
    """The per-op ``choices`` fixed, exhaustive over the coarse rows: all of the grid, or those
    where ``where`` [G] is true (``count=False``: no evaluator call counted)."""
    t0 = time.perf_counter()
    tr = Tracker(problem, top)
    idx = problem.fixed_choice_rows(choices)
    if where is not None:
        idx = idx[where]
    tr.add(idx, problem.score(problem.evaluate(idx, count=count)))
    return tr.result(method, t0)


def search_megatron(problem: Problem, budget: int, rng, top: int = 10,
                    progress=None) -> SearchResult:
    """Megatron's per-op sharding fixed, exhaustive over the coarse rows (the paper's heuristic
    baseline). Ignores the budget: the coarse grid is small."""
    sr = search_fixed(problem, MEGATRON, top)
    if progress:
        progress(budget)
    return sr
