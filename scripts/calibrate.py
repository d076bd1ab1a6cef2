"""Fit serving constants on the training part of a measurement file and report training and
held-out summaries.

    python scripts/calibrate.py ../shared/data/calibration.csv
    python scripts/calibrate.py FILE --fit collective_efficiency=0.3,0.4,0.5 --fit step_overhead_us=0,500
    python scripts/calibrate.py FILE --set roofline_exponent=0     # see what one key is worth
    python scripts/calibrate.py ../shared/data/serving_calibration.csv \
        --fit vllm.cohort_base=1,2,3 --fit vllm.cohort_share=0.03,0.05   # an engine profile's keys

    python scripts/calibrate.py ../shared/data/serving_calibration.csv --split-out /tmp/split
        # writes /tmp/split/train.csv and /tmp/split/held-out.csv (then: lts validate ...)

A key is a topology ``[gpu]`` key (set on every shipped topology) or ``ENGINE.KEY``, a field of
one engine profile (``lts.engines``: cohort_base, cohort_share, step_overhead_us,
request_overhead_ms, sim_request_overhead_ms (the simulator's), collective_efficiency,
handoff_ms); the objective then counts that engine's
rows only.

Split (deterministic, no randomness): the distinct (isl, osl) pairs of the file sorted
ascending; pairs at even positions (0, 2, 4, ...) are the training rows, odd positions held out.
Every model, GPU and tp degree appears on both sides, and the held-out rows ask whether the fit
carries over to request shapes it never saw.

The fit: every combination of the ``--fit`` grids (default: ``collective_efficiency`` 0.30 ...
1.00) is applied to every shipped topology (one value for every model and GPU), and the one that
minimises the mean of log2(pred/meas)^2 over the training rows wins. Hardware keys
(efficiencies, latencies, ``roofline_exponent``) come from microbenchmarks.csv and hardware.md, not
from this fit; ``--set`` overrides a [gpu] key of every topology to show its effect. The held-out
rows are only summarized, never used to choose.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.serving import validate as v            # noqa: E402
from lts.specs.units import MS, US             # noqa: E402

ENGINE_FIELDS = {"cohort_base": ("cohort_base", 1.0), "cohort_share": ("cohort_share", 1.0),
                 "step_overhead_us": ("step_overhead_s", US),
                 "request_overhead_ms": ("request_overhead_s", MS),
                 "sim_request_overhead_ms": ("sim_request_overhead_s", MS),
                 "collective_efficiency": ("collective_efficiency", 1.0),
                 "handoff_ms": ("handoff_s", MS)}
FIELDS = {"step_overhead_us": ("step_overhead_s", US), "fp8_memory_efficiency": (None, 1.0),
          "fp8_compute_efficiency": (None, 1.0), "memory_efficiency": (None, 1.0),
          "compute_efficiency": (None, 1.0), "kernel_overhead_us": ("kernel_overhead_s", US),
          "roofline_exponent": (None, 1.0), "collective_efficiency": (None, 1.0)}
DEFAULT_FIT = ["collective_efficiency=" + ",".join(f"{x / 100:.2f}" for x in range(30, 101, 5))]


def split(rows, by=""):
    """(train, held_out) rows of a validate result by the (isl, osl) rule above, or with
    ``by`` = "model:NAME" the rows of model NAME for training and every other model's held out
    (fit on one model, report another)."""
    if by.startswith("model:"):
        name = by.split(":", 1)[1]
        return ([r for r in rows if r["model"] == name], [r for r in rows if r["model"] != name])
    if by == "alternate":
        points = sorted({_point(r["id"]) for r in rows})
        train_points = set(points[0::2])
        return ([r for r in rows if _point(r["id"]) in train_points],
                [r for r in rows if _point(r["id"]) not in train_points])
    pairs = sorted({(r["isl"], r["osl"]) for r in rows})
    train_pairs = set(pairs[0::2])
    train = [r for r in rows if (r["isl"], r["osl"]) in train_pairs]
    held = [r for r in rows if (r["isl"], r["osl"]) not in train_pairs]
    return train, held


def _point(row_id: str) -> str:
    """A measured point's rows share their id up to the metric ("...c36_cfg392-ttft_ms")."""
    head, _, tail = row_id.rpartition("-")
    return head if head and tail in v.METRICS else row_id


def write_split(path, outdir):
    """The file's rows as two CSV files by the split rule above (header and rows unchanged)."""
    import csv
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames, list(reader)
    pairs = sorted({(int(r["isl"]), int(r["osl"])) for r in rows})
    train_pairs = set(pairs[0::2])
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for name, keep in (("train", True), ("held-out", False)):
        with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            part = [r for r in rows if ((int(r["isl"]), int(r["osl"])) in train_pairs) == keep]
            w.writerows(part)
        print(f"{out / (name + '.csv')}: {len(part)} rows")


