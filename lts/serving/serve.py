"""The ``serve`` phase: the closed loop that engines run under a benchmark (docs/design.md §8).

C clients each send a request of ``isl`` input and ``osl`` output tokens, wait for it and send the
next at once (aiperf/genai-perf ``--concurrency C``, ``vllm bench serve --max-concurrency C``).
The engine (an ``lts.engines.profiles.EngineProfile``) runs continuous batching with chunked prefill. The
model is the loop's steady state, vectorized over strategies (the batch column is C:
``strategy.CONCURRENCY``):

1. **Memory caps the running batch.** Two decode evaluations at the final context isl+osl (at
   u and 2u requests, u = the GPUs of an instance, ``strategy.instance_gpus``, where the KV cache
   grows exactly linearly) give the fixed bytes per GPU (weights, workspace) and the KV bytes
   per request. The engine's rule (``EngineProfile.kv_pool_bytes``, ``kv_pool``) sizes the KV
   pool; it holds ``kv_capacity`` requests, each with room for isl+osl tokens (TensorRT-LLM's
   GUARANTEED_NO_EVICT; conservative for the others). ``running`` n = min(C, kv_capacity, the
   engine's max running requests); the rest wait in a queue. A configuration is invalid
   (``memory``) only if not even one request fits.
2. **Two steps are costed by the evaluator**, each one pass over the model with weights read
   once: a decode step (n requests at the mean context isl + osl/2; a step's time is affine in
   the sum of the contexts it reads) and a mixed step (``specs.workload.compose_step``: the decode
   tokens of the requests not being prefilled plus a prefill chunk, under the engine's token
   budget per step). Each gets the engine's time per step.
3. **Cohorts.** Requests admitted together are prefilled together, finish together and are
   replaced together, so they stay a cohort of k requests whose prefill takes s steps.
   - Mixed engines (vLLM, TensorRT-LLM): k = the engine's ``cohort_base + cohort_share * n``
     (fitted; at least n/osl so that prefill keeps pace; ``specs.workload.compose_step``), its prompts
     in the budget left beside the decode tokens; m = n/k cohorts take turns. A cohort's cycle is
     s + osl - 1 steps; if the m*s prefill steps per cycle do not fit in it, the prefill queue
     stretches the cycle. TTFT = prefill queue + the mixed steps to its own prompt's last
     chunk: the cohort's prompts fill its s steps in turn, a (k+1)/2 + 1/2 of them on average
     (a = s/k), the mean request's TTFT rather than the cohort's last (issue 23); a request's
     osl - 1 decode steps include the rest of its cohort's and the other cohorts' prefill
     steps, min(osl - 1, m*s - that) of them, so
     TPOT ~ decode step + C x one prefill / osl (docs/design.md §8).
   - Prefill-first engines (SGLang): the whole running batch is one cohort, prefilled in
     prefill-only steps of the whole budget, then decoding together; request i's first token
     comes after ceil(i*isl/budget) of them, a*(n+1)/2 + 1/2 on average (a = isl/budget), and
     the rest of the batch's prefill steps stall its decode.
4. **Outputs** (``cost.latency.request_s``, ``closed_queue_s``). request latency L = TTFT +
   (osl-1) TPOT; output tokens/s = n * osl / L (Little's law: n requests in service); tokens/s
   per user = 1/TPOT. Requests beyond n wait (C - n)/n cycles: (C - n)/n * L is added to TTFT.
   The engine's time per request (HTTP, tokenization) is added to TTFT and L.

Every quantity is an array over strategies: 4 evaluator calls (two memory points, the decode and
the mixed step), no Python loop per strategy. ``best_batch`` finds the integer C up to the
capacity with the highest output tokens/s within the SLOs (``best_concurrency``); a batch column
of ``AT_CAPACITY`` (0) asks for C = the capacity (the result rows then hold that C).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from ..engines.space import attention_dp as runs_attention_dp
from ..cost.latency import closed_queue_s, request_s
from ..cost.model import Result, TableCache, evaluate
from ..cost.tables import REASON_BIT, REASONS
from ..engines import ENGINES, GENERIC
from ..engines.profiles import EngineProfile
from ..specs.strategy import (AT_CAPACITY, BATCH, CONCURRENCY, EP, PP, TP, coarse_rows,
                              instance_gpus, make_row, with_coarse)
from ..specs.workload import Workload
from .offload import host_tier
from .scheduler import step_counts
from .spec import tokens_per_step

NO_SLO = float("inf")


@dataclass
class ServeResult:
    """Serve-phase results of N strategies; arrays are [N]. Times in seconds, memory in bytes."""
    strategies: np.ndarray               # [N, WIDTH], the batch column holding the concurrency C
    valid: np.ndarray
    reasons: np.ndarray                  # bit flags, see cost.model.REASONS
    output_tokens_per_s: np.ndarray      # whole instance
    output_tokens_per_s_per_gpu: np.ndarray
    tokens_per_s_per_user: np.ndarray    # 1 / TPOT
    ttft_s: np.ndarray                   # mean time to first token (queue included)
    tpot_s: np.ndarray                   # mean time per output token after the first
    latency_s: np.ndarray                # mean request latency, TTFT + (osl - 1) * TPOT
    running: np.ndarray                  # requests in the running batch, n <= C
    kv_capacity: np.ndarray              # requests whose KV cache (isl + osl tokens) fits
    memory_bytes: np.ndarray             # per GPU with n requests at isl + osl tokens
    decode_step_s: np.ndarray            # one decode step of the n running requests
    mixed_step_s: np.ndarray             # one step that holds a prefill chunk
    gpus: np.ndarray
    # with a host tier (serving.offload; else None): [N, 3] the fractions of requests whose
    # prefix is on the GPU, on the host, nowhere (recomputed); the copy a request waits for
    # on average (a host hit's times the share on the host)
    prefix_split: np.ndarray | None = None
    copy_s: np.ndarray | None = None

    def reason_list(self, i: int) -> list:
        return [r for r in REASONS if self.reasons[i] & REASON_BIT[r]]

    def __len__(self):
        return len(self.valid)

    def take(self, idx) -> "ServeResult":
        return ServeResult(*(None if getattr(self, f.name) is None else getattr(self, f.name)[idx]
                             for f in fields(ServeResult)))


def memory_workload(isl: int, osl: int, gpus: int = 0, cached: int = 0) -> Workload:
    """A decode step at the final context isl + osl: the KV cache is largest there (memory and
    the engine's context length); a request's own tokens only, ``cached`` prompt tokens held
    apart (prefix caching: ``shared_prefix_bytes``)."""
    return Workload("decode", int(isl) - int(cached) + int(osl), tpot_slo_ms=NO_SLO, gpus=gpus)


def decode_workload(isl: int, osl: int, gpus: int = 0, query_tokens: int = 1) -> Workload:
    """The decode step of the running batch: the mean context isl + osl/2 (the step the per-op
    breakdowns of ``lts estimate`` and ``lts search`` show); ``query_tokens`` per sequence
    (speculative decoding's verification, ``serving.spec``)."""
    return Workload("decode", int(isl) + int(osl) // 2, tpot_slo_ms=NO_SLO, gpus=gpus,
                    query_tokens=int(query_tokens))


def mixed_workload(isl: int, osl: int, engine: EngineProfile, gpus: int = 0,
                   attn_dp_tp: bool = False, query_tokens: int = 1) -> Workload:
    """A step that holds a prefill chunk (``specs.workload.compose_step``); ``attn_dp_tp``: of
    strategies whose tp ranks are attention-DP ranks (each its own scheduler);
    ``query_tokens``: per decoding sequence (speculative decoding)."""
    return Workload("mixed", int(isl) + int(osl) // 2, tpot_slo_ms=NO_SLO, gpus=gpus, isl=int(isl),
                    osl=int(osl), step_tokens=engine.step_tokens, mixed=engine.mixed,
                    cohort_base=engine.cohort_base, cohort_share=engine.cohort_share,
                    budget_per_rank=engine.budget_per_rank, attn_dp_tp=attn_dp_tp,
                    query_tokens=int(query_tokens))


def step_workloads(isl: int, osl: int, engine: EngineProfile, gpus: int = 0,
                   spec=None, cached: int = 0) -> tuple:
    """(decode, mixed) step workloads of the loop; with speculative decoding
    (``serving.spec.Speculation``) each decoding request verifies k + 1 tokens a step and gains
    its mean accepted length; ``cached`` prompt tokens are not prefilled (prefix caching)."""
    q = spec.tokens + 1 if spec is not None else 1
    mixed = replace(mixed_workload(isl, osl, engine, gpus, query_tokens=q), cached=int(cached))
    if spec is not None:
        mixed = replace(mixed, tokens_per_step=tokens_per_step(spec, osl))
    return decode_workload(isl, osl, gpus, q), mixed


def prefix_workload(cached: int, gpus: int = 0) -> Workload:
    """A decode step at the context of a cached prefix: its KV bytes per request (two memory
    points, ``shared_prefix_bytes``)."""
    return Workload("decode", int(cached), tpot_slo_ms=NO_SLO, gpus=gpus)


def shared_prefix_bytes(ev: "Evaluator", prefix, isl: int, gpus: int, rows) -> np.ndarray:
    """Bytes per GPU of the cached prefixes (``serving.prefix``) [N]: each prefix's KV cache
    (a request's at its cached tokens, from two memory points as ``capacity`` takes them) held
    once on every attention-DP rank (ep group) of ``rows``; 0 without prefix caching."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    c = prefix.cached(isl) if prefix is not None else 0
    if c < 1:
        return np.zeros(len(rows))
    unit = instance_gpus(rows)
    work = prefix_workload(c, gpus)
    one = ev(work, _with_batch(rows, unit)).memory_bytes
    two = ev(work, _with_batch(rows, 2 * unit)).memory_bytes
    return prefix.prefixes * rows[:, EP] * (two - one) / unit


def _with_batch(strategies, batch) -> np.ndarray:
    """Copies of strategy rows with their batch column (the concurrency C, or a step's
    requests) set to ``batch``."""
    return with_coarse(strategies, batch=np.asarray(batch, dtype=np.int64))


def kv_pool(engine: EngineProfile, topo, fixed, rows) -> np.ndarray:
    """KV-cache bytes per GPU of strategy rows [N] once ``fixed`` bytes are held: the engine's
    rule (``EngineProfile.kv_pool_bytes``) at the rows' tp * pp, which SGLang's reads."""
    rows = np.atleast_2d(np.asarray(rows))
    return engine.kv_pool_bytes(topo, fixed, rows[:, TP] * rows[:, PP])


class Evaluator:
    """``cost.model.evaluate`` for one model and topology, optionally with a ``TableCache`` per
    workload (``cached=True``: for a search that serves many small batches)."""

    def __init__(self, model, topo, cached: bool = False):
        self.model, self.topo, self.cached = model, topo, cached
        self.caches = {}

    def __call__(self, work: Workload, rows) -> Result:
        if not self.cached:
            return evaluate(self.model, self.topo, work, rows)
        return self.cache(work).evaluate(rows)

    def cache(self, work: Workload) -> TableCache:
        """The table cache of one workload (made on first use)."""
        if work not in self.caches:
            self.caches[work] = TableCache(self.model, self.topo, work)
        return self.caches[work]


def warm(ev: Evaluator, engine: EngineProfile, coarse, isl: int, osl: int, gpus: int = 0,
         spec=None, cached: int = 0):
    """Fill a cached Evaluator's tables for coarse rows [G, N_COARSE] (their batch column the
    concurrency) at once: their memory points and, for the running batch n = C, their two
    steps (a search then builds tables only for running batches the KV cache caps). One build
    per workload."""
    coarse = np.asarray(coarse, dtype=np.int64)
    rows = coarse_rows(coarse)
    unit = instance_gpus(rows)
    ev(memory_workload(isl, osl, gpus, cached),
       np.concatenate([_with_batch(rows, unit), _with_batch(rows, 2 * unit)]))
    run = rows[rows[:, CONCURRENCY] != AT_CAPACITY]
    for work in step_workloads(isl, osl, engine, gpus, spec, cached):
        ev(work, run)


def draft_rows(rows) -> np.ndarray:
    """A speculative draft's rows [N, WIDTH] from strategy rows or coarse rows
    [N, >= N_COARSE]: Megatron's per-op choices at the target's tp and ep on one stage (every
    other axis 1), the batch kept (engines run the draft on the target's tensor-parallel group
    and shard it as a plain model; its one layer sits beside the last stage, counted on every
    GPU)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    return with_coarse(np.tile(make_row(), (len(rows), 1)), tp=rows[:, TP], ep=rows[:, EP],
                       batch=rows[:, BATCH])


def draft_s(draft: Evaluator, spec, isl: int, osl: int, gpus: int, rows) -> np.ndarray:
    """The k draft steps before each verification of running batches ``rows`` [N]
    (``serving.spec``): k decode steps of the draft at one token per sequence."""
    return spec.tokens * draft(decode_workload(isl, osl, gpus), draft_rows(rows)).step_s


def draft_memory(draft: Evaluator, isl: int, osl: int, gpus: int, rows) -> tuple:
    """(fixed bytes per GPU, KV bytes per request per GPU) [N] of a speculative draft beside
    the target of ``rows``, as ``capacity`` takes them from two memory points."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    unit = instance_gpus(rows)
    work = memory_workload(isl, osl, gpus)
    both = draft(work, draft_rows(np.concatenate([_with_batch(rows, unit),
                                                  _with_batch(rows, 2 * unit)]))).memory_bytes
    d1, d2 = both[:len(rows)], both[len(rows):]
    return d1 - (d2 - d1), (d2 - d1) / unit


def capacity(ev: Evaluator, engine: EngineProfile, strategies, isl: int, osl: int,
             gpus: int = 0, draft: Evaluator | None = None, prefix=None):
    """(requests whose KV cache fits [N], fixed bytes per GPU [N], KV bytes per request per GPU
    [N], reason bits that depend on neither [N]) -- see the module docstring, step 1. With a
    speculative ``draft`` (its Evaluator), its weights and KV cache per request count too; with
    a ``prefix`` cache (``serving.prefix``), a request holds its own tokens and the cached
    prefixes are held once (``shared_prefix_bytes``)."""
    unit = instance_gpus(strategies)
    cached = prefix.cached(isl) if prefix is not None else 0
    work = memory_workload(isl, osl, gpus, cached)
    # both points in one call (one table build: a row's figures do not depend on the others)
    both = ev(work, np.concatenate([_with_batch(strategies, unit),
                                    _with_batch(strategies, 2 * unit)]))
    n = len(strategies)
    one, two = both.memory_bytes[:n], both.memory_bytes[n:]
    per_unit = two - one                                     # KV (+ workspace) of u requests
    fixed = one - per_unit
    per_request = per_unit / unit
    if draft is not None:
        d_fixed, d_request = draft_memory(draft, isl, osl, gpus, strategies)
        fixed, per_request = fixed + d_fixed, per_request + d_request
    fixed = fixed + shared_prefix_bytes(ev, prefix, isl, gpus, strategies)
    pool = kv_pool(engine, ev.topo, fixed, strategies)
    cap = np.floor(np.maximum(pool, 0.0) / per_request)
    return cap, fixed, per_request, both.reasons[:n] & ~(REASON_BIT["memory"] | REASON_BIT["slo"])


def serve(model, topo, strategies, isl: int, osl: int, best_batch: bool = False,
          tpot_slo_ms: float | None = None, ttft_slo_ms: float | None = None,
          gpus: int = 0, engine: EngineProfile = ENGINES[GENERIC].profile,
          evaluator: Evaluator | None = None, attention_dp: bool = False,
          spec=None, draft: Evaluator | None = None, prefix=None) -> ServeResult:
    """Serve-phase figures of strategies [N, WIDTH] at concurrency C = their batch column
    (``CONCURRENCY``).

    Args:
        isl, osl: input and output tokens per request (both >= 1).
        best_batch: ignore the batch column; per row, the integer C up to what the KV cache
            holds with the highest output tokens/s within the SLOs (``best_concurrency``).
        tpot_slo_ms, ttft_slo_ms: enforced only when given.
        gpus: device budget (0: the whole topology).
        engine: the engine profile (scheduler knobs, memory rule, time per step and request).
        evaluator: an ``Evaluator`` of the model on ``engine.topology(topo)`` (to reuse its
            table caches across calls); by default a fresh, uncached one.
        attention_dp: schedule the data-parallel-attention rows as engines do (``_closed_loop``).
        spec: speculative decoding (``serving.spec.Speculation``): each decode step verifies
            k + 1 tokens per request after k draft steps and yields its mean accepted length.
        draft: an ``Evaluator`` of ``spec.draft`` on the same topology (to reuse its caches).
        prefix: prefix caching (``serving.prefix.PrefixCache``): the cached prompt tokens are
            not prefilled and their KV cache is held once per prefix.
    """
    strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
    if isl < 1 or osl < 1:
        raise ValueError(f"isl and osl must be >= 1, got {isl}, {osl}")
    ev = evaluator or Evaluator(model, engine.topology(topo))
    if spec is not None and draft is None:
        draft = Evaluator(spec.draft, ev.topo)
    cap, fixed, per_request, fixed_reasons = capacity(ev, engine, strategies, isl, osl, gpus,
                                                      draft, prefix)
    cached = prefix.cached(isl) if prefix is not None else 0
    tier = None
    if offloads(prefix, isl):
        tier, cap, fixed, per_request = _host_tier(ev, engine, prefix, isl, gpus, strategies,
                                                   cap, fixed, per_request)
    if not best_batch:
        return _closed_loop(ev, engine, strategies, isl, osl, cap, fixed, per_request,
                            fixed_reasons, tpot_slo_ms, ttft_slo_ms, gpus, attention_dp,
                            spec, draft, cached, tier)
    loop = lambda rows, take: _closed_loop(                   # noqa: E731
        ev, engine, rows, isl, osl, cap[take], fixed[take], per_request[take],
        fixed_reasons[take], tpot_slo_ms, ttft_slo_ms, gpus, attention_dp, spec, draft, cached,
        tier.take(take) if tier is not None else None)
    return best_concurrency(loop, strategies, engine.holds(cap))


def offloads(prefix, isl: int) -> bool:
    """Whether a prefix cache has a host tier that holds something (``serving.offload``)."""
    return prefix is not None and prefix.offload_bytes > 0 and prefix.cached(isl) >= 1


def _host_tier(ev: "Evaluator", engine: EngineProfile, prefix, isl, gpus, rows, cap, fixed,
               per_request) -> tuple:
    """``offload.host_tier`` of strategy rows on the evaluator's topology: (HostTier, capacity,
    fixed bytes, bytes per request) [N]; a ValueError where the engine or the topology has no
    host tier."""
    eng = ENGINES[engine.name]
    if not eng.kv_offload:
        raise ValueError(f"{eng.label} has no KV-cache offload to host memory")
    bandwidth = ev.topo.host_bandwidth_bytes_s
    if bandwidth <= 0:
        raise ValueError(f"topology {ev.topo.name} gives no gpu.host_bandwidth_gb_s")
    shared = shared_prefix_bytes(ev, prefix, isl, gpus, rows)
    return host_tier(prefix, lambda f: kv_pool(engine, ev.topo, f, rows), rows, cap, fixed,
                     per_request, shared, prefix_kv_bytes(ev, prefix.cached(isl), gpus, rows),
                     bandwidth, eng.offload_inclusive)


def prefix_kv_bytes(ev: "Evaluator", cached: int, gpus: int, rows) -> np.ndarray:
    """The KV cache alone of one prefix of ``cached`` tokens on one GPU of its attention-DP
    rank [N]: what a host tier holds and copies back (``serving.offload``). A request's bytes
    per GPU at a context (two memory points, as ``shared_prefix_bytes``) hold its workspace too;
    the difference between ``cached`` tokens and one is the KV of cached - 1 tokens, to which
    one token's share is added."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    unit = instance_gpus(rows)

    def per_request(tokens):
        work = prefix_workload(tokens, gpus)
        one = ev(work, _with_batch(rows, unit)).memory_bytes
        two = ev(work, _with_batch(rows, 2 * unit)).memory_bytes
        return rows[:, EP] * (two - one) / unit

    if cached < 2:
        return per_request(cached)
    kv = per_request(cached) - per_request(1)
    return kv * cached / (cached - 1)


