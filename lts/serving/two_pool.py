"""A given two-pool (disaggregated) deployment under a closed loop of C clients (issue 24).

A prefill pool of ``x`` instances runs whole prompts; a decode pool of ``y`` instances runs the
decode steps; each request's KV cache crosses the link that joins them. C clients each send a
request of ``isl`` input and ``osl`` output tokens and send the next when it ends. The model is
the loop's steady state, a closed queueing network of two stations and fixed delays (Lazowska
et al., *Quantitative System Performance*, 1984, ch. 6: mean value analysis):

- **Prefill station.** An instance runs passes of ``k`` prompts, as many on each attention-DP
  rank (all ranks together, the MoE dispatch joining them; with prefix caching only the tokens
  after each prompt's cached prefix); a pass takes ``T_p`` (the evaluator's prefill phase at context isl, plus the engine's time per step
  for each chunk of its token budget). The pool is ``m`` = x k servers of service time T_p,
  taken as one queue of demand ``T_p / m`` plus a delay of the rest, ``T_p (m - 1) / m``
  (Seidmann et al. 1987's multi-server approximation), so at low load a request's pass takes
  T_p and at saturation the pool completes m / T_p requests per second.
- **Decode pool.** ``y`` instances hold at most ``decode_slots`` running requests each, and no
  more than their KV cache holds (with speculative decoding, the draft's weights and KV cache
  too: ``serving.spec``; a step then yields E tokens per request, TPOT = step / E) (``serve.capacity`` under the engine's memory
  rule): ``slots`` in all. A request's decode time is D = (osl - 1) x TPOT, TPOT the decode
  step of the running batch at the mean context (``serve.decode_workload``) plus the engine's
  time per step. Below its slots the pool is a pure delay (a request decodes at once); it
  completes at most slots / D requests per second, and clients beyond that wait for a slot.
- **Fixed delays.** The engine's time per request and, between the pools, the KV transfer
  (``transfer_s``) and the engine's two-pool handoff (``EngineProfile.handoff_s``: the
  bootstrap, the decode side's admission, the router; fitted, ``scripts/calibrate.py``).
- **Solution.** Schweitzer's approximate MVA (Schweitzer 1979; Bard 1979) for the prefill
  queue, residence R = demand x (1 + Q (C - 1) / C), X = C / (R + delays); X capped at the
  decode pool's rate; iterated with the decode step at the running batch it implies
  (n_d = X D, Little's law). TTFT = C / X - D (everything a request spends before decoding:
  the prefill queue and pass, the wait for a decode slot, which comes before its KV is sent:
  SGLang's ``DecodePreallocQueue``, the transfer, the handoff and the engine's time per
  request); TPOT = the decode step; output tokens/s = X osl.

Everything is an array over deployments [N]; a few evaluator calls per iteration.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..cost import kv
from ..cost.tables import REASON_BIT, REASONS
from ..engines import chunked
from ..engines.profiles import EngineProfile
from ..engines.space import attention_dp as runs_attention_dp
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import EP, TP, instance_gpus, with_coarse
from ..specs.workload import Workload, rank_budget
from .serve import NO_SLO, Evaluator, capacity, decode_workload, draft_s
from .spec import tokens_per_step

ROUNDS = 6          # outer rounds: the decode step at the running batch the loop implies
SWEEPS = 60         # Schweitzer fixed-point sweeps per round (converges in far fewer)


@dataclass
class TwoPoolResult:
    """Figures of N two-pool deployments; arrays [N], times in seconds."""
    valid: np.ndarray
    reasons: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    requests_per_s: np.ndarray
    output_tokens_per_s: np.ndarray
    output_tokens_per_s_per_gpu: np.ndarray
    gpus: np.ndarray
    pass_s: np.ndarray            # one prefill pass of the instance's prompts
    prompts: np.ndarray           # prompts in one pass of a prefill instance
    transfer_s: np.ndarray        # one request's KV cache between the pools
    decode_step_s: np.ndarray     # one decode step of an instance's running batch (speculative:
                                  # the drafts and the verification, E tokens per request)
    running: np.ndarray           # requests decoding (pool-wide)
    decode_slots: np.ndarray      # requests the decode pool holds at most
    prefill_wait_s: np.ndarray    # waiting for a prefill pass (queue)
    decode_wait_s: np.ndarray     # waiting for a decode slot (queue)

    def reason_list(self, i: int) -> list:
        return [r for r in REASONS if self.reasons[i] & REASON_BIT[r]]

    def __len__(self):
        return len(self.valid)

    def take(self, idx) -> "TwoPoolResult":
        return TwoPoolResult(*(getattr(self, f.name)[idx] for f in fields(TwoPoolResult)))

    def with_rows(self, idx, other: "TwoPoolResult") -> "TwoPoolResult":
        """These figures with rows ``idx`` replaced by ``other``'s (a deployment's figures do
        not depend on the others': ``estimate`` costs each row alone)."""
        out = []
        for f in fields(TwoPoolResult):
            a = getattr(self, f.name).copy()
            a[idx] = getattr(other, f.name)
            out.append(a)
        return TwoPoolResult(*out)


