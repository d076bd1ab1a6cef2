"""Layouts, modes and conversions: the vocabulary of sharding, with no costs (docs/design.md §3).

A *layout* says how an activation lies over the tp group: ``R`` replicated, ``T`` split on
tokens (whole sequences), ``F`` split on features, ``P`` partial sums, and ``ER``/``ET`` the
expert-local state between FFN1 and FFN2 under the ``experts`` choice. A *mode* of an op is
(choice, input layout, output layout); a *conversion* is the collective that moves an activation
from one layout to another. Every table here follows from the choices alone, so a strategy's
path through the layouts is known before its coarse row is: ``walk`` uses that to fuse its
lookups (``PATH`` and the ``*_OUT``/``NEXT_*`` tables).
"""
from __future__ import annotations

import numpy as np

from ..specs.strategy import DIM0, DIM1, EXPERTS, N_COARSE, NONE, OPS

# layouts over the tp group
R, T, F, P, ER, ET = 0, 1, 2, 3, 4, 5
LAYOUT_NAMES = ("R", "T", "F", "P", "ER", "ET")
N_LAYOUTS = len(LAYOUT_NAMES)


# ----------------------------------------------------------------------------------------------
# modes: (choice, input layout, output layout) per op kind. Row-parallel GEMMs need F and produce
# P, column-parallel need R and produce F, `none` works on R or on its own tokens T (docs/design.md §3).

GEMM_MODES = ((DIM0, F, P), (DIM1, R, F), (NONE, R, R), (NONE, T, T))
FFN1_MODES = GEMM_MODES + ((EXPERTS, R, ER), (EXPERTS, T, ET))
FFN2_MODES = GEMM_MODES + ((EXPERTS, ER, P), (EXPERTS, ET, T))
# scores dim1: head_dim partial sums; context dim1 needs whole probabilities
SCORES_MODES = ((DIM0, F, F), (DIM1, F, P), (NONE, R, R), (NONE, T, T))
CONTEXT_MODES = ((DIM0, F, F), (DIM1, R, F), (NONE, R, R), (NONE, T, T))
NORM_MODES = ((DIM0, T, T), (DIM1, F, F), (NONE, R, R))
EMBED_MODES = ((DIM0, R, P), (DIM1, R, F), (NONE, R, R))                  # input: token ids (R)
MAX_MODES = 6
# A mode's index is the same in every op kind: its choice, and for `none`/`experts` the layout it
# works on. The op tables are filled by these names.
MODE_DIM0, MODE_DIM1, MODE_NONE, MODE_NONE_T, MODE_EXPERTS, MODE_EXPERTS_T = range(MAX_MODES)

# op slots: the 12 ops, then the FFN ops of the dense layers of a MoE model (DeepSeek's first 3)
SLOTS = OPS + ("router_dense", "ffn1_dense", "ffn2_dense")
SLOT = {name: i for i, name in enumerate(SLOTS)}
SLOT_MODES = {
    "embedding": EMBED_MODES, "attn_norm": NORM_MODES, "qkv": GEMM_MODES,
    "scores": SCORES_MODES, "context": CONTEXT_MODES, "out_proj": GEMM_MODES,
    "ffn_norm": NORM_MODES, "router": GEMM_MODES, "ffn1": FFN1_MODES, "ffn2": FFN2_MODES,
    "final_norm": NORM_MODES, "lm_head": GEMM_MODES,
    "router_dense": GEMM_MODES, "ffn1_dense": FFN1_MODES, "ffn2_dense": FFN2_MODES,
}

# activation points where conversions happen (bytes of the full activation per tp group)
# (residual: the residual stream, hc_mult hidden states wide under hyper-connections, else the
# hidden state's bytes; mixed: the hidden-wide activation into the token mixer's qkv and out of
# its output projection into ffn_norm, which the layers without a mixer do not have)
POINTS = ("hidden", "qkv", "scores", "context", "inter", "inter_dense", "router", "logits",
          "residual", "mixed")