WINDOW = 16      # concurrencies on each side of the largest within the SLOs that best_concurrency also tries


ROUND_ROWS = 64      # closed loops costed at once by one round of ``bisect_largest``


def bisect_largest(valid, lo, hi) -> np.ndarray:
    """Per row, the bisection between ``lo`` (a C known to meet the limits, 0: none) and ``hi``
    (one known not to) for the largest C that ``valid(rows [k], C [k]) -> bool [k]`` accepts:
    ``lo`` once ``hi - lo <= 1`` everywhere.

    Each round takes ``depth`` bisection steps at once: every midpoint they could visit (a
    subtree of 2^depth - 1 per row) is asked in one call of ``valid``, then the steps are
    replayed on the answers, so the result is the plain bisection's exactly, in fewer calls.
    A call's tables cost about the same for 1 row as for 64 (``cost.tables.build_tables``), so
    ``depth`` fills ROUND_ROWS (one step a round from 64 rows on)."""
    lo, hi = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    while True:
        todo = np.flatnonzero(hi - lo > 1)
        if not len(todo):
            return lo
        n = len(todo)
        depth = max(1, int(np.log2(ROUND_ROWS / n + 1)))
        nodes = (1 << depth) - 1               # heap order: node i's children 2i+1, 2i+2
        node_lo, node_hi = np.empty((n, nodes)), np.empty((n, nodes))
        node_lo[:, 0], node_hi[:, 0] = lo[todo], hi[todo]
        for i in range(nodes // 2):            # a node's halves: (lo, mid) and (mid, hi)
            mid = np.floor((node_lo[:, i] + node_hi[:, i]) / 2)
            node_lo[:, 2 * i + 1], node_hi[:, 2 * i + 1] = node_lo[:, i], mid
            node_lo[:, 2 * i + 2], node_hi[:, 2 * i + 2] = mid, node_hi[:, i]
        row, node = np.nonzero(node_hi - node_lo > 1)      # midpoints bisection could reach
        ok = np.zeros((n, nodes), dtype=bool)
        ok[row, node] = valid(todo[row], np.floor((node_lo[row, node] + node_hi[row, node]) / 2))
        r_lo, r_hi, at = lo[todo], hi[todo], np.zeros(n, dtype=np.int64)
        for _ in range(depth):                 # the plain bisection, on the answers
            go = r_hi - r_lo > 1
            mid = np.floor((r_lo + r_hi) / 2)
            good = ok[np.arange(n), at]
            r_lo, r_hi = np.where(go & good, mid, r_lo), np.where(go & ~good, mid, r_hi)
            at = np.minimum(2 * at + np.where(good, 2, 1), nodes - 1)
        lo[todo], hi[todo] = r_lo, r_hi


def best_concurrency(loop, strategies, limit) -> ServeResult:
    """Per strategy row, the integer concurrency C in 1..limit (what the KV cache and the engine
    hold: beyond it requests only queue) with the most output tokens/s within the SLOs; where
    none meets them, C = 1 (invalid). ``loop(rows, take)`` is the closed loop of ``rows`` whose
    memory figures are those of the strategies ``take``.

    The loop's TTFT and TPOT rise with C, so the concurrencies within the SLOs are 1..C_max:
    C_max is found by bisection (about log2(limit) vectorized rounds). Neither rises strictly
    everywhere (whole prefill steps and micro-batches round: a TPOT at its limit can cross it
    and come back a few C later), so C_max, the WINDOW integers on each side of it and the
    powers of two below it are all costed and the best kept (ties: the smaller C, less TTFT). ``tests/test_serve.py`` checks this against
    every integer on small spaces."""
    strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
    n = len(strategies)
    limit = np.maximum(np.asarray(limit, dtype=np.float64), 1.0)
    everyone = np.arange(n)
    # the largest C within the SLOs (0: none), below the smallest beyond them or the limit
    lo = bisect_largest(lambda take, c: loop(_with_batch(strategies[take], c), take).valid,
                        np.zeros(n), np.floor(limit) + 1.0)
    top = np.maximum(lo, 1.0)
    powers = 2.0 ** np.arange(int(np.log2(max(top.max(initial=1.0), 1.0))) + 1)
    cand = np.concatenate([top[:, None] + np.arange(-WINDOW, WINDOW + 1)[None, :],
                           np.broadcast_to(powers, (n, len(powers)))], axis=1)
    cand = np.where((cand >= 1) & (cand <= np.floor(limit)[:, None]), cand, top[:, None])
    k = cand.shape[1]
    res = loop(_with_batch(np.repeat(strategies, k, axis=0), cand.ravel()),
               np.repeat(everyone, k))
    score = np.where(res.valid, res.output_tokens_per_s, -np.inf).reshape(n, k)
    # the most tokens/s; of equals (within rounding) the smallest C
    best = score.max(axis=1, keepdims=True)
    near = (score >= best * (1 - 1e-12)) & np.isfinite(score)
    c = np.where(near, cand, np.inf).min(axis=1)
    pick = np.where(np.isfinite(best[:, 0]), np.argmax(near & (cand == c[:, None]), axis=1), 0)
    return res.take(everyone * k + pick)


def _closed_loop(ev: Evaluator, engine, strategies, isl, osl, cap, fixed, per_request,
                 fixed_reasons, tpot_slo_ms, ttft_slo_ms, gpus,
                 attention_dp: bool = False, spec=None, draft=None,
                 cached: int = 0, tier=None) -> ServeResult:
    """Steps 2-4 of the module docstring for rows whose batch column is the concurrency C
    (``AT_CAPACITY``: as many as the KV cache and the engine hold). ``attention_dp``: the rows
    of the data-parallel-attention variant (``engines.space.attention_dp``) are scheduled as an
    engine runs them, every rank of their tp groups its own scheduler (an engine's space; in
    the whole per-op space lts's one scheduler per ep group holds for every row). ``tier``: a
    host tier of the cached prefixes (``serving.offload.HostTier``), or None."""
    limit = engine.holds(cap)
    conc = strategies[:, CONCURRENCY].astype(np.float64)
    conc = np.where(conc == AT_CAPACITY, np.maximum(limit, 1.0), conc)
    strategies = _with_batch(strategies, conc)
    n = np.maximum(np.minimum(conc, limit), 1.0)               # running requests
    rows = _with_batch(strategies, n)
    t_dec, t_mix, ttft, tpot, latency = _step_times(ev, engine, strategies, rows, n, isl, osl,
                                                    gpus, attention_dp, spec, draft, cached)
    split = copy = None
    if tier is not None:
        split, copy, t_mix, ttft, tpot, latency = _with_tier(
            tier, n, (t_mix, ttft, tpot, latency),
            lambda m: _step_times(ev, engine, strategies[m], rows[m], n[m], isl, osl, gpus,
                                  attention_dp, spec, draft, 0)[1:])
    tokens = n * osl / latency
    wait = closed_queue_s(conc, n, latency)                     # queued for a running slot
    ttft = ttft + wait
    reasons = fixed_reasons | np.where(cap < 1, REASON_BIT["memory"], 0)
    slo = REASON_BIT["slo"]
    if tpot_slo_ms:                                           # nan (osl 1) meets any limit
        reasons |= np.where(tpot > tpot_slo_ms * 1e-3, slo, 0)
    if ttft_slo_ms:
        reasons |= np.where(ttft > ttft_slo_ms * 1e-3, slo, 0)
    gpus_used = instance_gpus(strategies).astype(np.float64)
    memory = fixed + n * per_request
    return ServeResult(strategies, reasons == 0, reasons, tokens, tokens / gpus_used, 1.0 / tpot,
                       ttft, tpot, latency + wait, n, cap,
                       memory, t_dec, t_mix, gpus_used, split, copy)


def _step_times(ev: Evaluator, engine, strategies, rows, n, isl, osl, gpus, attention_dp,
                spec, draft, cached) -> tuple:
    """(decode step, mixed step, TTFT, TPOT, request latency) [N] of running batches ``rows``
    (n requests each, no queue), ``cached`` prompt tokens each not prefilled."""
    c0 = np.full(len(rows), engine.step_overhead_s)
    if spec is not None:      # k draft steps before each verification (serving.spec)
        c0 = c0 + draft_s(draft, spec, isl, osl, gpus, rows)
    decode, mixed = step_workloads(isl, osl, engine, gpus, spec, cached)
    t_dec = ev(decode, rows).step_s + c0
    dp = strategies[:, EP].astype(np.float64)              # schedulers: one per ep group
    adp = runs_attention_dp(ev.model, rows) if attention_dp else np.zeros(len(rows), bool)
    t_mix = np.empty(len(rows))
    for mask, work in ((~adp, mixed), (adp, replace(mixed, attn_dp_tp=True))):
        if mask.any():
            t_mix[mask] = ev(work, rows[mask]).step_s + c0[mask]
    dp = np.where(adp, dp * strategies[:, TP], dp)
    ttft, tpot, latency = request_s(*step_counts(engine, mixed, n, dp), t_mix, t_dec, osl,
                                    engine.request_overhead_s)
    return t_dec, t_mix, ttft, tpot, latency


def _with_tier(tier, n, hit: tuple, miss_of) -> tuple:
    """(split [N, 3], copy [N], mixed step, TTFT, TPOT, latency) of a host tier at n running
    requests (``serving.offload``): ``hit`` the loop's (mixed step, TTFT, TPOT, latency) with
    every prompt hitting, ``miss_of(mask)`` the same of the rows ``mask`` with none; each
    figure the mean of the two weighted by the miss fraction, a host hit's copy on its TTFT
    and latency."""
    on_gpu, on_host, miss = tier.split(n)
    out = [np.array(v, dtype=np.float64) for v in hit]
    some = miss > 0
    if some.any():
        w = miss[some]
        for v, m in zip(out, miss_of(some)):
            v[some] = (1.0 - w) * v[some] + w * m
    copy = on_host * tier.copy_s()
    t_mix, ttft, tpot, latency = out
    return (np.stack([on_gpu, on_host, miss], axis=1), copy, t_mix, ttft + copy, tpot,
            latency + copy)


def as_result(r: ServeResult) -> Result:
    """A serve result in the evaluator's Result shape, so that search and reports take it as is:
    tokens/s (per GPU) are output tokens/s, ``step_s`` the request latency."""
    return Result(r.strategies, r.valid, r.reasons, r.output_tokens_per_s_per_gpu,
                  r.output_tokens_per_s, r.tpot_s, r.ttft_s, r.latency_s, r.memory_bytes, r.gpus,
                  r.running)
