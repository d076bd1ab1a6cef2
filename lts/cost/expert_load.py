"""The busiest expert-parallel rank's share of a MoE layer's routed tokens: how much more than its
uniform share the most loaded rank gets under realistic routing, with or without the engines'
expert-parallel load balancer (EPLB) and its redundant experts (docs/design.md §3 "Expert load").

A MoE layer's step waits for its busiest rank. With uniform routing every rank that holds m of
the layer's ``slots`` expert copies gets T k m / slots of the T k (token, expert) pairs of the T
tokens routed in the step; real routers are skewed. ``busiest`` returns I >= 1, the busiest
rank's pairs over that uniform share, as the cost tables' factor on the pairs (FLOPs, activation
bytes and the dispatch/combine bytes of the busiest rank; ``cost.tables``).

**The load model** is the power law of the kernel tables' collector (aiconfigurator
``collector/helper.py`` ``_generate_power_law_distribution``, read at ai-dynamo/aiconfigurator
095f58a5; its moe_perf rows ``power_law_1.01``; DeepSeek's, Kimi's, Qwen3.5's and MiniMax's models
use alpha 1.01, ``sdk/models/deepseek.py`` ``_power_law_alpha = 1.01``): each expert's load is drawn
from a power law of exponent ``ALPHA`` on [1, 0.8 T] (on [0.01, 2] when T k <= experts), the loads
scaled to T k pairs and capped at T (a token picks an expert once; the excess spread over the
others), the experts placed on the ranks in contiguous blocks (vLLM's default
``expert_placement_strategy = "linear"``, vllm/config/parallel.py; SGLang's and TensorRT-LLM's
``trivial`` placement). ``DRAWS`` draws from a fixed seed (deterministic), at every power of two
of T from 1 to 2^24 tokens; I is the mean over the draws of (busiest block's pairs) / (T k m /
experts), read at other T by linear interpolation in log2 T. Loads are kept fractional (the
collector rounds them to whole tokens). The curve of each (experts, top-k, m) is computed once
and kept, so the cost tables look it up for all their coarse rows at once.

**EPLB** (``ffn.eplb``: vLLM ``--enable-eplb``, SGLang ``--enable-eplb``, TensorRT-LLM's
``moe_config.load_balancer``) replicates the hottest experts into the ``redundant_experts`` extra
slots and places the slots so the ranks' loads even out (the collector's
``compute_expert_replication`` and ``compute_eplb_placement``: greedy replication, then the
heaviest slot first onto the least loaded rank). Modelled as its bound: the replication that
minimises the heaviest slot (the greedy's, found here by bisection on the load per copy), and the
busiest rank carrying the larger of the mean rank load and that heaviest slot: I =
max(1, heaviest slot / (T k m / slots)). Checked against the collector's greedy placement on the
same draws (scripts/expert_load.py, DeepSeek-V3's 256 experts): within 1% at 2, 8, 9 and 32
slots per rank and at 256 slots over 64 ranks, 5-8% low at 288 slots over 72 ranks (4 each, the
greedy's room per rank binds: 1.005 against 1.091 at 4,096 tokens). The rebalancing's own cost
(moving expert weights every few thousand steps) is not costed.

**Checked against the measured tables** (scripts/expert_load.py: every shared/data/kernels
``*/moe/*/*/moe_perf.parquet`` shape with balanced rows at three or more ep, at >= 4,096 tokens):
the fused layer's time at each token count, fitted on the balanced rows as a part that does not
shrink with ep plus a part in proportion to a rank's pairs (T k / ep), predicts the power_law_1.01
rows at ep > 1 (held out of the fit; alpha not fitted: the collector's) to median |log2| 0.108
with the busiest rank's pairs I T k / ep, against 0.418 with uniform routing (55,633 rows; vLLM
0.080, SGLang 0.118, TensorRT-LLM 0.143); the power_law_1.2 rows with alpha 1.2, 0.127 against
0.584. TensorRT-LLM's wideep_moe_perf rows with EPLB (the same fit on its rows without EPLB):
0.155 with EPLB's I, 0.380 with the static I (2,758 rows). Below ~4,096 tokens a rank's time is
its weight reads, which do not grow with its pairs: over all token counts that fit, which scales
the whole per-rank part by I, does worse than uniform routing (0.310 against 0.202, 300,566
rows), so lts applies I to the pairs only (their FLOPs and activation bytes; the weights a rank
reads are its active experts' whatever their load).

Properties (tests/test_expert_load.py): I = 1 on one rank (m >= slots) or under ``uniform``
load; I grows with the ranks along divisors (a finer split of the same placement: the busiest of
two halves carries at least half of its block); EPLB never exceeds the static placement and
more redundant slots never raise it (the heaviest slot only falls as copies are added).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

# the collector's exponent for the DeepSeek, Kimi, Qwen3.5 and MiniMax families (aiconfigurator
# sdk/models/deepseek.py, hybrid_moe.py, minimax_m3.py: _power_law_alpha = 1.01). aiconfigurator's
# generic MoE model (sdk/models/moe.py: Mixtral, Qwen-MoE, ...) uses 1.2, the tables' second and
# more skewed distribution; lts uses the milder 1.01 for every model, as its kernel reads do
# (cost.kernels.DEFAULT_DISTRIBUTION)
ALPHA = 1.01
DRAWS = 64                   # draws per token count: the mean's spread ~3% (its std / sqrt(64))
SEED = 36                    # the draws' seed (any fixed value: results are deterministic)
LOG2_TOKENS = np.arange(25, dtype=np.float64)     # the curves' grid: 1 .. 2^24 tokens
LOADS = ("power_law", "uniform")                   # FFNSpec.expert_load


@lru_cache(maxsize=32)
def expert_pairs(experts: int, top_k: int, alpha: float = ALPHA) -> np.ndarray:
    """[tokens grid, DRAWS, experts] (token, expert) pairs of each expert, the collector's power
    law (module docstring) at each T of ``LOG2_TOKENS``; read-only."""
    rng = np.random.default_rng([SEED, experts, top_k])
    u = rng.random((DRAWS, experts))
    tok = 2.0 ** LOG2_TOKENS[:, None, None]
    many = tok * top_k > experts
    lo, hi = np.where(many, 1.0, 0.01), np.where(many, 0.8 * tok, 2.0)
    a = 1.0 - alpha                                    # inverse CDF of x^-alpha on [lo, hi]
    x = ((hi ** a - lo ** a) * u + lo ** a) ** (1.0 / a)
    x = x / x.sum(axis=-1, keepdims=True) * (tok * top_k)
    for _ in range(experts):          # cap at T pairs, the excess spread over the others
        over = np.maximum(x - tok, 0.0).sum(axis=-1, keepdims=True)
        if not (over > 1e-9 * tok).any():
            break
        x = np.minimum(x, tok)
        room = x < tok
        x = x + np.where(room, over / np.maximum(room.sum(axis=-1, keepdims=True), 1), 0.0)
    x.setflags(write=False)
    return x


@lru_cache(maxsize=256)
def static_curve(experts: int, top_k: int, per_rank: int, alpha: float = ALPHA) -> np.ndarray:
    """[tokens grid] I of contiguous blocks of ``per_rank`` experts (the last may be short):
    mean over the draws of the busiest block's pairs / (T k per_rank / experts)."""
    if per_rank >= experts:
        return np.ones(len(LOG2_TOKENS))
    x = expert_pairs(experts, top_k, alpha)
    blocks = np.add.reduceat(x, np.arange(0, experts, per_rank), axis=-1)
    share = 2.0 ** LOG2_TOKENS[:, None] * top_k * per_rank / experts
    return np.maximum(blocks.max(axis=-1) / share, 1.0).mean(axis=-1)


