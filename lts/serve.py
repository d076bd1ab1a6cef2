"""The ``serve`` phase (DESIGN.md §1): requests of ``isl`` input and ``osl`` output tokens served
back to back, as published benchmarks (TensorRT-LLM, MLPerf, vLLM) measure them.

For a batch of B requests::

    output tokens/s = B * osl / (prefill of the batch at isl + sum of osl decode steps)

- **Prefill**: one ``Workload(phase="prefill", context=isl)`` evaluation of the batch; its time is
  the TTFT (``ttft_s``). Its memory is not checked (engines chunk long prefills).
- **Decode**: the osl steps run at the growing context isl .. isl+osl. A decode step's time is
  close to affine in the context (only the KV-cache read grows with it; the roofline max can put
  one kink in it), so the sum is ``osl * mean step time``, the mean taken by Simpson's rule over
  5 evenly spaced contexts isl, isl+osl/4, ..., isl+osl (exact for affine and quadratic step
  times; within a small fraction of a step elsewhere). ``tpot_s`` is that mean step time.
- **Memory and validity** come from the decode evaluation at the final context isl+osl (the KV
  cache is largest there): memory, budget, divisibility and expert-choice reasons. The decode
  TPOT SLO and the TTFT SLO are enforced only when given (``tpot_slo_ms``, ``ttft_slo_ms``):
  TPOT against the mean decode step.
- **Best batch** (``best_batch=True``, what an engine's max-throughput run does): for each strategy
  row the batch among powers of two 1..4096 with the highest output tokens/s among the valid ones
  (batch 1 and its reasons when none is valid).

Everything is vectorized over strategies: 6 evaluator calls (1 prefill + 5 decode) over all N
rows (times the 13 batches with ``best_batch``), no Python loop per strategy.

Imports: costmodel, strategy.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .costmodel import REASON_BIT, REASONS, Result, Workload, evaluate
from .strategy import BATCH, TP, EP, PP

BATCHES = tuple(2 ** i for i in range(13))           # 1 .. 4096
SIMPSON = np.array([1.0, 4.0, 2.0, 4.0, 1.0]) / 12.0   # composite Simpson, 4 intervals, as a mean
NO_SLO = float("inf")


@dataclass
class ServeResult:
    """Serve-phase results of N strategies; arrays are [N]. Times in seconds, memory in bytes."""
    strategies: np.ndarray               # [N, 16], with the batch that was used
    valid: np.ndarray
    reasons: np.ndarray                  # bit flags, see costmodel.REASONS
    output_tokens_per_s: np.ndarray      # whole instance
    output_tokens_per_s_per_gpu: np.ndarray
    ttft_s: np.ndarray                   # prefill of the whole batch at isl
    tpot_s: np.ndarray                   # mean decode step over isl .. isl+osl
    memory_bytes: np.ndarray             # per GPU at the final context isl+osl
    gpus: np.ndarray

    def reason_list(self, i: int) -> list:
        return [r for r in REASONS if self.reasons[i] & REASON_BIT[r]]

    def __len__(self):
        return len(self.valid)


def decode_contexts(isl: int, osl: int) -> np.ndarray:
    """The 5 Simpson points between isl and isl+osl (integers, first and last exact)."""
    return np.rint(isl + osl * np.linspace(0.0, 1.0, 5)).astype(np.int64)


def serve_workloads(isl: int, osl: int, gpus: int = 0) -> list:
    """The 6 evaluations of the serve phase: the prefill at isl, then decode at the 5 Simpson
    contexts (no TPOT SLO inside; ``combine`` applies the SLOs to the serve figures)."""
    return [Workload("prefill", int(isl), gpus=gpus)] + [
        Workload("decode", int(ctx), tpot_slo_ms=NO_SLO, gpus=gpus)
        for ctx in decode_contexts(isl, osl)]


def step_workload(isl: int, osl: int, gpus: int = 0) -> Workload:
    """The decode step at the mean context isl + osl/2: the step per-op breakdowns show."""
    return Workload("decode", int(isl) + int(osl) // 2, tpot_slo_ms=NO_SLO, gpus=gpus)


def combine(strategies, pre: Result, decodes: list, osl: int, tpot_slo_ms=None,
            ttft_slo_ms=None) -> ServeResult:
    """Serve figures of rows from their prefill and 5 decode evaluations (``serve_workloads``)."""
    tpot = SIMPSON @ np.stack([d.tpot_s for d in decodes])
    ttft = pre.ttft_s
    final = decodes[-1]
    batch = strategies[:, BATCH].astype(np.float64)
    tokens = batch * osl / (ttft + osl * tpot)
    slo = REASON_BIT["slo"]
    reasons = final.reasons & ~slo
    if tpot_slo_ms:
        reasons |= np.where(tpot > tpot_slo_ms * 1e-3, slo, 0)
    if ttft_slo_ms:
        reasons |= np.where(ttft > ttft_slo_ms * 1e-3, slo, 0)
    gpus_used = (strategies[:, TP] * strategies[:, EP] * strategies[:, PP]).astype(np.float64)
    return ServeResult(strategies, reasons == 0, reasons, tokens, tokens / gpus_used, ttft, tpot,
                       final.memory_bytes, gpus_used)


def as_result(r: ServeResult, osl: int) -> Result:
    """A serve result in the evaluator's Result shape, so that search and reports take it as is:
    tokens/s (per GPU) are output tokens/s, ``step_s`` the time to serve one batch of requests
    (TTFT + osl x TPOT)."""
    return Result(r.strategies, r.valid, r.reasons, r.output_tokens_per_s_per_gpu,
                  r.output_tokens_per_s, r.tpot_s, r.ttft_s, r.ttft_s + osl * r.tpot_s,
                  r.memory_bytes, r.gpus)


def _serve_fixed(model, topo, strategies, isl, osl, tpot_slo_ms, ttft_slo_ms, gpus):
    """Serve rows with the batch in their batch column."""
    pre, *decodes = (evaluate(model, topo, w, strategies) for w in serve_workloads(isl, osl, gpus))
    return combine(strategies, pre, decodes, osl, tpot_slo_ms, ttft_slo_ms)


def serve(model, topo, strategies, isl: int, osl: int, best_batch: bool = False,
          tpot_slo_ms: float | None = None, ttft_slo_ms: float | None = None,
          gpus: int = 0) -> ServeResult:
    """Serve-phase throughput and latency of strategies [N, 16] (see the module docstring).

    Args:
        isl, osl: input and output tokens per request (both >= 1).
        best_batch: ignore the batch column and use, per row, the batch in ``BATCHES`` with the
            highest output tokens/s among the valid ones.
        tpot_slo_ms, ttft_slo_ms: enforced only when given.
        gpus: device budget (0: the whole topology).
    """
    strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
    if isl < 1 or osl < 1:
        raise ValueError(f"isl and osl must be >= 1, got {isl}, {osl}")
    if not best_batch:
        return _serve_fixed(model, topo, strategies, isl, osl, tpot_slo_ms, ttft_slo_ms, gpus)
    n, nb = len(strategies), len(BATCHES)
    wide = np.repeat(strategies, nb, axis=0)                  # row i, batch j at i*nb + j
    wide[:, BATCH] = np.tile(BATCHES, n)
    res = _serve_fixed(model, topo, wide, isl, osl, tpot_slo_ms, ttft_slo_ms, gpus)
    score = np.where(res.valid, res.output_tokens_per_s, -np.inf).reshape(n, nb)
    pick = np.where(np.isfinite(score.max(axis=1)), score.argmax(axis=1), 0)
    idx = np.arange(n) * nb + pick
    return ServeResult(*(getattr(res, f.name)[idx] for f in fields(ServeResult)))
