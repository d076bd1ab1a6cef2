"""Percentile SLOs in a serve search (``lts search --phase serve --slo-percentile P``).

The searches rank by the analytic closed loop, whose TTFT and TPOT are means; a p90 promise is
about the tail. The analytic model cannot prove a percentile, so the answer is checked:

1. the search runs as without the flag, its limits on the means (a deployment that misses a
   limit at the mean misses it at the 90th and 99th percentiles of most runs, not always at the
   50th: the check below lowers a concurrency, it never raises one above the search's);
2. each of its top deployments (at most ``CHECKED``) is simulated (``serving.simulate``) under
   the benchmark its users would run: 10 x C requests at once behind a concurrency of C, input
   and output lengths each uniform over [0.8 L, L] (InferenceX's protocol: equal lengths would
   keep the first burst's cohort in step for the whole run, which no production load does), at
   the concurrency the search chose; where the P-th percentile of
   TTFT or TPOT misses its limit, the largest concurrency that meets both is found by bisection
   (each a simulation);
3. the checked deployments are ranked by their simulated output tokens/s per GPU of the budget
   at that concurrency: the first is the P-th percentile answer. They are taken in the search's
   order, and one whose search score is below the best simulated score so far by more than
   ``MARGIN`` is not simulated (``skipped``): a simulated steady loop is within 2% of the
   analytic one (tests/test_simulate.py) and a lower concurrency serves fewer tokens/s.

What is proven: the exact search's optimum of the mean objective. What is checked: that the
P-th percentile answer meets its limits in one simulated run of that load (seed 0), and that it
is the best of the checked deployments, not of the whole space.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..serving.simulate import Load, prepare, run
from ..specs.errors import LtsError
from ..specs.strategy import CONCURRENCY, instance_gpus

CHECKED = 10          # top deployments a percentile search simulates
RUNS_PER_PROMPT = 10  # requests per unit of concurrency (InferenceX: --num-prompts $((CONC*10)))
BISECTIONS = 6        # simulations that narrow a concurrency down (to within 1/64 of it)
RANGE_RATIO = 0.8     # lengths over [0.8 L, L] (InferenceX benchmark_lib.sh --random-range-ratio)
MARGIN = 1.05         # a search score this much below the best simulated one is not simulated


@dataclass
class Checked:
    """One deployment of the search's top, checked by simulation."""
    row: np.ndarray                 # its strategy row at the search's concurrency
    analytic_score: float           # the search's objective (tokens/s per GPU of the budget)
    concurrency: int                # the largest concurrency meeting the limits (0: none)
    score: float                    # simulated output tokens/s per GPU of the budget there
    summary: dict | None            # the simulation's summary there (or at the search's
                                    # concurrency when none met; None: skipped)
    simulations: int = 0

    @property
    def skipped(self) -> bool:
        return self.summary is None


@dataclass
class PercentileCheck:
    percentile: int
    checked: list = field(default_factory=list)    # Checked, best simulated first
    wall_s: float = 0.0

    @property
    def best(self) -> Checked | None:
        return self.checked[0] if self.checked and self.checked[0].concurrency else None


def _meets(summary: dict, p: int, ttft_ms, tpot_ms) -> bool:
    key = f"p{p}"
    ok = True
    if ttft_ms:
        ok &= summary["ttft_ms"][key] <= ttft_ms
    if tpot_ms and math.isfinite(summary["tpot_ms"][key]):
        ok &= summary["tpot_ms"][key] <= tpot_ms
    return bool(ok)


def check(problem, top_rows, top_scores, percentile: int, progress=None) -> PercentileCheck:
    """Simulate the top deployments of a serve search (rows [K, WIDTH], their concurrency in
    column ``CONCURRENCY``; scores the search's) at the ``percentile`` (module docstring)."""
    t0 = time.perf_counter()
    out = PercentileCheck(int(percentile))
    pcts = tuple(sorted({50, 90, 99, int(percentile)}))
    best_score = 0.0
    for row, score in list(zip(top_rows, top_scores))[:CHECKED]:
        row = np.array(row, dtype=np.int64)
        if score * MARGIN < best_score:
            out.checked.append(Checked(row, float(score), 0, 0.0, None))
            continue
        c0 = max(int(row[CONCURRENCY]), 1)
        gpus = int(instance_gpus(row))
        fill = float(problem.fill(gpus))       # the share of the budget its copies keep busy

        def load(c):
            return Load(isl=problem.isl, osl=problem.osl, num_prompts=RUNS_PER_PROMPT * c,
                        max_concurrency=c, range_ratio=RANGE_RATIO)
        try:
            dep = prepare(problem.model, problem.topo, row, problem.engine, [load(c0)],
                          problem.work.gpus)
        except LtsError:
            continue
        sims = 0

        def at(c):
            nonlocal sims
            sims += 1
            s = run(dep, load(c)).summary(problem.ttft_slo_ms, problem.tpot_slo_ms, pcts)
            if progress is not None:
                progress(1)
            return s
        s = at(c0)
        best_c, best_s = (c0, s) if _meets(s, percentile, problem.ttft_slo_ms,
                                            problem.tpot_slo_ms) else (0, None)
        if not best_c:
            lo, hi, lo_s = 0, c0, None          # lo meets (0: none known), hi does not
            for _ in range(BISECTIONS):
                if hi - lo <= 1:
                    break
                mid = max((lo + hi) // 2, 1) if lo else max(hi // 2, 1)
                s_mid = at(mid)
                if _meets(s_mid, percentile, problem.ttft_slo_ms, problem.tpot_slo_ms):
                    lo, lo_s = mid, s_mid
                else:
                    hi = mid
                    if mid == 1:
                        break
            best_c, best_s = (lo, lo_s) if lo else (0, s)
        sim_score = best_s["output_tokens_per_s"] / gpus * fill if best_c else 0.0
        best_score = max(best_score, sim_score)
        out.checked.append(Checked(row, float(score), best_c, sim_score, best_s, sims))
    out.checked.sort(key=lambda c: (c.skipped, -c.score))
    out.wall_s = time.perf_counter() - t0
    return out
