"""``lts bench``: how fast this machine evaluates and searches, all in process.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..cost.layouts import pack
from ..cost.model import breakdown, evaluate, kernel
from .exact import search_exact
from .problems import Problem
from .methods import search_ppo
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import degree_dict, make_row
from ..specs.workload import Workload


@dataclass
class Bench:
    """The JSON of ``lts bench`` (these names): seconds, and strategies per second."""
    model: str
    topology: str
    evaluations: int
    evaluations_per_s: float           # evaluate() over ``evaluations`` random rows, the coarse
                                       # grid's tables and fused pieces built (a search's state);
                                       # timed in turn with ``_grouped`` and ``kernel_per_s``
    evaluations_per_s_fusing: float    # the same rows, the fused pieces built in the call
    evaluations_per_s_cold: float      # the same rows, grouped and all tables built in the call
    evaluations_per_s_grouped: float   # the same rows given in coarse-row order (as ``kernel``
                                       # takes them), tables and fused pieces built
    kernel_per_s: float                # the evaluator's arithmetic alone on the same rows
                                       # (``cost.model.kernel``: packed, in coarse-row order)
    kernel_per_s_random: float         # the same on the rows in random order (packed), as
                                       # they come: no sort
    estimate_wall_s: float             # one breakdown (what ``lts estimate`` costs)
    search_wall_s: float | None = None     # ppo, budget 4000 calls, seed 0 (None: not measured)
    exact_wall_s: float | None = None      # the exact optimum
    simulate_wall_s: float | None = None   # a benchmark run of the exact optimum's degrees
                                           # (serving.simulate: 10 x 512 requests of 1k/1k, [0.8 L, L], at
                                           # once behind 512, generic engine; None: not run)
    simulate_strategy: str | None = None   # that deployment


CHUNK = 1_000_000      # rows evaluated at once (the Result of 10^7 rows held 3.7 GB)


def measure(model: ModelSpec, topo: TopologySpec, evaluations: int = 1_000_000, seed: int = 0,
            searches: bool = True) -> Bench:
    """Time the evaluator on ``evaluations`` uniform random strategies (``seed``) of the decode
    workload, one estimate, and (``searches``) a 4000-call ppo search and the exact search.

    The evaluator is timed on the same rows: with the tables of the space's coarse grid and
    their fused pieces built and each row's coarse index given (the state a search is in once
    it has asked 32 strategies of each row it visits: ``cost.model.FusedRows``), the rows in
    random order and in coarse-row order, in turn with its arithmetic alone
    (``side_by_side``); then, each the median of three calls, with the fused pieces built
    inside the call, and cold, from strategy rows alone (grouping the coarse rows and building
    all their tables inside the call)."""
    work = Workload()
    problem = Problem(model, topo, work)

    def rows(k, n):
        """Chunk k of the rows (n of them): strategies and their coarse indices (chunk 0 from
        ``seed`` itself, chunk k from (seed, k))."""
        rng = np.random.default_rng(seed if k == 0 else [seed, k])
        idx = problem.space.sample(rng, n)
        return problem.space.decode(idx), problem.coarse_index(idx)

    sizes = [min(CHUNK, evaluations - i) for i in range(0, evaluations, CHUNK)]

    def per_s(fresh=False, indexed=True, **kw):
        """Strategies per second of evaluate(strategies, **kw): per chunk of at most CHUNK rows
        (memory stays one chunk's), the median of three calls after one untimed call of the
        same size (the first call in a process also pays for the memory the allocator maps for
        its arrays), summed over the chunks; ``fresh``: the fused pieces dropped before each;
        ``indexed``: each row's coarse index given."""
        total = 0.0
        for k, n in enumerate(sizes):
            strategies, g = rows(k, n)
            extra = {"coarse_index": g} if indexed else {}
            evaluate(model, topo, work, strategies, **kw, **extra)
            times = []
            for _ in range(3):
                if fresh:
                    problem.tables.extra.pop("fused", None)
                t0 = time.perf_counter()
                evaluate(model, topo, work, strategies, **kw, **extra)
                times.append(time.perf_counter() - t0)
            total += float(np.median(times))
        return evaluations / total

    def side_by_side():
        """Strategies per second of the evaluator on the rows in random order and in coarse-row
        order, and of ``cost.model.kernel`` on the same two (packed beforehand, untimed), with
        the tables and fused pieces built: the four timed in turn, three calls each (medians),
        so that all meet the heap in the same state (a 1M-row call allocates and frees ~100 MB;
        timed apart, a later run could find its arrays' memory mapped already and take its
        ``finish`` in half the time). The kernel's figures must equal the evaluator's."""
        total = np.zeros(4)
        for k, n in enumerate(sizes):
            mixed, g_mixed = rows(k, n)
            order = np.argsort(g_mixed, kind="stable")      # the same rows in coarse-row order
            strategies, g = mixed[order], g_mixed[order]
            code, code_mixed = pack(strategies), pack(mixed)
            evaluate(model, topo, work, mixed, tables=problem.tables, coarse_index=g_mixed)
            got = kernel(model, topo, work, problem.tables, g, code)
            want = evaluate(model, topo, work, strategies, tables=problem.tables,
                            coarse_index=g)
            if not (np.array_equal(got[0], want.valid) and
                    np.array_equal(got[2], want.tokens_per_s_per_gpu, equal_nan=True)):
                raise AssertionError("cost.model.kernel differs from evaluate")
            del got, want
            calls = (lambda: evaluate(model, topo, work, mixed, tables=problem.tables,
                                      coarse_index=g_mixed),
                     lambda: evaluate(model, topo, work, strategies, tables=problem.tables,
                                      coarse_index=g),
                     lambda: kernel(model, topo, work, problem.tables, g, code),
                     lambda: kernel(model, topo, work, problem.tables, g_mixed, code_mixed))
            times = [[], [], [], []]
            for _ in range(3):
                for t, call in zip(times, calls):
                    t0 = time.perf_counter()
                    call()
                    t.append(time.perf_counter() - t0)
            total += np.median(times, axis=1)
        return tuple(evaluations / total)

    warm, grouped, plain, plain_random = side_by_side()
    fusing = per_s(fresh=True, tables=problem.tables)
    cold = per_s(indexed=False)
    t0 = time.perf_counter()
    breakdown(model, topo, work, make_row(tp=8, batch=64))
    out = Bench(model.name, topo.name, evaluations, warm, fusing, cold, grouped, plain,
                plain_random, time.perf_counter() - t0)
    if searches:
        problem = Problem(model, topo, work)
        t0 = time.perf_counter()
        search_ppo(problem, 4000, np.random.default_rng(0))
        out.search_wall_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        best = search_exact(problem).best
        out.exact_wall_s = time.perf_counter() - t0
        if best is not None:
            out.simulate_wall_s, out.simulate_strategy = _simulate(model, topo, best)
    return out


def _simulate(model, topo, best) -> tuple:
    """Seconds of one benchmark run (docs/design.md §10's target: 10 x C requests at C = 512,
    1,024 / 1,024 tokens, spread over [0.8 L, L] as InferenceX spreads them: equal lengths keep
    the first burst in step, a run of few events) of ``best``'s degrees with Megatron's per-op choices, the step table
    built in the time; (None, None) where not one request fits."""
    from ..engines import ENGINES, GENERIC
    from ..serving.simulate import Load, simulate
    from ..specs.errors import LtsError
    from ..specs.strategy import format_strategy
    row = make_row(**degree_dict(best))
    t0 = time.perf_counter()
    try:
        simulate(model, topo, row, ENGINES[GENERIC].profile,
                 Load(isl=1024, osl=1024, num_prompts=5120, max_concurrency=512,
                      range_ratio=0.8))
    except LtsError:
        return None, None
    text = format_strategy(row, only_changed=True, sep=", ").rsplit(", batch", 1)[0]
    return time.perf_counter() - t0, text
