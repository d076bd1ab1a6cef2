"""NumPy neural-network layers with hand-written backward passes, Adam, and init helpers.

Every layer follows the llm.c contract: ``*_forward(x, ...) -> (out, cache)`` and
``*_backward(dout, cache) -> (dx, *dparams)``, with the shapes on the ``def`` line. Parameters,
gradients and optimizer moments are ``dict[str, np.ndarray]`` with identical keys (Karpathy's
pg-pong), so the optimizer and the gradient checks are loops over keys. Nothing here draws from
a global RNG: initializers take an ``np.random.Generator``.

Shapes: ``B`` batch, ``T`` sequence (elite-history) length, ``d`` model width, ``nh`` attention
heads, ``hs = d // nh`` head width, ``K`` categories on the last axis.

References:
  - llm.c ``doc/layernorm/layernorm.py`` (layernorm forward/backward and the cache contract).
  - CS231n ``layers.py`` (affine forward/backward); numpy-ml ``DotProductAttention._bwd``.
  - Vaswani et al. 2017, "Attention Is All You Need", Eq. 1 (scaled dot-product attention).
  - Ba et al. 2016, "Layer Normalization"; Hendrycks & Gimpel 2016, "GELUs" (tanh approximation).
  - Kingma & Ba 2015, "Adam", Algorithm 1 (bias-corrected moments; eps added outside the sqrt,
    as in ``torch.optim.Adam``); CleanRL ``ppo.py`` for eps=1e-5 and ``clip_grad_norm_``.
  - Saxe et al. 2014 (orthogonal init); Glorot & Bengio 2010 (Xavier uniform).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LN_EPS = 1e-5            # layernorm epsilon (torch.nn.LayerNorm default)
ADAM_EPS = 1e-5          # CleanRL ppo.py: optim.Adam(..., eps=1e-5)
MASKED_LOGP = -1e9       # log-probability reported for masked entries; their probability is exactly 0
_GELU_C = math.sqrt(2.0 / math.pi)  # a Python float, so float32 inputs stay float32 (NEP 50)


# ----------------------------------------------------------------------------------------------
# linear

def linear_forward(x, W, b):  # [..., i], [i, o], [o] -> [..., o]
    """Affine map ``x @ W + b`` over the last axis.

    Returns:
        out: [..., o]; cache for ``linear_backward``.
    """
    # one 2-D GEMM: numpy's stacked matmul on [B, T, i] loops over B with small GEMMs (~5x slower)
    out = (x.reshape(-1, x.shape[-1]) @ W + b).reshape(x.shape[:-1] + (W.shape[1],))
    return out, (x, W)


def linear_backward(dout, cache):  # [..., o] -> [..., i], [i, o], [o]
    """Gradients of ``linear_forward`` with respect to x, W and b."""
    x, W = cache
    x2 = x.reshape(-1, x.shape[-1])            # [M, i]
    d2 = dout.reshape(-1, dout.shape[-1])      # [M, o]
    dx = (d2 @ W.T).reshape(x.shape)
    dW = x2.T @ d2
    db = d2.sum(axis=0)
    return dx, dW, db


# ----------------------------------------------------------------------------------------------
# layernorm (llm.c doc/layernorm)

def layernorm_forward(x, gamma, beta, eps=LN_EPS):  # [..., d], [d], [d] -> [..., d]
    """Normalize the last axis to zero mean and unit variance, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)                     # [..., 1]
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)              # [..., 1] (biased, as torch)
    rstd = 1.0 / np.sqrt(var + eps)                           # [..., 1]
    norm = xc * rstd                                          # [..., d]
    out = norm * gamma + beta
    return out, (norm, gamma, rstd)


def layernorm_backward(dout, cache):  # [..., d] -> [..., d], [d], [d]
    """Gradients of ``layernorm_forward`` with respect to x, gamma and beta."""
    norm, gamma, rstd = cache
    d = norm.shape[-1]
    dgamma = (dout * norm).reshape(-1, d).sum(axis=0)
    dbeta = dout.reshape(-1, d).sum(axis=0)
    dnorm = dout * gamma                                      # [..., d]
    # dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))  (llm.c layernorm.py)
    dx = rstd * (dnorm - dnorm.mean(axis=-1, keepdims=True)
                 - norm * (dnorm * norm).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


# ----------------------------------------------------------------------------------------------
# activations

def gelu_forward(x):  # [...] -> [...]
    """GELU, tanh approximation (Hendrycks & Gimpel 2016; torch ``approximate='tanh'``)."""
    t = np.tanh(_GELU_C * (x + 0.044715 * x ** 3))
    return 0.5 * x * (1.0 + t), (x, t)


def gelu_backward(dout, cache):  # [...] -> [...]
    x, t = cache
    dinner = _GELU_C * (1.0 + 3.0 * 0.044715 * x * x)
    return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)


