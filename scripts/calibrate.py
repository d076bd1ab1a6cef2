"""Fit the engine's per-step overhead (``[gpu] step_overhead_us``) on the training part of a
measurement file and report training and held-out summaries.

    python scripts/calibrate.py ../shared/data/calibration.csv [--grid 0,250,...] [--set KEY=V]

Split (deterministic, no randomness): the distinct (isl, osl) pairs of the file sorted
ascending; pairs at even positions (0, 2, 4, ...) are the training rows, odd positions held out.
Every model, GPU and tp degree appears on both sides, and the held-out rows ask whether the fit
carries over to request shapes it never saw.

The fit: one value of ``step_overhead_us`` for every shipped topology (the same constant for
every model and GPU), chosen on a grid by least squares: the value that minimises the mean of
log2(pred/meas)^2 over the training rows. The other keys (``fp8_compute_efficiency``,
``fp8_memory_efficiency``) come from microbenchmarks.csv, not from this fit; ``--set`` overrides a
[gpu] key of every topology (e.g. ``--set fp8_memory_efficiency=0.81`` to see its effect).
The held-out rows are only summarized, never used to choose.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts import validate as v            # noqa: E402
from lts.units import US                 # noqa: E402

FIELDS = {"step_overhead_us": ("step_overhead_s", US), "fp8_memory_efficiency": (None, 1.0),
          "fp8_compute_efficiency": (None, 1.0), "memory_efficiency": (None, 1.0),
          "compute_efficiency": (None, 1.0), "kernel_overhead_us": ("kernel_overhead_s", US)}


def split(rows):
    """(train, held_out) rows of a validate result by the (isl, osl) rule above."""
    pairs = sorted({(r["isl"], r["osl"]) for r in rows})
    train_pairs = set(pairs[0::2])
    train = [r for r in rows if (r["isl"], r["osl"]) in train_pairs]
    held = [r for r in rows if (r["isl"], r["osl"]) not in train_pairs]
    return train, held


def run(path, overrides):
    """validate() with every topology's [gpu] keys overridden."""
    orig = v.load_topology

    def patched(name):
        t = orig(name)
        kw = {}
        for key, val in overrides.items():
            field, scale = FIELDS[key]
            kw[field or key] = val * scale
        return replace(t, **kw)
    v.load_topology = patched
    try:
        return v.validate(path)
    finally:
        v.load_topology = orig


def line(name, s):
    sp = s["spearman_by_group"]
    return (f"{name:9s} n={s['count']:3d} median|log2|={s['median_abs_log2_ratio']:.3f} "
            f"within2x={s['within_2x']:.3f} spearman={sp['mean']:.3f} per_gpu={sp['mean_per_gpu']:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--grid", default=",".join(str(x) for x in range(0, 12001, 500)))
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    fixed = {k: float(x) for k, x in (s.split("=") for s in a.set)}
    best = None
    for us in (float(x) for x in a.grid.split(",")):
        res = run(a.file, {**fixed, "step_overhead_us": us})
        train, held = split(res["rows"])
        st = v.summarize(train)
        sq = sum(r["log2_ratio"] ** 2 for r in train) / len(train)
        print(f"step_overhead_us={us:7.1f}  mean sq log2={sq:.4f}  " + line("train", st))
        key = sq
        if best is None or key < best[0]:
            best = (key, us, res)
    _, us, res = best
    train, held = split(res["rows"])
    print(f"\nbest step_overhead_us = {us:g} (train rows only)")
    for name, rows in (("train", train), ("held-out", held), ("all", res["rows"])):
        print(line(name, v.summarize(rows)))
    print(f"skipped: {len(res['skipped'])}")


if __name__ == "__main__":
    main()
