"""What is served and what one engine step holds: ``Workload`` (phase, context, SLOs, device
budget and, for the serve phase's mixed step, the request shape and the engine's scheduler
constants) and ``compose_step`` (docs/design.md §8).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import TopologySpec

PHASES = ("decode", "prefill")     # the phases a user names; "mixed" is lts.serving.serve's step


@dataclass(frozen=True)
class Workload:
    """What is served. ``decode``: one token per sequence per step at ``context`` tokens of KV
    cache (the paper's case); ``prefill``: the whole prompt of ``context`` tokens per sequence in
    one pass; ``mixed``: one step of a continuous-batching engine (``compose_step``): the batch
    column counts the running requests, the step holds the decode tokens of those not being
    prefilled, at ``context``, and a prefill chunk of prompts of ``isl`` tokens under a budget of
    ``step_tokens`` per step (chunked prefill), all in one pass (weights read once)."""
    phase: str = "decode"
    context: int = 16384
    tpot_slo_ms: float = 50.0
    ttft_slo_ms: float = 0.0       # 0: no TTFT SLO
    gpus: int = 0                  # device budget; 0: the whole topology
    isl: int = 0                   # mixed: prompt length of the requests being prefilled
    osl: int = 0                   # mixed: output tokens per request
    step_tokens: int = 0           # mixed: the engine's token budget per step; prefill: the
                                   # same, a prompt longer than one rank's is prefilled in
                                   # chunks over several steps (``prefill_steps``; 0: one pass)
    mixed: bool = True             # mixed: decodes share the step (False: a prefill-only step)
    cohort_base: float = 1.0       # mixed: requests prefilled together: base + share x running
    cohort_share: float = 0.0
    budget_per_rank: bool = True   # mixed, prefill: each attention-DP rank (ep group) schedules
                                   # its own steps of step_tokens (False: the ranks share them)
    attn_dp_tp: bool = False       # mixed: the tp group's ranks are attention-DP ranks too (the
                                   # DP-attention variant in an engine: each its own scheduler)
    query_tokens: int = 1          # decode, mixed: tokens each running sequence puts through the
                                   # step (speculative decoding's verification: k drafts + 1;
                                   # serving.spec), each attending to its context, the KV cache
                                   # read once per sequence
    tokens_per_step: float = 1.0   # decode, mixed: output tokens a sequence gains per step (the
                                   # mean accepted length of speculative decoding; 1 without)
    cached: int = 0                # mixed: tokens at the start of each prompt already in the KV
                                   # cache (prefix caching: not prefilled; the new tokens attend
                                   # to them and the chunks read them)
    chunk: int = 0                 # mixed: a step the simulator composes (serving.simulate): the
                                   # batch column counts the requests decoding in it, beside a
                                   # prefill chunk of exactly ``chunk`` tokens of prompts of
                                   # ``isl`` tokens split in chunks of ``step_tokens`` (0: the
                                   # step compose_step composes for the running batch)
    max_cp: int = 1                # the largest context-parallel degree the search space
                                   # holds (specs.strategy.Space; 1: none): a prefill pass's
                                   # cp, a decode or mixed step's dcp (``cp_space``)
    max_etp: int = 1               # the largest expert-tensor-parallel degree (the etp axis:
                                   # each expert split over etp tp ranks under `experts`) the
                                   # search space holds (1: none; ``lts search --moe-tp``)

    def cp_space(self) -> dict:
        """``Space.for_model``'s limits of the axes a flag adds for this phase: a prefill pass
        splits prompts over cp more GPUs, a decode or mixed step its KV cache over dcp of the
        tp ranks; etp in every phase."""
        if self.phase == "prefill":
            return {"max_cp": self.max_cp, "max_etp": self.max_etp}
        return {"max_dcp": self.max_cp, "max_etp": self.max_etp}

    def budget(self, topo: TopologySpec) -> int:
        return self.gpus or topo.gpus


def rank_budget(step_tokens, per_rank: bool, dp=1):
    """One attention-DP rank's token budget per step: each rank its own ``step_tokens`` (vLLM
    runs an engine core per DP rank, TensorRT-LLM's max_num_tokens is per rank) or, when the
    ranks share it (``per_rank`` False: SGLang divides chunked_prefill_size by the DP size),
    step_tokens / dp. The one place this rule is written (``compose_step``,
    ``serving.scheduler.step_counts``, ``serving.two_pool``, ``serving.scheduler.Scheduler``)."""
    return float(step_tokens) / (1.0 if per_rank else np.asarray(dp, dtype=np.float64))


@dataclass
class StepMix:
    """What one step of a continuous-batching engine holds, for n running requests (arrays)."""
    decoders: np.ndarray     # requests decoding one token in the step
    chunk: np.ndarray        # prefill tokens in the step (mean over the cohort's prefill steps)
    cohort: np.ndarray       # requests admitted together: prefilled together, finishing together
    steps: np.ndarray        # steps that prefill one cohort (not mixed: a fraction counts the last)
    per_prompt: np.ndarray   # steps one prompt's prefill spans (1: whole prompts)
    rank_cap: np.ndarray     # prompt tokens one rank's step holds at most (its budget left
                             # for prefill): a prompt longer than that is chunked to it


def compose_step(n, work: Workload, dp=1) -> StepMix:
    """The scheduler's step for n running requests with prompts of ``work.isl`` tokens over
    ``dp`` attention-data-parallel ranks (lts's ep groups) (docs/design.md §8; ``lts.serving.serve`` builds
    the closed loop on it).

    Under attention data parallelism every rank runs its own scheduler over its share n / dp of
    the requests, each with a budget of ``step_tokens`` per step (``budget_per_rank``: vLLM runs
    one engine core per DP rank, TensorRT-LLM's max_num_tokens is per rank) or of
    step_tokens / dp (SGLang divides chunked_prefill_size by the DP size). The step below is one
    rank's; the totals (decoders, chunk, cohort) are the sum over the dp ranks, which step
    together. dp = 1 is one scheduler over all n.

    Mixed (vLLM, TensorRT-LLM): requests admitted together form a cohort of
    ``cohort_base + cohort_share * n`` requests (the two constants belong to the engine profile;
    at least n/osl, at most n); the running requests' decode tokens come first and count against the
    budget (vLLM v1/core/sched/scheduler.py: ``token_budget -= num_new_tokens`` for running
    requests; TRT-LLM microBatchScheduler.cpp), the cohort's prompts fill what is left, over as
    many steps as they need. Not mixed (SGLang's default, ``enable_mixed_chunk = False``: prefill
    batches run first and alone): the whole running batch is one cohort, prefilled in
    prefill-only steps of the whole budget (n * isl / budget of them, the last one counted in
    proportion), then it decodes together.
    """
    dp = np.asarray(dp, dtype=np.float64)
    if work.chunk:      # the simulator's step: n decoders beside a chunk it chose
        return _given_step(n, work, dp)
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0) / dp          # requests of one rank
    isl = float(work.isl - work.cached)      # the tokens a prompt prefills (prefix caching)
    budget = rank_budget(work.step_tokens, work.budget_per_rank, dp)
    if work.mixed:
        # no fewer than n/osl (n per decode step of a request): one cohort per decode step
        # keeps the prefills in pace (prompts that wait while a step runs are admitted together)
        law = work.cohort_base + work.cohort_share * n
        request_steps = max(work.osl / work.tokens_per_step, 1.0)   # decode steps of a request
        cohort = np.clip(np.maximum(law, n / request_steps), 1.0, n)
        decoders = n - cohort
        # budget left after the decode tokens (each decoder's query tokens: k + 1 when verifying)
        avail = np.maximum(budget - decoders * work.query_tokens, 1.0)
        steps = np.ceil(cohort * isl / avail)
        per_prompt = np.ceil(isl / avail)
    else:   # full chunks of the budget (the last one partial: steps counts it in proportion)
        cohort = n
        decoders = np.zeros_like(n)
        steps = n * isl / np.minimum(budget, n * isl)
        per_prompt = np.full_like(n, np.ceil(isl / budget))
        avail = budget * np.ones_like(n)
    return StepMix(dp * decoders, dp * cohort * isl / steps, dp * cohort, steps,
                   per_prompt * np.ones_like(dp), avail * np.ones_like(dp))


def _given_step(n, work: Workload, dp) -> StepMix:
    """A step whose content the simulator chose (``Workload.chunk``): n decoding requests (0
    allowed) and a prefill chunk of ``work.chunk`` tokens of prompts of ``work.isl`` tokens, each
    prompt split into chunks of at most one rank's budget (how many chunks a prompt spans sets
    how much of its own cache a chunk reads, ``kv.chunk_reads``)."""
    decoders = np.maximum(np.asarray(n, dtype=np.float64), 0.0) * np.ones_like(dp)
    new = float(max(work.isl - work.cached, 1))
    budget = np.maximum(rank_budget(work.step_tokens, work.budget_per_rank, dp), 1.0)
    per_prompt = np.ceil(new / budget) * np.ones_like(dp)
    chunk = np.full_like(decoders, float(work.chunk))
    return StepMix(decoders, chunk, np.maximum(chunk / new, 1.0), np.ones_like(decoders),
                   per_prompt, budget * np.ones_like(decoders))


def prefill_steps(work: Workload, dp=1):
    """Steps of a prefill pass (phase "prefill") whose engine chunks a prompt to its token
    budget (``work.step_tokens``; 0: one pass, ones): ceil(new tokens / one rank's budget) over
    ``dp`` attention-DP ranks, the ``per_prompt`` of ``compose_step``'s prefill-only steps (the
    prompt's new tokens after a cached prefix, ``work.context - work.cached``)."""
    ones = np.ones_like(np.asarray(dp, dtype=np.float64))
    if not work.step_tokens:
        return ones
    alone = replace(work, isl=work.context, mixed=False, chunk=0)
    return compose_step(1.0, alone, dp).per_prompt * ones
