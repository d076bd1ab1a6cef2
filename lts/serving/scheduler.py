"""The engine's scheduler: the one object that decides what a step holds (docs/design.md §10).

Both models of serving ask it. The analytic closed loop (``serving.serve``) takes its counts of
steps (``step_counts``) for a running batch at steady state; the simulator
(``serving.simulate``) asks it, step by step, which requests run, which prompts get a chunk of
the token budget, which waiting requests are admitted and which are preempted. What differs
between engines is data here, each value with the engine file and release it was read from:

- **vLLM v1** (vllm 0.19.0 ``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``): there is
  no prefill or decode phase. The running requests are scheduled first, in admission order,
  each taking its tokens from ``token_budget`` (``max_num_batched_tokens``): one for a decode, the
  rest of its prompt (up to the budget left) for one being prefilled; then waiting requests in
  arrival order while the budget lasts and fewer than ``max_num_seqs`` run (``len(self.running)
  == self.max_num_running_reqs``). KV blocks are allocated on demand, a step's new tokens at a
  time (``kv_cache_manager.allocate_slots``); when they cannot be, the last running request is
  preempted (``preempted_req = self.running.pop()``), its blocks freed and its prompt plus what it
  generated recomputed later; a waiting request whose blocks do not fit stops admission.
  Blocks of 16 tokens (vllm/config/cache.py, the CUDA platform's default ``block_size``).
- **SGLang** (sglang 0.5.1 ``srt/managers/scheduler.py`` ``get_next_batch_to_run``,
  ``schedule_policy.py`` ``PrefillAdder``): prefill first and alone (``enable_mixed_chunk``
  False): when waiting requests can be admitted a prefill-only step runs, at most
  ``chunked_prefill_size`` tokens, one prompt chunked at a time; else a decode step. A request
  is admitted when its prompt plus min(max_new_tokens, 4096) fits what is free less the running
  requests' remaining outputs times ``new_token_ratio`` (``rem_total_tokens``; the ratio starts at
  0.7, decays by (0.7 - 0.098)/600 each decode step to 0.098: ``global_config.py``
  SGLANG_INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO_FACTOR 0.14, DECAY_STEPS 600; reset when
  idle). A decode step that does not fit retracts the last requests (``retract_decode``) and
  raises the ratio. Pages of 1 token (``page_size`` 1).
- **TensorRT-LLM** (``batch_manager/capacityScheduler.cpp`` GUARANTEED_NO_EVICT, the default of
  ``trtllm-serve``; ``microBatchScheduler.cpp``): a request is admitted only when the KV cache
  has room for its whole prompt and output (never evicted); generation tokens and context chunks
  share a step under ``max_num_tokens``. Blocks of 32 tokens (``tokens_per_block``).
- **generic**: vLLM's policy with blocks of one token.

The analytic loop's view of the same rules is ``step_counts`` below (how many steps of each kind
a request waits for at steady state) and ``specs.workload.compose_step`` (what one step holds for
n running requests, which the cost model's tables need and so lives below them).

Attention data parallelism (lts's ep groups, and the DP-attention variant's tp ranks): each rank
runs its own scheduler in the engines; the simulator pools the ranks into one scheduler whose
budget and running cap are the ranks' sum (``rank_budget``: each rank its own budget, or SGLang's
budget divided over the ranks), requests spread over them evenly as the cost tables assume; a
prompt lives on one rank, so a step prefills at most one rank's budget of it (``chunk_cap``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engines.profiles import EngineProfile
from ..specs.workload import Workload, compose_step, rank_budget

# KV-cache block (page) size in tokens and the admission rule, per engine (module docstring)
BLOCK_TOKENS = {"vllm": 16, "sglang": 1, "trtllm": 32, "generic": 1}
KV_RULE = {"vllm": "demand", "sglang": "ratio", "trtllm": "reserve", "generic": "demand"}
# SGLang's new_token_ratio (sglang 0.5.1 global_config.py, scheduler.py __init__)
RATIO_INIT, RATIO_MIN_FACTOR, RATIO_DECAY_STEPS = 0.7, 0.14, 600
CLIP_NEW_TOKENS = 4096          # schedule_policy.py CLIP_MAX_NEW_TOKENS (its estimate only)


@dataclass(frozen=True)
class Scheduler:
    """What one engine's scheduler does, for a deployment of ``ranks`` attention-DP ranks."""
    engine: str              # the profile's name
    budget: int              # tokens per step, all ranks together
    max_running: int         # running requests at most, all ranks (0: memory alone)
    mixed: bool              # decodes share a step with prefill chunks
    kv_rule: str             # "demand" (blocks as tokens come, preemption), "ratio" (SGLang),
                             # "reserve" (room for prompt and output at admission)
    block: int               # KV block size in tokens
    ranks: int = 1
    per_rank: int = 0        # one rank's budget: a prompt's chunk in a step at most (0: budget)

    @classmethod
    def of(cls, engine: EngineProfile, ranks: int = 1) -> "Scheduler":
        ranks = max(int(ranks), 1)
        per_rank = rank_budget(engine.step_tokens, engine.budget_per_rank, ranks)
        return cls(engine.name, max(int(round(per_rank * ranks)), 1),
                   engine.max_running * ranks if engine.max_running else 0, engine.mixed,
                   KV_RULE.get(engine.name, "demand"), BLOCK_TOKENS.get(engine.name, 1), ranks,
                   max(int(per_rank), 1))

    @property
    def chunk_cap(self) -> int:
        """The most tokens of one prompt a step prefills: a prompt is on one rank, whose
        budget it takes at most."""
        return self.per_rank or self.budget

    def admits(self, running: int) -> bool:
        """Whether one more request may run beside ``running`` (the running cap)."""
        return not self.max_running or running < self.max_running

    @staticmethod
    def ratio_decay() -> tuple:
        """SGLang's (initial, minimum, decay per decode step) new_token_ratio."""
        low = RATIO_INIT * RATIO_MIN_FACTOR
        return RATIO_INIT, low, (RATIO_INIT - low) / RATIO_DECAY_STEPS