PT = {name: i for i, name in enumerate(POINTS)}



def conv_index(point, src, dst):
    """Position of the conversion of activation ``point`` from layout src to dst within one coarse
    row's conversion table [points, layouts, layouts]."""
    return PT[point] * N_LAYOUTS * N_LAYOUTS + src * N_LAYOUTS + dst


# the collective each conversion inserts (docs/design.md §3 table); None = free (a local slice)
CONVERSION = {
    (T, R): "all-gather", (F, R): "all-gather", (T, F): "all-to-all", (F, T): "all-to-all",
    (P, R): "all-reduce", (P, T): "reduce-scatter", (P, F): "reduce-scatter",
}


def _mode_lookup():
    """[slot, choice, input layout] -> mode index (-1 where the choice never takes that input)."""
    table = np.zeros((len(SLOTS), 4, MAX_MODES), dtype=np.int64)   # unreachable combos -> mode 0
    for s, name in enumerate(SLOTS):
        for m, (choice, lin, _) in enumerate(SLOT_MODES[name]):
            table[s, choice, lin] = m
    return table


MODE_OF = _mode_lookup()
# the layout a `none` (or `experts`) op works on: it keeps an incoming R or T and gathers anything
# else to R. The pick depends on layouts only, never on costs, so more bandwidth cannot flip it
# into a slower layout (docs/design.md §7); the token split is reached through a norm on tokens
# (choice 0), which reduce-scatters P into T.
PICK = np.array([R, T, R, R, R, R])
MODE_IN = np.full((len(SLOTS), MAX_MODES), -1, dtype=np.int64)
MODE_OUT = np.full((len(SLOTS), MAX_MODES), -1, dtype=np.int64)
for _s, _name in enumerate(SLOTS):
    for _m, (_c, _lin, _lout) in enumerate(SLOT_MODES[_name]):
        MODE_IN[_s, _m], MODE_OUT[_s, _m] = _lin, _lout


def _fixed_inputs():
    """[slot, choice] -> the input layout a dim-0/dim-1 choice needs (-1: chosen per strategy)."""
    fixed = np.zeros((len(SLOTS), 4), dtype=np.int64)       # choices 2, 3: picked per strategy
    for s, name in enumerate(SLOTS):
        for choice, lin, _ in SLOT_MODES[name]:
            if choice in (DIM0, DIM1):
                fixed[s, choice] = lin
    return fixed


FIXED_IN = _fixed_inputs()
NORM_OF = np.array([T, F, R])           # norm choice -> the layout of its activation and residual


# ----------------------------------------------------------------------------------------------
# a step's mode and output layout from (incoming layout, choice), for every op (no coarse row)

def _step_lut(slot):
    """[incoming layout, choice] -> (mode, output layout) of a step into ``slot``; flat [24]."""
    s = SLOT[slot]
    inc, ch = np.arange(6)[:, None], np.arange(4)[None, :]
    lin = np.where(ch >= NONE, PICK[inc], FIXED_IN[s, ch])
    mode = MODE_OF[s, ch, lin]
    return mode.ravel(), MODE_OUT[s, mode].ravel()


MODE_SC, NEXT_SC = _step_lut("scores")
MODE_CTX, NEXT_CTX = _step_lut("context")
_, NEXT_OP = _step_lut("out_proj")
QKV_OUT = _step_lut("qkv")[1].reshape(6, 4)[NORM_OF].ravel()   # [attn_norm*4 + qkv]
FFN1_OUT = _step_lut("ffn1")[1].reshape(6, 4)[NORM_OF]         # [ffn_norm, ffn1]


# ----------------------------------------------------------------------------------------------
# a strategy's twelve choices as one integer: two bits per op, op 1 highest (``pack``); a run of
# consecutive ops is then one bit field (``field``), which indexes the fused walk's tables

