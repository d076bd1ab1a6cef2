"""Finite-difference gradient checks (the CS231n ``gradient_check.py`` pattern), float64.

- ``eval_numerical_gradient(f, x)``: centred differences of a scalar function.
- ``eval_numerical_gradient_array(f, x, df)``: centred differences of an array function, dotted
  with a (random) upstream gradient ``df``, i.e. a vector-Jacobian product (llm.c's
  ``fakeloss = (out * dout).sum()`` trick).
- ``grad_check_sparse(f, x, analytic, rng)``: the same at a few random indices of a large array.
- ``rel_error(x, y) = max(|x - y| / max(1e-8, |x| + |y|))``.

All helpers perturb ``x`` in place and restore it, so ``f`` may close over ``x``.
"""
from __future__ import annotations

import numpy as np


def rel_error(x, y):
    """Maximum elementwise relative error, with the CS231n 1e-8 floor on the denominator."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float(np.max(np.abs(x - y) / np.maximum(1e-8, np.abs(x) + np.abs(y))))


def _centred(f, x, ix, h):
    """(f at x[ix] + h, f at x[ix] - h), leaving x unchanged; outputs copied as float64."""
    old = x[ix]
    x[ix] = old + h
    pos = np.array(f(), dtype=np.float64, copy=True)
    x[ix] = old - h
    neg = np.array(f(), dtype=np.float64, copy=True)
    x[ix] = old
    return pos, neg


def eval_numerical_gradient(f, x, h=1e-5):  # f: () -> float, x: [...] -> [...]
    """Numerical gradient of the scalar ``f()`` with respect to every entry of ``x``."""
    grad = np.zeros_like(x, dtype=np.float64)
    for ix in np.ndindex(x.shape):
        pos, neg = _centred(f, x, ix, h)
        grad[ix] = (pos - neg) / (2.0 * h)
    return grad


def eval_numerical_gradient_array(f, x, df, h=1e-5):  # f: () -> [...out], x: [...], df: [...out]
    """Numerical vector-Jacobian product ``sum(df * d f() / d x)`` for every entry of ``x``."""
    grad = np.zeros_like(x, dtype=np.float64)
    for ix in np.ndindex(x.shape):
        pos, neg = _centred(f, x, ix, h)
        grad[ix] = np.sum((pos - neg) * df) / (2.0 * h)
    return grad


def grad_check_sparse(f, x, analytic_grad, rng, num_checks=10, h=1e-5, where=None):
    """Relative error between ``analytic_grad`` and centred differences of scalar ``f()``.

    Checks ``num_checks`` indices of ``x`` drawn with ``rng`` without replacement (restricted to
    the entries where the bool array ``where`` is True, if given) and returns the largest
    relative error among them.
    """
    candidates = np.arange(x.size) if where is None else np.flatnonzero(where)
    n = min(num_checks, candidates.size)
    flat = rng.choice(candidates, size=n, replace=False)
    num, ana = np.empty(n), np.empty(n)
    for j, i in enumerate(flat):
        ix = np.unravel_index(i, x.shape)
        pos, neg = _centred(f, x, ix, h)
        num[j] = (pos - neg) / (2.0 * h)
        ana[j] = analytic_grad[ix]
    return rel_error(num, ana)