def step_counts(engine: EngineProfile, mixed: Workload, n, dp=1):
    """How many steps of each kind a request waits for, for n running requests [N] over dp
    attention-DP ranks (the ep groups: each rank schedules its share, ``compose_step``) at the
    analytic loop's steady state (``serving.serve``'s docstring, step 3): (mixed steps to its
    first token, mixed steps and decode steps between its first and last token). TTFT and the decode time are these counts times the step
    times, so for a fixed n and dp every figure of the loop is linear in the two step times
    (``lts.search.serve_exact`` solves on that); the counts are >= 0."""
    mix = compose_step(n, mixed, dp)
    k, s = mix.cohort, mix.steps
    decode_steps = (mixed.osl - 1.0) / mixed.tokens_per_step    # speculative: fewer steps
    if engine.mixed:
        m = n / k                                              # cohorts taking turns
        cycle = s + decode_steps                               # steps of one cohort's request
        queue = np.maximum(m * s - cycle, 0.0)                 # prefill steps it waits for
        # the cohort's prompts fill its s steps in turn: prompt j of k ends with step
        # ceil(j a) (a = s / k steps a prompt), a (k + 1) / 2 + 1/2 on average, not all at s
        done = np.clip(s / k * (k + 1) / 2 + 0.5, 1.0, np.maximum(s, 1.0))
        # its own cohort's later prefill steps and the other cohorts' fall in its decode
        others = np.minimum(decode_steps, m * s - done)
        return queue + done, others, decode_steps - others
    # request i's prefill ends with chunk ceil(i*isl/B): a*(n+1)/2 + 1/2 chunks on average
    # (a = isl/B; per rank: its share of the requests and of the budget); it then waits for the
    # rest of the batch's prefill before decoding on
    dp = np.asarray(dp, dtype=np.float64)
    budget = rank_budget(engine.step_tokens, engine.budget_per_rank, dp)
    done = np.clip(mixed.isl / budget * (n / dp + 1) / 2 + 0.5, 1.0, np.maximum(s, 1.0))
    return done, s - done, np.full_like(done, decode_steps)
