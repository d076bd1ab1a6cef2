"""Tests of lts/agent/policy.py and of the PPO loss on it (lts/agent/ppo.py
``ppo_loss_and_grad``): whole-policy and PPO-loss gradient checks, masking, sampling, learning.

Gradient checks run in float64 on a small network (d_model=16, 2 attention heads) and sample a
few entries of every parameter (CS231n ``grad_check_sparse``).
"""
import numpy as np
import pytest

from lts.agent import nn

from lts.agent import policy
from lts.agent.policy import PolicyConfig
from lts.agent.ppo import ppo_loss_and_grad

try:
    from gradcheck import grad_check_sparse
except ImportError:  # tests/ imported as a package
    from tests.gradcheck import grad_check_sparse

# Looser than the per-layer 1e-6 on purpose. Gradient entries of the whole network span ~5
# orders of magnitude (e.g. a saturated GELU unit's bias gets 5e-5 while the largest entry is
# ~10), and for the smallest ones the round-off of f (|f| ~ 10, so ~1e-16 * 10 / h ~ 1e-10 in the
# centred difference) alone gives relative errors up to ~4e-6: that is the worst seen when every
# entry of every key was checked for h in {1e-4, 3e-5, 1e-5}, with and without masks. A wrong
# gradient gives errors of 1e-3 or more.
TOL = 1e-5
SMALL = PolicyConfig(n_choices=(3, 2, 5, 4), T=3, n_extra=1, d_model=16, n_heads=2, d_ff=24,
                     hidden=12, rank_embedding=True)


def perturbed_params(cfg, rng, scale=0.3):
    """Initial parameters plus noise, so biases, LN affine and the tiny policy output layer are
    all generic (no exact zeros or ones that could hide a wrong gradient)."""
    params = policy.init_params(cfg, rng, dtype=np.float64)
    for k, p in params.items():
        p += scale * rng.standard_normal(p.shape)
    return params


def random_mask(cfg, rng, B, p_keep=0.6):  # -> bool [B, N], at least one valid entry per head
    mask = rng.random((B, cfg.N)) < p_keep
    start = 0
    for n in cfg.n_choices:
        rows = ~mask[:, start:start + n].any(axis=1)
        mask[rows, start + rng.integers(n, size=rows.sum())] = True
        start += n
    return mask


def random_obs(cfg, rng, B):
    return rng.random((B, cfg.T, cfg.A))


def check_all_params(f, params, grads, rng, num_checks):
    """Sparse gradient check of every parameter key.

    The key part of the attention in-projection bias (``attn.bqkv[d:2d]``) has a true gradient
    of exactly 0 (softmax is invariant to the per-query constant q.b_k it adds), so it is checked
    absolutely and left out of the relative check, where finite-difference noise would dominate.
    """
    assert list(grads) == list(params)
    for k in params:
        where = None
        if k == "attn.bqkv":
            d = params[k].size // 3
            assert np.max(np.abs(grads[k][d:2 * d])) < 1e-12
            where = np.ones(params[k].shape, dtype=bool)
            where[d:2 * d] = False
        err = grad_check_sparse(f, params[k], grads[k], rng, num_checks=num_checks, where=where)
        assert err < TOL, (k, err)


