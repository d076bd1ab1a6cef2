"""Wall time of simulated benchmark runs (docs/design.md §10's target: 10 x C requests at
C = 512, 1,024 / 1,024 tokens, within 2 s on this 2-core machine), the step table included, on
shipped models and engines; lengths over [0.8 L, L] as InferenceX's sweeps draw them (the case
with the most events) and equal (a burst's cohort in step).

    python scripts/simulate_speed.py
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.engines import ENGINES                      # noqa: E402
from lts.serving.simulate import Load, simulate      # noqa: E402
from lts.specs import load_model, load_topology      # noqa: E402
from lts.specs.strategy import parse_strategy        # noqa: E402

CASES = [("llama3.1-8b", "h100_dgx", "tp=1", "vllm"),
         ("llama3.1-70b", "h100_dgx", "tp=8", "vllm"),
         ("qwen3-32b", "h100_dgx", "tp=2", "sglang"),
         ("mixtral-8x7b", "h200_dgx", "tp=4", "trtllm"),
         ("deepseek-v3", "h200_dgx", "tp=1,ep=16", "sglang"),
         ("gpt-oss-120b", "b200_dgx", "tp=1", "vllm"),
         ("moe1.6t", "h100_dgx", "tp=8,ep=16,pp=4", "generic")]


def main():
    for model, topo, strategy, engine in CASES:
        m, t = load_model(model), load_topology(topo)
        row = parse_strategy(strategy, m.is_moe)
        for ratio in (0.8, 1.0):
            t0 = time.perf_counter()
            res = simulate(m, t, row, ENGINES[engine].profile.for_gpu(t),
                           Load(isl=1024, osl=1024, num_prompts=5120, max_concurrency=512,
                                range_ratio=ratio))
            s = res.summary()
            print(f"{model:14} {topo:11} {strategy:16} {engine:8} r={ratio:.1f}: "
                  f"{time.perf_counter() - t0:5.2f} s, {s['steps']:6,} steps, "
                  f"{len(res.timeline['start']):6,} events, {s['preemptions']:5,} preemptions, "
                  f"TTFT mean {s['ttft_ms']['mean']:9,.0f} ms")


if __name__ == "__main__":
    main()