def ranks(model: ModelSpec, rows) -> np.ndarray:
    """Attention-DP ranks of each instance [N]: lts's ep groups, times tp where the tp ranks are
    DP ranks too (``engines.space.attention_dp``)."""
    rows = np.atleast_2d(rows)
    return rows[:, EP] * np.where(runs_attention_dp(model, rows), rows[:, TP], 1)


def transfer_s(model: ModelSpec, topo: TopologySpec, isl, gpus_used, shard_gpus):
    """Seconds to move one request's KV cache (isl tokens) from its prefill to its decode
    instance: over the innermost link tier spanning ``gpus_used`` GPUs, each of ``shard_gpus``
    GPUs sending its share. Arrays broadcast."""
    gpus_used = np.asarray(gpus_used, dtype=np.float64)
    spans = np.array([l.span_gpus for l in topo.links], dtype=np.float64)
    tier = np.minimum(np.searchsorted(spans, gpus_used, side="left"), len(spans) - 1)
    rate = np.array([l.bandwidth_bytes_s * l.efficiency for l in topo.links])[tier]
    alpha = np.array([l.latency_s for l in topo.links])[tier]
    return kv.request_bytes(model, isl) / np.asarray(shard_gpus, dtype=np.float64) / rate + alpha


def transfer_between_s(model: ModelSpec, src: TopologySpec, dst: TopologySpec, isl,
                       shard_gpus):
    """Seconds to move one request's KV cache between pools on two topologies (two GPU types,
    two clusters joined by their networks): over the outermost link of each, at the slower of
    the two rates, with the larger latency."""
    a, b = src.links[-1], dst.links[-1]
    rate = min(a.bandwidth_bytes_s * a.efficiency, b.bandwidth_bytes_s * b.efficiency)
    return kv.request_bytes(model, isl) / np.asarray(shard_gpus, dtype=np.float64) / rate \
        + max(a.latency_s, b.latency_s)


def prefill_workload(isl: int, gpus: int = 0, cached: int = 0,
                     engine: EngineProfile | None = None) -> Workload:
    """A prefill pass of whole prompts of isl tokens, the first ``cached`` of them already in
    the KV cache (prefix caching: ``serving.prefix``), in chunks of the ``engine``'s token
    budget where it chunks a long prompt (``engines.chunked``; None: one pass)."""
    work = Workload("prefill", int(isl), tpot_slo_ms=NO_SLO, gpus=gpus, cached=int(cached))
    return work if engine is None else chunked(work, engine)


def _with_batch(rows, batch):
    """Copies of strategy rows with their batch column (prompts of a pass, or running
    requests) set to ``batch``, at least 1."""
    return with_coarse(rows, batch=np.maximum(np.asarray(batch, dtype=np.int64), 1))


