"""Why the best strategy wins (or loses) against Megatron's per-op choices at the same
coarse row: the collectives it avoids, adds or resizes and the step-time difference, from the
two per-op breakdowns of a ``methods.Versus``. The report formats the dict (``lts search``'s
``vs_megatron``).

Times are in microseconds, the unit the JSON carries, and summed in it: each op's seconds are
scaled to µs before the sums (as ``report.results.ops_us`` scales them), so the sums keep their bits.

Imports nothing from lts; a ``Versus`` is read by its attributes.
"""
from __future__ import annotations

import math

US_PER_S = 1e6


def _collectives(ops: list) -> dict:
    """(kind, group, op) -> (instances, total µs) of a breakdown, summed over the model."""
    out = {}
    for op in ops:
        for c in op["collectives"]:
            key = (c["kind"], c["group"], op["name"])
            n, t = out.get(key, (0, 0.0))
            out[key] = (n + c["count"], t + c["time_s"] * US_PER_S * c["count"])
    return out


def _op_time_us(ops: list) -> float:
    """The ops' time per step in µs, summed over the model."""
    return sum(op["time_s"] * US_PER_S * op["count"] for op in ops)


def _ms(s: float):
    """Seconds -> ms; NaN/inf -> None."""
    ms = float(s * 1e3)
    return ms if math.isfinite(ms) else None


def explain(versus) -> dict:
    """The comparison of a ``methods.Versus`` (one step of the best strategy and one of
    Megatron's choices, ``cost.model.breakdown``'s Result and ops each): ``avoids`` (collectives
    only Megatron's choices have), ``adds`` (only the best has), ``resized`` (both, differing by
    more than 1% and 1 µs; ``megatron_time_us`` beside), each sorted by the time at stake, with
    (kind, group, op, count, time_us) summed over the model; ``collectives_delta_us`` and
    ``ops_delta_us`` (best minus Megatron, summed over the model); ``step_ms`` and
    ``megatron_step_ms``."""
    ops, mops = versus.ops, versus.megatron_ops
    a, b = _collectives(ops), _collectives(mops)

    def entry(key, n, t, **extra):
        return {"kind": key[0], "group": key[1], "op": key[2], "count": int(n),
                "time_us": float(t), **extra}

    avoids = [entry(k, *b[k]) for k in b if k not in a]
    adds = [entry(k, *a[k]) for k in a if k not in b]
    resized = [entry(k, *a[k], megatron_time_us=float(b[k][1])) for k in a
               if k in b and abs(a[k][1] - b[k][1]) > max(0.01 * max(a[k][1], b[k][1]), 1.0)]
    for lst, key in ((avoids, "time_us"), (adds, "time_us")):
        lst.sort(key=lambda e: -e[key])
    resized.sort(key=lambda e: -abs(e["time_us"] - e["megatron_time_us"]))
    coll = sum(t for _, t in a.values()) - sum(t for _, t in b.values())
    return {"avoids": avoids, "adds": adds, "resized": resized,
            "collectives_delta_us": float(coll),
            "ops_delta_us": float(_op_time_us(ops) - _op_time_us(mops)),
            "step_ms": _ms(versus.step.step_s[0]),
            "megatron_step_ms": _ms(versus.megatron_step.step_s[0])}
