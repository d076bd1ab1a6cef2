"""The broad benchmark of issue 13: search methods on 74 problems beyond the paper's six
scenarios (32 in two halves, tune and report, and three sets of 14 kept aside), each method's
best tokens/s/GPU as a fraction of the exact optimum.

    python scripts/benchmark.py [--half tune|report|all|fresh|fresh2|fresh3] [--seeds 0-2]
                                [--methods ppo] [--engine-space generic,vllm,sglang,trtllm]
                                [--budget 4000] [--only NAME,...] [--set KEY=VALUE ...] [--json]

A problem is a shipped model on a shipped topology in one phase (decode, prefill or serve) with
SLOs and a GPU budget, chosen to span what users run: dense, MoE and MLA models from 8 B to
1.6 T parameters; H100, H200, A100, B200 and GB200 NVL72; 4 to 256 GPUs and whole clusters;
tight and loose TPOT, TTFT limits; the four engine profiles for the serve phase. The problems
alternate between two halves: ``tune`` (even positions) is the one to tune on, ``report`` (odd
positions) the one to report; every category appears in both. ``fresh`` is 14 further problems
written before any run on them and run once, at the end of issue 13's first session (docs/search-quality.md); ``fresh2`` and ``fresh3`` are 14 more each,
written the same way in its second session (``fresh3`` after ``fresh2`` had been run and
looked at). The paper's six scenarios are not here
(``scripts/search_quality.py`` checks them).

For each problem: the exact optimum once (``--method exact``; for the serve phase
``lts.search.serve_exact``), Megatron's exhaustive best once, then each method for every seed with the
budget of evaluator calls, as ``lts compare`` runs them (``search.run_seeds``; a run that finds
nothing counts as 0). Reported per method: the mean and the worst fraction of exact over the
problems' seeds, how many runs fall below Megatron's best (by more than 1e-9 relative), how many
find nothing, and the mean wall time of one run.

``--engine-space`` (issue 20) runs the same problems once per engine space (``generic``, the
default, is the paper's whole per-op space and the figures above; ``vllm``, ``sglang``,
``trtllm``: ``Problem.engine_space``, only what that engine runs as written) and reports each
space on its own: fractions of that space's exact optimum, Megatron's best within that space
(its choices at degrees the engine cannot lay out are invalid there). A serve problem whose
settings name an engine profile keeps it; one that names none takes the space's profile (as
``lts search --engine`` builds it); decode and prefill problems take the space only. In an
engine space ``exact`` is ``exact_engine.search_engine_exact`` (through ``SEARCHERS``), which
for the serve phase takes every integer concurrency, while the other methods search the
power-of-two and KV-capacity grid: there every method's result (Megatron's too) is refined as
``lts search`` refines it, its top 10 each at its best integer concurrency
(``search.every_concurrency``), before the fraction is taken, and the wall time counts that
refinement. In the generic space the comparison is today's: the serve phase's exact is
``lts.search.serve_exact`` over the same grid the methods search, and nothing is refined, so its
figures stay comparable with earlier reports.

Runs in process through the library API; the 16 problems of a half with ppo and 3 seeds take
about 40 s on the 2-core machine, a set of 14 with anneal and random walk besides about six
minutes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lts.agent import ppo                                            # noqa: E402
from lts.engines import ENGINES, GENERIC, REAL_ENGINES  # noqa: E402
from lts.search.problems import Problem, ServeProblem                 # noqa: E402
from lts.search.methods import (SEARCHERS, best_scores, every_concurrency, run_seeds,  # noqa: E402
                        search_ppo)
from lts.specs import load_model, load_topology                # noqa: E402
from lts.specs.workload import Workload                              # noqa: E402
from search_quality import parse_seeds, parse_sets             # noqa: E402

# (name, model, precision, topology, phase, settings): decode/prefill settings are the
# Workload's (context, tpot_slo_ms, ttft_slo_ms, gpus); serve's are isl, osl, tpot, ttft, gpus,
# engine. Positions alternate between the halves: tune, report, tune, ...
PROBLEMS = [
    ("moe1.6t-h100-d4k", "moe1.6t", None, "h100_dgx", "decode", dict(context=4096, tpot=50)),
    ("moe1.6t-h100-tpot20", "moe1.6t", None, "h100_dgx", "decode", dict(context=16384, tpot=20)),
    ("moe1.6t-h100-64gpu", "moe1.6t", None, "h100_dgx", "decode", dict(context=16384, gpus=64)),
    ("moe1.2t-h200-d32k", "moe1.2t", None, "h200_dgx", "decode", dict(context=32768)),
    ("moe1.2t-b200-prefill", "moe1.2t", None, "b200_dgx", "prefill",
     dict(context=4096, ttft=2000)),
    ("dsv3-h200-64gpu", "deepseek-v3", None, "h200_dgx", "decode", dict(context=8192, gpus=64)),
    ("dsv3-fp8-h100-prefill", "deepseek-v3", "fp8", "h100_dgx", "prefill",
     dict(context=4096, ttft=1000, gpus=16)),
    ("dsv3-gb200-72gpu", "deepseek-v3", None, "gb200_nvl72", "decode",
     dict(context=16384, tpot=30, gpus=72)),
    ("qwen235-fp8-h100-16gpu", "qwen3-235b-a22b", "fp8", "h100_dgx", "decode",
     dict(context=4096, gpus=16)),
    ("qwen235-a100-16gpu", "qwen3-235b-a22b", None, "a100_dgx", "decode",
     dict(context=8192, tpot=100, gpus=16)),
    ("qwen235-h200-prefill", "qwen3-235b-a22b", None, "h200_dgx", "prefill",
     dict(context=8192, ttft=3000, gpus=8)),
    ("mixtral22-h100-16gpu", "mixtral-8x22b", None, "h100_dgx", "decode",
     dict(context=8192, tpot=30, gpus=16)),
    ("mixtral22-a100-prefill", "mixtral-8x22b", None, "a100_dgx", "prefill",
     dict(context=2048, ttft=1000, gpus=32)),
    ("mixtral7-b200-tpot20", "mixtral-8x7b", None, "b200_dgx", "decode",
     dict(context=32768, tpot=20, gpus=8)),
    ("llama405-h100-128gpu", "llama3.1-405b", None, "h100_dgx", "decode",
     dict(context=8192, gpus=128)),
    ("llama405-h200-prefill", "llama3.1-405b", None, "h200_dgx", "prefill",
     dict(context=4096, ttft=2000, gpus=16)),
    ("llama405-gb200-72gpu", "llama3.1-405b", None, "gb200_nvl72", "decode",
     dict(context=32768, gpus=72)),
    ("llama70-a100-8gpu", "llama3.1-70b", None, "a100_dgx", "decode",
     dict(context=4096, tpot=30, gpus=8)),
    ("llama70-h100-prefill", "llama3.1-70b", None, "h100_dgx", "prefill",
     dict(context=8192, ttft=1000, gpus=8)),
    ("llama8-h100-tpot10", "llama3.1-8b", None, "h100_dgx", "decode",
     dict(context=4096, tpot=10, gpus=8)),
    ("qwen32-h200-8gpu", "qwen3-32b", None, "h200_dgx", "decode",
     dict(context=16384, tpot=30, gpus=8)),
    ("qwen32-a100-prefill", "qwen3-32b", None, "a100_dgx", "prefill",
     dict(context=4096, ttft=500, gpus=4)),
    ("serve-llama70-h100", "llama3.1-70b", None, "h100_dgx", "serve",
     dict(isl=4000, osl=1000, tpot=30, ttft=2000, gpus=8)),
    ("serve-qwen235-fp8-h100", "qwen3-235b-a22b", "fp8", "h100_dgx", "serve",
     dict(isl=4000, osl=1000, tpot=30, ttft=2000, gpus=8)),
    ("serve-dsv3-fp8-h100", "deepseek-v3", "fp8", "h100_dgx", "serve",
     dict(isl=4000, osl=1000, tpot=30, ttft=2000, gpus=16)),
    ("serve-mixtral7-h100", "mixtral-8x7b", None, "h100_dgx", "serve",
     dict(isl=1024, osl=1024, tpot=30, ttft=2000, gpus=8)),
    ("serve-llama405-h100-32gpu", "llama3.1-405b", None, "h100_dgx", "serve",
     dict(isl=4000, osl=1000, tpot=30, ttft=2000, gpus=32)),
    ("serve-llama8-a100-vllm", "llama3.1-8b", None, "a100_dgx", "serve",
     dict(isl=1024, osl=256, tpot=20, gpus=4, engine="vllm")),
    ("serve-qwen32-h100-sglang", "qwen3-32b", None, "h100_dgx", "serve",
     dict(isl=1024, osl=128, ttft=500, gpus=8, engine="sglang")),
    ("serve-mixtral22-h200-trtllm", "mixtral-8x22b", None, "h200_dgx", "serve",
     dict(isl=2048, osl=512, tpot=50, gpus=16, engine="trtllm")),
    ("serve-moe1.2t-h100-256gpu", "moe1.2t", None, "h100_dgx", "serve",
     dict(isl=1024, osl=1024, tpot=50, gpus=256)),
    ("serve-dsv3-h200", "deepseek-v3", None, "h200_dgx", "serve",
     dict(isl=2048, osl=2048, tpot=40, ttft=3000, gpus=16)),
]
# Kept aside (issue 13, written before any run on them): run once, at the end, to check the
# agent on problems no one looked at while it was built (the halves above were both looked at).
FRESH = [
    ("moe1.6t-h200-d8k", "moe1.6t", None, "h200_dgx", "decode", dict(context=8192, tpot=40)),
    ("moe1.2t-gb200-prefill", "moe1.2t", None, "gb200_nvl72", "prefill",
     dict(context=8192, ttft=3000, gpus=72)),
    ("dsv3-b200-d16k", "deepseek-v3", None, "b200_dgx", "decode",
     dict(context=16384, tpot=25, gpus=32)),
    ("qwen235-gb200-d32k", "qwen3-235b-a22b", None, "gb200_nvl72", "decode",
     dict(context=32768, gpus=36)),
    ("mixtral7-a100-prefill", "mixtral-8x7b", None, "a100_dgx", "prefill",
     dict(context=8192, ttft=1500, gpus=8)),
    ("mixtral22-b200-d8k", "mixtral-8x22b", None, "b200_dgx", "decode",
     dict(context=8192, tpot=15, gpus=8)),
    ("llama405-a100-64gpu", "llama3.1-405b", None, "a100_dgx", "decode",
     dict(context=4096, tpot=80, gpus=64)),
    ("llama8-b200-prefill", "llama3.1-8b", None, "b200_dgx", "prefill",
     dict(context=16384, ttft=300, gpus=8)),
    ("qwen32-gb200-tpot8", "qwen3-32b", None, "gb200_nvl72", "decode",
     dict(context=8192, tpot=8, gpus=16)),
    ("serve-llama70-h200-sglang", "llama3.1-70b", None, "h200_dgx", "serve",
     dict(isl=8000, osl=500, ttft=1500, gpus=8, engine="sglang")),
    ("serve-dsv3-h100-vllm", "deepseek-v3", None, "h100_dgx", "serve",
     dict(isl=1000, osl=1000, tpot=50, gpus=32, engine="vllm")),
    ("serve-qwen235-b200-trtllm", "qwen3-235b-a22b", None, "b200_dgx", "serve",
     dict(isl=2000, osl=2000, tpot=20, gpus=8, engine="trtllm")),
    ("serve-mixtral7-a100", "mixtral-8x7b", None, "a100_dgx", "serve",
     dict(isl=512, osl=512, tpot=40, ttft=1000, gpus=4)),
    ("serve-qwen32-gb200", "qwen3-32b", None, "gb200_nvl72", "serve",
     dict(isl=4000, osl=1000, tpot=15, gpus=8)),
]
# Kept aside for the second session of issue 13 (written before any run on them, run once at
# its end): checks the changes made after FRESH was looked at (n_steps 32 -> 64).
FRESH2 = [
    ("moe1.6t-b200-d32k", "moe1.6t", None, "b200_dgx", "decode", dict(context=32768, tpot=60)),
    ("moe1.2t-h100-prefill-64", "moe1.2t", None, "h100_dgx", "prefill",
     dict(context=2048, ttft=1500, gpus=64)),
    ("dsv3-a100-d4k", "deepseek-v3", None, "a100_dgx", "decode",
     dict(context=4096, tpot=80, gpus=64)),
    ("qwen235-h100-d16k", "qwen3-235b-a22b", None, "h100_dgx", "decode",
     dict(context=16384, tpot=40, gpus=32)),
    ("mixtral22-gb200-prefill", "mixtral-8x22b", None, "gb200_nvl72", "prefill",
     dict(context=16384, ttft=2500, gpus=18)),
    ("llama405-b200-tpot25", "llama3.1-405b", None, "b200_dgx", "decode",
     dict(context=8192, tpot=25, gpus=16)),
    ("llama8-a100-d32k", "llama3.1-8b", None, "a100_dgx", "decode",
     dict(context=32768, tpot=15, gpus=4)),
    ("serve-moe1.6t-h200-128gpu", "moe1.6t", None, "h200_dgx", "serve",
     dict(isl=2000, osl=500, tpot=60, gpus=128)),
    ("serve-dsv3-b200-sglang", "deepseek-v3", None, "b200_dgx", "serve",
     dict(isl=3000, osl=300, ttft=2000, gpus=16, engine="sglang")),
    ("serve-qwen235-h200-vllm", "qwen3-235b-a22b", None, "h200_dgx", "serve",
     dict(isl=1000, osl=2000, tpot=25, gpus=8, engine="vllm")),
    ("serve-llama405-b200-trtllm", "llama3.1-405b", None, "b200_dgx", "serve",
     dict(isl=2000, osl=200, tpot=40, ttft=3000, gpus=16, engine="trtllm")),
    ("serve-mixtral22-a100", "mixtral-8x22b", None, "a100_dgx", "serve",
     dict(isl=512, osl=1024, tpot=60, gpus=16)),
    ("serve-llama8-gb200-tight", "llama3.1-8b", None, "gb200_nvl72", "serve",
     dict(isl=8000, osl=400, tpot=5, ttft=800, gpus=4)),
    ("serve-qwen32-a100-sglang", "qwen3-32b", None, "a100_dgx", "serve",
     dict(isl=2000, osl=1000, tpot=40, gpus=8, engine="sglang")),
]
# Kept aside after FRESH2 failed the agent (0.988, three runs below Megatron) and the Megatron
# sweep (PPOConfig.baseline_sweep) was added: written before any run on them, run once at the end.
FRESH3 = [
    ("moe1.6t-gb200-d16k", "moe1.6t", None, "gb200_nvl72", "decode",
     dict(context=16384, tpot=40, gpus=288)),
    ("moe1.2t-a100-d8k", "moe1.2t", None, "a100_dgx", "decode", dict(context=8192, tpot=100)),
    ("dsv3-h100-prefill-32", "deepseek-v3", None, "h100_dgx", "prefill",
     dict(context=8192, ttft=2000, gpus=32)),
    ("qwen235-b200-d64k", "qwen3-235b-a22b", None, "b200_dgx", "decode",
     dict(context=65536, tpot=50, gpus=16)),
    ("mixtral7-h200-prefill", "mixtral-8x7b", None, "h200_dgx", "prefill",
     dict(context=32768, ttft=4000, gpus=8)),
    ("llama70-gb200-d16k", "llama3.1-70b", None, "gb200_nvl72", "decode",
     dict(context=16384, tpot=12, gpus=16)),
    ("qwen32-h100-d64k", "qwen3-32b", None, "h100_dgx", "decode",
     dict(context=65536, tpot=40, gpus=8)),
    ("serve-moe1.2t-h200-64gpu", "moe1.2t", None, "h200_dgx", "serve",
     dict(isl=1500, osl=1500, tpot=40, gpus=64)),
    ("serve-dsv3-h200-trtllm", "deepseek-v3", None, "h200_dgx", "serve",
     dict(isl=4000, osl=1000, tpot=60, ttft=4000, gpus=16, engine="trtllm")),
    ("serve-qwen235-a100", "qwen3-235b-a22b", None, "a100_dgx", "serve",
     dict(isl=1000, osl=500, tpot=80, gpus=16)),
    ("serve-llama70-b200-vllm", "llama3.1-70b", None, "b200_dgx", "serve",
     dict(isl=2000, osl=2000, tpot=15, gpus=8, engine="vllm")),
    ("serve-mixtral7-h200-sglang", "mixtral-8x7b", None, "h200_dgx", "serve",
     dict(isl=6000, osl=300, ttft=1000, gpus=8, engine="sglang")),
    ("serve-llama405-h200", "llama3.1-405b", None, "h200_dgx", "serve",
     dict(isl=3000, osl=800, tpot=50, ttft=5000, gpus=16)),
    ("serve-llama8-h100-tight", "llama3.1-8b", None, "h100_dgx", "serve",
     dict(isl=500, osl=100, tpot=8, ttft=300, gpus=2)),
]
HALVES = {"tune": PROBLEMS[0::2], "report": PROBLEMS[1::2], "all": PROBLEMS, "fresh": FRESH,
          "fresh2": FRESH2, "fresh3": FRESH3}


SPACES = (GENERIC,) + REAL_ENGINES
REFINE_TOP = 10         # an engine space's serve phase: the top strategies refined (lts search's)


def make_problem(model_name, precision, topo_name, phase, s, space=GENERIC) -> Problem:
    """The problem in engine space ``space``; a serve problem's profile is its settings' engine,
    else the space's (``generic``: the generic profile)."""
    model, topo = load_model(model_name, precision), load_topology(topo_name)
    if phase == "serve":
        profile = s.get("engine", space)
        return ServeProblem(model, topo, s["isl"], s["osl"], s.get("tpot"), s.get("ttft"),
                            gpus=s.get("gpus", 0), engine=ENGINES[profile].profile,
                            engine_space=space)
    return Problem(model, topo, Workload(phase, s["context"], tpot_slo_ms=s.get("tpot", 50.0),
                                         ttft_slo_ms=s.get("ttft", 0.0), gpus=s.get("gpus", 0)),
                   engine_space=space)


