"""The paper's search agent: PPO over an elite history (Learning to Shard, §3-4; PAPER.md §4-5).

One step of the environment is one evaluator call: the observation is the elite history X (the
T best valid strategies so far, each a record of normalized sub-action indices plus its
normalized throughput), the action is a full strategy (one categorical head per entry), the
reward is

    r = alpha * raw + beta * (raw - best_so_far)      (Eq. 1; raw = tokens/s/GPU / reference)

for a valid strategy and ``invalid_reward`` otherwise, and the episode ends (one-step, bandit
style). PPO (clipped objective, n_epochs per update, Adam with cosine-annealed learning rate)
updates the policy (``lts.policy``: the network) after every ``n_steps`` calls;
``ppo_loss_and_grad`` is the clipped loss with its hand-written gradient. The budget is split into
``chunks``; each chunk starts a fresh network that inherits the elite history and the
best-so-far, and a chunk ends early when every head's largest probability reaches
``confidence`` (the network has converged). The fresh network's output biases make it start
local (centred on the best elite) or, after a chunk that did not improve the best, global
(degrees uniform, per-op heads loosely on the elite's); after a stalled global chunk comes a local
one again (``PPOStats.kinds`` records the schedule).

Given ``bound`` (an upper bound on each coarse row's throughput that costs no call; issue 13),
degrees no valid row has are masked, the first network and each global restart aim at the
next-best-bound (tp, ep, pp) instead ("bound"), first climbing from the best per-op choices
moved there and from the best strategy seen there (``climb``: sweeps of single changes and of
groups of heads that pay off together), and the search ends once no bound beats the
best found, which is then the optimum (``prove_top``: the k best rows). Caller-proposed
strategies (``seed``) enter the elite history before the first network, followed by a
baseline's strategy (``sweep``) at every coarse row whose bound beats the best found.

Written against a callback ``evaluate(index_rows [n, H]) -> (raw [n], valid [n])`` so that it knows
nothing about parallelism (STYLE.md §8). Imports: numpy, nn, policy.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from . import nn

from . import policy


@dataclass(frozen=True)
class PPOConfig:
    """Defaults are lts's tuned agent; ``PPOConfig.paper()`` is the paper's as PAPER.md reads it.

    Where the defaults differ from the paper, each was measured on the six paper scenarios
    (README "Search quality"): rollouts of 32 calls per update with normalized advantages
    (the paper: 2, which makes one update per 2 calls and a noisy gradient; 64 since issue 13,
    below), learning rate 3e-3,
    16 chunks, and informed restarts: a fresh network starts centred on the best elite
    (``elite_prior``, ``coarse_kernel``) instead of uniform, and goes global again
    (``global_on_stall``) when a chunk brought no improvement.

    Restart schedule (``alternate``, ``global_fine``; scripts/search_quality.py, seeds 0-19 of
    the six scenarios, mean fraction of the exact optimum 0.93 -> 0.98). Without ``alternate``
    a run that stalls once makes every later chunk global, so a good basin is never refined
    again (stuck seeds were one per-op change from +5%); alternating keeps half of them local. A
    global restart that keeps the per-op heads at 0.9 on the elite's choices cannot leave a
    per-op pattern that only works at the elite's degrees (e.g. FFN split by experts, stuck at
    0.13-0.26 of the optimum); 0.7 lets the degrees and several per-op choices move together.
    Measured and not adopted: conditioned (autoregressive) heads, each head also given the earlier
    heads' actions (4 or 16 conditioned heads, gain 1-3; seeds 0-9, old schedule: 0.905-0.942
    against 0.931; with this schedule, seeds 0-19: 0.980 against 0.980, failures moved to other
    seeds; since removed from lts.policy), 8 chunks (0.903), ``coarse_kernel``
    2 (0.919), per-op heads uniform or at 0.5 at global restarts (0.898, 0.929), cycling 0.9 ->
    0.3 over successive global restarts (0.970) and counting gains under 1% as stalls (0.967).

    ``global_uniform`` makes the caller's ``switch_heads`` (``train``; lts.search passes the
    router, FFN1 and FFN2 heads of a MoE: where it chooses to split by experts) uniform at a
    global restart, so that an expert-split trap can be left
    while the other per-op heads stay at ``global_fine`` (same script, six-scenario mean over
    seeds 0-19 0.980 -> 0.985, held-out seeds 20-29 0.948 -> 0.974; moe1.6t 64k seeds 8 and 23
    from 0.26 to 1.00 and 0.98). Measured and not adopted: a first chunk twice as long (the two
    moe1.6t 32k/64k scenarios, seeds 0-19: 0.957 against 0.962) and local restarts that, with
    probability 0.5 (1.0) after a stall, centre on the best strategy of a different (tp, ep)
    (0.980 (0.968); with ``global_uniform``, six scenarios: 0.985 on seeds 0-19 but 0.965 on
    20-29).

    Issue 13 (``bound_*``, ``seed_points``; scripts/benchmark.py, tune half, seeds 0-2, mean
    fraction of the optimum 0.998): without the seeds 0.902 (7 of 48 runs below Megatron, 2
    empty), without the restarts aimed by the bound 0.999 but 1.4x the wall time, without the
    mask or the climbs 0.998 (the climbs decide the paper's moe1.2t 16k seed 0: 0.84 -> 1.00).
    With the learning rate at 0 (the networks keep their restart biases: sampling around the
    restart centres, no learning) 1.000, and 1.000 on the six scenarios, seeds 0-19: once the
    bounds guide it, PPO's updates add nothing measurable on these problems.

    Issue 13, second session (same script): 64 calls per update instead of 32 halves the
    gradient steps (Adam on 680k weights and the loss with its gradient were about a third of a
    serve run's time; tune half 0.998 -> 1.000, serve runs 1.7-3.9 -> 1.0-1.9 s; the report half
    0.996 -> 0.993, one bimodal problem); the climbs' group moves (``bound_moves``: the batch
    one step either way, each pair of train's ``groups`` changed jointly, a larger group set to
    one value) take report 0.993 -> 0.995 and the kept-aside fresh set 0.994 -> 0.997 with tune
    unchanged at 1.000. A second kept-aside set (fresh2) then scored 0.988 with 3 of 42 runs
    below Megatron; the Megatron sweep (``baseline_sweep``), joint changes over every
    combination of a pair and a second climb from the best strategy seen at the aimed row took
    it to 1.000 (tune and report 1.000), and a third set written after that (fresh3, run once)
    scores 0.998, none below Megatron. Tried and dropped: climbing at every restart, local ones
    too (tune 0.991: GPT-MoE 1.2T served on 256 GPUs, 48 (tp, ep, pp) above the best found,
    falls to 0.864 with no local refinement left).
    """
    history: int = 3               # T: elite strategies in the observation (paper App. A)
    d_model: int = 256             # embedding and hidden size (paper App. A)
    n_heads: int = 4               # attention heads (PAPER.md §11 rec.)
    d_ff: int = 512
    n_steps: int = 64              # calls per update (paper: 2; vectorized rollouts)
    n_epochs: int = 2              # gradient steps per update (paper App. A: 2)
    lr: float = 3e-3               # initial learning rate, cosine-annealed over each chunk (paper 1e-3)
    clip: float = 0.2              # PPO clip range (SB3 default)
    vf_coef: float = 0.5
    ent_coef: float = 0.0          # an entropy bonus would fight the confidence early exit
    max_grad_norm: float = 0.5
    alpha: float = 1.0             # reward weights of Eq. 1 (PAPER.md §11 rec.)
    beta: float = 1.0
    invalid_reward: float = -10.0  # "large negative reward" in normalized units
    chunks: int = 16               # budget chunks, fresh network per chunk (paper: 5)
    confidence: float = 0.95       # early exit when every head's max probability reaches this
    normalize_advantages: bool = True    # per rollout, as CleanRL (degenerate with 2 calls)
    elite_prior: float = 0.9       # a fresh network starts with this probability on the best
                                   # elite's choice in every per-op head (0: uniform, as the paper)
    coarse_kernel: float = 1.0     # > 0: the first four heads are ordinal (degrees and batch); a
                                   # fresh network's probability falls as exp(-kernel * |i - elite|)
                                   # with the distance in value index from the best elite's
    global_on_stall: bool = True   # a global restart after a chunk that did not improve the best
    alternate: bool = True         # ... but after a stalled global chunk a local one again, not
                                   # global for the rest of the budget
    global_fine: float = 0.7       # a global restart's probability on the best elite's per-op
                                   # choices (a local one uses elite_prior)
    # Issue 13: guidance by an upper bound on each coarse row's throughput (train's ``bound``;
    # lts.search passes search.guide, no evaluator call) and by the engines' schemes. Measured on
    # scripts/benchmark.py (32 problems, seeds 0-2) and the paper's six scenarios (README
    # "Search quality"): 0.845 -> 0.997 and 0.995 -> 1.000 of the exact optimum.
    seed_points: int = 8           # coarse rows at which the caller proposes strategies first
                                   # (train's ``seed``; lts.search.seed_rows); 0: none
    global_uniform: bool = True    # a global restart makes train()'s switch_heads uniform instead
                                   # of global_fine (False: they stay at global_fine)
    bound_mask: bool = True        # degrees and batches no row of which can be valid: never drawn
    bound_restarts: bool = True    # the first network and every global restart centre the coarse
                                   # heads on the best-bound row of the best-bound (tp, ep, pp)
                                   # not aimed at yet that can still beat the best found, and the
                                   # search stops once no row can (the best is then the optimum)
    bound_sweeps: int = 2          # at each such restart, sweeps of single per-op changes (one
                                   # call each) around the best per-op choices moved to that row
    bound_moves: bool = True       # ... and of the batch one step either way and of train's
                                   # ``groups`` (a pair: every joint change; a larger group: set
                                   # to one value), several changes at once
    baseline_sweep: bool = True    # after the seeds, train's ``sweep`` (lts.search: Megatron's
                                   # choices; in an engine's space the engine's strategies) at
                                   # every coarse row whose bound beats the best

    @classmethod
    def paper(cls) -> "PPOConfig":
        """The paper's agent (App. A; PAPER.md §11 for its gaps): 2 calls per update, lr 1e-3,
        5 chunks, fresh networks that start uniform."""
        return cls(n_steps=2, lr=1e-3, chunks=5, normalize_advantages=False, elite_prior=0.0,
                   coarse_kernel=0.0, global_on_stall=False, alternate=False,
                   global_uniform=False, bound_mask=False, bound_restarts=False,
                   bound_moves=False, baseline_sweep=False, seed_points=0)


class EliteHistory:
    """The T best valid strategies seen, best first, without duplicates (PAPER.md §4.2)."""

    def __init__(self, sizes, T: int):
        self.sizes = np.asarray(sizes)
        self.scale = np.maximum(self.sizes - 1, 1)
        self.T = T
        self.rows, self.raw = [], []

    def add(self, row: np.ndarray, raw: float) -> None:
        key = row.tobytes()
        if any(r.tobytes() == key for r in self.rows):
            return
        if len(self.rows) < self.T or raw > self.raw[-1]:
            self.rows.append(row.copy())
            self.raw.append(raw)
            order = np.argsort(self.raw)[::-1][: self.T]
            self.rows = [self.rows[i] for i in order]
            self.raw = [self.raw[i] for i in order]

    def observation(self) -> np.ndarray:
        """[1, T, H + 1]: normalized indices and normalized throughput, zero-padded."""
        X = np.zeros((1, self.T, len(self.sizes) + 1))
        for t, (row, raw) in enumerate(zip(self.rows, self.raw)):
            X[0, t, :-1] = row / self.scale
            X[0, t, -1] = raw
        return X


@dataclass
class PPOStats:
    updates: int = 0
    restarts: int = 0
    early_exits: int = 0
    proved: bool = False        # stopped because no coarse row's bound beats the best found
    kinds: list = field(default_factory=list)   # each chunk's start: "fresh", "local" or "global"
    log: list = field(default_factory=list)     # one dict per update (namespaced keys)


def _prior_bias(sizes, row, probs, kernel=None) -> np.ndarray:
    """Output biases of a fresh network centred on an elite strategy ``row``.

    Head i gives probability probs[i] to row's choice and spreads the rest uniformly; or, where
    kernel[i] > 0 (an ordinal head), its logits are -kernel[i] * |j - row[i]| (neighbouring
    values likely, far ones rare).
    """
    kernel = kernel or [0.0] * len(sizes)
    bias = []
    for n, choice, p, k in zip(sizes, row, probs, kernel):
        b = np.zeros(n)
        if k > 0:
            b = -k * np.abs(np.arange(n) - choice)
        elif n > 1:
            b[choice] = math.log(p * (n - 1) / (1 - p))    # softmax: e^b / (e^b + n - 1) = p
        bias.append(b)
    return np.concatenate(bias)


def _restart_bias(sizes, row, kind: str, cfg: PPOConfig, switch_heads=()) -> np.ndarray:
    """Output biases of a fresh network for a restart of ``kind`` around the best elite ``row``.

    local: every head centred on ``row`` (per-op heads ``elite_prior``, the four coarse heads the
    ordinal ``coarse_kernel``); global: the coarse heads (and ``switch_heads`` when
    ``global_uniform``) uniform, the other per-op heads ``global_fine`` on ``row``'s choices
    (never below uniform).
    """
    fine = sizes[4:]
    if kind == "bound":         # coarse heads around the target row, per-op as a global restart
        probs = [0.5] * 4 + [max(cfg.global_fine, 1.0 / n) for n in fine]
        for i in switch_heads if cfg.global_uniform else ():
            probs[i] = 1.0 / sizes[i]
        return _prior_bias(sizes, row, probs, [cfg.coarse_kernel] * 4 + [0.0] * len(fine))
    if kind == "global":
        probs = [1.0 / n for n in sizes[:4]] + [max(cfg.global_fine, 1.0 / n) for n in fine]
        for i in switch_heads if cfg.global_uniform else ():
            probs[i] = 1.0 / sizes[i]
        return _prior_bias(sizes, row, probs)
    probs = [cfg.elite_prior] * len(sizes)
    return _prior_bias(sizes, row, probs, [cfg.coarse_kernel] * 4 + [0.0] * len(fine))


def _cosine(lr0: float, progress: float) -> float:
    return lr0 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


# ----------------------------------------------------------------------------------------------
# PPO loss (CleanRL ppo.py, "ALGO LOGIC" block) with its hand-written gradient

def ppo_loss_and_grad(params, cfg, X, actions, old_logprob, advantages, returns,
                      clip=0.2, vf_coef=0.5, ent_coef=0.0, mask=None):
    """Clipped PPO loss on one minibatch and its gradient with respect to every parameter.

    loss = pg_loss - ent_coef * entropy_loss + vf_coef * v_loss, with
    pg_loss = mean(max(-adv * ratio, -adv * clip(ratio, 1 - clip, 1 + clip))) (PPO Eq. 7),
    v_loss = 0.5 * mean((value - returns) ** 2) (unclipped, as SB3's default), and
    entropy_loss = mean of the joint entropy. Advantages are used as given (normalize them
    before calling, as CleanRL does per minibatch, when the minibatch is large enough).
    References: Schulman et al. 2017, "PPO", Eq. 7 (clipped surrogate); approx_kl estimator from
    http://joschu.net/blog/kl-approx.html; CleanRL ``ppo.py`` (names and diagnostics).

    Args:
        params: policy parameters; cfg: policy.PolicyConfig.
        X: [B, T, A], or [1, T, A] shared by all B actions (one forward and backward pass);
        actions: int [B, H]; old_logprob, advantages, returns: [B].
        mask: optional bool [B, N] action mask (the one used when the actions were sampled);
            with a shared X [1, T, A] it must be shared too ([N] or [1, N]).

    Returns:
        loss (float), grads (dict, same keys as params), stats (dict of floats with keys
        "losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clipfrac").
    """
    actions = np.asarray(actions)
    _, newvalue, cache = policy.forward(params, X, cfg, mask)
    dt = newvalue.dtype
    logp_pad = cache["logp_pad"]                                  # [B,H,K] ([1,H,K]: shared X)
    B = actions.shape[0]
    shared = newvalue.shape[0] == 1 and B > 1
    if shared:   # one observation for every action: forward once, broadcast, sum grads back
        logp_pad = np.broadcast_to(logp_pad, (B,) + logp_pad.shape[1:])
        newvalue = np.broadcast_to(newvalue, (B,))
    old_logprob, advantages, returns = (np.asarray(a, dtype=dt) for a in (old_logprob, advantages, returns))

    newlogprob, entropy = policy.log_prob_and_entropy_padded(logp_pad, actions)   # [B], [B]
    logratio = newlogprob - old_logprob
    ratio = np.exp(logratio)
    approx_kl = np.mean((ratio - 1.0) - logratio)
    clipfrac = np.mean(np.abs(ratio - 1.0) > clip)

    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * np.clip(ratio, 1.0 - clip, 1.0 + clip)
    pg_loss = np.maximum(pg_loss1, pg_loss2).mean()
    v_loss = 0.5 * np.mean((newvalue - returns) ** 2)
    entropy_loss = entropy.mean()
    loss = pg_loss - ent_coef * entropy_loss + vf_coef * v_loss

    # backward: pg_loss2 > pg_loss1 only when the ratio is clipped, where its slope is 0
    dratio = np.where(pg_loss1 >= pg_loss2, -advantages, 0.0) / B        # [B]
    dnewlogprob = dratio * ratio
    dlogp_pad = np.zeros_like(logp_pad)
    np.put_along_axis(dlogp_pad, actions[..., None],
                      np.broadcast_to(dnewlogprob[:, None, None], actions.shape + (1,)), axis=-1)
    if ent_coef:
        p = np.exp(logp_pad)
        dlogp_pad += (ent_coef / B) * p * (logp_pad + 1.0)               # d(-ent_coef*H)/dlogp
    dvalue = vf_coef * (newvalue - returns) / B
    if shared:   # back to the one observation: sum over the actions
        dlogp_pad, dvalue = dlogp_pad.sum(axis=0, keepdims=True), dvalue.sum(keepdims=True)
    grads = policy.backward(policy.unpad(dlogp_pad, cfg), dvalue, cache, params, cfg)
    stats = {
        "losses/policy": float(pg_loss),
        "losses/value": float(v_loss),
        "losses/entropy": float(entropy_loss),
        "stats/approx_kl": float(approx_kl),
        "stats/clipfrac": float(clipfrac),
    }
    return float(loss), grads, stats


# ----------------------------------------------------------------------------------------------
# the search loop

def train(evaluate, sizes, budget: int, rng: np.random.Generator, cfg: PPOConfig = PPOConfig(),
          on_calls=None, switch_heads=(), keep: bool = True, seed=None, bound=None,
          groups=(), sweep=None, prove_top: int = 1):
    """Run the agent for ``budget`` evaluator calls.

    Args:
        evaluate: callback index rows [n, H] -> (raw tokens/s/GPU [n], valid [n] bool).
        sizes: number of choices of each of the H entries.
        on_calls: optional callback(n) after every n calls (progress bars).
        switch_heads: heads whose choice switches the problem's regime (a MoE's expert split);
            a global restart draws them uniformly when ``cfg.global_uniform``.
        keep: return every strategy tried and log every update; False keeps memory flat in the
            budget (empty arrays, the last update's log only).
        seed: index rows [k, H] evaluated first (counted in the budget), their valid ones in
            the elite history before the first network is made.
        bound: optional upper bound on the raw throughput of every strategy of each coarse row,
            shaped ``sizes[:4]`` (-inf: no valid strategy); see ``bound_mask`` and
            ``bound_restarts``. Read as the search goes (a float64 array of that shape is used
            as is): ``evaluate`` may lower entries in place, e.g. to a row's best once every
            strategy of the row has been tried (lts.search in an engine's space).
        groups: tuples of per-op heads whose choices pay off together; with ``bound_moves``
            ``climb`` also changes both heads of a pair at once (every combination) and sets a
            larger group's heads to a common value.
        sweep: index rows [n, H], e.g. a baseline's strategy at each coarse row, or a list of
            such arrays (stages, swept one after the other); with ``baseline_sweep`` each row
            whose coarse row's bound beats the best found is tried after the seeds (best bound
            first, the seeds skipped), so the search ends at least at the baseline's best when
            the sweep fits in half the budget.
        prove_top: with ``bound``, what the search must prove before it stops, aims and sweeps
            for: 1, the best (no bound above the best found); k > 1, the k best coarse rows (no
            bound above the k-th best row found, except a row's whose bound its own best
            reaches: a caller lowers a row's bound to its best once every strategy of it was
            tried), e.g. where the caller refines the top k afterwards.

    Returns:
        (index rows [calls, H], raw [calls], valid [calls], PPOStats) of every strategy tried.
    """
    sizes = tuple(int(s) for s in sizes)
    pcfg = policy.PolicyConfig(n_choices=sizes, T=cfg.history, n_extra=1, d_model=cfg.d_model,
                               n_heads=cfg.n_heads, d_ff=cfg.d_ff, hidden=cfg.d_model)
    elite = EliteHistory(sizes, cfg.history)
    all_rows, all_raw, all_valid = [], [], []
    stats = PPOStats()
    ref = None                  # reference throughput: the first valid strategy's (PAPER.md §5.1)
    best = 0.0                  # best-so-far in normalized units (b of Eq. 1)
    calls, chunk = 0, max(cfg.n_steps, budget // cfg.chunks)
    stalled = False
    n_coarse = sum(sizes[:4])
    mask = np.zeros(sum(sizes), dtype=np.float32)   # added to every fresh network's output biases
    targets = np.zeros(0, dtype=np.int64)           # coarse rows to aim at, best bound first
    if bound is not None:
        bound = np.asarray(bound, dtype=np.float64).reshape(sizes[:4])
        if cfg.bound_mask:
            live = np.isfinite(bound)
            mask[:n_coarse] = np.concatenate([
                np.where(live.any(axis=tuple(j for j in range(4) if j != i)), 0.0, -30.0)
                for i in range(4)])
        if cfg.bound_restarts:
            flat = bound.ravel()
            targets = np.argsort(-flat, kind="stable")
            targets = targets[np.isfinite(flat[targets])]

    def next_target():
        """The coarse heads of the best-bound row that can still beat the best found, of the
        (tp, ep, pp) not aimed at yet (the local restarts move the batch), or None."""
        nonlocal targets
        targets = targets[open_rows(targets)]
        if not len(targets):
            return None
        t = targets[0]
        targets = targets[targets // sizes[3] != t // sizes[3]]
        return np.array(np.unravel_index(t, sizes[:4]))

    def normalize(raw, valid):
        """Throughput over the reference (set by the first valid strategy, PAPER.md §5.1)."""
        nonlocal ref
        if ref is None and valid.any():
            ref = float(raw[valid][0])
        return raw / ref if ref else np.zeros(len(raw))

    row_best = {}               # coarse row (flat) -> (raw, strategy): the best valid seen there
    row_raw = np.full(int(np.prod(sizes[:4])), -np.inf)     # the same raw, all rows

    def open_rows(g=None):
        """Whether each coarse row g (flat; None: every row) may still hold what the search
        must find (``prove_top``): its bound beats the best found (k > 1: the k-th best row
        found, and the row's own best)."""
        ub = bound.ravel() if g is None else bound.ravel()[g]
        if prove_top <= 1:
            best_raw = best * ref if ref else -np.inf
            return ub > best_raw * (1 + 1e-9)
        found = row_raw[np.isfinite(row_raw)]
        kth = np.partition(found, -prove_top)[-prove_top] if len(found) >= prove_top else -np.inf
        return (ub > kth * (1 + 1e-9)) & (ub > (row_raw if g is None else row_raw[g]))

    def remember(actions, raw, valid, norm):
        """The valid strategies into the elite history and the best-so-far b."""
        nonlocal best
        for a, v, r, x in zip(actions, valid, norm, raw):
            if v:
                elite.add(a, float(r))
                g = int(np.ravel_multi_index(tuple(a[:4]), sizes[:4]))
                if x > row_best.get(g, (-np.inf,))[0]:
                    row_best[g] = (float(x), a)
                    row_raw[g] = float(x)
        if valid.any():
            best = max(best, float(norm[valid].max()))
        if keep:
            all_rows.append(actions)
            all_raw.append(raw)
            all_valid.append(valid)

    def probe(rows):
        """Evaluate proposed index rows (within the budget) into the elite history."""
        nonlocal calls
        rows = np.asarray(rows, dtype=np.int64)[:budget - calls]
        if not len(rows):
            return np.zeros(0), np.zeros(0, dtype=bool)
        raw, valid = evaluate(rows)
        calls += len(rows)
        remember(rows, raw, valid, normalize(raw, valid))
        if on_calls:
            on_calls(len(rows))
        return raw, valid

    def climb(row):
        """Up to ``bound_sweeps`` sweeps of single per-op changes from ``row`` (with
        ``bound_moves`` also the batch one step either way, every joint change of a pair of
        ``groups`` and a larger group set to one value; one call each, all of a sweep at once),
        moving to the best valid one while it improves."""
        r0, v0 = probe(row[None])
        here = float(r0[0]) if len(r0) and v0[0] else -np.inf
        for _ in range(cfg.bound_sweeps):
            near = [np.r_[row[:h], v, row[h + 1:]] for h in range(4, len(sizes))
                    for v in range(sizes[h]) if v != row[h]]
            if cfg.bound_moves:
                near += [np.r_[row[:3], v, row[4:]] for v in (row[3] - 1, row[3] + 1)
                         if 0 <= v < sizes[3]]          # the batch, one step either way
                for g in groups:        # a pair: every joint change; a larger group: to one value
                    values = itertools.product(*(range(sizes[h]) for h in g)) if len(g) == 2 \
                        else ((v,) * len(g) for v in range(min(sizes[h] for h in g)))
                    for vs in values:
                        if (row[list(g)] != vs).all() or len(g) > 2 and \
                                (row[list(g)] != vs).sum() > 1:   # (one change: swept above)
                            near.append(row.copy())
                            near[-1][list(g)] = vs
            raw, valid = probe(near)
            if not valid.any() or raw[valid].max() <= here:
                return
            i = np.flatnonzero(valid)[np.argmax(raw[valid])]
            row, here = near[i], float(raw[i])

    if seed is not None and len(seed):
        probe(seed)
    stages = [] if sweep is None or bound is None or not cfg.baseline_sweep else \
        [sweep] if isinstance(sweep, np.ndarray) else list(sweep)
    seeded = {r.tobytes() for r in np.asarray(seed, dtype=np.int64)} if seed is not None else ()
    for rows in stages:
        # the stage's strategies whose coarse row's bound beats the best found, best bound
        # first, n_steps rows a call, until none is left (or half the budget is spent)
        rows = np.asarray(rows, dtype=np.int64)
        flat = bound.ravel()
        g = np.ravel_multi_index(tuple(rows[:, :4].T), sizes[:4])
        order = np.argsort(-flat[g], kind="stable")
        order = order[np.isfinite(flat[g[order]])]
        done = np.array([r.tobytes() in seeded for r in rows], dtype=bool)   # (tried as seeds)
        while calls < budget // 2:
            todo = order[~done[order] & open_rows(g[order])][:cfg.n_steps]
            if not len(todo):
                break
            done[todo] = True
            probe(rows[todo])
    while calls < budget:
        # ---- a fresh agent: new weights and optimizer, same elite history and best-so-far
        params = policy.init_params(pcfg, rng, dtype=np.float32)
        kind = "fresh"
        if cfg.elite_prior > 0 and elite.rows:
            after_global = cfg.alternate and bool(stats.kinds) and stats.kinds[-1] in (
                "global", "bound")
            kind = "global" if cfg.global_on_stall and stalled and not after_global else "local"
            params["pi.b2"][:] = _restart_bias(sizes, elite.rows[0], kind, cfg, switch_heads)
        if bound is not None and cfg.bound_restarts and not open_rows().any():
            stats.proved = True         # no coarse row can beat the best found: the optimum
            break
        if bound is not None and cfg.bound_restarts and (kind == "global" or not stats.kinds):
            target = next_target()
            if target is not None:
                row = elite.rows[0].copy() if elite.rows else np.zeros(len(sizes), np.int64)
                row[:4] = target
                if elite.rows:          # the best per-op choices, moved to the target row
                    climb(row)
                here = row_best.get(int(np.ravel_multi_index(tuple(target), sizes[:4])))
                if here is not None:    # ... and the best strategy seen at the target row
                    climb(here[1].copy())
                params["pi.b2"][:] = _restart_bias(sizes, row, "bound", cfg, switch_heads)
                if not elite.rows:                  # nothing to centre the per-op heads on
                    params["pi.b2"][n_coarse:] = 0.0
                kind = "bound"
        params["pi.b2"] += mask
        stats.kinds.append(kind)
        if not keep:
            del stats.kinds[:-1]
        adam = nn.adam_init(params)
        start, best_at_start = calls, best
        stats.restarts += 1
        while calls < budget and calls - start < chunk:
            n = min(cfg.n_steps, budget - calls)
            X = elite.observation()                     # [1, T, A], shared by the n rollouts
            actions, logprob, _, value = policy.get_action_and_value(params, X, pcfg, rng, n=n)
            raw, valid = evaluate(actions)
            calls += n
            # ---- rewards (Eq. 1) against the best before this rollout, then update b and elites
            norm = normalize(raw, valid)
            rewards = np.where(valid, cfg.alpha * norm + cfg.beta * (norm - best),
                               cfg.invalid_reward)
            remember(actions, raw, valid, norm)
            # ---- PPO update: one-step episodes, so returns = rewards and advantages = r - V
            advantages = rewards - value
            if cfg.normalize_advantages and n > 1:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            lr = _cosine(cfg.lr, (calls - start) / chunk)
            for _ in range(cfg.n_epochs):
                loss, grads, info = ppo_loss_and_grad(
                    params, pcfg, X, actions, logprob, advantages, rewards, clip=cfg.clip,
                    vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
                grads, gnorm = nn.clip_grad_norm(grads, cfg.max_grad_norm)
                nn.adam_step(params, grads, adam, lr)
            stats.updates += 1
            info.update({"charts/learning_rate": lr, "charts/best": best,
                         "losses/grad_norm": gnorm, "charts/calls": calls})
            if not keep:
                stats.log.clear()
            stats.log.append(info)
            if on_calls:
                on_calls(n)
            # ---- early exit: the policy is (nearly) deterministic on the current history
            if policy.confidence(params, elite.observation(), pcfg).min() >= cfg.confidence:
                stats.early_exits += 1
                break
        stalled = best <= best_at_start
    if not all_rows:
        return np.zeros((0, len(sizes)), np.int64), np.zeros(0), np.zeros(0, bool), stats
    return (np.concatenate(all_rows), np.concatenate(all_raw), np.concatenate(all_valid), stats)
