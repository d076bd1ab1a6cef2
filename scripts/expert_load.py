"""Check lts's expert-load model (lts.cost.expert_load) against the measured kernel tables and
against the placement it bounds (the figures in its docstring and in docs/design.md §3).

    python scripts/expert_load.py [--min-tokens 4096]

A maintainer's script: it reads shared/data/kernels with pyarrow (not a runtime dependency).

1. **Skewed against balanced routing** (every ``*/moe/*/*/moe_perf.parquet``): at each (shape,
   tokens) with balanced rows at three or more ep and power-law rows, the fused layer's time is
   fitted on the balanced rows as a + b / ep (a part that does not shrink with ep, and a part in
   proportion to one rank's pairs, T k / ep of them), then the power-law rows (held out of the
   fit; alpha not fitted: the collector's) are predicted as a + b I / ep with lts's busiest-rank
   load I at that alpha, and as a + b / ep (uniform routing, lts before issue 36). Error:
   |log2(predicted / measured)|, median over the rows at ``--min-tokens`` tokens or more (below,
   a rank's time is its weight reads: the pairs hardly move it).
2. **EPLB** (TensorRT-LLM's ``wideep_moe_perf.parquet``: power-law rows with and without the
   load balancer, 256 or 288 slots): a + b I / ep fitted on the rows without EPLB (lts's static
   I), the EPLB rows predicted with EPLB's I and with the static I.
3. **EPLB's bound against its placement**: on lts's own draws, the collector's greedy placement
   (heaviest slot first onto the least loaded rank with room: ``compute_eplb_placement``) against
   lts's max(mean, heaviest slot).
"""
import argparse
import glob
import heapq
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.cost import expert_load as el            # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "kernels"
COLUMNS = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
           "moe_ep_size", "distribution", "num_tokens", "latency"]