def run(path, overrides):
    """validate() with every topology's [gpu] keys and the engine profiles' keys overridden."""
    orig_topo, orig_engines = v.load_topology, v.PROFILES
    gpu = {k: x for k, x in overrides.items() if "." not in k}
    engines = {name: dict(releases) for name, releases in orig_engines.items()}
    for key, val in overrides.items():
        if "." in key:          # ENGINE.KEY: every release of the engine (its rows' profiles)
            name, field = key.split(".", 1)
            attr, scale = ENGINE_FIELDS[field]
            engines[name] = {rel: replace(prof, **{attr: val * scale})
                             for rel, prof in engines[name].items()}

    def patched(name):
        t = orig_topo(name)
        kw = {}
        for key, val in gpu.items():
            field, scale = FIELDS[key]
            kw[field or key] = val * scale
        return replace(t, **kw)
    v.load_topology, v.PROFILES = patched, engines
    try:
        return v.validate(path)
    finally:
        v.load_topology, v.PROFILES = orig_topo, orig_engines


def check_key(ap, key):
    if "." in key:
        name, field = key.split(".", 1)
        if name not in v.PROFILES or field not in ENGINE_FIELDS:
            ap.error(f"unknown key {key!r} (ENGINE.KEY: ENGINE one of {', '.join(v.PROFILES)}, "
                     f"KEY one of {', '.join(ENGINE_FIELDS)})")
    elif key not in FIELDS:
        ap.error(f"unknown key {key!r} (one of {', '.join(FIELDS)}, or ENGINE.KEY)")


def line(name, s):
    sp = s["spearman_by_group"]
    f = lambda x: "-" if x is None else f"{x:.3f}"        # noqa: E731
    return (f"{name:9s} n={s['count']:3d} median|log2|={f(s['median_abs_log2_ratio'])} "
            f"within2x={f(s['within_2x'])} spearman={f(sp['mean'])} per_gpu={f(sp['mean_per_gpu'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--fit", action="append", default=[], metavar="KEY=V1,V2,...",
                    help=f"a grid to fit (repeatable; default {DEFAULT_FIT[0][:40]}...)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=V",
                    help="a fixed override of every topology's [gpu] KEY")
    ap.add_argument("--split-out", metavar="DIR", default=None,
                    help="write the training and held-out rows to DIR/train.csv and "
                         "DIR/held-out.csv, and stop")
    ap.add_argument("--split", default="", metavar="model:NAME|alternate",
                    help="model:NAME: train on model NAME's rows, hold out the other models'; "
                         "alternate: the measured points (rows sharing an id up to the metric) "
                         "in id order, even positions trained, odd held out (a file with too "
                         "few (isl, osl) pairs for the default rule); default: the (isl, osl) "
                         "split above")
    ap.add_argument("--max-concurrency", type=int, default=0, metavar="C",
                    help="fit on the training rows at concurrency <= C only (a constant that "
                         "shows alone at low load, e.g. a time per request: the queues of high "
                         "load do not pull it); the summaries still show every row")
    a = ap.parse_args()
    if a.split and not (a.split.startswith("model:") or a.split == "alternate"):
        ap.error(f"--split {a.split!r}: expected model:NAME or alternate")
    if a.split_out:
        write_split(a.file, a.split_out)
        return
    fixed = {k: float(x) for k, x in (s.split("=") for s in a.set)}
    grids = [(k, [float(x) for x in vals.split(",")])
             for k, vals in (f.split("=") for f in (a.fit or DEFAULT_FIT))]
    for key, _ in grids + [(k, 0) for k in fixed]:
        check_key(ap, key)
    fitted = {k.split(".", 1)[0] for k, _ in grids if "." in k}

    def counted(rows):          # an engine key's fit counts that engine's rows only
        return [r for r in rows if not fitted or r["engine"] in fitted]
    best = None
    for values in itertools.product(*(vals for _, vals in grids)):
        point = dict(zip((k for k, _ in grids), values))
        res = run(a.file, {**fixed, **point})
        train = [r for r in counted(split(res["rows"], a.split)[0])
                 if not a.max_concurrency or (r["concurrency"] or 0) <= a.max_concurrency]
        if not train:
            ap.error("no training rows (check --split and the engine keys)")
        sq = sum(r["log2_ratio"] ** 2 for r in train) / len(train)
        label = " ".join(f"{k}={x:g}" for k, x in point.items())
        print(f"{label}  mean sq log2={sq:.4f}  " + line("train", v.summarize(train)))
        if best is None or sq < best[0]:
            best = (sq, label, res)
    _, label, res = best
    train, held = (counted(x) for x in split(res["rows"], a.split))
    print(f"\nbest {label} (train rows only)")
    for name, rows in (("train", train), ("held-out", held), ("all", counted(res["rows"]))):
        print(line(name, v.summarize(rows)))
        for metric in sorted({r["metric"] for r in rows}):
            print("  " + line(metric, v.summarize([r for r in rows if r["metric"] == metric])))
    print(f"skipped: {len(res['skipped'])}")


if __name__ == "__main__":
    main()
