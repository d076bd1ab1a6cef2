"""``lts simulate``: a benchmark run of one deployment, request by request (docs/simulate.md).

What a user measures is a finite run, not a steady state: e.g. InferenceX's
``benchmark_serving.py`` creates 10 x C requests at once behind a semaphore of C, so the timed
run starts with C prompts on an idle server, and lengths spread over [0.8 L, L]. This module
runs that: a discrete-event simulation at the granularity of engine steps.

- **Requests** (``Load``): a benchmark (``num_prompts`` behind ``max_concurrency``, all created
  at t = 0 with ``request_rate`` inf, else arriving by a Poisson or gamma process), or a trace
  (``serving.traces``). Input and output lengths are each uniform over [int(r L), L] with the
  range ratio r (InferenceX ``utils/bench_serving/benchmark_serving.py`` ``sample_random_requests``:
  ``np.random.randint(int(input_len * range_ratio), input_len + 1)``); outputs run to their
  length (``--ignore-eos``). A request is sent when it has arrived and fewer than C are in flight.
- **Steps.** The engine's scheduler (``serving.scheduler.Scheduler``) picks each step: which
  requests decode, which prompts get a chunk, which waiting requests are admitted and which
  running ones are preempted when KV blocks run out (a preempted request recomputes its prompt
  and what it generated, as vLLM v1 does). A step's time is the cost model's
  (``serving.steptime.StepTable``), plus the engine's time per step.
- **Stretches.** While nothing changes but the decoders' contexts (no prompt to prefill, no
  request admissible, no finish, no arrival, the KV cache not full), the steps between two
  events are summed in closed form (a decode step is affine in the context), so the cost grows
  with the number of events, not of steps.
- **Outputs** (``SimResult``): per request, when it was sent, its first token and its last; so
  TTFT, TPOT ((last - first) / (osl - 1)), end-to-end latency, inter-token latencies (the times
  between the steps each decoding request advances in), each as mean and percentiles (numpy's
  linear percentile, as ``vllm bench serve`` reports them); output tokens/s over the run (first
  send to last token), goodput within SLOs, the KV cache's peak use and preemptions; a timeline
  per step for ``--plot``. The engine's time per request (HTTP, tokenization) passes between a
  request's sending and its reaching the scheduler: it is part of TTFT and latency, and the
  client's slot stays taken meanwhile.

Warm-up requests that the benchmark awaits before its timed run (InferenceX ``--num-warmups``)
leave an idle server behind: they do not change the timed run and are not simulated.
Deterministic: the same load and seed give the same run.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..specs.errors import LtsError
from ..specs.limits import MAX_SIM_REQUESTS
from ..specs.strategy import instance_gpus, with_coarse
from .scheduler import CLIP_NEW_TOKENS, Scheduler



@dataclass(frozen=True)
class Load:
    """The requests of a run. ``arrival``: a benchmark behind a semaphore (``burst``: all at
    t = 0), an open loop (``poisson``, ``gamma`` with ``burstiness``) or a ``trace``."""
    isl: int = 1024
    osl: int = 1024
    num_prompts: int = 0                 # 0: 10 x max_concurrency (InferenceX's sweep)
    max_concurrency: int = 0             # 0: no limit (an open loop or a trace)
    request_rate: float = math.inf       # requests/s; inf: all at t = 0 (a burst)
    burstiness: float = 1.0              # gamma shape (1: Poisson), as vllm bench serve
    range_ratio: float = 1.0             # lengths uniform over [int(r L), L]
    seed: int = 0
    trace: tuple = ()                    # ((arrival s, isl, osl), ...) replaces the above

    @property
    def kind(self) -> str:
        if self.trace:
            return "trace"
        if math.isinf(self.request_rate):
            return "burst"
        return "poisson" if self.burstiness == 1.0 else "gamma"

    def requests(self) -> tuple:
        """(arrival s [N], isl [N], osl [N]) of the run's requests, in the order sent."""
        if self.trace:
            arr = np.array(self.trace, dtype=np.float64).reshape(-1, 3)
            order = np.argsort(arr[:, 0], kind="stable")
            arr = arr[order]
            return arr[:, 0] - arr[0, 0], arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64)
        n = self.num_prompts or 10 * max(self.max_concurrency, 1)
        rng = np.random.default_rng(self.seed)
        isl = rng.integers(max(int(self.isl * self.range_ratio), 1), self.isl + 1, size=n)
        osl = rng.integers(max(int(self.osl * self.range_ratio), 1), self.osl + 1, size=n)
        if math.isinf(self.request_rate):
            arrival = np.zeros(n)
        else:   # vllm bench serve: gamma gaps with shape burstiness, mean 1 / rate
            theta = 1.0 / (self.request_rate * self.burstiness)
            gaps = rng.gamma(self.burstiness, theta, size=n)
            gaps[0] = 0.0
            arrival = np.cumsum(gaps)
        return arrival, isl.astype(np.int64), osl.astype(np.int64)


