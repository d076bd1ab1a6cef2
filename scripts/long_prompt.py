"""The fastest prefill of one long prompt with and without context parallelism (issue 37): for
each model and GPU count, the least TTFT over every degree of the space at batch 1 with each
per-op preset engines ship (specs.strategy.presets), cp = 1 and cp up to --max-cp; then what
`lts search --phase prefill` picks under a TTFT limit just below the best without cp.

    python scripts/long_prompt.py [--isl 131072] [--max-cp 8] [--engine vllm]

With --engine, each pass as that engine runs it (vLLM and SGLang chunk a long prompt to their
token budget: engines.chunked) and the search in its space.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lts.cost.model import evaluate                                       # noqa: E402
from lts.engines import ENGINE_NAMES, ENGINES, GENERIC, chunked          # noqa: E402
from lts.search.methods import SEARCHERS                                  # noqa: E402
from lts.search.problems import Problem                                   # noqa: E402
from lts.specs import load_model, load_topology                           # noqa: E402
from lts.specs.strategy import Space, coarse_rows, format_strategy, presets   # noqa: E402
from lts.specs.workload import Workload                                   # noqa: E402


def fastest(model, topo, work, max_cp):
    sp = Space.for_model(model, work.gpus, max_batch=1, max_cp=max_cp)
    grid = sp.coarse_grid()
    rows = np.concatenate([coarse_rows(grid, v) for v in presets(model.is_moe)])
    res = evaluate(model, topo, work, rows)
    ttft = np.where(res.valid, res.ttft_s, np.inf)
    i = int(np.argmin(ttft))
    return rows[i], ttft[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isl", type=int, default=131072)
    ap.add_argument("--max-cp", type=int, default=8)
    ap.add_argument("--topology", default="h200_dgx")
    ap.add_argument("--engine", default=GENERIC, choices=ENGINE_NAMES)
    args = ap.parse_args()
    topo = load_topology(args.topology)
    profile = ENGINES[args.engine].profile.for_gpu(topo)
    print(f"one {args.isl:,}-token prompt on {args.topology}: the least TTFT (batch 1)"
          + (f", {args.engine}" if args.engine != GENERIC else ""))
    for name in ("llama3.1-70b", "deepseek-v3"):
        model = load_model(name)
        for gpus in (8, 16):
            work = chunked(Workload("prefill", context=args.isl, gpus=gpus), profile)
            (r1, t1), (rc, tc) = (fastest(model, topo, work, m) for m in (1, args.max_cp))
            print(f"  {name} on {gpus} GPUs, presets at batch 1:")
            for what, r, t in (("without cp", r1, t1), ("with cp", rc, tc)):
                print(f"    {what:10s} {t * 1e3:8,.0f} ms  {format_strategy(r, only_changed=True)}"
                      if np.isfinite(t) else f"    {what:10s} none fits")
            # the search's answer (its own per-op choices) under a TTFT limit 5% below the best
            # without cp (none found: no limit), with cp in the space
            for max_cp in (1, args.max_cp):
                limit = 0.95 * t1 * 1e3 if np.isfinite(t1) else 0.0
                w = chunked(Workload("prefill", context=args.isl, gpus=gpus, ttft_slo_ms=limit,
                                     max_cp=max_cp), profile)
                res = SEARCHERS["exact"](Problem(model, topo, w, engine_space=args.engine), 0,
                                         None, top=1)
                got = "nothing within it" if res.best is None else (
                    f"{format_strategy(res.best, only_changed=True)}: TTFT "
                    f"{evaluate(model, topo, w, res.best[None]).ttft_s[0] * 1e3:,.0f} ms")
                print(f"    lts search --max-cp {max_cp}" +
                      (f" --ttft-slo-ms {limit:,.0f}" if limit else "") + f": {got}")


if __name__ == "__main__":
    main()