def test_config_properties():
    cfg = PolicyConfig(n_choices=[3, 13, 4])
    assert cfg.n_choices == (3, 13, 4)
    assert (cfg.H, cfg.A, cfg.N, cfg.K) == (3, 3, 20, 13)
    assert (cfg.T, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.hidden) == (3, 256, 4, 512, 256)
    with pytest.raises(ValueError):
        PolicyConfig(n_choices=(3,), d_model=10, n_heads=4)
    with pytest.raises(ValueError):
        PolicyConfig(n_choices=())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_shapes_and_normalization(dtype):
    rng = np.random.default_rng(0)
    cfg = PolicyConfig(n_choices=(3, 5, 2, 13), n_extra=1)
    params = policy.init_params(cfg, rng, dtype=dtype)
    X = random_obs(cfg, rng, 4)
    logits, value, cache = policy.forward(params, X, cfg)
    assert logits.shape == (4, cfg.N) and value.shape == (4,)
    assert logits.dtype == dtype and value.dtype == dtype
    start = 0
    for n in cfg.n_choices:                    # each head is a distribution
        assert np.allclose(np.exp(logits[:, start:start + n]).sum(axis=1), 1.0, atol=1e-5)
        start += n
    # CleanRL init: policy output std 0.01 -> near-uniform heads
    conf = policy.confidence(params, X, cfg)
    assert conf.shape == (4, cfg.H)
    assert np.allclose(conf, 1.0 / np.asarray(cfg.n_choices), rtol=0.1)
    grads = policy.backward(np.ones_like(logits), np.ones_like(value), cache, params, cfg)
    assert list(grads) == list(params)
    assert all(grads[k].shape == params[k].shape and grads[k].dtype == dtype for k in params)


@pytest.mark.parametrize("use_mask", [False, True])
def test_policy_gradcheck(use_mask):
    rng = np.random.default_rng(1)
    cfg = SMALL
    params = perturbed_params(cfg, rng)
    B = 4
    X = random_obs(cfg, rng, B)
    mask = random_mask(cfg, rng, B) if use_mask else None
    R_logits = rng.standard_normal((B, cfg.N))   # random linear functional of (logits, value)
    R_value = rng.standard_normal(B)
    if use_mask:  # masked logits are the constant MASKED_LOGP (zero gradient); leaving them in
        R_logits[~mask] = 0.0   # would add ~1e9 to f and drown the differences in round-off

    def f():
        logits, value, _ = policy.forward(params, X, cfg, mask)
        return np.sum(R_logits * logits) + np.sum(R_value * value)

    _, _, cache = policy.forward(params, X, cfg, mask)
    grads = policy.backward(R_logits, R_value, cache, params, cfg)
    check_all_params(f, params, grads, rng, num_checks=12)


@pytest.mark.parametrize("use_mask", [False, True])
def test_ppo_loss_gradcheck(use_mask):
    rng = np.random.default_rng(2)
    cfg = SMALL
    params = perturbed_params(cfg, rng)
    B = 8
    X = random_obs(cfg, rng, B)
    mask = random_mask(cfg, rng, B) if use_mask else None
    actions, logprob, _, _ = policy.get_action_and_value(params, X, cfg, rng, mask)
    # old log-probs chosen so that half the ratios are clipped and half are not, all well away
    # from the kinks at 1 +- clip, with advantages of both signs
    logratio = np.array([0.05, -0.05, 0.1, -0.1, 0.5, -0.5, 0.6, -0.6])
    old_logprob = logprob - logratio
    advantages = np.array([1.0, -1.0, -0.5, 0.7, 1.2, -0.8, -1.5, 0.9])
    returns = rng.standard_normal(B)
    kw = dict(clip=0.2, vf_coef=0.5, ent_coef=0.01, mask=mask)

    loss, grads, stats = ppo_loss_and_grad(params, cfg, X, actions, old_logprob,
                                           advantages, returns, **kw)
    assert set(stats) == {"losses/policy", "losses/value", "losses/entropy",
                          "stats/approx_kl", "stats/clipfrac"}
    assert stats["stats/clipfrac"] == 0.5
    assert np.isclose(loss, stats["losses/policy"] - 0.01 * stats["losses/entropy"]
                      + 0.5 * stats["losses/value"])
    assert list(grads) == list(params)

    def f():
        return ppo_loss_and_grad(params, cfg, X, actions, old_logprob,
                                 advantages, returns, **kw)[0]

    check_all_params(f, params, grads, rng, num_checks=8)