def estimate(model: ModelSpec, topo: TopologySpec, engine: EngineProfile, prefill_rows,
             prefill_workers, prefill_prompts, decode_rows, decode_workers, decode_slots,
             isl: int, osl: int, concurrency, gpus: int = 0, spec=None,
             decode_topo: TopologySpec | None = None,
             decode_engine: EngineProfile | None = None, prefix=None) -> TwoPoolResult:
    """Figures of N two-pool deployments (see the module docstring).

    Args:
        prefill_rows, decode_rows: strategy rows [N, WIDTH] of one instance of each pool (their
            batch columns are ignored).
        prefill_workers, decode_workers: instances of each pool [N].
        prefill_prompts: prompts one prefill instance runs in a pass [N] (over its attention-DP
            ranks; at least one per rank).
        decode_slots: running requests one decode instance holds at most [N] (0: what the KV
            cache and the engine hold; the KV cache bounds it either way).
        isl, osl: tokens per request; concurrency: clients [N].
        spec: speculative decoding in the decode pool (``serving.spec.Speculation``): each step
            verifies k + 1 tokens per request after k draft steps and yields E of them.
        decode_topo, decode_engine: the decode pool on another topology (another GPU type),
            with the engine's profile as it sets itself up there (default: the prefill pool's
            topology and ``engine``); the KV cache then crosses both networks
            (``transfer_between_s``).
        prefix: prefix caching (``serving.prefix.PrefixCache``): a pass prefills the prompts'
            tokens after their cached prefix; the decode pool holds the prefixes once.
    """
    if isl < 1 or osl < 1:
        raise ValueError(f"isl and osl must be >= 1, got {isl}, {osl}")
    pre = np.atleast_2d(np.asarray(prefill_rows, dtype=np.int64))
    dec = np.atleast_2d(np.asarray(decode_rows, dtype=np.int64))
    n = len(pre)
    arr = lambda v: np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).copy()  # noqa: E731
    x, y = arr(prefill_workers), arr(decode_workers)
    prompts, cap_d = arr(prefill_prompts), arr(decode_slots)
    conc = np.maximum(arr(concurrency), 1.0)
    ev = Evaluator(model, engine.topology(topo))
    d_topo, d_engine = decode_topo or topo, decode_engine or engine
    ev_d = ev if decode_topo is None else Evaluator(model, d_engine.topology(d_topo))
    g_p = instance_gpus(pre).astype(np.float64)
    g_d = instance_gpus(dec).astype(np.float64)
    used = x * g_p + y * g_d

    # prefill: k prompts per pass per instance, a whole number on each rank; the engine's time
    # per step once per chunk of its token budget on each rank
    dp_p = ranks(model, pre).astype(np.float64)
    per_rank = np.maximum(np.ceil(prompts / dp_p), 1.0)
    k = per_rank * dp_p
    cached = prefix.cached(isl) if prefix is not None else 0
    passes = ev(prefill_workload(isl, gpus, cached, engine), _with_batch(pre, k))
    chunks = np.ceil(per_rank * (isl - cached) / rank_budget(engine.step_tokens,
                                                             engine.budget_per_rank, dp_p))
    t_pass = passes.step_s + chunks * engine.step_overhead_s
    reasons = passes.reasons & ~REASON_BIT["slo"]

    # decode: slots per instance (the deployment's cap per rank, at most what the KV cache holds)
    draft = Evaluator(spec.draft, ev_d.topo) if spec is not None else None
    cap, _, _, fixed_reasons = capacity(ev_d, d_engine, _with_batch(dec, ranks(model, dec)), isl,
                                        osl, gpus, draft, prefix)
    q, per_step = (spec.tokens + 1 if spec is not None else 1), tokens_per_step(spec, osl)
    # the deployment's own cap replaces the engine's default one (max_running); the KV cache
    # bounds both
    per_instance = np.where(cap_d > 0, np.minimum(cap_d, cap), d_engine.holds(cap))
    reasons |= fixed_reasons | np.where(per_instance < 1, REASON_BIT["memory"], 0)
    per_instance = np.maximum(per_instance, 1.0)
    slots = y * per_instance

    move = transfer_s(model, engine.topology(topo), isl, used, np.minimum(g_p, g_d)) \
        if decode_topo is None else \
        transfer_between_s(model, engine.topology(topo), d_engine.topology(d_topo), isl,
                           np.minimum(g_p, g_d))
    fixed = move + engine.handoff_s + engine.request_overhead_s

    servers = x * k                                   # prompts the prefill pool runs at once
    s_p = t_pass / servers                            # its demand per request
    running = np.minimum(conc, slots)
    q_p = np.zeros(n)
    for _ in range(ROUNDS):
        batch = np.clip(np.round(running / y), 1.0, per_instance)
        rows = _with_batch(dec, batch)
        t_dec = ev_d(decode_workload(isl, osl, gpus, q), rows).step_s + d_engine.step_overhead_s
        if spec is not None:
            t_dec = t_dec + draft_s(draft, spec, isl, osl, gpus, rows)
        d = (osl - 1) / per_step * t_dec              # (osl - 1) / E steps
        delay = (t_pass - s_p) + d + fixed
        for _ in range(SWEEPS):
            r_p = s_p * (1 + q_p * (conc - 1) / conc)
            rate = conc / (r_p + delay)
            q_p = rate * r_p
        # the decode pool holds `slots` requests: it completes at most slots / d per second;
        # beyond that the clients wait for a slot
        rate = np.minimum(rate, slots / np.maximum(d, 1e-30))
        running = np.minimum(rate * d, slots)
    # the prefill queue at the rate the loop runs (where the decode pool caps it, the prefill
    # pool is less busy than the uncapped solution had it): R = s_p (1 + X R (C - 1) / C)
    load = np.minimum(rate * s_p * (conc - 1) / conc, 1.0 - 1e-9)
    r_p = np.minimum(r_p, s_p / (1.0 - load))
    wait_p = r_p - s_p
    ttft = np.maximum(conc / rate - d, wait_p + t_pass + fixed)
    wait_d = ttft - (wait_p + t_pass + fixed)
    latency = ttft + d
    tokens = rate * osl
    tpot = t_dec / per_step if osl > 1 else np.full(n, np.nan)
    return TwoPoolResult(reasons == 0, reasons, ttft, tpot, latency, rate, tokens, tokens / used,
                         used, t_pass, k, move, t_dec, running, slots, wait_p, wait_d)
