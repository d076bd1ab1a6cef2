"""The search methods' names and budget maxima: what the command line needs before it imports
the methods themselves (``search.methods``, which registers each name in ``SEARCHERS``)."""
from __future__ import annotations

METHODS = ("ppo", "ppo-paper", "random", "random-walk", "anneal", "megatron", "exact")
STOCHASTIC = ("ppo", "ppo-paper", "random-walk", "anneal", "random")   # seeded methods

# the most evaluator calls a method accepts, by phase: the largest accepted run of any shipped
# problem finishes within 60 s on a 2-core machine (issue 26). Measured here (CPython 3.11, 2
# cores, `lts search moe1.6t h100_dgx --method M --budget B --json`, scripts/limits.py --bounds):
# seconds per 1,000 calls beyond the start-up, decode (prefill alike) / serve —
#   random 0.0004 / 0.0033, random-walk 0.0073 / 0.0092, ppo 0.0065 / 0.133,
#   anneal 0.19 / 1.07, ppo-paper 2.7 / 3.6;
# each maximum is a round number under 30 s of those calls, half the bound, leaving room for
# the slower problems; checked at each maximum by scripts/limits.py --bounds (moe1.6t h100_dgx:
# 0.5-31 s; the slowest calls, DeepSeek-V3 serve with --spec mtp --prefix-hit 0.5: anneal at
# 20,000 took 52.9 s, so its serve maximum is 15,000; ppo and random-walk serve were lowered
# alike). Peak memory at the maxima 0.1-1.2 GiB (serve random: 0.8 GiB at 500,000 calls, 1.2
# GiB at 5,000,000).
MAX_BUDGET = {"random": {"decode": 10_000_000, "prefill": 10_000_000, "serve": 5_000_000},
              "random-walk": {"decode": 3_000_000, "prefill": 3_000_000, "serve": 2_000_000},
              "anneal": {"decode": 150_000, "prefill": 150_000, "serve": 15_000},
              "ppo": {"decode": 1_000_000, "prefill": 1_000_000, "serve": 100_000},
              "ppo-paper": {"decode": 10_000, "prefill": 10_000, "serve": 5_000}}
BUDGET_SECONDS = 60    # what the maxima above bound a run to, here
