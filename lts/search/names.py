"""The search methods' names and budget maxima: what the command line needs before it imports
the methods themselves (``search.methods``, which registers each name in ``SEARCHERS``)."""
from __future__ import annotations

METHODS = ("ppo", "ppo-paper", "random", "random-walk", "anneal", "megatron", "exact")
STOCHASTIC = ("ppo", "ppo-paper", "random-walk", "anneal", "random")   # seeded methods

# the most evaluator calls a method accepts, by phase: the largest accepted run of any shipped
# problem finishes within 60 s on a 2-core machine (issue 26). Measured here (CPython 3.11, 2
# cores, `lts search moe1.6t h100_dgx --method M --budget B --json`, scripts/limits.py --bounds,
# 2026-11-29, at the maxima of 2026-11-26, which had grown to 180 s as the ops and axes grew):
# seconds per 1,000 calls beyond the start-up, decode / prefill / serve —
#   random 0.0005 / 0.0005 / 0.0083, random-walk 0.014 / 0.016 / 0.021,
#   anneal 0.37 / 0.45 / 2.4 (DeepSeek-V3 serve with --spec mtp --prefix-hit 0.5: 3.8),
#   ppo 0.014 (it stopped early) / 0.18 / 0.27, ppo-paper 5.0 / 5.4 / 7.0 (DeepSeek-V3: 7.6);
# each maximum is a round number under 30 s of the slowest of those calls, half the bound,
# leaving room for slower problems (ppo's decode maximum is its prefill's: a run that does not
# stop early costs as much). Checked at each maximum by scripts/limits.py --bounds. Peak memory
# at the maxima 0.1-0.4 GiB.
MAX_BUDGET = {"random": {"decode": 10_000_000, "prefill": 10_000_000, "serve": 3_000_000},
              "random-walk": {"decode": 1_500_000, "prefill": 1_500_000, "serve": 1_000_000},
              "anneal": {"decode": 60_000, "prefill": 60_000, "serve": 7_500},
              "ppo": {"decode": 150_000, "prefill": 150_000, "serve": 100_000},
              "ppo-paper": {"decode": 5_000, "prefill": 5_000, "serve": 3_000}}
BUDGET_SECONDS = 60    # what the maxima above bound a run to, here