SHIFT = {op: 2 * (len(OPS) - 1 - i) for i, op in enumerate(OPS)}
_PACK = np.array([0] * N_COARSE + [1 << SHIFT[op] for op in OPS], dtype=np.int64)
# choice codes each op takes: 0..2, and 3 (experts) for FFN1 and FFN2
EXPERT_OPS = ("ffn1", "ffn2")
_LOW_BITS_3 = sum(1 << SHIFT[op] for op in OPS if op not in EXPERT_OPS)


PACK_ROWS = 16384      # rows packed at once (``pack``): checked again while still in cache


def pack(strategies, check: bool = False) -> np.ndarray:
    """Strategies [N, WIDTH] -> their choices packed in one int64 each (a matrix-vector product,
    by ``einsum``: a fifth faster than ``@`` on integers). ``check``: raise ValueError unless
    every choice code is one its op takes (0..2; 3 for FFN1, FFN2), as the fused walk reads two
    bits per op and would read another code silently; each chunk of rows is checked right after
    it is packed, while it is in cache (one pass over the rows' memory, not two)."""
    s = np.asarray(strategies, dtype=np.int64)
    if not check:
        return np.einsum("...j,j->...", s, _PACK)
    code = np.empty(len(s), dtype=np.int64)
    beyond = 0
    for i in range(0, len(s), PACK_ROWS):
        part = s[i:i + PACK_ROWS]
        np.einsum("ij,j->i", part, _PACK, out=code[i:i + PACK_ROWS])
        beyond |= int(np.bitwise_or.reduce(part[:, N_COARSE:], axis=None)) & ~3   # < 0 or > 3
    if beyond or ((code >> 1) & code & _LOW_BITS_3).any():      # a 3 outside FFN1, FFN2
        choices = s[:, N_COARSE:]
        n = np.array([4 if op in EXPERT_OPS else 3 for op in OPS])
        row, col = np.argwhere((choices < 0) | (choices >= n))[0]
        raise ValueError(f"strategy row {row}: choice {choices[row, col]} for {OPS[col]} (codes "
                         f"0..{n[col] - 1})")
    return code


def field(code, first: str, last: str):
    """The choices of the consecutive ops first..last of packed ``code``, as one integer with
    ``first``'s choice highest (two bits per op)."""
    width = 2 * (OPS.index(last) - OPS.index(first) + 1)
    return (code >> SHIFT[last]) & ((1 << width) - 1)


def unfield(values, first: str, last: str) -> tuple:
    """The choice of each op first..last in the bit field ``values`` (``field``'s inverse)."""
    n = OPS.index(last) - OPS.index(first) + 1
    return tuple((values >> 2 * (n - 1 - i)) & 3 for i in range(n))


def _path_fields():
    """The layout path of the attention block as indices into the fused pieces, for every value
    of the bit field attn_norm..ffn_norm (12 bits; the norms' code 3 never occurs and is read as
    2). The layouts depend on the choices alone, so this holds no costs."""
    attn_norm, qkv, scores, context, out_proj, ffn_norm = unfield(np.arange(4096), "attn_norm",
                                                                  "ffn_norm")
    attn_norm, ffn_norm = np.minimum(attn_norm, 2), np.minimum(ffn_norm, 2)
    k23 = attn_norm * 4 + qkv
    q = QKV_OUT[k23] * 4 + scores                # scores: incoming layout*4 + choice
    k5 = NEXT_SC[q] * 4 + context                # context
    k6 = NEXT_CTX[k5] * 4 + out_proj             # out_proj
    return dict(att1=k23, att1_w=k23, scores=q, context=k5, out_proj=k6, out_w=k6,
                kv=MODE_SC[q] * 4 + MODE_CTX[k5], to_norm=NEXT_OP[k6] * 3 + ffn_norm,
                to_norm_res=NORM_OF[attn_norm] * 3 + ffn_norm, norm=ffn_norm, norm_w=ffn_norm,
                # a layer without an FFN: the mixer's output into attn_norm's layout
                to_alone=NEXT_OP[k6] * 3 + attn_norm)


PATH = _path_fields()