def test_ppo_loss_matches_reference_formulas():
    rng = np.random.default_rng(3)
    cfg = SMALL
    params = perturbed_params(cfg, rng)
    B = 6
    X = random_obs(cfg, rng, B)
    actions = policy.sample(params, X, cfg, rng)
    old = rng.normal(-4.0, 0.3, size=B)
    adv, ret = rng.standard_normal(B), rng.standard_normal(B)
    loss, _, stats = ppo_loss_and_grad(params, cfg, X, actions, old, adv, ret)
    logits, value, _ = policy.forward(params, X, cfg)
    starts = np.concatenate([[0], np.cumsum(cfg.n_choices)[:-1]])
    newlogprob = logits[np.arange(B)[:, None], starts + actions].sum(axis=1)
    ratio = np.exp(newlogprob - old)
    pg = np.mean(np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.8, 1.2)))
    assert np.isclose(stats["losses/policy"], pg)
    assert np.isclose(stats["losses/value"], 0.5 * np.mean((value - ret) ** 2))
    assert np.isclose(stats["stats/approx_kl"], np.mean(ratio - 1 - np.log(ratio)))
    assert np.isclose(loss, pg + 0.5 * stats["losses/value"])   # ent_coef defaults to 0


def test_masked_actions_have_zero_probability_and_are_never_sampled():
    rng = np.random.default_rng(4)
    cfg = SMALL
    params = perturbed_params(cfg, rng, scale=1.0)
    B = 256
    X = random_obs(cfg, rng, B)
    mask = random_mask(cfg, rng, B, p_keep=0.4)
    logits, _, _ = policy.forward(params, X, cfg, mask)
    assert np.all(np.exp(logits)[~mask] == 0.0) and np.all(logits[~mask] == nn.MASKED_LOGP)
    logp = policy.head_log_probs(logits, cfg, mask)            # [B, H, K]
    assert logp.shape == (B, cfg.H, cfg.K)
    assert np.allclose(np.exp(logp).sum(axis=-1), 1.0)
    starts = np.concatenate([[0], np.cumsum(cfg.n_choices)[:-1]])
    for _ in range(20):
        actions = policy.sample(params, X, cfg, rng, mask)
        assert actions.shape == (B, cfg.H)
        assert np.all(actions < np.asarray(cfg.n_choices))
        assert np.all(mask[np.arange(B)[:, None], starts + actions])
    logprob, entropy = policy.log_prob_and_entropy(params, X, actions, cfg, mask)
    assert np.all(np.isfinite(logprob)) and np.all(entropy >= 0.0)
    # a head with a single allowed action is certain
    one = np.zeros(cfg.N, dtype=bool)
    one[starts + 1] = True
    conf = policy.confidence(params, X[:3], cfg, one)
    assert np.allclose(conf, 1.0)
    assert np.all(policy.sample(params, X[:3], cfg, rng, one) == 1)


def test_sampling_is_deterministic_for_a_fixed_seed():
    cfg = SMALL
    params = perturbed_params(cfg, np.random.default_rng(5))
    X = random_obs(cfg, np.random.default_rng(6), 16)
    a1 = policy.sample(params, X, cfg, np.random.default_rng(123))
    a2 = policy.sample(params, X, cfg, np.random.default_rng(123))
    a3 = policy.sample(params, X, cfg, np.random.default_rng(124))
    assert np.array_equal(a1, a2)
    assert not np.array_equal(a1, a3)
    assert a1.dtype.kind == "i"


def test_sampling_follows_the_distribution():
    rng = np.random.default_rng(7)
    cfg = PolicyConfig(n_choices=(3, 4), d_model=8, n_heads=2, d_ff=8, hidden=8)
    params = perturbed_params(cfg, rng, scale=1.0)
    X = np.repeat(random_obs(cfg, rng, 1), 20000, axis=0)
    actions = policy.sample(params, X, cfg, rng)
    logp = policy.head_log_probs(policy.forward(params, X[:1], cfg)[0], cfg)[0]   # [H, K]
    for h, n in enumerate(cfg.n_choices):
        freq = np.bincount(actions[:, h], minlength=n) / len(actions)
        assert np.allclose(freq, np.exp(logp[h, :n]), atol=0.015)