def tanh_forward(x):  # [...] -> [...]
    out = np.tanh(x)
    return out, out


def tanh_backward(dout, cache):  # [...] -> [...]
    out = cache
    return dout * (1.0 - out * out)


def relu_forward(x):  # [...] -> [...]
    return np.maximum(x, 0.0), x > 0


def relu_backward(dout, cache):  # [...] -> [...]
    return dout * cache


# ----------------------------------------------------------------------------------------------
# softmax family

def softmax(x, axis=-1):  # [..., K] -> [..., K]
    """Numerically stable softmax (shift by the max, picoGPT ``gpt2.py``)."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):  # [..., K] -> [..., K]
    """Numerically stable log-softmax: ``x - max - log(sum(exp(x - max)))``."""
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def masked_log_softmax_forward(x, mask=None):  # [..., K], bool [..., K] -> [..., K]
    """Log-softmax over the last axis restricted to entries where ``mask`` is True.

    Masked entries get probability exactly 0 (they never enter the max or the sum) and the
    finite log-probability ``MASKED_LOGP``, so ``p * logp`` is 0 rather than NaN. A fully
    masked row gives all-zero probabilities and no NaN. ``mask=None`` means no masking.

    Returns:
        logp: [..., K]; cache holding the probabilities p [..., K] and the mask.
    """
    if mask is None:
        mask = np.ones(x.shape, dtype=bool)
    mask = np.broadcast_to(mask, x.shape)
    m = np.where(mask, x, -np.inf).max(axis=-1, keepdims=True)     # [..., 1]
    m = np.where(np.isfinite(m), m, 0.0)                          # fully masked row
    z = np.where(mask, x - m, 0.0)
    e = np.where(mask, np.exp(z), 0.0)
    s = e.sum(axis=-1, keepdims=True)                             # [..., 1], 0 if fully masked
    s = np.where(s > 0.0, s, 1.0)
    logp = np.where(mask, z - np.log(s), MASKED_LOGP)
    p = e / s
    return logp, (p, mask)


def masked_log_softmax_backward(dout, cache):  # [..., K] -> [..., K]
    """dx_j = mask_j * (dout_j - p_j * sum_{i unmasked} dout_i); masked entries get 0."""
    p, mask = cache
    dsum = np.where(mask, dout, 0.0).sum(axis=-1, keepdims=True)
    return np.where(mask, dout - p * dsum, 0.0)


# ----------------------------------------------------------------------------------------------
# multi-head self-attention (no mask; Vaswani et al. 2017 Eq. 1)

def attention_forward(x, Wqkv, bqkv, Wo, bo, n_heads):  # [B,T,d], [d,3d], [3d], [d,d], [d] -> [B,T,d]
    """Multi-head self-attention ``softmax(q k^T / sqrt(hs)) v`` followed by an output projection.

    The heads are reshaped into a batch axis (no per-head Python loop).
    """
    B, T, d = x.shape
    hs = d // n_heads
    qkv, c_qkv = linear_forward(x, Wqkv, bqkv)                        # [B,T,3d]
    qkv = qkv.reshape(B, T, 3, n_heads, hs).transpose(2, 0, 3, 1, 4)  # [3,B,nh,T,hs]
    q, k, v = qkv[0], qkv[1], qkv[2]
    scale = 1.0 / math.sqrt(hs)
    att = softmax((q @ k.swapaxes(-1, -2)) * scale)                   # [B,nh,T,T]
    y = att @ v                                                       # [B,nh,T,hs]
    y = y.transpose(0, 2, 1, 3).reshape(B, T, d)                      # [B,T,d]
    out, c_o = linear_forward(y, Wo, bo)
    return out, (c_qkv, c_o, q, k, v, att, scale, n_heads)


def attention_backward(dout, cache):  # [B,T,d] -> [B,T,d], [d,3d], [3d], [d,d], [d]
    """Gradients of ``attention_forward`` (numpy-ml ``DotProductAttention._bwd`` template)."""
    c_qkv, c_o, q, k, v, att, scale, n_heads = cache
    B, T, d = dout.shape
    hs = d // n_heads
    dy, dWo, dbo = linear_backward(dout, c_o)                         # [B,T,d]
    dy = dy.reshape(B, T, n_heads, hs).transpose(0, 2, 1, 3)          # [B,nh,T,hs]
    datt = dy @ v.swapaxes(-1, -2)                                    # [B,nh,T,T]
    dv = att.swapaxes(-1, -2) @ dy                                    # [B,nh,T,hs]
    dscores = att * (datt - (datt * att).sum(axis=-1, keepdims=True)) * scale
    dq = dscores @ k                                                  # [B,nh,T,hs]
    dk = dscores.swapaxes(-1, -2) @ q
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * d)
    dx, dWqkv, dbqkv = linear_backward(dqkv, c_qkv)
    return dx, dWqkv, dbqkv, dWo, dbo


# ----------------------------------------------------------------------------------------------
# optimizer and gradient clipping

@dataclass
class AdamState:
    """Adam moments with the same keys as the parameters, and the number of steps taken."""
    m: dict
    v: dict
    t: int = 0


def adam_init(params):  # dict[str, arr] -> AdamState
    return AdamState(m={k: np.zeros_like(p) for k, p in params.items()},
                     v={k: np.zeros_like(p) for k, p in params.items()})


def adam_step(params, grads, state, lr, betas=(0.9, 0.999), eps=ADAM_EPS):
    """One Adam update of ``params`` in place (Kingma & Ba 2015, Alg. 1; torch.optim.Adam form).

    Args:
        params, grads: dict[str, np.ndarray] with identical keys; params are updated in place.
        state: AdamState from ``adam_init(params)``; updated in place.
        lr: learning rate for this step (the caller anneals it).
    """
    b1, b2 = betas
    state.t += 1
    bc1 = 1.0 - b1 ** state.t
    bc2 = 1.0 - b2 ** state.t
    for k, g in grads.items():
        m, v = state.m[k], state.v[k]
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * (g * g)
        params[k] -= (lr / bc1) * m / (np.sqrt(v / bc2) + eps)


def clip_grad_norm(grads, max_norm):  # dict[str, arr], float -> (dict[str, arr], float)
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    Same rule as ``torch.nn.utils.clip_grad_norm_``: coef = max_norm / (norm + 1e-6), capped at 1.

    Returns:
        (clipped grads as a new dict, the global norm before clipping).
    """
    norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads.values())))
    coef = min(1.0, max_norm / (norm + 1e-6))
    return {k: g * coef for k, g in grads.items()}, norm