def load_at(experts, top_k, ep, tokens, alpha, slots=None):
    """lts's I at ``tokens`` (static, or EPLB with ``slots``) for ep ranks of the experts."""
    if slots is None:
        curve = el.static_curve(experts, top_k, experts // ep, alpha)
    else:
        curve = el.balanced_curve(experts, top_k, slots, slots // ep, alpha)
    return float(np.interp(np.log2(tokens), el.LOG2_TOKENS, curve))


def fit(xs, ys):
    """Least squares y = a + b x."""
    (a, b), *_ = np.linalg.lstsq(np.stack([np.ones(len(xs)), xs], 1), np.asarray(ys), rcond=None)
    return a, b


def skewed_against_balanced(min_tokens):
    """Part 1: {(distribution, engine): (errors with I, errors uniform)}."""
    import pyarrow.parquet as pq
    out = defaultdict(lambda: ([], []))
    for f in sorted(glob.glob(str(DATA / "*" / "moe" / "*" / "*" / "moe_perf.parquet"))):
        engine = Path(f).parts[-3]
        d = {k: np.asarray(v) for k, v in pq.read_table(f, columns=COLUMNS).to_pydict().items()}
        rows = defaultdict(dict)
        for i in np.nonzero((d["moe_tp_size"] == 1) & (d["num_tokens"] >= min_tokens))[0]:
            key = tuple(d[c][i] for c in COLUMNS[:5]) + (float(d["num_tokens"][i]),)
            rows[key].setdefault(d["distribution"][i], {})[int(d["moe_ep_size"][i])] = \
                float(d["latency"][i])
        for (_, _, _, top_k, experts, tokens), by in rows.items():
            bal = by.get("balanced", {})
            if len(bal) < 3:
                continue
            a, b = fit([1.0 / e for e in bal], list(bal.values()))
            for dist in ("power_law_1.01", "power_law_1.2"):
                alpha = float(dist.split("_")[-1])
                for ep, lat in by.get(dist, {}).items():
                    if ep < 2 or experts % ep:
                        continue
                    skew = a + b * load_at(int(experts), int(top_k), ep, tokens, alpha) / ep
                    flat = a + b / ep
                    if skew > 0 and flat > 0:
                        out[dist, engine][0].append(abs(np.log2(skew / lat)))
                        out[dist, engine][1].append(abs(np.log2(flat / lat)))
    return out


def eplb_rows(min_tokens):
    """Part 2: {(redundant?, ep): (errors with EPLB's I, errors with the static I)}."""
    import pyarrow.parquet as pq
    out = defaultdict(lambda: ([], []))
    for f in sorted(glob.glob(str(DATA / "*" / "moe" / "trtllm" / "*" / "wideep_moe_perf.parquet"))):
        d = {k: np.asarray(v) for k, v in pq.read_table(f).to_pydict().items()}
        rows = defaultdict(dict)
        for i in np.nonzero(d["num_tokens"] >= min_tokens)[0]:
            dist = str(d["distribution"][i])
            key = (d["moe_dtype"][i], d["hidden_size"][i], d["inter_size"][i], int(d["topk"][i]),
                   int(d["num_experts"][i]), float(dist.split("_")[2]),
                   float(d["num_tokens"][i]))
            rows[key][(dist.endswith("eplb"), int(d["num_slots"][i]),
                       int(d["moe_ep_size"][i]))] = float(d["latency"][i])
        for (_, _, _, top_k, experts, alpha, tokens), by in rows.items():
            static = {ep: lat for (e, _, ep), lat in by.items() if not e}
            if len(static) < 3:
                continue
            i_static = {ep: load_at(experts, top_k, ep, tokens, alpha) for ep in static}
            a, b = fit([i_static[e] / e for e in static], list(static.values()))
            for (e, slots, ep), lat in by.items():
                if not e or ep not in i_static:
                    continue
                with_eplb = a + b * load_at(experts, top_k, ep, tokens, alpha, slots) / ep
                without = a + b * i_static[ep] / ep
                if with_eplb > 0 and without > 0:
                    out[slots > experts, ep][0].append(abs(np.log2(with_eplb / lat)))
                    out[slots > experts, ep][1].append(abs(np.log2(without / lat)))
    return out


def greedy_placement(slot_loads, ranks):
    """The collector's compute_eplb_placement: the heaviest slot first onto the least loaded
    rank with room (slots / ranks each); the busiest rank's load."""
    room = len(slot_loads) // ranks
    heap = [(0.0, r) for r in range(ranks)]
    count = [0] * ranks
    busiest = 0.0
    for load in sorted(slot_loads, reverse=True):
        total, r = heapq.heappop(heap)
        total += load
        count[r] += 1
        busiest = max(busiest, total)
        if count[r] < room:
            heapq.heappush(heap, (total, r))
    return busiest


def bound_against_placement(experts=256, top_k=8):
    """Part 3: [(slots, ranks, tokens, lts's I, the greedy placement's I)]."""
    out = []
    for slots, ranks in ((256, 8), (256, 32), (256, 64), (288, 32), (288, 72), (288, 144)):
        for g in (10, 12, 14):                             # 1,024 / 4,096 / 16,384 tokens
            tok = 2.0 ** el.LOG2_TOKENS[g]
            x = el.expert_pairs(experts, top_k)[g]
            mean = tok * top_k / ranks
            greedy = []
            for d in range(16):
                copies = np.ones(experts)
                heap = [(-v, e) for e, v in enumerate(x[d])]
                heapq.heapify(heap)
                for _ in range(slots - experts):
                    _, e = heapq.heappop(heap)
                    copies[e] += 1
                    heapq.heappush(heap, (-x[d][e] / copies[e], e))
                loads = np.repeat(x[d] / copies, copies.astype(int))
                greedy.append(greedy_placement(list(loads), ranks) / mean)
            out.append((slots, ranks, int(tok),
                        float(el.balanced_curve(experts, top_k, slots, slots // ranks)[g]),
                        float(np.mean(greedy))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-tokens", type=int, default=4096)
    args = ap.parse_args()
    print(f"1. skewed against balanced routing, >= {args.min_tokens} tokens "
          "(median |log2|: lts's I, uniform)")
    part = skewed_against_balanced(args.min_tokens)
    for dist in ("power_law_1.01", "power_law_1.2"):
        both = [np.concatenate([part[k][j] for k in part if k[0] == dist]) for j in (0, 1)]
        print(f"   {dist}: {len(both[0]):,} rows, {np.median(both[0]):.3f} against "
              f"{np.median(both[1]):.3f}")
        for k in sorted(k for k in part if k[0] == dist):
            print(f"      {k[1]}: {len(part[k][0]):,} rows, {np.median(part[k][0]):.3f} against "
                  f"{np.median(part[k][1]):.3f}")
    print(f"2. EPLB rows of TensorRT-LLM's wideep_moe_perf, >= {args.min_tokens} tokens "
          "(median |log2|: EPLB's I, the static I)")
    part = eplb_rows(args.min_tokens)
    both = [np.concatenate([v[j] for v in part.values()]) for j in (0, 1)]
    print(f"   {len(both[0]):,} rows, {np.median(both[0]):.3f} against {np.median(both[1]):.3f}")
    for (redundant, ep) in sorted(part):
        v = part[redundant, ep]
        print(f"      {'288 slots' if redundant else 'no redundant'} ep {ep}: {len(v[0])} rows, "
              f"{np.median(v[0]):.3f} against {np.median(v[1]):.3f}")
    print("3. EPLB's bound against the greedy placement (DeepSeek-V3's 256 experts, top-8)")
    for slots, ranks, tok, bound, greedy in bound_against_placement():
        print(f"   {slots} slots over {ranks} ranks ({slots // ranks} each), {tok:,} tokens: "
              f"I {bound:.3f}, greedy {greedy:.3f} ({bound / greedy - 1:+.1%})")


if __name__ == "__main__":
    main()
