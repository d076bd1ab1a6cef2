"""How well lts reads shapes its kernel tables do not hold: the leave-one-shape-out error of the
kernel model (lts.cost.kernels) against the tables, per op class and GPU, beside the plain
roofline's error at the same points (docs/kernels.md; the closing note of issue 34).

    python scripts/kernel_error.py [--gpu h100_sxm] [--engine vllm]

- dense GEMM: each interior n (and each interior k) of a table's grid left out, its latencies
  at every m and k read by interpolating the rest; the roofline: lts's smooth roofline with the
  topology's rates for that format plus its kernel overhead.
- fused MoE: each held (hidden, inter, top-k, experts) shape left out and read from the nearest
  other shape (``KernelSet.moe``'s transfer), at every (moe tp, tokens) of the ep = 1 rows (the
  rows lts reads); the roofline:
  lts's FFN1 + FFN2 of that shape (tables.build_tables, tp = ep = 1 points only).
- decode / prefill attention: each (heads, KV heads) row left out and read from the nearest
  (``KernelSet.attention``), at every (batch, context); the roofline: lts's scores + context.
- all-reduce: each interior message size left out, interpolated; the roofline: lts's
  alpha-beta / one-shot model with the engine's custom all-reduce limit.

Error: |log2(predicted / measured)| per point; the table gives the median per GPU and class.
The GPUs are those a shipped topology names (``[gpu] kernels``).
"""
import argparse
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.cost import collectives as coll            # noqa: E402
from lts.cost import kernels as K                   # noqa: E402
from lts.cost.layouts import MODE_NONE, SLOT        # noqa: E402
from lts.cost.tables import build_tables, roofline_time   # noqa: E402
from lts.engines import ENGINES                     # noqa: E402
from lts.specs import load_model, load_topology, shipped_names   # noqa: E402
from lts.specs.strategy import coarse_of, make_row    # noqa: E402
from lts.specs.units import WEIGHT_FORMATS          # noqa: E402
from lts.specs.workload import Workload             # noqa: E402

LTS_FORMAT = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4",
              "int4_wo": "w4a16", "w4a16_mxfp4": "mxfp4", "w4a8_mxfp4_mxfp8": "mxfp4"}


def gemm_roofline(topo, fmt, m, n, k):
    """lts's time of one dense GEMM (cost.tables._gemm and _Builder.put, written out)."""
    wb = WEIGHT_FORMATS[fmt][0]
    wbr = wb * topo.memory_efficiency / topo.weight_memory_efficiency_for(fmt)
    c = 2.0 * m * n * k / (topo.peak_for(fmt) * topo.compute_efficiency_for(fmt))
    mem = (n * k * wbr + m * (k + n) * 2.0) / (topo.hbm_bandwidth_bytes_s * topo.memory_efficiency)
    return roofline_time(c, mem, topo.roofline_exponent) + topo.kernel_overhead_s


def gemm_errors(ks, topo):
    kern, roof = [], []
    d = ks.data
    for key in [k for k in d if k.startswith("gemm|") and k.endswith("|lat")]:
        p = key[:-4]
        dt = p.split("|")[3]
        fmt = LTS_FORMAT.get(dt)
        lat = d[key].astype(np.float64)
        g = [d[f"{p}|{a}"] for a in "mnk"]
        for axis in (1, 2):
            for i in range(1, len(g[axis]) - 1):
                keep = [j for j in range(len(g[axis])) if j != i]
                sub = np.take(lat, keep, axis=axis)
                grids = list(g)
                grids[axis] = g[axis][keep]
                idx = [slice(None)] * 3
                idx[axis] = i
                meas = lat[tuple(idx)]
                pts = np.meshgrid(*[g[a] if a != axis else np.array([g[axis][i]])
                                    for a in range(3)], indexing="ij")
                pts = [x.squeeze(axis) for x in pts]
                pred = K._lerp(sub, grids, pts, (1.0, 1.0, 1.0))
                ok = np.isfinite(meas) & np.isfinite(pred)
                kern += list(np.abs(pred[ok] - meas[ok]))
                if fmt and fmt in WEIGHT_FORMATS:
                    r = gemm_roofline(topo, fmt, *[x.astype(np.float64) for x in pts])
                    roof += list(np.abs(np.log2(r[ok] * 1e3) - meas[ok]))
    return kern, roof


