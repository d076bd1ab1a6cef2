"""A deployment's step times as tables, for the simulator (docs/design.md §10).

A step of a continuous-batching engine holds d decoding requests whose caches hold c tokens on
average and a prefill chunk of p tokens. The simulator asks for thousands of steps, so they are
not costed one by one: the cost model (``cost.model.evaluate``) costs a grid of steps once, each
as one pass over the model with its weights read once (``specs.workload.Workload.chunk``: a step
of exactly d decoders beside a chunk of p tokens), and ``StepTable.time`` interpolates:

- d on a grid of about 1.4x steps from 0 to the most requests the deployment runs, p on a grid
  of 2x steps from 0 to the step's token budget (linearly between grid points: a roofline is
  piecewise linear in tokens, and the grid is fine where its kinks are);
- c at two contexts, the shortest prompt and the longest prompt plus output: a decode step's
  time is affine in the context its attention reads (it reads every cached token once).

The prompts in a chunk are costed at the load's mean prompt length (their attention over the
prompt so far, ``kv.chunk_reads``). Each step also pays the engine's time per step.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..specs.strategy import BATCH
from ..specs.workload import Workload


def _grid(top: int, ratio: float, first: tuple) -> list:
    """``first``'s values below ``top``, then integers growing by ``ratio``, then ``top``."""
    out = [v for v in first if v < top]
    x = out[-1]
    while True:
        x = max(int(np.ceil(x * ratio)), x + 1)
        if x >= top:
            return out + [top]
        out.append(x)


class StepTable:
    """Step times of one deployment (a strategy row) on one engine profile."""

    def __init__(self, ev, engine, row, isl: int, osl: int, max_decoders: int, budget: int,
                 context_lo: int, context_hi: int, gpus: int = 0, attn_dp_tp: bool = False):
        row = np.asarray(row, dtype=np.int64)
        self.overhead = float(engine.step_overhead_s)
        self.d = _grid(max(int(max_decoders), 1), 1.4, (0, 1, 2, 3, 4))
        self.p = _grid(max(int(budget), 1), 2.0, (0, 16))
        self.c = (float(context_lo), float(max(context_hi, context_lo + 1)))
        rows = np.tile(row, (len(self.d), 1))
        rows[:, BATCH] = self.d
        # [context, p, d]
        table = np.empty((2, len(self.p), len(self.d)))
        for ci, c in enumerate(self.c):
            for pi, p in enumerate(self.p):
                if p == 0:
                    work = Workload("decode", int(c), tpot_slo_ms=float("inf"), gpus=gpus)
                else:
                    work = Workload("mixed", int(c), tpot_slo_ms=float("inf"), gpus=gpus,
                                    isl=int(isl), osl=int(osl), step_tokens=engine.step_tokens,
                                    budget_per_rank=engine.budget_per_rank,
                                    attn_dp_tp=bool(attn_dp_tp), chunk=int(p))
                table[ci, pi] = ev(work, rows).step_s
        if not np.isfinite(table).all():
            raise ValueError("a step of this deployment has no finite time")
        self.table = table
        self.slope_c = (table[1] - table[0]) / (self.c[1] - self.c[0])   # [p, d] per token
        self._t0 = table[0].tolist()
        self._sl = self.slope_c.tolist()

    def _find(self, grid, x):
        """(index i, weight w): x between grid[i] and grid[i+1], w the share of grid[i+1]."""
        if x >= grid[-1]:
            return len(grid) - 2, 1.0 + (x - grid[-1]) / max(grid[-1] - grid[-2], 1)
        i = max(bisect.bisect_right(grid, x) - 1, 0)
        return i, (x - grid[i]) / (grid[i + 1] - grid[i])

    def decode_line(self, d: int) -> tuple:
        """(a, b): a decode-only step of d requests whose caches hold c tokens on average takes
        a + b * c seconds (the engine's time per step included)."""
        i, w = self._find(self.d, d)
        t0, sl = self._t0[0], self._sl[0]
        a = t0[i] + w * (t0[i + 1] - t0[i]) - self.c[0] * (sl[i] + w * (sl[i + 1] - sl[i]))
        return a + self.overhead, sl[i] + w * (sl[i + 1] - sl[i])

    def time(self, d: int, c: float, p: int) -> float:
        """Seconds of a step of d decoders at mean context c beside a prefill chunk of p."""
        i, w = self._find(self.d, d)
        j, v = self._find(self.p, p)
        t0, sl = self._t0, self._sl

        def at(rows, k):
            return (1 - w) * rows[k][i] + w * rows[k][i + 1]
        base = (1 - v) * at(t0, j) + v * at(t0, j + 1)
        slope = (1 - v) * at(sl, j) + v * at(sl, j + 1)
        return base + slope * (c - self.c[0]) + self.overhead

