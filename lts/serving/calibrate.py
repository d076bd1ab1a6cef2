"""``lts calibrate``: fit a few physical constants to a user's own measurements (issue 25).

What one cluster's measurement file (one topology, one engine) can identify, each a knob with
bounds that keep it physical:

- ``memory_scale``: every HBM rate of the topology (``memory_efficiency``, ``fp8_memory_efficiency``,
  the ``[gpu.gemm]`` and ``[gpu.grouped_gemm]`` memory shares) times one factor, capped at 1;
- ``compute_scale``: every compute rate (``compute_efficiency``, ``fp8_``/``fp4_compute_efficiency``,
  the tables' compute shares) times one factor, capped at 1;
- ``step_overhead_us``: the engine's time per step outside the kernels;
- ``request_overhead_ms``: the engine's time per request (HTTP, tokenization), on TTFT.

The fit: robust (soft-L1) least squares of log2(predicted / measured) over the training rows
(``lts.serving.validate`` with the knobs applied), by Levenberg-Marquardt within each knob's
bounds (the scales in log space, the overheads in ms), the Jacobian by finite differences. Its
standard errors (sigma^2 (J^T J)^-1) say what the rows identify: while a knob's error is above
its threshold (a quarter of a scale, 30% of an overhead), the one furthest above is *not
identified*: kept at the base value, the others refitted; the report says which. The training rows are a share
of the measured points (rows sharing an id up to the metric), spread evenly in id order; the
rest are held out and only reported.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..engines import ENGINES
from ..engines.profiles import EngineProfile
from ..specs import TopologySpec
from ..specs.errors import LtsError, SpecError, cut_quoted, plain
from ..specs.units import FORMAT_ALIASES, MS, US, WEIGHT_FORMATS
from . import validate as v

# knob -> (kind, the fitted parameter's transform, its bounds in that space, its identification
# threshold: the largest standard error, in that space, a fitted knob may have)
KNOBS = {
    "memory_scale": ("topology", "log", (math.log(0.25), math.log(2.0)), 0.25),
    "compute_scale": ("topology", "log", (math.log(0.25), math.log(2.0)), 0.25),
    "step_overhead_us": ("engine", "ms", (0.0, 20.0), None),
    "request_overhead_ms": ("engine", "ms", (0.0, 500.0), None),
    # per kernel launched (the per-layer fixed costs: a MoE layer's routing, permutation and
    # activation kernels, each op's launch)
    "kernel_overhead_us": ("topology", "ms", (0.0, 0.02), None),
    # collectives by message size: large ones (the ring) at the share of each link's rate
    # reached in a serving step, times one factor; small ones (the engines' one-shot all-reduce,
    # up to its size limit) at the inner link's fixed time per call
    "collective_scale": ("topology", "log", (math.log(0.25), math.log(4.0)), 0.25),
    "oneshot_latency_us": ("topology", "ms", (0.0, 0.05), None),
    # per weight format beyond the rows' commonest (``memory_scale@nvfp4``): that format's GEMM
    # and grouped-GEMM rates relative to the common scales (rows of two formats tell them apart)
    "memory_scale@": ("topology", "log", (math.log(0.25), math.log(4.0)), 0.25),
    "compute_scale@": ("topology", "log", (math.log(0.25), math.log(4.0)), 0.25),
}
US_KNOBS = ("kernel_overhead_us", "oneshot_latency_us")   # fitted in ms (their step: 0.5 us)
ITERATIONS = 25        # Levenberg-Marquardt iterations at most
# The command's work, bounded by how it is sized (issue 38), in validate.work_s's seconds (a
# count of simulated deployments and requests and serve calls; 1-1.7x the time measured here on
# the shipped files): every row is predicted twice (before and after) and the training rows as
# many times as fit in the rest of BOUND_S, at most EVALUATIONS (each Levenberg-Marquardt step
# takes one, a Jacobian one per free knob). Where fewer than FEWEST fit, the training points are
# cut (in an even spread, the rest held out) until FEWEST do.
BOUND_S = 60.0
FIRST_SHARE = 0.375    # of BOUND_S, a first prediction of every row at most (twice that leaves a
                       # quarter to fit in)
EVALUATIONS = 400      # the unbounded fits of tests/test_calibrate.py take 66-121
FEWEST = 80
GAIN = 1e-3            # a taken step that lowers the loss by less than this share ends a fit
STEP = 0.02            # finite-difference step in each parameter's space (log, or ms; a
KERNEL_STEP = 0.0005   # kernel's launch time: 0.5 us)


def scaled(topo: TopologySpec, memory: float, compute: float) -> TopologySpec:
    """The topology with every HBM rate times ``memory`` and every compute rate times
    ``compute``, each capped at 1 (0 keeps meaning "not given")."""
    m = lambda x: min(x * memory, 1.0) if x else x          # noqa: E731
    c = lambda x: min(x * compute, 1.0) if x else x         # noqa: E731
    return replace(topo, memory_efficiency=m(topo.memory_efficiency),
                   fp8_memory_efficiency=m(topo.fp8_memory_efficiency),
                   compute_efficiency=c(topo.compute_efficiency),
                   fp8_compute_efficiency=c(topo.fp8_compute_efficiency),
                   fp4_compute_efficiency=c(topo.fp4_compute_efficiency),
                   gemm={f: (c(a), m(b)) for f, (a, b) in topo.gemm.items()},
                   grouped={f: (tuple(c(x) for x in a), m(b))
                            for f, (a, b) in topo.grouped.items()})


def _spec(name: str) -> tuple:
    """A knob's KNOBS entry (a per-format knob: its kind's, ``memory_scale@``)."""
    return KNOBS[name.split("@")[0] + "@" if "@" in name else name]


# a format whose rate a class key of the file gives (no [gpu.gemm] entry of its own may repeat it:
# specs.topology_from_dict): its per-format scale sets that key, shared by the class's formats
# without their own entry
_CLASS_KEYS = {"fp8": ("fp8_compute_efficiency", "fp8_memory_efficiency"),
               "nvfp4": ("fp4_compute_efficiency", None)}


def per_format(topo: TopologySpec, fmt: str, memory: float, compute: float) -> TopologySpec:
    """The topology with one weight format's dense GEMM rates (its own ``[gpu.gemm]`` entry, a
    class key that gives them, or else the rates it falls back to, now its own entry) and its
    grouped-GEMM rates times ``memory`` and ``compute``, each capped at 1."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    rates = [min(topo.compute_efficiency_for(fmt) * compute, 1.0),
             min(topo.weight_memory_efficiency_for(fmt) * memory, 1.0)]
    fields = {}
    if fmt not in topo.gemm:
        for i, key in enumerate(_CLASS_KEYS.get(fmt, (None, None))):
            if key and getattr(topo, key):
                fields[key], rates[i] = rates[i], 0.0
    gemm = dict(topo.gemm)
    if any(rates):
        gemm[fmt] = tuple(rates)
    grouped = dict(topo.grouped)
    if fmt in grouped:
        a, b = grouped[fmt]
        grouped[fmt] = (tuple(min(x * compute, 1.0) for x in a), min(b * memory, 1.0))
    return replace(topo, gemm=gemm, grouped=grouped, **fields)


