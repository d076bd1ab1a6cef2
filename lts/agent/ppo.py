"""The paper's search agent: PPO over an elite history (Learning to Shard, §3-4; docs/paper.md §4-5).

The environment (``lts.agent.env``) is one-step, bandit style: the observation is the elite
history, the action a full strategy (one categorical head per entry, ``lts.agent.policy``), the
reward Eq. 1. PPO (clipped objective, n_epochs per update, Adam with cosine-annealed learning
rate) updates the policy after every ``n_steps`` calls; ``ppo_loss_and_grad`` is the clipped loss
with its hand-written gradient. The budget is split into ``chunks``; each chunk starts a fresh
network that inherits the elite history and the best-so-far, and ends early when every head's
largest probability reaches ``confidence`` (the network has converged). Where each fresh network
starts, and the strategies the agent proposes besides its policy's samples (seeds, a baseline
sweep, climbs, the proof of optimality that ends the search), are ``lts.agent.proposer``'s.

``train`` reads as CleanRL's ``ppo.py`` loop: collect a rollout, compute advantages, PPO epochs,
log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..specs.strategy import BATCH, N_COARSE
from . import nn
from . import policy
from .env import Env
from .proposer import Proposer


@dataclass(frozen=True)
class PPOConfig:
    """The agent's settings: lts's tuned agent by default, ``PPOConfig.paper()`` the paper's.

    Where a default departs from the paper it was measured on the paper's six scenarios
    (scripts/search_quality.py) and scripts/benchmark.py's problems; docs/agent.md ("How the
    defaults were chosen") records the figures and what was tried and not kept.
    """
    # the network (lts.agent.policy)
    history: int = 3               # T: elite strategies in the observation (paper App. A)
    d_model: int = 256             # embedding and hidden size (paper App. A)
    n_heads: int = 4               # attention heads (docs/paper.md §11 rec.)
    d_ff: int = 512                # the encoder block's feed-forward width (docs/paper.md §11 rec.)
    # PPO (docs/paper.md §5.2)
    n_steps: int = 64              # calls per update, one rollout (paper: 2; docs/agent.md)
    n_epochs: int = 2              # gradient steps per update (paper App. A: 2)
    lr: float = 3e-3               # initial learning rate, cosine-annealed over each chunk
                                   # (paper: 1e-3; docs/agent.md)
    clip: float = 0.2              # PPO clip range (SB3 default)
    vf_coef: float = 0.5           # value loss weight (SB3 default)
    ent_coef: float = 0.0          # an entropy bonus would fight the confidence early exit
    max_grad_norm: float = 0.5     # global gradient-norm clip (SB3 default)
    normalize_advantages: bool = True    # per rollout, as CleanRL (paper: none; degenerate
                                         # with 2 calls)
    # the reward, Eq. 1 (lts.agent.env)
    alpha: float = 1.0             # weight of the normalized throughput (docs/paper.md §11 rec.)
    beta: float = 1.0              # weight of its gain over the best-so-far (docs/paper.md §11 rec.)
    invalid_reward: float = -10.0  # the paper's "large negative reward", in normalized units
                                   # (docs/paper.md §11 rec.)
    # chunks and restarts (lts.agent.proposer)
    chunks: int = 16               # budget chunks, a fresh network each (paper: 5; docs/agent.md)
    confidence: float = 0.95       # a chunk ends when every head's max probability reaches this
                                   # (paper §3, App. A)
    elite_prior: float = 0.9       # a local restart's probability on the best elite's choice in
                                   # every per-op head (0: uniform, as the paper; docs/agent.md)
    coarse_kernel: float = 1.0     # > 0: the coarse heads (degrees, batch) are ordinal, a
                                   # fresh network's probability falls as exp(-kernel * |i - elite|)
                                   # (docs/agent.md)
    global_on_stall: bool = True   # a global restart after a chunk that did not improve the best
    alternate: bool = True         # ... but after a stalled global chunk a local one again
                                   # (docs/agent.md: 0.93 -> 0.98 of the optimum)
    global_fine: float = 0.7       # a global restart's probability on the best elite's per-op
                                   # choices (docs/agent.md: 0.9 traps, 0.5 too loose)
    global_uniform: bool = True    # a global restart draws train's ``switch_heads`` (a MoE's
                                   # expert split) uniformly (docs/agent.md: 0.980 -> 0.985)
    # guidance by train's ``bound``, an upper bound on each coarse row (issue 13; docs/agent.md)
    seed_points: int = 8           # coarse rows at which lts.search proposes ``seed`` strategies
                                   # (lts.search.seed_rows); 0: none
    baseline_sweep: bool = True    # train's ``sweep`` (Megatron's choices; an engine's strategies)
                                   # at every coarse row whose bound beats the best
    bound_mask: bool = True        # degrees and batches no row of which can be valid: never drawn
    bound_restarts: bool = True    # the first network and every global restart aim at the next
                                   # best-bound instance (the coarse heads but the batch); stop
                                   # once no row can beat the best
    bound_sweeps: int | None = None  # climbs at each aimed restart: sweeps of single per-op
                                   # changes, None: until a sweep finds nothing better (a local
                                   # optimum; 2 left issue 23's serve-mixtral22-h200-trtllm
                                   # at 0.954, 7 sweeps from Megatron's choices); 0: no climbs
    bound_moves: bool = True       # ... and of the batch one step either way and of train's
                                   # ``groups`` (several changes at once)

    @classmethod
    def paper(cls) -> "PPOConfig":
        """The paper's agent (App. A; docs/paper.md §11 for its gaps): 2 calls per update, lr 1e-3,
        5 chunks, fresh networks that start uniform."""
        return cls(n_steps=2, lr=1e-3, chunks=5, normalize_advantages=False, elite_prior=0.0,
                   coarse_kernel=0.0, global_on_stall=False, alternate=False,
                   global_uniform=False, bound_mask=False, bound_restarts=False,
                   bound_moves=False, baseline_sweep=False, seed_points=0)


@dataclass
class PPOStats:
    updates: int = 0
    restarts: int = 0
    early_exits: int = 0
    proved: bool = False        # stopped because no coarse row's bound beats the best found
    kinds: list = field(default_factory=list)   # each chunk's start: "fresh", "local", "global"
                                                # or "bound"
    log: list = field(default_factory=list)     # one dict per update (namespaced keys)


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
          groups=(), sweep=None, prove_top: int = 1, coarse: int | None = None,
          step_head: int | None = None):
    """Run the agent for ``budget`` evaluator calls.

    Args:
        evaluate: callback index rows [n, H] -> (raw tokens/s/GPU [n], valid [n] bool).
        sizes: number of choices of each of the H entries.
        on_calls: optional callback(n) after every n calls (progress bars).
        keep: return every strategy tried and log every update; False keeps memory flat in the
            budget (empty arrays, the last update's log only).
        seed, sweep: strategies tried before the first network (``Proposer.start``).
        switch_heads, bound, groups, prove_top: see ``Proposer``.
        coarse, step_head: the number of coarse heads and the batch head's position (default:
            the strategy layout's, ``N_COARSE`` and ``BATCH``).

    Returns:
        (index rows [calls, H], raw [calls], valid [calls], PPOStats) of every strategy tried.
    """
    sizes = tuple(int(s) for s in sizes)
    pcfg = policy.PolicyConfig(n_choices=sizes, T=cfg.history, n_extra=1, d_model=cfg.d_model,
                               n_heads=cfg.n_heads, d_ff=cfg.d_ff, hidden=cfg.d_model)
    env = Env(evaluate, sizes, budget, cfg, keep, N_COARSE if coarse is None else coarse,
              BATCH if step_head is None else step_head)
    proposer = Proposer(env, cfg, bound, groups, switch_heads, prove_top, on_calls)
    stats = PPOStats()
    chunk = max(cfg.n_steps, budget // cfg.chunks)
    proposer.start(seed, sweep)
    while env.calls < budget:
        # ---- a fresh agent: new weights and optimizer, same elite history and best-so-far
        params = policy.init_params(pcfg, rng, dtype=np.float32)
        restart = proposer.restart()    # climbs first where it aims at a coarse row
        if restart is None:
            stats.proved = True         # no coarse row can beat the best found: the optimum
            break
        kind, bias = restart
        if bias is not None:
            params["pi.b2"][:] = bias
        params["pi.b2"] += proposer.mask
        stats.kinds.append(kind)
        if not keep:
            del stats.kinds[:-1]
        adam = nn.adam_init(params)
        start = env.calls
        stats.restarts += 1
        while env.calls < budget and env.calls - start < chunk:
            # ---- rollout: n strategies on one observation, rewards (Eq. 1) from the environment
            n = min(cfg.n_steps, budget - env.calls)
            X = env.observation()                       # [1, T, A], shared by the n rollouts
            actions, logprob, _, value = policy.get_action_and_value(params, X, pcfg, rng, n=n)
            _, _, rewards = env.step(actions)
            # ---- PPO update: one-step episodes, so returns = rewards and advantages = r - V
            advantages = rewards - value
            if cfg.normalize_advantages and n > 1:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            lr = _cosine(cfg.lr, (env.calls - start) / chunk)
            for _ in range(cfg.n_epochs):
                loss, grads, info = ppo_loss_and_grad(
                    params, pcfg, X, actions, logprob, advantages, rewards, clip=cfg.clip,
                    vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
                grads, gnorm = nn.clip_grad_norm(grads, cfg.max_grad_norm)
                nn.adam_step(params, grads, adam, lr)
            stats.updates += 1
            # ---- log
            info.update({"charts/learning_rate": lr, "charts/best": env.best,
                         "losses/grad_norm": gnorm, "charts/calls": env.calls})
            if not keep:
                stats.log.clear()
            stats.log.append(info)
            if on_calls:
                on_calls(n)
            # ---- early exit: the policy is (nearly) deterministic on the current history
            if policy.confidence(params, env.observation(), pcfg).min() >= cfg.confidence:
                stats.early_exits += 1
                break
    return (*env.tried(), stats)