def test_ppo_updates_raise_probability_of_rewarded_action():
    rng = np.random.default_rng(8)
    cfg = PolicyConfig(n_choices=(3, 5, 4), T=3, d_model=16, n_heads=2, d_ff=32, hidden=16)
    params = policy.init_params(cfg, rng)
    state = nn.adam_init(params)
    X = random_obs(cfg, rng, 2)
    target = np.array([[2, 1, 3], [2, 1, 3]])
    adv, ret = np.ones(2), np.zeros(2)
    start, _ = policy.log_prob_and_entropy(params, X, target, cfg)
    for _ in range(30):
        old, _ = policy.log_prob_and_entropy(params, X, target, cfg)
        _, grads, _ = ppo_loss_and_grad(params, cfg, X, target, old, adv, ret)
        grads, _ = nn.clip_grad_norm(grads, 0.5)
        nn.adam_step(params, grads, state, lr=3e-3)
    end, _ = policy.log_prob_and_entropy(params, X, target, cfg)
    assert np.all(end > start + 1.0), (start, end)
    assert np.all(policy.confidence(params, X, cfg) > 1.0 / np.asarray(cfg.n_choices))


def test_float32_gradients_match_float64():
    rng = np.random.default_rng(9)
    cfg = SMALL
    p64 = perturbed_params(cfg, rng)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    X = random_obs(cfg, rng, 4)
    actions = policy.sample(p64, X, cfg, rng)
    old, adv, ret = rng.normal(-5.0, 0.1, 4), rng.standard_normal(4), rng.standard_normal(4)
    l64, g64, _ = ppo_loss_and_grad(p64, cfg, X, actions, old, adv, ret, ent_coef=0.01)
    l32, g32, _ = ppo_loss_and_grad(p32, cfg, X, actions, old, adv, ret, ent_coef=0.01)
    assert np.isclose(l32, l64, rtol=1e-4)
    for k in p64:
        assert g32[k].dtype == np.float32
        scale = np.max(np.abs(g64[k])) + 1e-12
        assert np.max(np.abs(g32[k] - g64[k])) < 1e-3 * scale, k


def test_shared_observation_matches_tiled_batch():
    # ppo.py rolls out n actions on one elite history X [1, T, A]: get_action_and_value(n=...)
    # and ppo_loss_and_grad with X [1, T, A] must equal the same calls on X tiled to [n, T, A]
    rng = np.random.default_rng(10)
    cfg = SMALL
    params = perturbed_params(cfg, rng)
    X1 = random_obs(cfg, rng, 1)
    n = 5
    Xn = np.repeat(X1, n, axis=0)
    a1, lp1, ent1, v1 = policy.get_action_and_value(params, X1, cfg, np.random.default_rng(3), n=n)
    an, lpn, entn, vn = policy.get_action_and_value(params, Xn, cfg, np.random.default_rng(3))
    assert np.array_equal(a1, an)
    assert np.allclose(lp1, lpn) and np.allclose(ent1, entn) and np.allclose(v1, vn)
    old = lpn - np.array([0.05, -0.3, 0.1, 0.4, -0.02])
    adv, ret = rng.standard_normal(n), rng.standard_normal(n)
    kw = dict(clip=0.2, vf_coef=0.5, ent_coef=0.01)
    l1, g1, s1 = ppo_loss_and_grad(params, cfg, X1, a1, old, adv, ret, **kw)
    ln, gn, sn = ppo_loss_and_grad(params, cfg, Xn, an, old, adv, ret, **kw)
    assert np.isclose(l1, ln)
    assert all(np.isclose(s1[k], sn[k]) for k in sn)
    for k in params:
        assert np.allclose(g1[k], gn[k], rtol=1e-9, atol=1e-12), k
