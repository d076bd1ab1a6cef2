"""Re-derive the grouped MoE GEMM rates of topologies/h100_dgx.toml ``[gpu.grouped_gemm]`` from
microbenchmarks.csv's ``moe_grouped_gemm`` rows, and show lts's cost of each row with them.

    python scripts/grouped_gemm.py [../shared/data/microbenchmarks.csv]

The rows: TensorRT-LLM's cutlass grouped GEMM (gate+up, then down) for hidden 4096, inter 1536,
128 experts, top 8, ep 8, balanced routing, at 64 / 1024 / 4096 / 16384 tokens. Each GPU holds 16
experts and gets tokens x 8 / 8 (token, expert) pairs, tokens / 16 per expert. lts costs the two
ops as it costs any op (``cost.tables``): (c^p + m^p)^(1/p) + kernel overhead each, c the FLOPs at
peak x compute efficiency, m the weights at the grouped weight-read rate plus the activations at
``memory_efficiency``. Per format four rates make the four rows exact: the weight-read rate from
the 64-token row (4 tokens per expert: weight-read bound) and the compute rate at 64, 256 and
1024 tokens per expert from the others (solved together: the 64-token row's compute is taken at
the 64-per-expert rate, as lts clamps below the first point). Nothing is fitted across rows.
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lts.cost.tables import roofline_time  # noqa: E402
from lts.specs import load_topology  # noqa: E402
from lts.specs.units import WEIGHT_FORMATS  # noqa: E402

DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block"}


def rows(path):
    """{format: [(tokens, seconds)]} and the shape of the rows."""
    out, shape = {}, None
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if not r["op"].startswith("moe_grouped_gemm") or r["kind"] != "measured":
                continue
            p = dict(re.findall(r"(\w+)=(\d+)", r["params"]))
            shape = tuple(int(p[k]) for k in ("hidden", "inter", "topk", "experts", "ep"))
            out.setdefault(DTYPES[r["dtype"]], []).append(
                (int(p["num_tokens"]), float(r["measured_latency_us"]) * 1e-6))
    return {k: sorted(v) for k, v in out.items()}, shape


def cost(topo, fmt, shape, tokens, eta_w, eta_c):
    """lts's time of the two grouped GEMMs (balanced routing: every local expert active)."""
    h, inter, topk, experts, ep = shape
    e_loc, pairs = experts / ep, tokens * topk / ep
    wb, peak = WEIGHT_FORMATS[fmt][0], topo.peak_for(fmt)
    hbm, act = topo.hbm_bandwidth_bytes_s, topo.hbm_bandwidth_bytes_s * topo.memory_efficiency
    t = 0.0
    for mats, fin, fout in ((2, h, 2 * inter), (1, inter, h)):
        w = e_loc * h * inter * mats
        c = 2.0 * pairs * h * inter * mats / (peak * eta_c)
        m = w * wb / (hbm * eta_w) + pairs * (fin + fout) * 2.0 / act
        t += float(roofline_time(c, m, topo.roofline_exponent)) + topo.kernel_overhead_s
    return t


def _solve(f, target, lo=0.01, hi=1.0):
    """The efficiency e in [lo, hi] with f(e) = target (f falls as e grows)."""
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


def derive(topo, fmt, shape, pts):
    """(weight-read rate, compute rates at pts[1:]'s tokens per expert)."""
    eta_c = [0.5] * (len(pts) - 1)
    for _ in range(20):
        eta_w = _solve(lambda e: cost(topo, fmt, shape, pts[0][0], e, eta_c[0]), pts[0][1])
        eta_c = [_solve(lambda e: cost(topo, fmt, shape, n, eta_w, e), t) for n, t in pts[1:]]
    return eta_w, eta_c


def main(argv):
    path = argv[1] if len(argv) > 1 else ROOT.parent / "shared" / "data" / "microbenchmarks.csv"
    data, shape = rows(path)
    topo = load_topology("h100_dgx")
    h, inter, topk, experts, ep = shape
    for fmt, pts in data.items():
        eta_w, eta_c = derive(topo, fmt, shape, pts)
        tpe = [n * topk / ep / (experts / ep) for n, _ in pts[1:]]
        print(f"{fmt}: memory {eta_w:.3f}; compute " +
              ", ".join(f"{c:.3f} at {t:g}/expert" for c, t in zip(eta_c, tpe)))
        points, compute, memory = topo.grouped_efficiency(fmt)
        for n, t in pts:
            per = max(n * topk / experts, 1.0)
            i = min(range(len(points)), key=lambda j: abs(points[j] - min(max(per, points[0]),
                                                                         points[-1])))
            pred = cost(topo, fmt, shape, n, memory, compute[i])
            print(f"   {n:6d} tokens: measured {t * 1e6:8.2f} us, lts (h100_dgx) {pred * 1e6:8.2f} us")


if __name__ == "__main__":
    main(sys.argv)
