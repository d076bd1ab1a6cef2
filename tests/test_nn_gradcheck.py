"""Gradient checks for every layer in lts/agent/nn.py, plus Adam and gradient clipping.

Each check runs in float64 with a random upstream gradient ``dout`` (llm.c / CS231n pattern) and
is judged by the maximum relative error against centred finite differences.
"""
import numpy as np
import pytest

from lts.agent import nn

try:
    from gradcheck import eval_numerical_gradient_array, rel_error
except ImportError:  # tests/ imported as a package
    from tests.gradcheck import eval_numerical_gradient_array, rel_error

TOL = 1e-6


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_linear(rng):
    x = rng.standard_normal((2, 3, 5))
    W = rng.standard_normal((5, 4))
    b = rng.standard_normal(4)
    out, cache = nn.linear_forward(x, W, b)
    assert out.shape == (2, 3, 4)
    dout = rng.standard_normal(out.shape)
    dx, dW, db = nn.linear_backward(dout, cache)
    f = lambda: nn.linear_forward(x, W, b)[0]  # noqa: E731
    assert rel_error(dx, eval_numerical_gradient_array(f, x, dout)) < TOL
    assert rel_error(dW, eval_numerical_gradient_array(f, W, dout)) < TOL
    assert rel_error(db, eval_numerical_gradient_array(f, b, dout)) < TOL


def test_layernorm(rng):
    x = 3.0 * rng.standard_normal((2, 3, 6)) + 1.0
    gamma = 1.0 + 0.5 * rng.standard_normal(6)
    beta = rng.standard_normal(6)
    out, cache = nn.layernorm_forward(x, gamma, beta)
    norm = (out - beta) / gamma
    assert np.allclose(norm.mean(-1), 0.0, atol=1e-12)
    assert np.allclose(norm.var(-1), 1.0, atol=1e-5)
    dout = rng.standard_normal(out.shape)
    dx, dgamma, dbeta = nn.layernorm_backward(dout, cache)
    f = lambda: nn.layernorm_forward(x, gamma, beta)[0]  # noqa: E731
    assert rel_error(dx, eval_numerical_gradient_array(f, x, dout)) < TOL
    assert rel_error(dgamma, eval_numerical_gradient_array(f, gamma, dout)) < TOL
    assert rel_error(dbeta, eval_numerical_gradient_array(f, beta, dout)) < TOL


@pytest.mark.parametrize("name", ["gelu", "tanh", "relu"])
def test_activation(rng, name):
    fwd, bwd = getattr(nn, name + "_forward"), getattr(nn, name + "_backward")
    x = rng.standard_normal((4, 7))
    if name == "relu":  # keep the finite-difference stencil away from the kink at 0
        x = np.where(np.abs(x) < 1e-2, 0.5, x)
    out, cache = fwd(x)
    dout = rng.standard_normal(out.shape)
    dx = bwd(dout, cache)
    assert rel_error(dx, eval_numerical_gradient_array(lambda: fwd(x)[0], x, dout)) < TOL


def test_gelu_values():
    # tanh approximation of x * Phi(x): GELU(1) ~ 0.8412, GELU(-1) ~ -0.1588, GELU(0) = 0
    out, _ = nn.gelu_forward(np.array([-1.0, 0.0, 1.0]))
    assert np.allclose(out, [-0.158808, 0.0, 0.841192], atol=1e-6)


def test_attention(rng):
    B, T, d, nh = 2, 3, 8, 2
    x = rng.standard_normal((B, T, d))
    Wqkv = 0.5 * rng.standard_normal((d, 3 * d))
    bqkv = 0.1 * rng.standard_normal(3 * d)
    Wo = 0.5 * rng.standard_normal((d, d))
    bo = 0.1 * rng.standard_normal(d)
    out, cache = nn.attention_forward(x, Wqkv, bqkv, Wo, bo, nh)
    assert out.shape == (B, T, d)
    dout = rng.standard_normal(out.shape)
    grads = nn.attention_backward(dout, cache)
    f = lambda: nn.attention_forward(x, Wqkv, bqkv, Wo, bo, nh)[0]  # noqa: E731
    for g, p in zip(grads, (x, Wqkv, bqkv, Wo, bo)):
        num = eval_numerical_gradient_array(f, p, dout)
        if p is bqkv:
            # The key bias adds q.b_k to every score of a query row, which softmax ignores: its
            # true gradient is exactly 0, so relative error is meaningless there (finite
            # differences give ~1e-11 noise). Check it absolutely, and the q/v parts relatively.
            k_part = slice(d, 2 * d)
            assert np.max(np.abs(g[k_part])) < 1e-12 and np.max(np.abs(num[k_part])) < 1e-8
            g, num = np.delete(g, np.arange(d, 2 * d)), np.delete(num, np.arange(d, 2 * d))
        assert rel_error(g, num) < TOL


def test_attention_matches_per_head_reference(rng):
    B, T, d, nh = 2, 4, 8, 2
    hs = d // nh
    x = rng.standard_normal((B, T, d))
    Wqkv, bqkv = rng.standard_normal((d, 3 * d)), rng.standard_normal(3 * d)
    Wo, bo = rng.standard_normal((d, d)), rng.standard_normal(d)
    out, _ = nn.attention_forward(x, Wqkv, bqkv, Wo, bo, nh)
    q, k, v = np.split(x @ Wqkv + bqkv, 3, axis=-1)
    heads = []
    for h in range(nh):
        s = slice(h * hs, (h + 1) * hs)
        att = nn.softmax(q[..., s] @ k[..., s].swapaxes(-1, -2) / np.sqrt(hs))
        heads.append(att @ v[..., s])
    assert np.allclose(out, np.concatenate(heads, axis=-1) @ Wo + bo)