def tuned_topology(topo: TopologySpec, knobs: dict) -> TopologySpec:
    """The topology with a knob setting's rates and times (``tuned``'s topology half). The
    knobs scale the roofline's rates, so the fitted topology costs every op by the roofline:
    one cluster's own measurements stand in for the measured-kernel tables (no ``kernels``)."""
    topo = scaled(topo, knobs["memory_scale"], knobs["compute_scale"])
    topo = replace(topo, kernel_gpu="", kernels=None)
    for fmt in sorted({k.split("@")[1] for k in knobs if "@" in k}):
        topo = per_format(topo, fmt, knobs.get(f"memory_scale@{fmt}", 1.0),
                          knobs.get(f"compute_scale@{fmt}", 1.0))
    if "kernel_overhead_us" in knobs:
        topo = replace(topo, kernel_overhead_s=max(knobs["kernel_overhead_us"], 0.0) * US)
    if "oneshot_latency_us" in knobs and topo.links and topo.links[0].oneshot_latency_s:
        inner = replace(topo.links[0],
                        oneshot_latency_s=max(knobs["oneshot_latency_us"], 0.0) * US)
        topo = replace(topo, links=(inner,) + tuple(topo.links[1:]))
    return topo


def tuned(knobs: dict):
    """The ``validate`` tune hook of a knob setting: (topology, profile) -> the tuned pair."""
    def tune(topo: TopologySpec, profile: EngineProfile):
        topo = tuned_topology(topo, knobs)
        if "collective_scale" in knobs:
            profile = replace(profile, collective_efficiency=min(
                (profile.collective_efficiency or topo.collective_efficiency)
                * knobs["collective_scale"], 1.0))
        profile = replace(profile, step_overhead_s=knobs["step_overhead_us"] * US
                          ).with_request_time(knobs["request_overhead_ms"] * MS)
        return topo, profile
    return tune


def _point(row_id: str) -> str:
    head, _, tail = row_id.rpartition("-")
    return head if head and tail in v.METRICS else row_id


HOLDOUTS = ("fraction", "isl", "concurrency")