@dataclass
class SimResult:
    """One simulated run. Per request [N] (seconds from the run's start); a timeline per step."""
    sent: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    preemptions: np.ndarray
    itl: object                           # inter-token gaps (s) and how many requests had each
    #                                       (a tuple), or ``Stretches`` for a long run
    timeline: dict = field(default_factory=dict)   # per step: start, duration, running, ...
    kv_tokens: float = 0.0                # the KV cache's capacity in tokens (all ranks)
    steps: int = 0
    loops: int = 0                        # the event loop's turns (steps, stretches, idle waits)

    @property
    def ttft(self) -> np.ndarray:
        return self.first - self.sent

    @property
    def e2e(self) -> np.ndarray:
        return self.finish - self.sent

    @property
    def tpot(self) -> np.ndarray:
        """Per request (its osl > 1 only), (last - first token) / (osl - 1)."""
        more = self.osl > 1
        return (self.finish[more] - self.first[more]) / (self.osl[more] - 1)

    @property
    def duration(self) -> float:
        return float(self.finish.max() - self.sent.min()) if len(self.finish) else 0.0

    def summary(self, ttft_slo_ms: float | None = None, tpot_slo_ms: float | None = None,
                percentiles=(50, 90, 99)) -> dict:
        """Means and percentiles in ms; throughputs; goodput within the SLOs given."""
        out = {"requests": int(len(self.sent)), "duration_s": self.duration,
               "steps": int(self.steps)}
        for name, v in (("ttft_ms", self.ttft), ("tpot_ms", self.tpot), ("itl_ms", self.itl),
                        ("e2e_ms", self.e2e)):
            if isinstance(v, Stretches):
                out[name] = v.spread(percentiles, 1e3)
                continue
            v, w = v if isinstance(v, tuple) else (v, None)
            v = np.asarray(v, dtype=np.float64) * 1e3
            out[name] = spread(v, w, percentiles)
        dur = max(self.duration, 1e-12)
        out["output_tokens_per_s"] = float(self.osl.sum() / dur)
        out["requests_per_s"] = len(self.sent) / dur
        good = np.ones(len(self.sent), bool)
        if ttft_slo_ms:
            good &= self.ttft * 1e3 <= ttft_slo_ms
        if tpot_slo_ms:
            tp = np.zeros(len(self.sent))
            more = self.osl > 1
            tp[more] = (self.finish[more] - self.first[more]) / (self.osl[more] - 1)
            good &= tp * 1e3 <= tpot_slo_ms
        out["goodput_requests_per_s"] = float(good.sum() / dur)
        out["good_share"] = float(good.mean()) if len(good) else float("nan")
        kv = self.timeline.get("kv_tokens")
        out["kv_peak_tokens"] = float(max(kv)) if kv else 0.0
        out["kv_capacity_tokens"] = float(self.kv_tokens)
        out["kv_peak_share"] = out["kv_peak_tokens"] / self.kv_tokens if self.kv_tokens else 0.0
        out["preemptions"] = int(self.preemptions.sum())
        return out


EXPAND_STEPS = 2_000_000     # a run's inter-token gaps kept a value per step up to this many
#                              steps (16 bytes each); beyond, as its stretches (``Stretches``)


