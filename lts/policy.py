"""Actor-critic policy of "Learning to Shard" (arXiv 2509.00217, §4.1), forward and backward by hand.

Observation X [B, T, A] is the elite history: the T best strategies found so far, each an
A-vector of normalized sub-action indices (plus ``n_extra`` optional features). The network is

    X --linear--> [B,T,d] (+ learned rank embedding, optional)
      --> one post-LN Transformer encoder block, as torch.nn.TransformerEncoderLayer
          (norm_first=False, dropout=0, GELU tanh-approx FFN):
              h1 = LN1(h0 + MHA(h0));  z = LN2(h1 + W2 gelu(W1 h1))
      --> mean over T --> pooled [B,d]
      --> policy MLP  d -> hidden -> tanh -> sum(n_choices) logits, one categorical head per
          sub-action (MultiDiscrete); optional boolean action mask via masked log-softmax;
          optionally autoregressive (``condition_on``): + s * onehot(earlier actions) @ (M * Wc)
      --> value  MLP  d -> hidden -> tanh -> 1

``forward`` returns the per-head *normalized* logits, i.e. each head's log-probabilities laid
side by side in a flat [B, N] array (N = sum(n_choices)); masked entries hold ``nn.MASKED_LOGP``
and have probability exactly 0. ``backward`` takes the gradient with respect to that output.
Internally the heads are padded to [B, H, K] (H heads, K = max(n_choices)) so that softmax,
sampling and entropy are single vectorized ops, with no per-head Python loop (conditioned heads
are sampled in order: one small step per head that has dependants, see ``_decode``).

Shapes: B batch, T history length, A record width, d d_model, H sub-action heads,
K max choices per head, N = sum(n_choices).

References:
  - Yin et al. 2025, "Learning to Shard", §3 (policy), App. A (T=3, d=256, 1 encoder block),
    §3 early exit (all heads' max-probability >= 0.95: see ``confidence``).
  - PyTorch nn.TransformerEncoderLayer (post-LN default); CleanRL ``ppo.py`` (orthogonal init,
    std 0.01 policy output, std 1.0 value output; clipped surrogate and diagnostics).
  - Schulman et al. 2017, "PPO", Eq. 7 (clipped surrogate); approx_kl estimator from
    http://joschu.net/blog/kl-approx.html.

Imports: numpy and lts.nn only.
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
    n_heads: int = 4             # attention heads (paper silent; PAPER.md §11 rec. 4)
    d_ff: int = 512              # encoder FFN width (paper silent; PAPER.md §11 rec. 512)
    hidden: int = 256            # width of the policy and value MLPs (paper App. A: 256)
    rank_embedding: bool = False  # learned [T, d] embedding of the elite rank (records are sorted)
    condition_on: int = 0        # autoregressive heads: head i's logits also depend on the actions
                                 # of heads j < min(i, condition_on) (0: independent heads, paper)
    condition_scale: float = 1.0  # gain s of the conditioning term (see ``forward``)

    def __post_init__(self):
        object.__setattr__(self, "n_choices", tuple(int(n) for n in self.n_choices))
        if not self.n_choices or min(self.n_choices) < 1:
            raise ValueError(f"n_choices must be a non-empty tuple of ints >= 1, got {self.n_choices}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if not 0 <= self.condition_on <= len(self.n_choices):
            raise ValueError(f"condition_on={self.condition_on} must lie in "
                             f"0..{len(self.n_choices)}")

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


@lru_cache(maxsize=64)
def _cond_layout(n_choices, condition_on):  # -> [N, N] bool, [H] int
    """Which conditioning weights exist, and each head's offset in the flat [N] layout.

    Entry [r, c] of the [N, N] mask is True when the logit c (of head i) may depend on the one-hot
    entry r (choice of head j): j < i and j < condition_on, i.e. the mask is block strictly lower
    triangular, so head i sees only heads that are sampled before it.
    """
    head = np.repeat(np.arange(len(n_choices)), n_choices)                       # [N]
    parent = head[:, None] < np.minimum(head[None, :], condition_on)              # [N, N]
    offsets = np.concatenate([[0], np.cumsum(n_choices)[:-1]]).astype(np.int64)   # [H]
    parent.setflags(write=False)
    offsets.setflags(write=False)
    return parent, offsets


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
    if cfg.condition_on:
        p["pi.Wc"] = z(cfg.N, cfg.N)     # zero: a fresh network's heads are independent
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
    """Encoder, mean pool, policy MLP (raw logits, before conditioning and softmax) and value."""
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


def _trunk_backward(draw, dvalue, c, params, cfg):  # [B,N], [B] -> dict (no "pi.Wc")
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


def _parent_rows(actions, cfg):  # int [B,H] -> int [B, condition_on]
    """Flat [N] positions of the one-hot entries that the conditioning reads (the parent heads)."""
    _, offsets = _cond_layout(cfg.n_choices, cfg.condition_on)
    c = cfg.condition_on
    return offsets[:c] + np.asarray(actions)[:, :c]


def _cond_weight(params, cfg):  # -> [N, N]
    """s * (M * Wc): the conditioning weights that exist (M from ``_cond_layout``), scaled."""
    parent, _ = _cond_layout(cfg.n_choices, cfg.condition_on)
    Wc = params["pi.Wc"]
    return (cfg.condition_scale * np.where(parent, Wc, 0.0)).astype(Wc.dtype)


def forward(params, X, cfg, mask=None, actions=None):  # [B,T,A], [B,N], [B,H] -> [B,N], [B], cache
    """Run the policy.

    With ``cfg.condition_on = c > 0`` the heads are autoregressive: head i's raw logits gain

        s * sum_{j < min(i, c)} Wc[offset_j + a_j, head i's block]     (s = cfg.condition_scale)

    i.e. raw + s * onehot(a) @ (M * Wc) with M the block strictly lower-triangular mask of
    ``_cond_layout``. ``forward`` evaluates that with the given (taken) ``actions`` (teacher
    forcing, for log-probabilities and training); without ``actions`` the term is left out, which
    is head 0's distribution exactly and the others' given an all-zero prefix. Sampling and
    greedy decoding go head by head (``_decode``). Why a linear term on the one-hot: it is the
    smallest change that lets a coarse move (e.g. fewer pipeline stages) carry its own per-op and
    batch choices, and at Wc = 0 (the initialization) the network is exactly the independent one.

    Args:
        params: dict from ``init_params``.
        X: [B, T, A] elite-history observations (cast to the parameters' dtype); with ``actions``
            [B', H], X may be [1, T, A], shared by the B' actions.
        cfg: PolicyConfig.
        mask: optional bool [B, N] (or [N]); False marks an action that may not be chosen.
        actions: optional int [B, H], the actions the conditioning reads (ignored when c = 0).

    Returns:
        logits: [B, N] per-head log-probabilities (normalized logits); masked -> nn.MASKED_LOGP.
        value: [B] state values ([1] for a shared X).
        cache: for ``backward``.
    """
    raw, value, cache = _trunk_forward(params, X, cfg)                          # [B0,N], [B0]
    cache["B0"] = raw.shape[0]
    if cfg.condition_on and actions is not None:
        rows = _parent_rows(actions, cfg)                                        # [B,c]
        raw = raw + _cond_weight(params, cfg)[rows].sum(axis=1)                  # [B,N]
        cache["cond_rows"] = rows
    logp_pad, c_heads = _heads_forward(raw, cfg, mask)                          # [B,H,K]
    logits = logp_pad[:, _layout(cfg.n_choices)[1]]                              # [B,N]
    cache.update(heads=c_heads, logp_pad=logp_pad)
    return logits, value, cache


def backward(dlogits, dvalue, cache, params, cfg):  # [B,N], [B] -> dict[str, np.ndarray]
    """Gradients of sum(dlogits * logits) + sum(dvalue * value) with respect to every parameter.

    The conditioning weight's gradient is dWc = s * M * (onehot(a)^T @ draw) (draw: gradient of
    the raw logits); with a shared X the trunk gets draw summed over the actions.

    Returns:
        grads: dict with the same keys (and order) as ``params``.
    """
    c = cache
    dt = params["embed.W"].dtype
    _, valid = _layout(cfg.n_choices)
    dpad = np.zeros((dlogits.shape[0],) + valid.shape, dtype=dt)
    dpad[:, valid] = dlogits
    draw = _heads_backward(dpad, c["heads"], cfg)                                   # [B,N]
    g = {}
    if "cond_rows" in c:
        rows = c["cond_rows"]                                                        # [B,c]
        onehot = np.zeros_like(draw)
        np.put_along_axis(onehot, rows, 1.0, axis=1)                                 # [B,N]
        parent, _ = _cond_layout(cfg.n_choices, cfg.condition_on)
        g["pi.Wc"] = np.where(parent, cfg.condition_scale * (onehot.T @ draw), 0.0).astype(dt)
    elif cfg.condition_on:
        g["pi.Wc"] = np.zeros_like(params["pi.Wc"])
    if draw.shape[0] != c["B0"]:        # X [1, T, A] shared by every action
        draw = draw.sum(axis=0, keepdims=True)
    g.update(_trunk_backward(draw, dvalue, c, params, cfg))
    return {k: g[k] for k in params}


# ----------------------------------------------------------------------------------------------
# distribution helpers

def head_log_probs(logits, cfg, mask=None):  # [B, N], bool [B, N] -> [B, H, K]
    """Per-head log-probabilities in the padded [B, H, K] layout.

    Accepts raw or normalized logits (log-softmax is idempotent). Padding and masked entries have
    probability exactly 0 and log-probability ``nn.MASKED_LOGP``.
    """
    return _heads_forward(np.asarray(logits), cfg, mask)[0]


def _logprob_entropy(logp_pad, actions):  # [B,H,K], int [B,H] -> [B], [B]
    """Joint log-prob (sum over heads) of ``actions`` and joint entropy (sum of head entropies).

    For autoregressive heads ``logp_pad`` holds each head's distribution given the actions'
    prefix, so the log-prob is exact and the entropy is the sum of the conditional entropies
    along the sampled prefix (an unbiased estimate of the joint entropy for sampled actions).
    """
    logprob = np.take_along_axis(logp_pad, actions[..., None], axis=-1)[..., 0].sum(axis=-1)
    entropy = -(np.exp(logp_pad) * logp_pad).sum(axis=(1, 2))      # exp(MASKED_LOGP) == 0.0
    return logprob, entropy


def _decode(raw, params, cfg, mask=None, gumbel=None):  # [B,N], bool, [B,H,K] -> [B,H], [B,H,K]
    """Draw (Gumbel-max with ``gumbel`` noise) or greedily pick (``gumbel=None``) one action per
    head, in head order when the heads are conditioned.

    The heads with parents (< condition_on) go one at a time, each adding its chosen row of
    s * M * Wc to the running conditioning term; the heads from condition_on on share the same
    parents and go together. The returned log-probabilities are those of a teacher-forced
    ``forward`` with the chosen actions (the same numbers: later heads add exact zeros to an
    earlier head's block). Masked entries are never chosen.

    Returns:
        actions [B, H] int, logp_pad [B, H, K].
    """
    index, valid = _layout(cfg.n_choices)
    B, H, K = raw.shape[0], cfg.H, cfg.K
    c = cfg.condition_on
    if not c:
        logp_pad, (_, m) = _heads_forward(raw, cfg, mask)                       # [B,H,K]
        scores = logp_pad if gumbel is None else logp_pad + gumbel
        return np.where(m, scores, -np.inf).argmax(axis=-1), logp_pad
    m = valid if mask is None else (np.asarray(mask, dtype=bool)[..., index] & valid)
    m = np.broadcast_to(m, (B, H, K))
    W = _cond_weight(params, cfg)                                                # [N,N]
    _, offsets = _cond_layout(cfg.n_choices, c)
    cond = np.zeros_like(raw)                                                    # [B,N]
    actions = np.zeros((B, H), dtype=np.int64)
    groups = [[h] for h in range(c)] + ([list(range(c, H))] if c < H else [])
    for heads in groups:
        lp, _ = nn.masked_log_softmax_forward((raw + cond)[:, index[heads]], m[:, heads])  # [B,g,K]
        scores = lp if gumbel is None else lp + gumbel[:, heads]
        actions[:, heads] = np.where(m[:, heads], scores, -np.inf).argmax(axis=-1)
        if heads[0] < c:
            cond = cond + W[offsets[heads[0]] + actions[:, heads[0]]]
    logp_pad = _heads_forward(raw + cond, cfg, mask)[0]
    return actions, logp_pad


def get_action_and_value(params, X, cfg, rng, mask=None, n=None):  # [B,T,A] -> [B,H], [B], [B], [B]
    """Sample one action per head (CleanRL ``Agent.get_action_and_value``).

    Sampling is Gumbel-max over the unmasked entries only, so a masked action is never drawn. A
    head whose entries are all masked returns index 0 (callers should not build such masks).
    Autoregressive heads (``cfg.condition_on``) are drawn in order, each given the earlier draws.

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
    actions, logp_pad = _decode(raw, params, cfg, mask, gumbel)
    logprob, entropy = _logprob_entropy(logp_pad, actions)
    return actions, logprob, entropy, value


def sample(params, X, cfg, rng, mask=None):  # [B,T,A] -> [B,H] int
    """Draw one action per head; masked actions are never drawn. Deterministic given ``rng``."""
    return get_action_and_value(params, X, cfg, rng, mask)[0]


def log_prob_and_entropy(params, X, actions, cfg, mask=None):  # [B,T,A], int [B,H] -> [B], [B]
    """Joint log-probability of ``actions`` (sum of per-head log-probs) and the joint entropy."""
    actions = np.asarray(actions)
    _, _, cache = forward(params, X, cfg, mask, actions=actions)
    return _logprob_entropy(cache["logp_pad"], actions)


def confidence(params, X, cfg, mask=None):  # [B,T,A] -> [B,H]
    """Per-head max probability CS_m = max(p_m) (paper §3, early exit when all >= 0.95).

    Autoregressive heads: each head's max probability given the greedy (argmax) choices of the
    heads before it, so that all >= 0.95 means the greedy strategy has probability >= 0.95^H.
    """
    raw, _, _ = _trunk_forward(params, X, cfg)
    actions, logp_pad = _decode(raw, params, cfg, mask)
    return np.exp(np.take_along_axis(logp_pad, actions[..., None], axis=-1)[..., 0])


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

    Args:
        params: policy parameters; cfg: PolicyConfig.
        X: [B, T, A], or [1, T, A] shared by all B actions (one forward and backward pass);
        actions: int [B, H]; old_logprob, advantages, returns: [B].
        mask: optional bool [B, N] action mask (the one used when the actions were sampled);
            with a shared X [1, T, A] it must be shared too ([N] or [1, N]).

    Returns:
        loss (float), grads (dict, same keys as params), stats (dict of floats with keys
        "losses/policy", "losses/value", "losses/entropy", "stats/approx_kl", "stats/clipfrac").
    """
    actions = np.asarray(actions)
    _, newvalue, cache = forward(params, X, cfg, mask, actions=actions)
    dt = newvalue.dtype
    logp_pad = cache["logp_pad"]                                  # [B,H,K] ([1,H,K]: shared X)
    B = actions.shape[0]
    shared = newvalue.shape[0] == 1 and B > 1
    if shared:   # one observation for every action: forward once, broadcast, sum grads back
        logp_pad = np.broadcast_to(logp_pad, (B,) + logp_pad.shape[1:])
        newvalue = np.broadcast_to(newvalue, (B,))
    old_logprob, advantages, returns = (np.asarray(a, dtype=dt) for a in (old_logprob, advantages, returns))

    newlogprob, entropy = _logprob_entropy(logp_pad, actions)             # [B], [B]
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
    if shared:   # (conditioned heads differ per action: ``backward`` sums after the softmax)
        dvalue = dvalue.sum(keepdims=True)
        if cache["logp_pad"].shape[0] == 1:
            dlogp_pad = dlogp_pad.sum(axis=0, keepdims=True)
    dlogits = dlogp_pad[:, _layout(cfg.n_choices)[1]]                     # [B,N]
    grads = backward(dlogits, dvalue, cache, params, cfg)
    stats = {
        "losses/policy": float(pg_loss),
        "losses/value": float(v_loss),
        "losses/entropy": float(entropy_loss),
        "stats/approx_kl": float(approx_kl),
        "stats/clipfrac": float(clipfrac),
    }
    return float(loss), grads, stats