@lru_cache(maxsize=64)
def heaviest_slot(experts: int, top_k: int, slots: int, alpha: float = ALPHA) -> np.ndarray:
    """[tokens grid, DRAWS] the heaviest slot's pairs when ``slots`` >= experts copies are given
    to the experts so that the heaviest copy is lightest (each expert's pairs split evenly over
    its copies): r_e = max(1, ceil(x_e / L)) copies at the least load L with sum r_e <= slots,
    by bisection on L (the collector's greedy reaches the same optimum)."""
    x = expert_pairs(experts, top_k, alpha)
    top = x.max(axis=-1)
    if slots <= experts:
        return top
    lo, hi = np.zeros_like(top), top.copy()
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        need = np.maximum(1.0, np.ceil(x / np.maximum(mid, 1e-300)[..., None])).sum(axis=-1)
        fits = need <= slots
        hi, lo = np.where(fits, mid, hi), np.where(fits, lo, mid)
    copies = np.maximum(1.0, np.ceil(x / hi[..., None]))
    return (x / copies).max(axis=-1)


@lru_cache(maxsize=256)
def balanced_curve(experts: int, top_k: int, slots: int, per_rank: int,
                   alpha: float = ALPHA) -> np.ndarray:
    """[tokens grid] I under EPLB with ``slots`` copies, ``per_rank`` on each rank: mean over the
    draws of max(1, heaviest slot / (T k per_rank / slots)) (module docstring)."""
    if per_rank >= slots:
        return np.ones(len(LOG2_TOKENS))
    share = 2.0 ** LOG2_TOKENS[:, None] * top_k * per_rank / slots
    return np.maximum(heaviest_slot(experts, top_k, slots, alpha) / share, 1.0).mean(axis=-1)


def busiest(ffn, per_rank, tokens) -> np.ndarray:
    """I, the busiest rank's (token, expert) pairs over its uniform share, for a MoE ``ffn``
    (``FFNSpec``: experts, top_k, its slots, ``eplb``, ``expert_load``) whose ranks each hold
    ``per_rank`` of its slots (rounded up) with ``tokens`` tokens routed in the step; arrays
    broadcast. 1 for ``uniform`` load and on one rank."""
    per_rank = np.asarray(per_rank, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.float64)
    per_rank, tokens = np.broadcast_arrays(per_rank, tokens)
    out = np.ones(per_rank.shape)
    if ffn.expert_load == "uniform" or ffn.kind != "moe":
        return out
    m = np.maximum(np.ceil(per_rank - 1e-9), 1.0).astype(np.int64)
    log_t = np.log2(np.maximum(tokens, 1.0))
    for mi in np.unique(m):
        sel = m == mi
        curve = balanced_curve(ffn.experts, ffn.top_k, ffn.slots, int(mi)) if ffn.eplb else \
            static_curve(ffn.experts, ffn.top_k, int(mi))
        out[sel] = np.interp(log_t[sel], LOG2_TOKENS, curve)
    return out