def split(rows: list, train: float, holdout: str = "fraction") -> tuple:
    """(training rows, held-out rows). ``fraction``: of the measured points in id order, those
    at floor(i / train) for i < n x train (spread evenly); ``isl``: the (isl, osl) pairs in
    order, even positions trained (do the constants carry to request shapes never fitted?);
    ``concurrency``: the concurrencies up to the median trained, the higher held out (do they
    carry to loads never fitted?)."""
    if holdout == "isl":
        pairs = sorted({(r["isl"], r["osl"]) for r in rows})
        keep_pairs = set(pairs[0::2])
        inside = [(r["isl"], r["osl"]) in keep_pairs for r in rows]
    elif holdout == "concurrency":
        levels = sorted({r["concurrency"] or 0 for r in rows})
        top = levels[(len(levels) - 1) // 2]
        inside = [(r["concurrency"] or 0) <= top for r in rows]
    else:
        points = sorted({_point(r["id"]) for r in rows})
        n = len(points)
        keep = {points[min(int(i / train), n - 1)] for i in range(max(int(round(n * train)), 1))}
        inside = [_point(r["id"]) in keep for r in rows]
    return ([r for r, k in zip(rows, inside) if k], [r for r, k in zip(rows, inside) if not k])


def within_bound(path, train_rows: list, held_rows: list, read=None, used=None,
                 extra: float = 0.0) -> tuple:
    """(training rows, held-out rows, training points before any cut, predictions of the
    training rows the fit may make, the work each may take): two predictions of every row and
    those within ``BOUND_S`` (``validate.work_s``), at most ``EVALUATIONS``; where fewer than
    ``FEWEST`` fit, training points are cut (the longest prefix of an even spread that fits,
    found by bisection: those cut are held out) until ``FEWEST`` do. ``read``: the file's rows,
    read once; ``used``: the work of the predictions before and after the fit (else twice
    ``_every``); ``extra``: the first prediction's work past its count on the rows it predicted
    (simulated runs' scheduler steps past theirs, ``validate.STEPS_PER_REQUEST``): each of the
    fit's may take twice that. LtsError where the file's rows or one training point alone take
    too long."""
    read = read or v.read_measurements(path)
    used = 2 * _every(path, read) if used is None else used
    fit_s = BOUND_S - used - v.READ_S * (len(read[0]) + len(read[1]))
    points = sorted({_point(r["id"]) for r in train_rows})

    def seconds(keep):
        return v.validate(path, only={r["id"] for r in train_rows if _point(r["id"]) in keep},
                          work_only=True, read=read) + 2 * extra
    keep = set(points)
    cost = seconds(keep)
    if cost * FEWEST > fit_s:
        order = [points[i] for i in _spread(len(points))]
        lo, hi = 0, len(points)       # the first lo fit; the first hi do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if seconds(set(order[:mid])) * FEWEST <= fit_s:
                lo = mid
            else:
                hi = mid
        if lo == 0:
            one = seconds({order[0]})
            raise LtsError(f"{plain(str(path))}: fitting even one point ({order[0]}) takes "
                           f"{FEWEST} predictions of about {one:.1f} s each, over calibrate's "
                           "bound (docs/limits.md): its simulated runs hold too many requests")
        keep = set(order[:lo])
        cost = seconds(keep)
    allowed = int(min(EVALUATIONS, fit_s // max(cost, 1e-9)))
    if len(keep) == len(points):
        return train_rows, held_rows, len(points), allowed, cost
    cut = [r for r in train_rows if _point(r["id"]) not in keep]
    return ([r for r in train_rows if _point(r["id"]) in keep], held_rows + cut, len(points),
            allowed, cost)


def _every(path, read) -> float:
    """``validate.work_s`` of predicting every row once; LtsError where twice that leaves less
    than a quarter of ``BOUND_S`` to fit in."""
    every = v.validate(path, work_only=True, read=read)
    if every > FIRST_SHARE * BOUND_S:
        raise LtsError(f"{plain(str(path))}: predicting its rows takes about {every:.0f} s, and "
                       f"calibrate predicts them twice and fits within {BOUND_S:.0f} s "
                       "(docs/limits.md): fit fewer rows at a time (split the file)")
    return every


def _spread(n: int) -> list:
    """0..n-1 in the order that spreads any prefix evenly: the middle, then the quarters, ..."""
    order, seen, parts = [], set(), 1
    while len(order) < n:
        for j in range(parts):
            i = min(int((2 * j + 1) * n / (2 * parts)), n - 1)
            if i not in seen:
                seen.add(i)
                order.append(i)
        parts *= 2
        if parts > 2 * n:
            order += [i for i in range(n) if i not in seen]
    return order


def _loss(rows: list) -> float:
    return float(np.mean([r["log2_ratio"] ** 2 for r in rows])) if rows else math.inf


@dataclass
class Fit:
    """The result of ``calibrate``."""
    knobs: dict            # fitted values (base values where not identified)
    base: dict             # the base values
    identified: dict       # knob -> bool
    engine: str            # the engine whose profile was tuned
    release: str
    before: dict           # {"train": summary, "held_out": summary} at the base values
    after: dict
    train_points: int
    held_points: int
    skipped: list = field(default_factory=list)   # rows not fitted: validate's, with reasons
    evaluations: int = 0   # predictions of the training rows the fit made
    allowed: int = 0       # those calibrate's bound allowed (within_bound)
    asked_points: int = 0  # training points before calibrate's bound cut them (within_bound)
    bounded: bool = False  # the fit stopped at its bound: knobs still uncertain kept at base


def calibrate(path, train: float = 0.5, progress=None, holdout: str = "fraction") -> Fit:
    """Fit the knobs on the training rows (``split``: ``train`` of the measured points, or by
    ``holdout``) of a one-cluster, one-engine file. Rows lts cannot read or predict are left
    out, each with its reason (``Fit.skipped``, as ``lts validate`` lists them)."""
    read = meas, unread = v.read_measurements(path)
    if not meas:
        raise LtsError(v.none_predicted(path, unread))
    topos = {m.topology for m in meas}
    engines = {m.engine for m in meas}
    if len(topos) != 1 or len(engines) != 1:
        plural = lambda n, w: f"{n} {w}" + ("s" if n != 1 else "")      # noqa: E731
        raise SpecError(path, "", f"calibrate fits one cluster and one engine at a time: the "
                                  f"rows name {plural(len(topos), 'topology').replace('ys', 'ies')}"
                                  f" ({', '.join(sorted(topos))}) and "
                                  f"{plural(len(engines), 'engine')} ({', '.join(sorted(engines))})")
    every_s = _every(path, read)  # a file too large for the bound: refused before predicting
    # the first prediction within what _every allows it (its simulated runs may step past
    # their count, validate.STEPS_PER_REQUEST: the bounds below take what it took)
    meter = {}
    first = v.validate(path, read=read, bound_s=FIRST_SHARE * BOUND_S, meter=meter)
    base_rows = first["rows"]
    if not base_rows:
        raise LtsError(v.none_predicted(path, first["skipped"]))
    engine = engines.pop()
    releases = {r["profile"] for r in base_rows}
    if len(releases) != 1:
        raise SpecError(path, "", f"the rows take {len(releases)} {engine} profiles "
                                  f"({', '.join(sorted(releases))}: their engine_version): "
                                  "calibrate one release at a time")
    release = releases.pop()
    prof = v.PROFILES[engine][release]
    # the topology as validate loads it (a shipped name, or a file relative to the CSV)
    loader = v._Loader("topology", "topologies", v.load_topology, Path(path).resolve().parent)
    loader.why(meas[0].topology)
    topo0 = loader.get(meas[0].topology)
    base = {"memory_scale": 1.0, "compute_scale": 1.0,
            "step_overhead_us": round(prof.step_overhead_s / US, 6),
            "request_overhead_ms": round(prof.request_overhead_s / MS, 6),
            "kernel_overhead_us": round(topo0.kernel_overhead_s / US, 6),
            "collective_scale": 1.0}
    if topo0.links and topo0.links[0].oneshot_latency_s:
        base["oneshot_latency_us"] = round(topo0.links[0].oneshot_latency_s / US, 6)
    train_rows, held_rows = split(base_rows, train, holdout)
    # rows of several weight formats: each but the commonest gets its own two scales
    counts = {}
    for r in train_rows:
        fmt = FORMAT_ALIASES.get(r["weights"], r["weights"])
        if fmt in WEIGHT_FORMATS:
            counts[fmt] = counts.get(fmt, 0) + 1
    for fmt in sorted(counts, key=lambda f: (-counts[f], f))[1:]:
        base[f"memory_scale@{fmt}"] = base[f"compute_scale@{fmt}"] = 1.0
    if not train_rows:
        raise SpecError(path, "", f"--holdout {holdout} leaves no row to fit")
    if holdout != "fraction" and not held_rows:
        raise SpecError(path, "", f"--holdout {holdout} holds nothing out: the rows have one "
                                  f"{'(isl, osl) pair' if holdout == 'isl' else 'concurrency'}")
    # the rows predicted, once more after the fit: their count, and twice the steps their runs
    # took past it (another trial's runs may take more)
    base_ids = {r["id"] for r in base_rows}
    extra = meter["extra_s"]
    last_s = v.validate(path, only=base_ids, work_only=True, read=read) + 2 * extra
    train_rows, held_rows, asked, allowed, cost = within_bound(
        path, train_rows, held_rows, read, max(meter["work_s"], every_s) + last_s, extra)
    train_ids = {r["id"] for r in train_rows}

    def run(knobs, every: bool = False):
        """(training rows, every row predicted before when ``every``) predicted with ``knobs``,
        within the work they were sized for (a margin of 1e-9 for sums in another order): the
        fit predicts the training rows alone."""
        bound = last_s if every else cost
        rows = v.validate(path, tune=tuned(knobs), only=base_ids if every else train_ids,
                          read=read, bound_s=bound * (1 + 1e-9) + 1e-9)["rows"]
        return [r for r in rows if r["id"] in train_ids], rows

    names = list(base)
    order = sorted(train_ids)

    def to_theta(knobs):
        return np.array([math.log(knobs[n]) if _spec(n)[1] == "log" else
                         knobs[n] / (1000.0 if n.endswith("_us") else 1.0) for n in names])

    def to_knobs(theta):
        out = {}
        for n, t in zip(names, theta):
            out[n] = math.exp(t) if _spec(n)[1] == "log" else \
                t * (1000.0 if n.endswith("_us") else 1.0)
        return out

    seen = {}              # theta's bytes -> residuals: a point asked again is not predicted again

    def residuals(theta):
        key = np.asarray(theta, np.float64).tobytes()
        if key in seen:
            return seen[key]
        if len(seen) >= allowed:         # the callers ask only within the bound (left())
            raise AssertionError("calibrate asked past its bound of predictions")
        rows = {r["id"]: r["log2_ratio"] for r in run(to_knobs(theta))[0]}
        if progress:
            progress(1)
        # a row the trial cannot predict (memory) counts as 4x off; soft-L1 (Huber-like) so
        # that a few rows far off (queues the loop does not model) do not drive the fit:
        # rho(r) = 2 (sqrt(1 + r^2) - 1), least squares of sign(r) sqrt(rho(r))
        r = np.array([rows.get(i, 2.0) for i in order])
        seen[key] = np.sign(r) * np.sqrt(2.0 * (np.sqrt(1.0 + r * r) - 1.0))
        return seen[key]

    def left():
        return allowed - len(seen)

    steps = np.array([KERNEL_STEP if n in US_KNOBS else STEP for n in names])
    lo = np.array([_spec(n)[2][0] for n in names])
    hi = np.array([_spec(n)[2][1] for n in names])
    theta = to_theta(base)
    # what the rows can tell at all: a knob that moves no row by more than a hundredth of a
    # log2 unit over its threshold is not identified; then at least two rows a knob (fewer and
    # the fit passes through them, with no error left to judge by), keeping the knobs that move
    # the rows most
    free = np.ones(len(names), bool)
    jac = _jacobian(residuals, theta, residuals(theta), lo, hi, free, steps)
    reach = np.array([np.linalg.norm(jac[:, i]) * _threshold(n, theta[i])
                      for i, n in enumerate(names)])
    free = reach > 0.01
    for i in np.argsort(reach):
        if free.sum() * 2 <= len(order):
            break
        free[i] = False
    bounded, ratio = False, np.full(len(names), np.inf)    # not fitted yet: all uncertain
    at_base = to_theta(base)
    while free.any():     # fit; drop the least identified knob (kept at its base); refit
        k = int(free.sum())
        if left() < 2 * (k + 1) + 1:      # no refit within the bound: every knob still above
            bounded = True                # its threshold is kept at its base (one prediction
            free &= ratio <= 1.0          # kept for the check below)
            theta = np.where(free, theta, at_base)
            break
        theta, r, jac = _levenberg_marquardt(residuals, theta, lo, hi, free, steps,
                                             lambda: left() - 1)
        dof = max(len(r) - k, 1)
        # a direction the rows do not move (a zero or collinear column) gets a huge variance,
        # not pinv's zero
        jtj = jac[:, free].T @ jac[:, free]
        cov = np.linalg.inv(jtj + 1e-10 * np.eye(len(jtj))) * float(r @ r) / dof
        se = np.zeros(len(names))
        se[free] = np.sqrt(np.maximum(np.diag(cov), 0.0))
        ratio = np.array([se[i] / _threshold(names[i], theta[i]) if free[i] else 0.0
                          for i in range(len(names))])
        if ratio.max() <= 1.0:
            break
        if left() < 4 * (k + 1):
            # short of a refit for each: every knob above its threshold at once
            free &= ratio <= 1.0
        else:
            # of the knobs above their threshold, the most specific goes first (knobs the
            # rows cannot tell apart, such as the times per step, per kernel and per small
            # all-reduce on one model, are all uncertain; the generic one stays)
            free[max(np.flatnonzero(ratio > 1.0),
                     key=lambda i: (_specific(names[i]), ratio[i]))] = False
        theta = np.where(free, theta, at_base)
    if bounded and free.any():
        # the knobs kept were fitted beside some now at their base: kept only if together they
        # fit the training rows better than the base does
        fitted, plain_base = residuals(theta), residuals(at_base)
        if fitted @ fitted >= plain_base @ plain_base:
            free[:] = False
            theta = at_base
    knobs = {n: float(x) for n, x in to_knobs(theta).items()}
    identified = {n: bool(free[i]) for i, n in enumerate(names)}
    for n in names:
        if not identified[n]:
            knobs[n] = base[n]
    _, rows = run(knobs, every=True)
    held_ids = {r["id"] for r in held_rows}
    return Fit(knobs, base, identified, engine, release,
               {"train": v.summarize(train_rows, split=False),
                "held_out": v.summarize(held_rows, split=False),
                "train_by_metric": _by_metric(train_rows), "held_by_metric": _by_metric(held_rows)},
               {"train": v.summarize([r for r in rows if r["id"] in train_ids], split=False),
                "held_out": v.summarize([r for r in rows if r["id"] in held_ids], split=False),
                "train_by_metric": _by_metric([r for r in rows if r["id"] in train_ids]),
                "held_by_metric": _by_metric([r for r in rows if r["id"] in held_ids])},
               len({_point(r["id"]) for r in train_rows}),
               len({_point(r["id"]) for r in held_rows}), first["skipped"], len(seen), allowed,
               asked, bounded)


# the order in which knobs the rows cannot pin are dropped (most specific first)
_SPECIFIC = ("memory_scale@", "compute_scale@", "oneshot_latency_us", "kernel_overhead_us",
             "collective_scale", "request_overhead_ms", "step_overhead_us", "compute_scale",
             "memory_scale")


def _specific(name: str) -> int:
    return len(_SPECIFIC) - _SPECIFIC.index(name.split("@")[0] + "@" if "@" in name else name)


def _threshold(name: str, value: float) -> float:
    """The largest standard error a fitted knob may have (its parameter's space): a quarter of
    a scale (in log), 30% of an overhead (at least 0.2 ms; a kernel's 1 us)."""
    fixed = _spec(name)[3]
    if fixed is not None:
        return fixed
    return max(0.3 * abs(value), 0.001 if name in US_KNOBS else 0.2)


def _levenberg_marquardt(residuals, theta, lo, hi, free, steps, left=lambda: math.inf):
    """Least squares of ``residuals(theta)`` over the ``free`` parameters within [lo, hi]
    (projected Levenberg-Marquardt): (theta, residuals, Jacobian at theta). The Jacobian by
    forward differences at the start and the end; between, each taken step updates it by
    Broyden's rank-one rule (one prediction a step, not one a knob), and a step refused on an
    updated Jacobian differences it again before damping more. A step starts only while
    ``left()`` predictions hold it and the last Jacobian."""
    lam, k = 1e-2, int(free.sum())
    r = residuals(theta)
    jac = _jacobian(residuals, theta, r, lo, hi, free, steps)
    fresh = True           # jac differenced at theta (not updated)
    for _ in range(ITERATIONS):
        if left() < 1 + k + (0 if fresh else k):
            break
        a = jac[:, free].T @ jac[:, free]
        g = jac[:, free].T @ r
        step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
        trial = theta.copy()
        trial[free] = np.clip(theta[free] + step, lo[free], hi[free])
        rt = residuals(trial)
        if rt @ rt < r @ r - 1e-12:
            gain = (r @ r - rt @ rt) / max(r @ r, 1e-30)
            dx = (trial - theta)[free]
            jac[:, free] += np.outer(rt - r - jac[:, free] @ dx, dx) / max(dx @ dx, 1e-30)
            theta, r, lam, fresh = trial, rt, max(lam / 3, 1e-6), False
            if gain < GAIN:
                break
        elif not fresh:
            jac, fresh = _jacobian(residuals, theta, r, lo, hi, free, steps), True
        else:
            lam *= 5
            if lam > 1e6:
                break
    if not fresh:
        jac = _jacobian(residuals, theta, r, lo, hi, free, steps)
    return theta, r, jac


def _jacobian(residuals, theta, r, lo, hi, free, steps):
    jac = np.zeros((len(r), len(theta)))
    for i in np.flatnonzero(free):
        t = theta.copy()
        h = steps[i] if t[i] + steps[i] <= hi[i] else -steps[i]
        t[i] = t[i] + h
        jac[:, i] = (residuals(t) - r) / h
    return jac


def _by_metric(rows: list) -> dict:
    return {m: v.summarize([r for r in rows if r["metric"] == m], split=False)
            for m in sorted({r["metric"] for r in rows})}


# ----------------------------------------------------------------------------------------------
# the files it writes

_GPU_MEMORY = ("memory_efficiency", "fp8_memory_efficiency")
_GPU_COMPUTE = ("compute_efficiency", "fp8_compute_efficiency", "fp4_compute_efficiency")


_HEADER = re.compile(r"^(\[\[?)\s*([A-Za-z0-9_.\- ]+?)\s*\]\]?\s*(#.*)?$")


def topology_text(base_path, fit: Fit, note: str) -> str:
    """The base topology file with the fitted values written in (each the tuned topology's,
    ``tuned_topology``; each line commented with ``note``) and its name suffixed ``-fitted``. A
    format with its own fitted scales and no line of its own gets a ``[gpu.gemm]`` line."""
    from ..specs import load_topology
    old = load_topology(str(base_path))
    new_t = tuned_topology(old, fit.knobs)
    fmts = sorted(f for f in new_t.gemm if new_t.gemm[f] != old.gemm.get(f))

    def rate_line(key, line, c, m):
        body = ", ".join(f"{n} = {x:.4g}" for n, x in (("compute", c), ("memory", m)) if x)
        return f"{key} = {{ {body} }}   # {note}"

    out, section, link, written = [], "", -1, set()
    for line in Path(base_path).read_text(encoding="utf-8").splitlines():
        head = line.strip()
        header = _HEADER.match(head)        # [table] or [[array]], a comment after it or not
        if header:
            section = header.group(2).strip()
            link += header.group(1) == "[[" and section == "link"
        key = head.split("=", 1)[0].strip().strip('"').strip("'") \
            if "=" in head and not head.startswith("#") else ""
        code, _, _ = line.partition("#")
        was = code.partition("=")[2].strip()
        new = line
        if section == "gpu" and key == "kernels":
            new = f"# {line}   # {note}: this cluster's fitted rates replace the kernel tables"
        elif section == "" and key == "name":
            new = re.sub(r'"([^"]*)"', lambda mt: f'"{mt.group(1)}-fitted"', line, count=1)
        elif section == "gpu" and key == "kernel_overhead_us" and fit.identified.get(key) or \
                section == "link" and link == 0 and key == "oneshot_latency_us" and \
                fit.identified.get(key):
            new = f"{key} = {fit.knobs[key]:.4g}   # {note} (was {was})"
        elif section == "gpu" and key in _GPU_MEMORY + _GPU_COMPUTE and \
                getattr(new_t, key) != getattr(old, key):
            new = f"{key} = {getattr(new_t, key):.4g}   # {note} (was {was})"
        elif section == "gpu.gemm" and key in fmts:
            new = rate_line(key, line, *new_t.gemm[key]) + f" (was {was})"
            written.add(key)
        elif section == "gpu.grouped_gemm" and key in new_t.grouped and \
                new_t.grouped[key] != old.grouped.get(key):
            a, b = new_t.grouped[key]
            new = (f"{key} = {{ compute = [{', '.join(f'{x:.4g}' for x in a)}], "
                   f"memory = {b:.4g} }}   # {note} (was {was})")
        out.append(new)
        if head.startswith("[gpu.gemm]"):
            out += [rate_line(f, "", *new_t.gemm[f]) for f in fmts if f not in old.gemm]
            written |= {f for f in fmts if f not in old.gemm}
    missing = [f for f in fmts if f not in written]
    if missing:
        out += ["", "[gpu.gemm]"] + [rate_line(f, "", *new_t.gemm[f]) for f in missing]
    text = "\n".join(out) + "\n"
    _reads_back(text, base_path, new_t)
    return text


# rates are written to 4 significant digits: read back within half a unit of the last
_READ_BACK_RTOL = 1e-3


def _reads_back(text: str, base_path, want: TopologySpec) -> None:
    """LtsError unless ``text``, read as lts reads a topology file (``specs.toml_table``,
    ``topology_from_dict``), is ``want`` (but its name, source and path): a line of the base
    file the writer did not edit (one TOML writes in a way it does not know) never leaves a
    file that reads back rates other than the fitted ones."""
    from dataclasses import fields
    from ..specs import toml_table, topology_from_dict
    where, base = f"{Path(base_path).name} as calibrate writes it", plain(str(base_path))
    try:
        got = topology_from_dict(toml_table(text, where), where)
    except SpecError as e:
        raise LtsError(f"calibrate: the fitted topology would not read back ({e}); a line of "
                       f"{base} lts cannot rewrite, nothing written") from None
    for f in fields(TopologySpec):
        diff = None if f.name in ("name", "source", "path") else \
            _difference(getattr(got, f.name), getattr(want, f.name), f.name)
        if diff:
            raise LtsError(f"calibrate: the fitted topology would read {diff[0]} back as "
                           f"{cut_quoted(diff[1])}, not the fitted {cut_quoted(diff[2])}: a line "
                           f"of {base} lts "
                           f"cannot rewrite, nothing written")


def _difference(a, b, name: str):
    """Where ``a`` and ``b`` first differ, through dicts, tuples and dataclasses, floats
    beyond ``_READ_BACK_RTOL``: (the dotted name, a's value, b's value), or None."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() or \
            hasattr(a, "__dataclass_fields__") and type(a) is type(b):
        a, b = (vars(a), vars(b)) if hasattr(a, "__dataclass_fields__") else (a, b)
        return next(filter(None, (_difference(a[k], b[k], f"{name}.{k}") for k in a)), None)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return next(filter(None, (_difference(x, y, f"{name}[{i}]")
                                  for i, (x, y) in enumerate(zip(a, b)))), None)
    if isinstance(a, float) or isinstance(b, float):
        same = isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            math.isclose(a, b, rel_tol=_READ_BACK_RTOL, abs_tol=1e-12)
    else:
        same = a == b
    return None if same else (name, a, b)


def overlay_text(fit: Fit, note: str, collective_efficiency: float) -> str:
    """An engine profile overlay (``--engine-profile``): the fitted engine constants, and the
    share of each link's rate its collectives reach (``collective_efficiency``: the base's
    times the fitted scale)."""
    k = fit.knobs
    said = lambda n: "FITTED" if fit.identified[n] else "not identified: the base"  # noqa: E731
    return (f"# lts engine profile overlay written by lts calibrate: {note}\n"
            "[engine]\n"
            f'name = "{fit.engine}"\n'
            f'release = "{fit.release}"          # the profile it overlays\n'
            f"step_overhead_us = {k['step_overhead_us']:g}   # {said('step_overhead_us')}\n"
            f"request_overhead_ms = {k['request_overhead_ms']:g}   # "
            f"{said('request_overhead_ms')}\n"
            f"collective_efficiency = {collective_efficiency:.4g}   # "
            f"{said('collective_scale')} (x{k['collective_scale']:.3g})\n")


def collective_of(fit: Fit, topology_path) -> float:
    """The collectives' share of each link's rate the fit tunes (``tuned``): the engine
    profile's own, else the topology's, times the fitted scale, at most 1."""
    from ..specs import load_topology
    base = v.PROFILES[fit.engine][fit.release].collective_efficiency or \
        load_topology(str(topology_path)).collective_efficiency
    return min(base * fit.knobs["collective_scale"], 1.0)


def load_overlay(path) -> dict:
    """{"name", "release", "step_overhead_s", "request_overhead_s", "collective_efficiency"}
    of an overlay file (the keys it gives)."""
    from ..specs import read_toml
    data = read_toml(Path(path), "an engine profile overlay (.toml)",
                     needs="an overlay needs 1")
    e = data.get("engine")
    if not isinstance(e, dict) or not isinstance(e.get("name"), str):
        raise SpecError(path, "engine", "missing table with a name (written by lts calibrate)")
    out = {"name": e["name"], "release": str(e.get("release", ""))}
    for key, attr, unit, low, top in (("step_overhead_us", "step_overhead_s", US, 0.0, 1e6),
                                      ("request_overhead_ms", "request_overhead_s", MS, 0.0, 1e5),
                                      ("collective_efficiency", "collective_efficiency", 1.0,
                                       1e-3, 1.0)):
        val = e.get(key)
        if val is not None:
            if isinstance(val, bool) or not isinstance(val, (int, float)) or \
                    not low <= val <= top or not math.isfinite(val):
                raise SpecError(path, f"engine.{key}", f"{cut_quoted(val)} is not a number from {low:g} "
                                                       f"to {top:g}")
            out[attr] = float(val) * unit
    if out["name"] not in ENGINES:
        raise SpecError(path, "engine.name", f"{cut_quoted(out['name'])} is not an engine lts "
                                             "knows")
    if out["release"] and out["release"] not in ENGINES[out["name"]].profiles:
        raise SpecError(path, "engine.release", f"{cut_quoted(out['release'])} is not a "
                                                f"{out['name']} "
                                                f"profile lts has "
                                                f"({', '.join(ENGINES[out['name']].profiles)})")
    unknown = set(e) - {"name", "release", "step_overhead_us", "request_overhead_ms",
                        "collective_efficiency"}
    if unknown:
        raise SpecError(path, f"engine.{sorted(unknown)[0]}", "unknown key")
    return out