def run_problem(entry, methods, seeds, budget, cfg, space=GENERIC) -> dict:
    """Exact and Megatron once, each method for every seed: fractions of exact per run (an
    engine space's serve phase: each result refined to every integer concurrency first)."""
    name, model_name, precision, topo_name, phase, s = entry
    problem = make_problem(model_name, precision, topo_name, phase, s, space)
    refine = space != GENERIC and phase == "serve"
    top = REFINE_TOP if refine else 1

    def runs_of(method, seeds, budget, searcher=None):
        runs = run_seeds(problem, method, seeds, budget, top=top, searcher=searcher)
        return [every_concurrency(problem, r) for r in runs] if refine else runs

    out = {"name": name, "phase": phase}
    for method in ("exact", "megatron"):
        t0 = time.perf_counter()
        r = runs_of(method, [0], 0)[0]
        out[method], out[f"{method}_wall_s"] = r.best_score, time.perf_counter() - t0
    exact, mega = out["exact"], out["megatron"]
    out["methods"] = {}
    for method in methods:
        searcher = partial(search_ppo, cfg=cfg) if method == "ppo" else None
        t0 = time.perf_counter()
        runs = runs_of(method, seeds, budget, searcher)
        wall = (time.perf_counter() - t0) / len(seeds)
        scores = best_scores(runs)
        out["methods"][method] = {
            "fractions": (scores / exact).tolist() if exact > 0 else [],
            "below_megatron": int(np.sum(scores < mega * (1 - 1e-9))) if mega > 0 else 0,
            "empty": int(np.sum(scores <= 0)), "wall_s": wall}
    return out