# ----------------------------------------------------------------------------------------------
# initializers (weights are stored [in, out])

def orthogonal(rng, n_in, n_out, gain=1.0, dtype=np.float64):  # -> [n_in, n_out]
    """(Semi-)orthogonal matrix times ``gain`` (Saxe et al. 2014; torch.nn.init.orthogonal_)."""
    a = rng.standard_normal((max(n_in, n_out), min(n_in, n_out)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))                                   # uniform over the Haar measure
    if n_in < n_out:
        q = q.T
    return (gain * q).astype(dtype)


def xavier_uniform(rng, n_in, n_out, gain=1.0, dtype=np.float64):  # -> [n_in, n_out]
    """U(-a, a) with a = gain * sqrt(6 / (n_in + n_out)) (Glorot & Bengio 2010)."""
    a = gain * np.sqrt(6.0 / (n_in + n_out))
    return rng.uniform(-a, a, size=(n_in, n_out)).astype(dtype)


def fan_in_uniform(rng, n_in, n_out, dtype=np.float64):  # -> [n_in, n_out]
    """U(-1/sqrt(n_in), 1/sqrt(n_in)): the torch.nn.Linear default weight init."""
    a = 1.0 / np.sqrt(n_in)
    return rng.uniform(-a, a, size=(n_in, n_out)).astype(dtype)