def each_release(ks, kind):
    """The kernel set with each of its engine's ``kind`` releases picked in turn, each table
    read as timed (no engine-kernel rule: a shape left out is read from its own table's other
    shapes) and with lookups of its own (a fresh memo)."""
    if kind not in ks.picked:
        return []
    eng = ks.picked[kind][3]
    return [replace(ks, picked={**ks.picked, kind: (r, "", "", eng)}, memo={},
                    engine_kernels=False)
            for r in K.releases(ks.data, kind, eng)]


def moe_errors(ks, topo, base):
    kern, roof = [], []
    for one in each_release(ks, "moe"):
        k, r = moe_release_errors(one, topo, base)
        kern += k
        roof += r
    return kern, roof


def moe_release_errors(ks, topo, base):
    kern, roof = [], []
    d = ks.data
    p = ks._prefix("moe")
    names, keys, lat, tok = (list(d[p + "dtypes"]), d[p + "keys"], d[p + "lat"].astype(float),
                             d[p + "tokens"])
    dist = K.DISTRIBUTION[ks.distribution]
    for di, dt in enumerate(names):
        fmt = LTS_FORMAT.get(dt)
        sel = (keys[:, 0] == di) & (keys[:, 1] == dist)
        for shape in sorted({tuple(r) for r in keys[sel, 2:6].tolist()}):
            h, i, k, e = shape
            rows = np.nonzero(sel & (keys[:, 2:6] == shape).all(axis=1))[0]
            for r in rows:
                tp, ep = keys[r, 6], keys[r, 7]
                if fmt is None or ep != 1:    # lts reads the ep = 1 rows (KernelSet.moe)
                    continue
                pred = ks.moe(fmt, h, i, k, e, tp, ep, tok.astype(float), exclude=shape)
                meas = lat[r]
                if pred is None:
                    continue
                lp = np.log2(pred * 1e3)
                ok = np.isfinite(meas) & np.isfinite(lp)
                kern += list(np.abs(lp[ok] - meas[ok]))
                if tp == 1 and ep == 1 and fmt in WEIGHT_FORMATS:
                    roof += list(np.abs(np.log2(moe_roofline(base, topo, fmt, shape, tok)[ok]
                                                * 1e3) - meas[ok]))
    return kern, roof


def moe_roofline(base, topo, fmt, shape, tokens):
    """lts's FFN1 + FFN2 of a MoE layer of ``shape`` at tp = ep = 1, one prefill sequence of
    one token per coarse row, ``tokens`` rows (each coarse row's batch)."""
    h, i, k, e = shape
    m = replace(base, hidden=int(h),
                ffn=replace(base.ffn, experts=int(e), top_k=int(k), expert_intermediate=int(i),
                            shared_intermediate=0, shared_experts=0),
                precision=replace(base.precision, weights=fmt, formats=(), unquantized=()))
    coarse = np.stack([coarse_of(make_row(batch=int(t))) for t in tokens])
    t = build_tables(m, replace(topo, kernels=None), Workload(phase="prefill", context=1), coarse)
    return t.time_s[:, SLOT["ffn1"], MODE_NONE] + t.time_s[:, SLOT["ffn2"], MODE_NONE]


def attention_errors(ks, topo, base, phase):
    kern, roof = [], []
    d = ks.data
    p = ks._prefix(phase)
    if p is None:
        return kern, roof
    keys, lat, b, L = d[p + "keys"], d[p + "lat"].astype(float), d[p + "batch"], d[p + "length"]
    kvs = list(d[p + "kv_dtypes"])
    for r, (kv, heads, kvh, hd, win) in enumerate(keys.tolist()):
        if win != 0:
            continue
        B, LL = np.meshgrid(b.astype(float), L.astype(float), indexing="ij")
        pred = ks.attention(phase, kvs[kv], heads, kvh, hd, 0, B, LL, exclude=(heads, kvh))
        if pred is None:
            continue
        lp = np.log2(pred * 1e3)
        ok = np.isfinite(lat[r]) & np.isfinite(lp)
        kern += list(np.abs(lp[ok] - lat[r][ok]))
        if kvs[kv] in ("bf16", "fp8") and heads % kvh == 0:
            rf = attention_roofline(base, topo, phase, kvs[kv], heads, kvh, hd, b, L)
            roof += list(np.abs(np.log2(rf[ok] * 1e3) - lat[r][ok]))
    return kern, roof