def summary(results, method) -> dict:
    fr = np.concatenate([r["methods"][method]["fractions"] for r in results])
    means = [np.mean(r["methods"][method]["fractions"]) for r in results]
    return {"mean": float(np.mean(fr)), "worst": float(np.min(fr)),
            "worst_problem_mean": float(np.min(means)),
            "runs": int(len(fr)),
            "below_megatron": sum(r["methods"][method]["below_megatron"] for r in results),
            "empty": sum(r["methods"][method]["empty"] for r in results),
            "wall_s": float(np.mean([r["methods"][method]["wall_s"] for r in results]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--half", choices=sorted(HALVES), default="tune")
    ap.add_argument("--seeds", default="0-2", help="e.g. 0-2 or 3-9")
    ap.add_argument("--methods", default="ppo", help="comma-separated, from: "
                    + ", ".join(m for m in SEARCHERS if m not in ("exact", "megatron")))
    ap.add_argument("--engine-space", default=GENERIC,
                    help="comma-separated, from: " + ", ".join(SPACES) + " (each reported alone)")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                    help="override a PPOConfig field for method ppo (repeatable)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cfg = replace(ppo.PPOConfig(), **parse_sets(args.sets))
    seeds, methods = parse_seeds(args.seeds), args.methods.split(",")
    spaces = args.engine_space.split(",")
    if not set(spaces) <= set(SPACES):
        ap.error(f"--engine-space {args.engine_space}: expected some of {', '.join(SPACES)}")
    only = set(filter(None, args.only.split(",")))
    problems = [p for p in HALVES[args.half] if not only or p[0] in only]
    docs = [run_space(space, problems, methods, seeds, cfg, args) for space in spaces]
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=1))
    return 0


def run_space(space, problems, methods, seeds, cfg, args) -> dict:
    """The benchmark in one engine space: the table as it runs (unless --json), the summary,
    and the JSON document of the space."""
    results = []
    if not args.json:
        print(f"half {args.half}: {len(problems)} problems, seeds {args.seeds}, budget "
              f"{args.budget}" + (f", engine space {space}" if space != GENERIC else ""))
        print(f"{'problem':<30}{'exact':>11}{'megatron':>9}" +
              "".join(f"{m + ' mean':>12}{'worst':>7}{'<meg':>5}{'none':>5}" for m in methods)
              + f"{'exact s':>8}")
    for entry in problems:
        r = run_problem(entry, methods, seeds, args.budget, cfg, space)
        results.append(r)
        if args.json:
            continue
        ex = r["exact"]
        line = f"{r['name']:<30}{ex:>11,.1f}{r['megatron'] / ex if ex > 0 else 0:>9.3f}"
        for m in methods:
            d = r["methods"][m]
            f = d["fractions"] or [0.0]
            line += f"{np.mean(f):>12.3f}{min(f):>7.3f}{d['below_megatron']:>5}{d['empty']:>5}"
        print(line + f"{r['exact_wall_s']:>8.1f}", flush=True)
    sums = {m: summary(results, m) for m in methods}
    doc = {"half": args.half, "engine_space": space, "seeds": seeds, "budget": args.budget,
           "problems": results, "summary": sums}
    if args.json:
        return doc
    mega = [r["megatron"] / r["exact"] for r in results if r["exact"] > 0]
    print(f"megatron: mean {np.mean(mega):.3f} of exact, worst {min(mega):.3f}")
    for m, s in sums.items():
        print(f"{m}: mean {s['mean']:.3f} of exact over {s['runs']} runs, worst run "
              f"{s['worst']:.3f}, worst problem mean {s['worst_problem_mean']:.3f}; below "
              f"Megatron {s['below_megatron']}, nothing found {s['empty']}; "
              f"{s['wall_s']:.2f} s per run", flush=True)
    return doc


if __name__ == "__main__":
    sys.exit(main())
