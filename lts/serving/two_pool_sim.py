"""Two pools in the simulator: a benchmark run through a prefill pool and a decode pool
(docs/simulate.md "Two pools").

The same loads as ``serving.simulate`` (a burst behind a concurrency limit, an open loop, a
trace); the requests go through two stations and a link, each event at its own time:

- **Prefill pool**: ``x`` instances share one queue (the router sends a request to whichever
  instance is free; in arrival order). A free instance starts a pass with the waiting prompts
  that fit its budget: ``per_pass`` prompts of the load's mean length (its token budget per
  attention-DP rank, at least one prompt a rank; or the prompts the deployment names); a pass
  of k prompts takes the cost model's prefill of k prompts (``two_pool.prefill_workload``) plus
  the engine's time per step for each chunk of the budget a prompt longer than it needs.
- **The link**: when its pass ends, a request's KV cache crosses to the decode pool
  (``two_pool.transfer_s`` over the tier that spans both pools, or ``transfer_between_s``),
  then the engine's two-pool handoff (``EngineProfile.handoff_s``).
- **Decode pool**: ``y`` instances pooled as one scheduler (the requests spread evenly, as the
  attention-DP ranks of one instance are): at each step's start the arrived requests join
  while fewer than the slots run and the KV cache has room for their prompt and output (SGLang's
  ``DecodePreallocQueue`` allocates before the transfer); a step of n running requests takes the
  decode instance's step of ceil(n / y) requests at their mean context (``steptime.StepTable``)
  plus the engine's time per step. A request's first token comes with its first decode step
  (TTFT is measured at the client, through the router: prefill queue, pass, transfer, handoff,
  first decode step), its last osl - 1 steps later.

The engine's time per request passes before a request joins the prefill queue, as in one pool
(part of TTFT and latency, the client's slot taken). The result is a
``simulate.SimResult``.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ..cost.tables import REASON_BIT
from ..specs.errors import LtsError
from ..specs.strategy import BATCH, instance_gpus, with_coarse
from .simulate import Load, SimResult, check_fit, requests_of


@dataclass
class Pools:
    """What every run of one two-pool deployment shares."""
    prefill_workers: int
    per_pass: int                   # prompts in one pass of one prefill instance
    pass_s: list                    # [k] seconds of a pass of k prompts (index 0 unused)
    decode_workers: int
    slots: int                      # running requests the decode pool holds, all instances
    kv_tokens: float                # the decode pool's KV cache in tokens, all instances
    decode: object                  # steptime.StepTable of one decode instance
    move_s: float                   # KV transfer + handoff, per request
    request_overhead_s: float


def prepare_pools(model, topo, engine, prefill_row, prefill_workers, decode_row,
                  decode_workers, decode_slots, loads, gpus: int = 0, decode_topo=None,
                  decode_engine=None, prefill_prompts: int = 0) -> Pools:
    """A two-pool deployment ready to run ``loads``: one instance's rows of each pool, the
    instances of each, the decode pool's running requests at most per instance
    (``decode_slots``, 0: what its KV cache and the engine hold) and the prompts of one prefill
    pass (``prefill_prompts``, 0: what its token budget holds)."""
    from .scheduler import Scheduler
    from .serve import Evaluator, capacity, kv_pool
    from .steptime import StepTable
    from .two_pool import prefill_workload, ranks, transfer_between_s, transfer_s
    pre = np.array(np.atleast_2d(np.asarray(prefill_row, dtype=np.int64))[0], copy=True)
    dec = np.array(np.atleast_2d(np.asarray(decode_row, dtype=np.int64))[0], copy=True)
    d_topo, d_engine = decode_topo or topo, decode_engine or engine
    reqs = requests_of(loads)
    isl = np.concatenate([r[1] for r in reqs])
    osl = np.concatenate([r[2] for r in reqs])
    top_isl, top_osl, mean_isl = int(isl.max()), int(osl.max()), int(round(isl.mean()))
    ev_p = Evaluator(model, engine.topology(topo))
    ev_d = Evaluator(model, d_engine.topology(d_topo))
    # prefill: prompts a pass holds, its time for 1..per_pass prompts
    dp_p = int(ranks(model, pre[None, :])[0])
    rank_budget = Scheduler.of(engine, dp_p).budget / dp_p
    per_pass = int(prefill_prompts) or dp_p * max(int(rank_budget // max(mean_isl, 1)), 1)
    rows = np.tile(pre, (per_pass, 1))
    rows[:, BATCH] = np.arange(1, per_pass + 1)
    res = ev_p(prefill_workload(mean_isl, gpus, engine=engine), rows)
    if not np.isfinite(res.step_s).all() or (res.reasons & ~REASON_BIT["slo"]).any():
        raise LtsError("the prefill pool's pass is invalid: "
                       + ", ".join(res.reason_list(int(np.argmax(res.reasons != 0)))))
    chunks = max(math.ceil(mean_isl / max(rank_budget, 1.0)), 1)
    pass_s = [0.0] + [float(t) + chunks * engine.step_overhead_s for t in res.step_s]
    # decode: slots and KV cache of the pool, one instance's step table
    dp_d = int(ranks(model, dec[None, :])[0])
    probe = with_coarse(dec, batch=int(instance_gpus(dec)))
    cap, fixed, per_request, reasons = capacity(ev_d, d_engine, probe[None, :], top_isl,
                                                top_osl, gpus)
    if reasons[0]:
        raise LtsError("the decode pool's instance is invalid")
    if cap[0] < 1:
        raise LtsError(f"not one request of {top_isl + top_osl:,} tokens fits a decode "
                       "instance's KV cache")
    pool = float(kv_pool(d_engine, ev_d.topo, fixed, dec)[0])
    kv_tokens = pool / (float(per_request[0]) / (top_isl + top_osl)) * decode_workers
    check_fit(isl, osl, kv_tokens / decode_workers / dp_d,
              "the KV cache of a decode instance's attention-DP rank" if dp_d > 1 else
              "a decode instance's KV cache")
    per_instance = int(min(decode_slots, cap[0])) if decode_slots else \
        int(d_engine.holds(cap)[0])
    slots = max(per_instance, 1) * decode_workers
    table = StepTable(ev_d, d_engine, dec, mean_isl, int(round(osl.mean())),
                      max(per_instance, 1), 1, int(isl.min()), top_isl + top_osl, gpus)
    g_p, g_d = (int(instance_gpus(r)) for r in (pre, dec))
    used = prefill_workers * g_p + decode_workers * g_d
    move = float(transfer_s(model, engine.topology(topo), mean_isl, used, min(g_p, g_d))
                 if decode_topo is None else
                 transfer_between_s(model, engine.topology(topo), d_engine.topology(d_topo),
                                    mean_isl, min(g_p, g_d)))
    return Pools(int(prefill_workers), per_pass, pass_s, int(decode_workers), slots, kv_tokens,
                 table, move + float(engine.handoff_s), engine.simulated_request_s)


def run_pools(p: Pools, load: Load) -> SimResult:
    """Simulate ``load`` on a prepared two-pool deployment (module docstring)."""
    arrival, isl, osl = load.requests()
    n = len(arrival)
    isl_l, osl_l, arr = isl.tolist(), osl.tolist(), arrival.tolist()
    limit = load.max_concurrency or n
    sent, first, finish = [math.nan] * n, [math.nan] * n, [math.nan] * n
    events = []                      # (time, order, kind, payload)
    order = 0

    def push(t, kind, payload):
        nonlocal order
        heapq.heappush(events, (t, order, kind, payload))
        order += 1

    nxt, inflight, free_since = 0, 0, 0.0

    def release(now):
        nonlocal nxt, inflight
        while nxt < n and inflight < limit and arr[nxt] <= now:
            sent[nxt] = max(arr[nxt], free_since)
            push(sent[nxt] + p.request_overhead_s, "enqueue", nxt)   # HTTP, tokenization
            inflight += 1
            nxt += 1
        if nxt < n and inflight < limit:
            push(arr[nxt], "arrive", None)

    queue = []                       # prefill queue (a list used as a deque; head index)
    head = 0
    idle_servers = p.prefill_workers
    ready = []                       # arrived at the decode pool, waiting for a slot
    ready_head = 0
    running = 0                      # decoding requests
    key_sum = 0.0                    # sum of (prompt - start tick) over the running
    reserved = 0.0                   # prompt + output of the running (their KV room)
    heap = []                        # (finish tick, request)
    tick = 0
    decoding = False                 # a decode step is running
    itl = []
    last_step_end = 0.0
    finished = 0
    steps = 0
    tl = {k: [] for k in ("start", "duration", "decoders", "prefill_tokens", "running",
                          "waiting", "kv_tokens", "steps")}

    def start_passes(now):
        nonlocal head, idle_servers
        while idle_servers and head < len(queue):
            batch = queue[head:head + p.per_pass]
            head += len(batch)
            idle_servers -= 1
            push(now + p.pass_s[len(batch)], "pass", batch)

    def start_step(now):
        nonlocal ready_head, running, key_sum, reserved, decoding, steps
        while ready_head < len(ready) and running < p.slots:
            i = ready[ready_head]
            if reserved + isl_l[i] + osl_l[i] > p.kv_tokens and running:
                break
            ready_head += 1
            running += 1
            reserved += isl_l[i] + osl_l[i]
            key_sum += isl_l[i] - tick
            heapq.heappush(heap, (tick + osl_l[i], i))     # its osl-th step gives its last
            start_tick[i] = tick
            joining.append(i)
        if not running:
            decoding = False
            return
        per = math.ceil(running / p.decode_workers)
        ctx = (key_sum + running * (tick + 1)) / running
        dur = p.decode.time(per, ctx, 0)
        decoding = True
        steps += 1
        tl["start"].append(now)
        tl["duration"].append(dur)
        tl["decoders"].append(running)
        tl["prefill_tokens"].append(0)
        tl["running"].append(running)
        tl["waiting"].append(len(ready) - ready_head + len(queue) - head)
        tl["kv_tokens"].append(key_sum + running * tick)
        tl["steps"].append(1)
        push(now + dur, "step", running)

    start_tick = [0] * n
    joining = []                     # admitted at the running step's start
    release(0.0)
    start_passes(0.0)
    while finished < n:
        if not events:
            raise LtsError("the two-pool simulation stalled")
        now, _, kind, payload = heapq.heappop(events)
        if kind == "arrive":
            release(now)
        elif kind == "enqueue":
            queue.append(payload)
        elif kind == "pass":
            idle_servers += 1
            for i in payload:
                push(now + p.move_s, "ready", i)
        elif kind == "ready":
            ready.append(payload)
        elif kind == "step":
            tick += 1
            if last_step_end:
                itl.append((payload, now - last_step_end))
            last_step_end = now
            while heap and heap[0][0] <= tick:
                _, i = heapq.heappop(heap)
                finish[i] = now
                running -= 1
                key_sum -= isl_l[i] - start_tick[i]
                reserved -= isl_l[i] + osl_l[i]
                finished += 1
                if inflight == limit:
                    free_since = now
                inflight -= 1
            for i in joining:            # their first decode step: their first token
                first[i] = now
            joining.clear()
            decoding = False
            release(now)
        start_passes(now)
        if not decoding and (running or ready_head < len(ready)):
            start_step(now)
    itl_arr = (np.array([g for _, g in itl]), np.array([d for d, g in itl], dtype=np.float64)) \
        if itl else (np.zeros(0), np.zeros(0))
    f = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    return SimResult(f(sent), f(first), f(finish), isl, osl, np.zeros(n, dtype=np.int64),
                     itl_arr, tl, p.kv_tokens, steps)