def test_softmax_stable():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]])
    p, logp = nn.softmax(x), nn.log_softmax(x)
    assert np.all(np.isfinite(p)) and np.all(np.isfinite(logp))
    ref = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    assert np.allclose(p[0], ref) and np.allclose(p[1], 1.0 / 3.0)
    assert np.allclose(np.exp(logp), p)


def test_masked_log_softmax_gradient_on_unmasked_entries(rng):
    x = rng.standard_normal((3, 4, 6))
    mask = rng.random(x.shape) < 0.6
    mask[..., 0] = True                       # at least one valid entry per row
    logp, cache = nn.masked_log_softmax_forward(x, mask)
    dout = rng.standard_normal(x.shape)
    dx = nn.masked_log_softmax_backward(dout, cache)
    f = lambda: np.where(mask, nn.masked_log_softmax_forward(x, mask)[0], 0.0)  # noqa: E731
    num = eval_numerical_gradient_array(f, x, np.where(mask, dout, 0.0))
    assert rel_error(dx[mask], num[mask]) < TOL
    assert np.all(dx[~mask] == 0.0)


def test_masked_log_softmax_unmasked_equals_log_softmax(rng):
    x = rng.standard_normal((5, 7))
    logp, cache = nn.masked_log_softmax_forward(x)
    assert np.allclose(logp, nn.log_softmax(x))
    dout = rng.standard_normal(x.shape)
    dx = nn.masked_log_softmax_backward(dout, cache)
    f = lambda: nn.masked_log_softmax_forward(x)[0]  # noqa: E731
    assert rel_error(dx, eval_numerical_gradient_array(f, x, dout)) < TOL


def test_masked_log_softmax_probabilities():
    x = np.array([[0.3, 5.0, -2.0, 1.0],
                  [1.0, 2.0, 3.0, 4.0]])
    mask = np.array([[True, False, True, True],
                     [False, False, False, False]])   # second row fully masked
    logp, (p, _) = nn.masked_log_softmax_forward(x, mask)
    assert np.all(np.isfinite(logp)) and np.all(np.isfinite(p))
    assert np.all(np.exp(logp)[~mask] == 0.0) and np.all(p[~mask] == 0.0)
    assert np.all(logp[~mask] == nn.MASKED_LOGP)
    assert np.isclose(p[0].sum(), 1.0)
    assert np.allclose(p[0, mask[0]], nn.softmax(x[0, mask[0]]))
    assert np.all(p[1] == 0.0)
    dx = nn.masked_log_softmax_backward(np.ones_like(x), (p, mask))
    assert np.all(np.isfinite(dx)) and np.all(dx[1] == 0.0)


def test_adam_decreases_quadratic(rng):
    target = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    params = {"w": np.zeros((3, 4)), "b": np.zeros(4)}
    state = nn.adam_init(params)
    loss = lambda: sum(0.5 * np.sum((params[k] - target[k]) ** 2) for k in params)  # noqa: E731
    start = loss()
    for _ in range(300):
        grads = {k: params[k] - target[k] for k in params}
        nn.adam_step(params, grads, state, lr=0.05)
    assert state.t == 300
    assert set(state.m) == set(state.v) == set(params)
    assert loss() < 1e-2 * start


def test_adam_first_step_is_lr_times_sign():
    # with bias correction the first step is lr * g / (|g| + eps) ~ lr * sign(g)
    params = {"w": np.array([1.0, -2.0, 3.0])}
    state = nn.adam_init(params)
    nn.adam_step(params, {"w": np.array([10.0, -10.0, 0.5])}, state, lr=0.1)
    assert np.allclose(params["w"], [0.9, -1.9, 2.9], atol=1e-4)


def test_clip_grad_norm(rng):
    grads = {"a": rng.standard_normal((4, 5)), "b": rng.standard_normal(3)}
    norm0 = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
    clipped, norm = nn.clip_grad_norm(grads, 0.5)
    assert np.isclose(norm, norm0)
    new = np.sqrt(sum(np.sum(g * g) for g in clipped.values()))
    assert new <= 0.5 + 1e-9 and np.isclose(new, 0.5, rtol=1e-5)
    assert np.allclose(clipped["a"] / grads["a"], clipped["b"][0] / grads["b"][0])  # same direction
    same, _ = nn.clip_grad_norm(grads, 10.0 * norm0)
    assert all(np.array_equal(same[k], grads[k]) for k in grads)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_init_helpers(rng, shape):
    W = nn.orthogonal(rng, *shape, gain=2.0)
    assert W.shape == shape
    small = min(shape)
    gram = W.T @ W if shape[0] >= shape[1] else W @ W.T
    assert np.allclose(gram, 4.0 * np.eye(small))
    U = nn.xavier_uniform(rng, *shape)
    assert U.shape == shape and np.all(np.abs(U) <= np.sqrt(6.0 / sum(shape)))
    V = nn.fan_in_uniform(rng, *shape, dtype=np.float32)
    assert V.dtype == np.float32 and np.all(np.abs(V) <= 1.0 / np.sqrt(shape[0]))
    assert np.array_equal(nn.orthogonal(np.random.default_rng(1), *shape),
                          nn.orthogonal(np.random.default_rng(1), *shape))
