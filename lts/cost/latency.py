"""A request's times from step times and step counts: the one place that says what a step, the
time to first token (TTFT), the time per output token (TPOT), a request's latency and its queue
are (issue 21). Every figure is a count of steps times a step time plus fixed seconds; the
callers differ in what they count, and each difference is a parameter here:

- **One batch alone** (``model.finish``, the decode and prefill phases): ``step_s``. A decode
  step is the TPOT of its batch, a prefill pass the TTFT of its prompts; no queue.
- **The closed loop** (``serving.serve._closed_loop``; ``search.serve_exact``, which solves the
  same figures for a fixed running batch): ``request_s`` from the counts of
  ``serving.scheduler.step_counts``, plus ``closed_queue_s`` for the clients beyond the running batch.
- **A disaggregated prefill pool** (``search.disagg``): ``pool_ttft_s``, a request waits
  ``QUEUE_PASSES`` passes (half the pass in progress, then its own) and the KV transfer.

The two TTFTs with a queue are different models, not one formula written twice: in the one
pool, clients beyond the running batch wait whole request latencies for a slot; in a prefill
pool, a request joins the next pass, after half the one in progress. Both are
``first_token_s`` (steps x step time + fixed seconds) with their own counts.

Bit for bit: each function keeps the order of operations its callers had (the golden outputs
are unchanged), e.g. the latency adds the per-request time after the decode time, not to the
TTFT first.
"""
from __future__ import annotations

import numpy as np

QUEUE_PASSES = 1.5       # a pool request's TTFT in passes: half the pass in progress, then its own


def step_s(pp, stage_s, overhead_s, fill_drain: bool):
    """One step of a batch through pp pipeline stages whose slowest takes ``stage_s``, plus the
    fixed time per step: decode (``fill_drain`` False): pp micro-batches each pass every stage
    once, pp stage times; prefill (True): pp micro-batches through pp stages (fill + drain),
    2 pp - 1 stage times."""
    if fill_drain:
        return (2 * pp - 1) * stage_s + overhead_s
    return pp * stage_s + overhead_s


def first_token_s(steps, step_time_s, fixed_s):
    """TTFT before any queue for clients: ``steps`` steps of ``step_time_s`` (a fraction counts
    a partial step waited for), then ``fixed_s`` (the engine's time per request, or the KV
    transfer of a disaggregated pool)."""
    return steps * step_time_s + fixed_s


def request_s(first, mid_mix, mid_dec, t_mix, t_dec, osl, overhead_s, one_token_tpot=np.nan):
    """(TTFT, TPOT, latency) of a request in a running batch, without a queue: it waits
    ``first`` mixed steps for its first token, then ``mid_mix`` mixed and ``mid_dec`` decode
    steps (of ``t_mix`` and ``t_dec`` seconds) for its other osl - 1 tokens; the engine's time
    per request ``overhead_s`` is part of TTFT and latency. Arrays broadcast.

    ``one_token_tpot``: the TPOT of a one-token request (osl 1: no second token). nan in
    reports, where it meets any limit (the SLO test is ``tpot > limit``); the exact solver
    passes 0, which its ``tpot <= limit`` tests and its frontier's sort by TPOT keep."""
    with np.errstate(invalid="ignore"):      # 0 steps x an invalid x's inf: nan, invalid
        decode_time = mid_mix * t_mix + mid_dec * t_dec
    latency = first * t_mix + decode_time + overhead_s
    tpot = decode_time / (osl - 1) if osl > 1 else np.full(np.shape(latency), one_token_tpot)
    return first_token_s(first, t_mix, overhead_s), tpot, latency


def closed_queue_s(concurrency, running, latency_s):
    """The queue of a closed loop of ``concurrency`` clients of which ``running`` are served:
    the others wait for a slot, (C - n) / n request latencies on average (Little's law); it
    adds to their TTFT and latency."""
    return np.maximum(concurrency - running, 0.0) / running * latency_s


def pool_ttft_s(pass_s, transfer_s):
    """TTFT of a disaggregated prefill pool's request: ``QUEUE_PASSES`` passes, then its KV
    transfer to the decode pool."""
    return first_token_s(QUEUE_PASSES, pass_s, transfer_s)


def pool_pass_limit(ttft_limit, transfer):
    """The longest prefill pass whose ``pool_ttft_s`` meets ``ttft_limit`` (any one unit)."""
    return (ttft_limit - transfer) / QUEUE_PASSES