@dataclass
class Stretches:
    """A run's inter-token gaps as it recorded them, per stretch of k steps with d decoders:
    the first gap ``gap0``, then ``first + slope * j`` (j = 1 .. k - 1), each d times. The
    values ``_Run.result`` expands for a run of at most EXPAND_STEPS steps; beyond, they stay
    so (a 120,000,000-step run held 8.5 GB expanded)."""
    d: np.ndarray
    k: np.ndarray
    gap0: np.ndarray
    first: np.ndarray
    slope: np.ndarray

    def at_most(self, x: float) -> np.ndarray:
        """Per stretch, how many of its values are <= x, and the largest such j >= 1 (0: none):
        the values as ``first + slope * j`` computes them (float), so the count is exact."""
        k1 = self.k - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            est = np.where(self.slope > 0, np.floor((x - self.first) / self.slope),
                           np.where(self.first <= x, k1, 0))
        j = np.clip(est, 0, k1)
        j = np.where((j >= 1) & (self.first + self.slope * j > x), j - 1, j)
        j = np.where((j + 1 <= k1) & (self.first + self.slope * (j + 1) <= x), j + 1, j)
        return j

    def count(self, x: float) -> float:
        """How many values (each d times) are <= x."""
        return float((self.d * (self.at_most(x) + (self.gap0 <= x))).sum())

    def largest(self, x: float) -> float:
        """The largest value <= x."""
        j = self.at_most(x)
        cands = np.concatenate([self.gap0[self.gap0 <= x],
                                (self.first + self.slope * j)[j >= 1]])
        return float(cands.max())

    def spread(self, percentiles, scale: float = 1.0) -> dict:
        """``spread`` of the expanded values times ``scale``: the same percentiles (each order
        statistic found by bisection on the counts), the mean summed per stretch."""
        total = float((self.d * self.k).sum())
        if total <= 0:
            return {"mean": float("nan"), **{f"p{p}": float("nan") for p in percentiles}}
        k1 = self.k - 1.0
        sums = self.gap0 + k1 * self.first + self.slope * k1 * self.k / 2.0
        out = {"mean": float((self.d * sums).sum() / total) * scale}
        lo_v = min(float(self.gap0.min()), float((self.first + self.slope)[self.k > 1].min())
                   if (self.k > 1).any() else np.inf)

        def nth(i: int) -> float:          # the value at index i of the sorted expanded values
            lo, hi = np.nextafter(lo_v, -np.inf), self.largest(np.inf)
            for _ in range(200):
                mid = lo + (hi - lo) / 2
                if mid <= lo or mid >= hi:
                    break
                if self.count(mid) >= i + 1:
                    hi = mid
                else:
                    lo = mid
            return self.largest(hi)
        for p in percentiles:
            pos = p / 100.0 * (total - 1)
            lo = int(np.floor(pos))
            a = nth(lo) * scale
            b = nth(min(lo + 1, int(total) - 1)) * scale
            out[f"p{p}"] = float(a + (b - a) * (pos - lo))
        return out


def spread(v, w=None, percentiles=(50, 90, 99)) -> dict:
    """Mean and percentiles of values ``v`` each counted ``w`` times (None: once), the
    percentiles numpy's linear ones of the expanded values (without expanding them)."""
    if w is None:
        w = np.ones(len(v))
    w = np.asarray(w, dtype=np.float64)
    keep = w > 0
    v, w = v[keep], w[keep]
    total = w.sum()
    if not len(v):
        return {"mean": float("nan"), **{f"p{p}": float("nan") for p in percentiles}}
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    ends = np.cumsum(w)                   # the expanded index past each value's copies
    out = {"mean": float((v * w).sum() / total)}
    for p in percentiles:
        pos = p / 100.0 * (total - 1)     # numpy's linear position in the expanded values
        lo = int(np.floor(pos))
        a = v[np.searchsorted(ends, lo, side="right")]
        b = v[min(np.searchsorted(ends, lo + 1, side="right"), len(v) - 1)]
        out[f"p{p}"] = float(a + (b - a) * (pos - lo))
    return out


