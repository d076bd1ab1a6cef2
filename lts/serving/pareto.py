"""The Pareto front of two objectives (higher is better on both): the trade-offs lts reports.

Imports nothing from lts.
"""
from __future__ import annotations

import numpy as np


def pareto_front(x, y, tie=None) -> np.ndarray:
    """Indices of the points that no other point matches or beats on both x and y (higher is
    better on both), in order of increasing x: for each x reached, the highest y at or beyond
    it. Of points equal on both, the one with the least ``tie`` is kept (then the first)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    tie = np.zeros(len(x)) if tie is None else np.asarray(tie, dtype=np.float64)
    order = np.lexsort((np.arange(len(x)), tie, -y, -x))  # x falling, y falling, least tie
    ys = y[order]
    above = ys > np.maximum.accumulate(np.concatenate([[-np.inf], ys[:-1]]))
    return order[above][::-1]
