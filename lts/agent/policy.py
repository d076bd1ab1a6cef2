"""Actor-critic policy of "Learning to Shard" (arXiv 2509.00217, §4.1), forward and backward by hand.

Observation X [B, T, A] is the elite history: the T best strategies found so far, each an
A-vector of normalized sub-action indices (plus ``n_extra`` optional features). The network is

    X --linear--> [B,T,d] (+ learned rank embedding, optional)
      --> one post-LN Transformer encoder block, as torch.nn.TransformerEncoderLayer
          (norm_first=False, dropout=0, GELU tanh-approx FFN):
              h1 = LN1(h0 + MHA(h0));  z = LN2(h1 + W2 gelu(W1 h1))
      --> mean over T --> pooled [B,d]
      --> policy MLP  d -> hidden -> tanh -> sum(n_choices) logits, one categorical head per
          sub-action (MultiDiscrete); optional boolean action mask via masked log-softmax
      --> value  MLP  d -> hidden -> tanh -> 1

``forward`` returns the per-head *normalized* logits, i.e. each head's log-probabilities laid
side by side in a flat [B, N] array (N = sum(n_choices)); masked entries hold ``nn.MASKED_LOGP``
and have probability exactly 0. ``backward`` takes the gradient with respect to that output.
Internally the heads are padded to [B, H, K] (H heads, K = max(n_choices)) so that softmax,
sampling and entropy are single vectorized ops, with no per-head Python loop. The heads are
independent given the observation, as in the paper (autoregressive heads conditioned on the earlier
heads' actions were tried, with no gain measured, and removed: docs/search-quality.md).

The clipped PPO loss that trains this network, and its gradient, are in ``lts.agent.ppo``.

Shapes: B batch, T history length, A record width, d d_model, H sub-action heads,
K max choices per head, N = sum(n_choices).

References:
  - Yin et al. 2025, "Learning to Shard", §3 (policy), App. A (T=3, d=256, 1 encoder block),
    §3 early exit (all heads' max-probability >= 0.95: see ``confidence``).
  - PyTorch nn.TransformerEncoderLayer (post-LN default); CleanRL ``ppo.py`` (orthogonal init,
    std 0.01 policy output, std 1.0 value output).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import nn


@dataclass(frozen=True)
class PolicyConfig:
    n_choices: tuple             # tuple[int, ...]: categories of each sub-action head (MultiDiscrete nvec)
    T: int = 3                   # elite-history length (paper App. A)
    n_extra: int = 0             # extra features per record after the len(n_choices) indices (e.g. throughput)
    d_model: int = 256           # embedding width (paper App. A: 256)
    n_heads: int = 4             # attention heads (paper silent; docs/paper.md §11 rec. 4)
    d_ff: int = 512              # encoder FFN width (paper silent; docs/paper.md §11 rec. 512)
    hidden: int = 256            # width of the policy and value MLPs (paper App. A: 256)
    rank_embedding: bool = False  # learned [T, d] embedding of the elite rank (records are sorted)

    def __post_init__(self):
        object.__setattr__(self, "n_choices", tuple(int(n) for n in self.n_choices))
        if not self.n_choices or min(self.n_choices) < 1:
            raise ValueError(f"n_choices must be a non-empty tuple of ints >= 1, got {self.n_choices}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")

    @property
    def H(self) -> int:          # number of sub-action heads
        return len(self.n_choices)

    @property
    def A(self) -> int:          # record width
        return len(self.n_choices) + self.n_extra

    @property
    def N(self) -> int:          # total logits
        return sum(self.n_choices)

    @property
    def K(self) -> int:          # padded head width
        return max(self.n_choices)


@lru_cache(maxsize=64)
def _layout(n_choices):  # tuple[int, ...] -> [H, K] int, [H, K] bool
    """Gather map from the flat [N] logits to the padded [H, K] layout, and its validity mask."""
    K = max(n_choices)
    valid = np.arange(K)[None, :] < np.asarray(n_choices)[:, None]          # [H, K]
    offsets = np.concatenate([[0], np.cumsum(n_choices)[:-1]])
    index = np.where(valid, offsets[:, None] + np.arange(K)[None, :], 0)   # [H, K]
    valid.setflags(write=False)
    index.setflags(write=False)
    return index, valid


# ----------------------------------------------------------------------------------------------
# parameters

def init_params(cfg, rng, dtype=np.float32):  # -> dict[str, np.ndarray]
    """Fresh parameters (CleanRL / PyTorch initializations) as a flat dict.

    Embedding and MLP hidden layers: orthogonal, gain sqrt(2) (CleanRL ``layer_init``); attention
    in-projection: Xavier uniform and out-projection / FFN: U(+-1/sqrt(fan_in)) (PyTorch
    defaults); policy output: orthogonal std 0.01; value output: orthogonal std 1.0; biases 0;
    LayerNorm gamma 1, beta 0.

    Args:
        cfg: PolicyConfig.
        rng: np.random.Generator.
        dtype: float32 (default) for search: at d_model=256 a float64 backward is ~3x slower,
            mostly from writing 5 MB of fresh gradient arrays. Pass np.float64 for gradient
            checks. ``forward`` computes in the parameters' dtype.
    """
    d, f, h = cfg.d_model, cfg.d_ff, cfg.hidden
    z = lambda *s: np.zeros(s, dtype=dtype)                           # noqa: E731
    p = {
        "embed.W": nn.orthogonal(rng, cfg.A, d, np.sqrt(2.0), dtype), "embed.b": z(d),
        "attn.Wqkv": nn.xavier_uniform(rng, d, 3 * d, 1.0, dtype), "attn.bqkv": z(3 * d),
        "attn.Wo": nn.fan_in_uniform(rng, d, d, dtype), "attn.bo": z(d),
        "ln1.g": np.ones(d, dtype=dtype), "ln1.b": z(d),
        "ffn.W1": nn.fan_in_uniform(rng, d, f, dtype), "ffn.b1": z(f),
        "ffn.W2": nn.fan_in_uniform(rng, f, d, dtype), "ffn.b2": z(d),
        "ln2.g": np.ones(d, dtype=dtype), "ln2.b": z(d),
        "pi.W1": nn.orthogonal(rng, d, h, np.sqrt(2.0), dtype), "pi.b1": z(h),
        "pi.W2": nn.orthogonal(rng, h, cfg.N, 0.01, dtype), "pi.b2": z(cfg.N),
        "v.W1": nn.orthogonal(rng, d, h, np.sqrt(2.0), dtype), "v.b1": z(h),
        "v.W2": nn.orthogonal(rng, h, 1, 1.0, dtype), "v.b2": z(1),
    }
    if cfg.rank_embedding:
        p["embed.rank"] = (0.02 * rng.standard_normal((cfg.T, d))).astype(dtype)
    return p


# ----------------------------------------------------------------------------------------------
# forward / backward

def _heads_forward(logits, cfg, mask=None):  # [B, N], bool [B, N] | [N] -> [B, H, K]
    """Per-head masked log-softmax in the padded layout; padding counts as masked."""
    index, valid = _layout(cfg.n_choices)
    m = valid if mask is None else (np.asarray(mask, dtype=bool)[..., index] & valid)
    return nn.masked_log_softmax_forward(logits[:, index], m)        # [B,H,K], cache (p, mask)


def _heads_backward(dlogp_pad, cache, cfg):  # [B, H, K] -> [B, N]
    _, valid = _layout(cfg.n_choices)
    return nn.masked_log_softmax_backward(dlogp_pad, cache)[:, valid]


def _trunk_forward(params, X, cfg):  # [B,T,A] -> raw [B,N], value [B], cache
    """Encoder, mean pool, policy MLP (raw logits, before the softmax) and value."""
    P = params
    X = np.asarray(X, dtype=P["embed.W"].dtype)
    h0, c_emb = nn.linear_forward(X, P["embed.W"], P["embed.b"])                 # [B,T,d]
    if cfg.rank_embedding:
        h0 = h0 + P["embed.rank"]
    # post-LN encoder block (torch.nn.TransformerEncoderLayer, norm_first=False, dropout=0)
    a, c_att = nn.attention_forward(h0, P["attn.Wqkv"], P["attn.bqkv"], P["attn.Wo"], P["attn.bo"],
                                    cfg.n_heads)
    h1, c_ln1 = nn.layernorm_forward(h0 + a, P["ln1.g"], P["ln1.b"])
    f, c_f1 = nn.linear_forward(h1, P["ffn.W1"], P["ffn.b1"])                    # [B,T,d_ff]
    f, c_gelu = nn.gelu_forward(f)
    f, c_f2 = nn.linear_forward(f, P["ffn.W2"], P["ffn.b2"])                     # [B,T,d]
    z, c_ln2 = nn.layernorm_forward(h1 + f, P["ln2.g"], P["ln2.b"])
    pooled = z.mean(axis=1)                                                      # [B,d]
    # policy head: d -> hidden -> tanh -> N raw logits
    u, c_p1 = nn.linear_forward(pooled, P["pi.W1"], P["pi.b1"])
    u, c_pt = nn.tanh_forward(u)
    raw, c_p2 = nn.linear_forward(u, P["pi.W2"], P["pi.b2"])                     # [B,N]
    # value head: d -> hidden -> tanh -> 1
    w, c_v1 = nn.linear_forward(pooled, P["v.W1"], P["v.b1"])
    w, c_vt = nn.tanh_forward(w)
    value, c_v2 = nn.linear_forward(w, P["v.W2"], P["v.b2"])                     # [B,1]
    cache = dict(emb=c_emb, att=c_att, ln1=c_ln1, f1=c_f1, gelu=c_gelu, f2=c_f2, ln2=c_ln2,
                 zshape=z.shape, p1=c_p1, pt=c_pt, p2=c_p2, v1=c_v1, vt=c_vt, v2=c_v2)
    return raw, value[:, 0], cache


def _trunk_backward(draw, dvalue, c, params, cfg):  # [B,N], [B] -> dict
    g = {}
    B, T, d = zshape = c["zshape"]
    dt = params["embed.W"].dtype
    # policy head
    du, g["pi.W2"], g["pi.b2"] = nn.linear_backward(draw, c["p2"])
    du = nn.tanh_backward(du, c["pt"])
    dpooled, g["pi.W1"], g["pi.b1"] = nn.linear_backward(du, c["p1"])
    # value head
    dw, g["v.W2"], g["v.b2"] = nn.linear_backward(np.asarray(dvalue, dtype=dt)[:, None], c["v2"])
    dw = nn.tanh_backward(dw, c["vt"])
    dpv, g["v.W1"], g["v.b1"] = nn.linear_backward(dw, c["v1"])
    dpooled = dpooled + dpv
    # mean pool and encoder block
    dz = np.broadcast_to(dpooled[:, None, :] / T, zshape)                       # [B,T,d]
    ds2, g["ln2.g"], g["ln2.b"] = nn.layernorm_backward(dz, c["ln2"])
    df, g["ffn.W2"], g["ffn.b2"] = nn.linear_backward(ds2, c["f2"])
    df = nn.gelu_backward(df, c["gelu"])
    dh1, g["ffn.W1"], g["ffn.b1"] = nn.linear_backward(df, c["f1"])
    dh1 = dh1 + ds2
    ds1, g["ln1.g"], g["ln1.b"] = nn.layernorm_backward(dh1, c["ln1"])
    dh0, g["attn.Wqkv"], g["attn.bqkv"], g["attn.Wo"], g["attn.bo"] = nn.attention_backward(ds1, c["att"])
    dh0 = dh0 + ds1
    if cfg.rank_embedding:
        g["embed.rank"] = dh0.sum(axis=0)
    _, g["embed.W"], g["embed.b"] = nn.linear_backward(dh0, c["emb"])
    return g


def unpad(pad, cfg):  # [B, H, K] -> [B, N]
    """The padded per-head layout [B, H, K] back to the flat [B, N] one (padding dropped)."""
    return pad[:, _layout(cfg.n_choices)[1]]


def forward(params, X, cfg, mask=None):  # [B,T,A], bool [B,N] -> [B,N], [B], cache
    """Run the policy.

    Args:
        params: dict from ``init_params``.
        X: [B, T, A] elite-history observations (cast to the parameters' dtype).
        cfg: PolicyConfig.
        mask: optional bool [B, N] (or [N]); False marks an action that may not be chosen.

    Returns:
        logits: [B, N] per-head log-probabilities (normalized logits); masked -> nn.MASKED_LOGP.
        value: [B] state values.
        cache: for ``backward``; ``cache["logp_pad"]`` holds the logits in the padded [B, H, K]
            layout.
    """
    raw, value, cache = _trunk_forward(params, X, cfg)                          # [B,N], [B]
    logp_pad, c_heads = _heads_forward(raw, cfg, mask)                          # [B,H,K]
    cache.update(heads=c_heads, logp_pad=logp_pad)
    return unpad(logp_pad, cfg), value, cache


def backward(dlogits, dvalue, cache, params, cfg):  # [B,N], [B] -> dict[str, np.ndarray]
    """Gradients of sum(dlogits * logits) + sum(dvalue * value) with respect to every parameter.

    Returns:
        grads: dict with the same keys (and order) as ``params``.
    """
    dt = params["embed.W"].dtype
    _, valid = _layout(cfg.n_choices)
    dpad = np.zeros((dlogits.shape[0],) + valid.shape, dtype=dt)
    dpad[:, valid] = dlogits
    draw = _heads_backward(dpad, cache["heads"], cfg)                               # [B,N]
    g = _trunk_backward(draw, dvalue, cache, params, cfg)
    return {k: g[k] for k in params}


# ----------------------------------------------------------------------------------------------
# distribution helpers

def head_log_probs(logits, cfg, mask=None):  # [B, N], bool [B, N] -> [B, H, K]
    """Per-head log-probabilities in the padded [B, H, K] layout.

    Accepts raw or normalized logits (log-softmax is idempotent). Padding and masked entries have
    probability exactly 0 and log-probability ``nn.MASKED_LOGP``.
    """
    return _heads_forward(np.asarray(logits), cfg, mask)[0]


def log_prob_and_entropy_padded(logp_pad, actions):  # [B,H,K], int [B,H] -> [B], [B]
    """Joint log-prob (sum over heads) of ``actions`` and joint entropy (sum of head entropies),
    from per-head log-probabilities in the padded layout (``forward``'s ``cache["logp_pad"]``)."""
    logprob = np.take_along_axis(logp_pad, actions[..., None], axis=-1)[..., 0].sum(axis=-1)
    entropy = -(np.exp(logp_pad) * logp_pad).sum(axis=(1, 2))      # exp(MASKED_LOGP) == 0.0
    return logprob, entropy


def _decode(raw, cfg, mask=None, gumbel=None):  # [B,N], bool, [B,H,K] -> [B,H], [B,H,K]
    """Draw (Gumbel-max with ``gumbel`` noise) or greedily pick (``gumbel=None``) one action per
    head. Masked entries are never chosen.

    Returns:
        actions [B, H] int, logp_pad [B, H, K].
    """
    logp_pad, (_, m) = _heads_forward(raw, cfg, mask)                           # [B,H,K]
    scores = logp_pad if gumbel is None else logp_pad + gumbel
    return np.where(m, scores, -np.inf).argmax(axis=-1), logp_pad


def get_action_and_value(params, X, cfg, rng, mask=None, n=None):  # [B,T,A] -> [B,H], [B], [B], [B]
    """Sample one action per head (CleanRL ``Agent.get_action_and_value``).

    Sampling is Gumbel-max over the unmasked entries only, so a masked action is never drawn. A
    head whose entries are all masked returns index 0 (callers should not build such masks).

    Args:
        n: optional; with X [1, T, A], draw n actions for that one observation from a single
            forward pass (B = n in the returned shapes; value is a broadcast view).

    Returns:
        actions [B, H] int, logprob [B] (sum over heads), entropy [B], value [B].
    """
    raw, value, _ = _trunk_forward(params, X, cfg)
    if n is not None:   # n actions for one shared observation X [1, T, A]: one forward pass
        raw = np.broadcast_to(raw, (n,) + raw.shape[1:])
        value = np.broadcast_to(value, (n,))
    gumbel = rng.gumbel(size=(raw.shape[0], cfg.H, cfg.K))                       # [B,H,K]
    actions, logp_pad = _decode(raw, cfg, mask, gumbel)
    logprob, entropy = log_prob_and_entropy_padded(logp_pad, actions)
    return actions, logprob, entropy, value


def sample(params, X, cfg, rng, mask=None):  # [B,T,A] -> [B,H] int
    """Draw one action per head; masked actions are never drawn. Deterministic given ``rng``."""
    return get_action_and_value(params, X, cfg, rng, mask)[0]


def log_prob_and_entropy(params, X, actions, cfg, mask=None):  # [B,T,A], int [B,H] -> [B], [B]
    """Joint log-probability of ``actions`` (sum of per-head log-probs) and the joint entropy."""
    _, _, cache = forward(params, X, cfg, mask)
    return log_prob_and_entropy_padded(cache["logp_pad"], np.asarray(actions))


def confidence(params, X, cfg, mask=None):  # [B,T,A] -> [B,H]
    """Per-head max probability CS_m = max(p_m) (paper §3, early exit when all >= 0.95)."""
    raw, _, _ = _trunk_forward(params, X, cfg)
    actions, logp_pad = _decode(raw, cfg, mask)
    return np.exp(np.take_along_axis(logp_pad, actions[..., None], axis=-1)[..., 0])