class _Run:
    """The event loop's state (module docstring). Per-request state lives in Python lists (a
    step touches a few requests; the decoders advance together, their contexts summed)."""

    def __init__(self, sched: Scheduler, table, kv_tokens: float, load: Load, overhead: float,
                 overlap: bool = False):
        self.s, self.table, self.cap, self.load = sched, table, float(kv_tokens), load
        arrival, isl, osl = load.requests()
        n = len(arrival)
        self.n = n
        self.arrival, self.isl, self.osl = arrival.tolist(), isl.tolist(), osl.tolist()
        self.limit = load.max_concurrency or n
        self.overhead = overhead
        self.overlap = overlap                 # the next step is planned while one runs
        self.last_start = None                 # the running step's start (None: idle)
        self.cutoff = 0.0                      # requests sent after it wait for a later step
        self.clip_free = max(self.osl) <= CLIP_NEW_TOKENS   # SGLang's clip never applies
        self.sent = [math.nan] * n
        self.ready = [math.nan] * n            # when it reaches the scheduler (sent + overhead)
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        self.preempts = [0] * n
        self.prompt = list(self.isl)           # tokens to prefill (+ generated, once preempted)
        self.done = [0] * n                    # of them prefilled
        self.gen_base = [0] * n                # tokens generated before the current decode run
        self.dec_start = [0] * n               # the tick its current decode run began
        self.version = [0] * n                 # invalidates heap entries of preempted requests
        self.next_send = 0                     # requests are sent in order
        self.inflight = 0
        self.free_since = 0.0                  # when the concurrency limit last stopped binding
        self.waiting = deque()                 # sent, not running, in order
        self.running = []                      # admission order (preemption takes the last)
        self.prefilling = []                   # running requests with prompt tokens left
        self.decoders = 0
        self.key_sum = 0.0                     # sum of (prompt - dec_start) over decoders
        self.prefilled = 0.0                   # prefilled tokens of the prefilling requests
        self.reserved = 0.0                    # reserve rule: prompt + output of the running
        self.left_key = 0.0                    # sum of (osl - gen_base - 1 + dec_start), decoders
        self.left_pre = 0.0                    # sum of (osl - gen_base), prefilling requests
        self.heap = []                         # (finish tick, request, version)
        self.tick = 0                          # steps in which the decoders advanced
        self.clock = 0.0
        self.steps = 0
        self.loops = 0                         # the event loop's turns (``run``)
        self.finished = 0
        self.ratio_init, self.ratio_min, self.decay = sched.ratio_decay()
        self.ratio = self.ratio_init            # SGLang's new_token_ratio
        self.itl_d = []                        # per step or stretch that ticks: (d, k, gaps)
        self.last_tick_clock = 0.0
        self.tl = {k: [] for k in ("start", "duration", "decoders", "prefill_tokens", "running",
                                   "waiting", "kv_tokens", "steps")}

    # --- KV accounting -------------------------------------------------------------------
    def kv_used(self) -> float:
        blocks = (self.s.block - 1) / 2.0 * len(self.running)
        return self.key_sum + self.decoders * self.tick + self.prefilled + blocks

    def generated(self, i: int) -> int:
        return self.gen_base[i] + 1 + (self.tick - self.dec_start[i])

    # --- requests in and out -------------------------------------------------------------
    def release(self):
        """Send every arrived request while fewer than the limit are in flight."""
        while self.next_send < self.n and self.inflight < self.limit \
                and self.arrival[self.next_send] <= self.clock:
            i = self.next_send
            self.sent[i] = max(self.arrival[i], self.free_since)
            self.ready[i] = self.sent[i] + self.overhead
            self.waiting.append(i)
            self.inflight += 1
            self.next_send += 1

    def next_arrival(self) -> float:
        """When the next request can be sent (inf: none, or the limit is reached)."""
        if self.next_send >= self.n or self.inflight >= self.limit:
            return math.inf
        return self.arrival[self.next_send]

    def start_decoding(self, i: int):
        self.prefilling.remove(i)
        self.prefilled -= self.done[i]
        self.left_pre -= self.osl[i] - self.gen_base[i]
        if math.isnan(self.first[i]):
            self.first[i] = self.clock
        self.dec_start[i] = self.tick
        left = self.osl[i] - self.gen_base[i] - 1          # ticks to its last token
        if left <= 0:
            self.complete(i)
            return
        if not self.decoders:                 # its first gap starts at its first token
            self.last_tick_clock = self.clock
        self.decoders += 1
        self.key_sum += self.prompt[i] - self.tick
        self.left_key += left + self.tick
        heapq.heappush(self.heap, (self.tick + left, i, self.version[i]))

    def complete(self, i: int):
        self.finish[i] = self.clock
        self.running.remove(i)
        self.reserved -= self.isl[i] + self.osl[i]
        self.finished += 1
        if self.inflight == self.limit:       # a client held back by the limit sends now
            self.free_since = self.clock
        self.inflight -= 1

    def preempt(self, i: int):
        """Free request i's KV cache; it waits first in line to recompute what it holds."""
        self.running.remove(i)
        self.reserved -= self.isl[i] + self.osl[i]
        if i in self.prefilling:
            self.prefilling.remove(i)
            self.prefilled -= self.done[i]
            self.left_pre -= self.osl[i] - self.gen_base[i]
            self.prompt[i] = self.isl[i] + self.gen_base[i]
        else:
            g = self.generated(i)
            self._stop_decoding(i)
            self.gen_base[i] = g
            self.prompt[i] = self.isl[i] + g
            self.version[i] += 1
        self.done[i] = 0
        self.preempts[i] += 1
        self.waiting.appendleft(i)

    def admit(self, i: int):
        self.waiting.popleft()              # (i: the head, the only one admitted)
        self.running.append(i)
        self.prefilling.append(i)
        self.reserved += self.isl[i] + self.osl[i]
        self.left_pre += self.osl[i] - self.gen_base[i]

    def _stop_decoding(self, i: int):
        self.decoders -= 1
        self.key_sum -= self.prompt[i] - self.dec_start[i]
        self.left_key -= self.osl[i] - self.gen_base[i] - 1 + self.dec_start[i]

    # --- one step's plan -------------------------------------------------------------------
    def plan(self) -> tuple:
        """(decoders advancing, [(request, chunk tokens)]) of the next step."""
        if self.s.mixed:
            return self._plan_mixed()
        return self._plan_prefill_first()

    def _fits(self, i: int, tokens: float, new: float) -> bool:
        rule = self.s.kv_rule
        if rule == "reserve":
            return self.reserved + self.isl[i] + self.osl[i] <= self.cap
        if rule == "ratio":
            rem = self.cap - self.kv_used() - new - self._ratio_offset()
            return self.prompt[i] - self.done[i] + min(self.osl[i] - self.gen_base[i],
                                                        CLIP_NEW_TOKENS) < rem
        return self.kv_used() + new + tokens + self.s.block <= self.cap

    def _ratio_offset(self) -> float:
        """SGLang's reservation for the running requests' outputs: their tokens left times the
        new_token_ratio (each clipped at 4096 in SGLang's estimate: the sum is clipped here
        only where an output is longer, in a loop)."""
        if self.clip_free:
            return (self.left_key - self.decoders * self.tick + self.left_pre) * self.ratio
        tot = 0.0
        for j in self.running:
            left = self.osl[j] - (self.generated(j) if j not in self.prefilling else
                                  self.gen_base[j])
            tot += min(left, CLIP_NEW_TOKENS)
        return tot * self.ratio

    def _plan_mixed(self):
        budget = self.s.budget
        while True:     # the running requests' tokens first; preempt the last while they do not fit
            d = min(self.decoders, budget)
            left = budget - d
            chunks = []
            for i in self.prefilling:
                if left <= 0:
                    break
                t = min(self.prompt[i] - self.done[i], left, self.s.chunk_cap)
                chunks.append((i, t))
                left -= t
            new = d + sum(t for _, t in chunks)
            if self.s.kv_rule != "demand" or self.kv_used() + new <= self.cap \
                    or len(self.running) <= 1:
                break
            self.preempt(self.running[-1])
        while self.waiting and left > 0 and self.s.admits(len(self.running)):
            i = self.waiting[0]
            t = min(self.prompt[i] - self.done[i], left, self.s.chunk_cap)
            if self.ready[i] > self.cutoff or not self._fits(i, t, new):
                break
            self.admit(i)
            chunks.append((i, t))
            left -= t
            new += t
        return d, chunks

    def _plan_prefill_first(self):
        left = self.s.budget
        chunks = []
        for i in self.prefilling:          # the prompt chunked last time goes on first
            if left <= 0:
                break
            t = min(self.prompt[i] - self.done[i], left, self.s.chunk_cap)
            chunks.append((i, t))
            left -= t
        new = sum(t for _, t in chunks)
        while self.waiting and left > 0 and self.s.admits(len(self.running)):
            i = self.waiting[0]
            t = min(self.prompt[i] - self.done[i], left, self.s.chunk_cap)
            if self.ready[i] > self.cutoff or not self._fits(i, t, new) and self.running:
                break
            self.admit(i)
            chunks.append((i, t))
            left -= t
            new += t
        if chunks:
            return 0, chunks
        # a decode step: retract the last requests while the step's tokens do not fit
        while self.decoders > 1 and self.kv_used() + self.decoders > self.cap:
            self.preempt(self.running[-1])
            self.ratio = self.ratio_init
        return self.decoders, chunks

    # --- the loop ----------------------------------------------------------------------------
    def run(self, progress=None, max_loops: int | None = None) -> None:
        own = min(MAX_LOOPS, LOOPS_PER_REQUEST * self.n + 100_000)
        cap = own if max_loops is None else min(own, max_loops)
        self.loops = 0
        while self.finished < self.n:
            self.loops += 1
            if self.loops > cap:
                raise TooManySteps(
                    f"the run passed {cap:,} scheduler steps with {self.finished:,} of "
                    f"{self.n:,} requests done and {sum(self.preempts):,} preemptions: lts "
                    "simulates at most that many (docs/limits.md); the KV cache cannot hold the "
                    "requests in flight as they grow: give fewer at once or shorter ones",
                    cap, cap < own)
            self.release()
            head = self.ready[self.waiting[0]] if self.waiting else math.inf
            if not self.running and head > self.clock:      # idle until a request is there
                nxt = min(self.next_arrival(), head)
                if math.isinf(nxt):
                    raise LtsError("the simulation stalled: no request is running or can come")
                self.clock = max(self.clock, nxt)
                self.last_start = None
                continue
            # a step is planned when the one before starts (overlap) or ends
            self.cutoff = self.last_start if self.overlap and self.last_start is not None \
                and self.running else self.clock
            d, chunks = self.plan()
            if d == 0 and not chunks:
                if self.waiting and not self.running:
                    raise LtsError(
                        f"not one request fits the KV cache ({self.cap:,.0f} tokens; a request "
                        f"holds up to {max(self.isl) + max(self.osl):,} tokens)")
                # blocked: nothing can run until something finishes (cannot happen: a running
                # request always decodes or prefills)
                raise LtsError("the simulation stalled: requests wait but none can run")
            before = self.finished
            self._step(d, chunks)
            if progress is not None and self.finished > before:
                progress(self.finished - before)

    def _step(self, d: int, chunks: list):
        p = sum(t for _, t in chunks)
        k = 1
        if not chunks and d > 0:
            k = self._stretch(d)
        mean_ctx = (self.key_sum + self.decoders * (self.tick + 1)) / self.decoders \
            if self.decoders else 0.0
        if k == 1:
            dur = self.table.time(d, mean_ctx, p)
            first_dur = dur
            slope = 0.0
        else:
            a, b = self.table.decode_line(d)
            # step j (1..k) reads mean context key_sum/d + tick + j
            first_dur = a + b * (self.key_sum / d + self.tick + 1)
            slope = b
            dur = k * first_dur + b * k * (k - 1) / 2.0
        start = self.clock
        self.last_start = start + dur - (first_dur + slope * (k - 1))   # its last step's start
        tl = self.tl
        tl["start"].append(start)
        tl["duration"].append(dur)
        tl["decoders"].append(d)
        tl["prefill_tokens"].append(p)
        tl["running"].append(len(self.running))
        tl["waiting"].append(len(self.waiting))
        tl["steps"].append(k)
        self.clock += dur
        self.steps += k
        if d > 0:
            # the ticks' gaps: the first since the last tick (prefill-only steps between count)
            gap0 = start - self.last_tick_clock + first_dur
            self.itl_d.append((d, k, gap0, first_dur, slope))
            self.tick += k
            self.last_tick_clock = self.clock
            if not self.s.mixed:
                self.ratio = max(self.ratio - k * self.decay, self.ratio_min)
        for i, t in chunks:
            self.done[i] += t
            self.prefilled += t
        for i, _ in chunks:
            if self.done[i] >= self.prompt[i]:
                self.start_decoding(i)
        while self.heap and self.heap[0][0] <= self.tick:
            f, i, v = heapq.heappop(self.heap)
            if v != self.version[i]:
                continue
            self._stop_decoding(i)
            self.complete(i)
        tl["kv_tokens"].append(self.kv_used())

    def _stretch(self, d: int) -> int:
        """Decode-only steps that can run before the next event (module docstring)."""
        if self.waiting and (self.s.kv_rule == "ratio"
                             or self.ready[self.waiting[0]] > self.cutoff):
            return 1       # SGLang's admission changes as its ratio decays; a request comes in
        k = self.heap[0][0] - self.tick if self.heap else 1
        if self.s.kv_rule == "demand" or self.s.kv_rule == "ratio":
            room = self.cap - self.kv_used()
            k = min(k, max(int(room // d), 1))
        nxt = self.next_arrival()
        if not math.isinf(nxt):
            a, b = self.table.decode_line(d)
            a1 = a + b * (self.key_sum / d + self.tick)      # step j takes a1 + b j
            gap = nxt - self.clock
            if gap <= a1 + b:
                return 1
            # the smallest k with k a1 + b k (k + 1) / 2 >= gap
            if b > 0:
                q = a1 + b / 2
                kk = (-q + math.sqrt(q * q + 2 * b * gap)) / b
            else:
                kk = gap / a1
            k = min(k, max(int(math.ceil(kk)), 1))
        return max(int(k), 1)

    def result(self, kv_tokens: float) -> SimResult:
        f = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
        return SimResult(f(self.sent), f(self.first), f(self.finish), np.asarray(self.isl),
                         np.asarray(self.osl), np.asarray(self.preempts), self._gaps(), self.tl,
                         kv_tokens, self.steps, self.loops)

    def _gaps(self):
        """The inter-token gaps: (values, how many requests had each), a value per step, or
        ``Stretches`` for a run past EXPAND_STEPS steps."""
        if sum(k for _, k, _, _, _ in self.itl_d) > EXPAND_STEPS:
            return Stretches(*(np.array(c, dtype=np.float64) for c in zip(*self.itl_d)))
        gaps, counts = [], []
        for d, k, gap0, first, slope in self.itl_d:
            g = first + slope * np.arange(k) if k > 1 else np.zeros(1)
            g[0] = gap0
            gaps.append(g)
            counts.append(np.full(k, float(d)))
        return (np.concatenate(gaps), np.concatenate(counts)) if gaps else \
            (np.zeros(0), np.zeros(0))


def ranks_of(model, row) -> int:
    """The deployment's attention-DP ranks: its ep groups, and its tp ranks too under the
    DP-attention variant (``engines.space.attention_dp``)."""
    from .two_pool import ranks
    return int(ranks(model, np.atleast_2d(np.asarray(row, dtype=np.int64)))[0])


# a run's scheduler steps (each a step or a stretch of decode steps) at most: normal runs take
# 1-2 a request (10,000 at C = 256: 1.06; 5,120 at 50/s: 1.63); a KV cache too small for the
# requests in flight preempts without end (200 of 100 in and 120,000 out at C = 2,000: 12,207
# a request, 1,272,710 preemptions, 12 s and 1.7 GB): ~5 us and ~0.7 kB a step
LOOPS_PER_REQUEST = 50
MAX_LOOPS = 2_500_000


class TooManySteps(LtsError):
    """A run past its bound of scheduler steps: ``steps`` taken; ``caller``: the bound was the
    caller's ``max_loops`` (what is left of a command's work, ``validate``), not the run's own."""

    def __init__(self, message: str, steps: int, caller: bool):
        super().__init__(message)
        self.steps, self.caller = steps, caller


MAX_SPAN_S = 1e9      # seconds a run's arrivals span at most (31 years: a step's milliseconds
                      # stay exact in float64 beside the clock)


def requests_of(loads) -> list:
    """Each load's (arrival, isl, osl), checked: 1..MAX_SIM_REQUESTS requests arriving within
    MAX_SPAN_S seconds."""
    reqs = [load.requests() for load in loads]
    for arrival, _, _ in reqs:
        if not 0 < len(arrival) <= MAX_SIM_REQUESTS:
            raise LtsError(f"{len(arrival):,} requests: from 1 to {MAX_SIM_REQUESTS:,} a run")
        if arrival[-1] > MAX_SPAN_S:
            raise LtsError(f"the requests arrive over {arrival[-1]:.3g} s: at most "
                           f"{MAX_SPAN_S:.0e} s (a request rate or trace that slow is not a "
                           "run to simulate step by step)")
    return reqs


def check_fit(isl, osl, kv_tokens: float, where: str) -> None:
    """LtsError unless every request (prompt and output) fits ``kv_tokens``: an engine runs no
    request its KV cache cannot hold (vLLM refuses a max_model_len whose cache does not fit)."""
    tokens = np.asarray(isl, dtype=np.int64) + np.asarray(osl, dtype=np.int64)
    over = int((tokens > kv_tokens).sum())
    if over:
        what = "not one request fits" if over == len(tokens) else \
            f"{over:,} of the {len(tokens):,} requests do not fit"
        raise LtsError(f"{what} {where} ({kv_tokens:,.0f} tokens): the largest holds "
                       f"{int(tokens.max()):,} (prompt and output)")


@dataclass
class Deployment:
    """What every run of one deployment shares: its KV cache in tokens, its scheduler and its
    step-time table (built once for the largest of the loads it will run)."""
    kv_tokens: float
    scheduler: Scheduler
    table: object
    request_overhead_s: float
    overlap: bool = False


def prepare(model, topo, row, engine, loads, gpus: int = 0) -> Deployment:
    """The deployment ``row`` (a strategy row: degrees and per-op choices; its batch column is
    ignored) served by ``engine`` (an EngineProfile as the engine sets itself up on the
    topology's GPU), ready to run each of ``loads``. LtsError where not one request fits."""
    from .serve import Evaluator, capacity, kv_pool
    from .steptime import StepTable
    row = np.array(np.atleast_2d(np.asarray(row, dtype=np.int64))[0], copy=True)
    reqs = requests_of(loads)
    isl = np.concatenate([r[1] for r in reqs])
    osl = np.concatenate([r[2] for r in reqs])
    top_isl, top_osl = int(isl.max()), int(osl.max())
    ev = Evaluator(model, engine.topology(topo))
    probe = with_coarse(row, batch=int(instance_gpus(row)))
    _, fixed, per_request, reasons = capacity(ev, engine, probe[None, :], top_isl, top_osl, gpus)
    if reasons[0]:
        from ..cost.tables import REASONS, REASON_BIT
        why = [r for r in REASONS if reasons[0] & REASON_BIT[r]]
        raise LtsError(f"the deployment is invalid: {', '.join(why)}")
    pool = float(kv_pool(engine, ev.topo, fixed, row)[0])
    per_token = float(per_request[0]) / (top_isl + top_osl)    # bytes per GPU a cached token
    kv_tokens = max(pool, 0.0) / per_token if per_token > 0 else math.inf
    sched = Scheduler.of(engine, ranks_of(model, row))
    check_fit(isl, osl, kv_tokens / sched.ranks, "the KV cache of an attention-DP rank"
              if sched.ranks > 1 else "the KV cache")
    most = max(len(r[0]) if not load.max_concurrency else load.max_concurrency
               for r, load in zip(reqs, loads))
    most = int(min(most, sched.max_running or most, max(kv_tokens // max(int(isl.min()), 1), 1)))
    from ..engines.space import attention_dp
    table = StepTable(ev, engine, row, int(round(isl.mean())), int(round(osl.mean())), most,
                      sched.budget, int(isl.min()), top_isl + top_osl, gpus,
                      bool(attention_dp(model, row[None, :])[0]))
    return Deployment(kv_tokens, sched, table, engine.simulated_request_s, engine.overlap)


def run(dep: Deployment, load: Load, progress=None, max_loops: int | None = None) -> SimResult:
    """Simulate ``load`` on a prepared deployment (``prepare``); at most ``max_loops`` scheduler
    steps where given (else ``TooManySteps``), and never more than the run's own bound. The
    result's ``loops``: the steps taken (idle waits included)."""
    r = _Run(dep.scheduler, dep.table, dep.kv_tokens, load, dep.request_overhead_s, dep.overlap)
    r.run(progress, max_loops)
    return r.result(dep.kv_tokens)


def simulate(model, topo, row, engine, load: Load, gpus: int = 0, progress=None) -> SimResult:
    """``run(prepare(...), load)``: one run of one deployment."""
    return run(prepare(model, topo, row, engine, [load], gpus), load, progress)