def attention_roofline(base, topo, phase, kv, heads, kvh, hd, batches, lengths):
    """lts's scores + context of one layer at every (batch, length), every head on one GPU."""
    m = replace(base, attention=replace(base.attention, heads=int(heads), kv_heads=int(kvh),
                                        head_dim=int(hd)),
                precision=replace(base.precision, kv_cache=kv))
    out = np.zeros((len(batches), len(lengths)))
    coarse = np.stack([coarse_of(make_row(batch=int(x))) for x in batches])
    for j, n in enumerate(lengths):
        w = Workload(phase="decode" if phase == "gen" else "prefill", context=int(max(n, 1)))
        t = build_tables(m, replace(topo, kernels=None), w, coarse)
        out[:, j] = t.time_s[:, SLOT["scores"], MODE_NONE] + t.time_s[:, SLOT["context"],
                                                                        MODE_NONE]
    return out


def allreduce_errors(ks, topo, engine):
    kern, roof = [], []
    p = ks._prefix("ar")
    if p is None:
        return kern, roof
    d = ks.data
    lat, g, s = d[p + "lat"].astype(float), d[p + "gpus"], d[p + "bytes"]
    prof = ENGINES[engine].profile.for_gpu(topo)
    links = prof.topology(replace(topo, kernel_gpu="")).engine_links
    for gi, n in enumerate(g):
        for i in range(1, len(s) - 1):
            keep = [j for j in range(len(s)) if j != i]
            pred = K._lerp(lat[gi, keep], [s[keep]], (float(s[i]),), (1.0,))
            if np.isfinite(pred) and np.isfinite(lat[gi, i]):
                kern.append(abs(float(pred) - lat[gi, i]))
                ranks = np.array([float(n)])
                t = coll.COST["all-reduce"](links, np.array([float(s[i])]), ranks, np.ones(1),
                                            coll.levels(links, ranks, np.ones(1)))
                roof.append(abs(float(np.log2(t[0] * 1e3)) - lat[gi, i]))
    return kern, roof


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default=None)
    ap.add_argument("--engine", default=None, choices=("vllm", "sglang", "trtllm"))
    a = ap.parse_args()
    topos = {}
    for name in shipped_names("topologies"):
        t = load_topology(name)
        if t.kernel_gpu and t.kernel_gpu not in topos:
            topos[t.kernel_gpu] = t
    moe_base = load_model("qwen3-235b-a22b")
    dense_base = load_model("qwen3-32b")
    res = defaultdict(lambda: ([], []))
    for gpu, topo in sorted(topos.items()):
        if a.gpu and gpu != a.gpu:
            continue
        for engine in ("vllm", "sglang", "trtllm"):
            if a.engine and engine != a.engine:
                continue
            ks = K.for_engine(gpu, engine, "")          # each class's newest release
            if ks is None:
                continue
            parts = {"gemm": gemm_errors(ks, topo), "moe": moe_errors(ks, topo, moe_base),
                     "gen": attention_errors(ks, topo, dense_base, "gen"),
                     "ctx": attention_errors(ks, topo, dense_base, "ctx"),
                     "ar": allreduce_errors(ks, topo, engine)}
            for kind, (kern, roof) in parts.items():
                res[(gpu, kind)][0].extend(kern)
                res[(gpu, kind)][1].extend(roof)
            print(f"  {gpu} {engine} done", file=sys.stderr)
    print(f"{'gpu':22} {'op':18} {'points':>8} {'kernel model':>13} {'roofline':>9} "
          f"{'(points)':>9}")
    for (gpu, kind), (kern, roof) in sorted(res.items()):
        if not kern:
            continue
        rf = f"{np.median(roof):9.3f} {len(roof):9d}" if roof else f"{'-':>9} {0:9d}"
        print(f"{gpu:22} {K.KIND_TITLES[kind]:18} {len(kern):8d} {np.median(kern):13.3f} {rf}")


if __name__ == "__main__":
    main()
