"""The walk: a strategy's ops in order, each op's mode following from its choice and the
incoming layout, the conversion inserted in front of it, and op, conversion and collective times
looked up in the op tables (docs/design.md §3).

The walk is written once, as *pieces* (``piece_*``: the embedding into the first norm, one
attention block, one FFN block, a layer boundary, the last stage's tail, the stage-to-stage
send), each a function of the choices it depends on. Three callers use the same pieces:
``walk`` over N strategies (with a record of every conversion, for ``breakdown``), ``fuse``
over grids of choices (a table per coarse row, walked by ``fused_walk`` with a few lookups per
strategy: ``evaluate``'s hot path, bit-identical to ``walk``), and the exact solver over
factorized grids. A piece's arguments are the choices of the ops it holds, named after them,
and the layouts the norms' choices fix (``attn_layout``, ``ffn_layout``: ``NORM_OF``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layouts import (ER, F, FFN1_OUT, FIXED_IN, MAX_MODES, MODE_OF, MODE_OUT, N_LAYOUTS, NORM_OF,
                      PATH, PICK, POINTS, R, SLOT, SLOTS, T, conv_index, field, unfield)
from .tables import REASON_BIT, Tables
from ..specs import ModelSpec
from ..specs.strategy import ETP, EXPERTS, NONE, OPS

class Gather:
    """Table lookups for coarse indices ``g`` that broadcast against choice/layout arrays.

    The pieces below take choices and layouts of any broadcastable shape: ``walk`` calls them
    with [N] arrays (one per strategy), the exact search with factorized grids ([G, 1] coarse
    rows against [1, K] choice combinations). Both therefore cost a strategy identically.
    """

    def __init__(self, tab: Tables, g, record: list | None = None):
        self.tab, self.g, self.record = tab, np.asarray(g), record
        self.scope = "first"     # where a conversion sits: first/layer/ffn/ffn_dense/between/last
        self.modes = {}
        self.op_s = {}
        self._conv = tab.conv_s.reshape(-1)
        self._g_conv = self.g * (len(POINTS) * N_LAYOUTS * N_LAYOUTS)
        self._op = tab.op_total_s.reshape(-1)
        self._w = tab.weight_bytes.reshape(-1)
        self._kv = tab.kv_layer_bytes.reshape(-1)
        self._g_op = self.g * (len(SLOTS) * MAX_MODES)

    def conv(self, feeds, point, src, dst):
        """Time of converting activation `point` from layout src to dst (0 if equal)."""
        t = self._conv[self._g_conv + conv_index(point, src, dst)]
        if self.record is not None:
            self.record.append((feeds, point, src, dst, t, self.scope))
        return t

    def op(self, slot, mode):
        t = self._op[self._g_op + SLOT[slot] * MAX_MODES + mode]
        self.op_s[slot], self.modes[slot] = t, mode
        return t

    def weight(self, slot, mode):
        return self._w[self._g_op + SLOT[slot] * MAX_MODES + mode]

    def kv(self, scores_mode, context_mode):
        """Resident KV cache per GPU per layer (``cost.tables.kv_layer``)."""
        return self._kv[self.g * 16 + (scores_mode * 4 + context_mode)]


    def step(self, slot, choice, incoming, point):
        """Insert the conversion into `slot` and run it: (time, output layout, input layout)."""
        s = SLOT[slot]
        lin = np.where(choice >= NONE, PICK[incoming], FIXED_IN[s, choice])
        mode = MODE_OF[s, choice, lin]
        t = self.conv(slot, point, incoming, lin) + self.op(slot, mode)
        return t, MODE_OUT[s, mode], lin


def piece_first(x: Gather, embedding, attn_layout):
    """Embedding (token ids are on every rank) into the first attn_norm: (time, weights)."""
    x.scope = "first"
    out = MODE_OUT[SLOT["embedding"], embedding]
    t = x.op("embedding", embedding) + x.conv("attn_norm", "hidden", out, attn_layout)
    return t, x.weight("embedding", embedding)


def piece_attn(x: Gather, model, attn_norm, qkv, scores, context, out_proj, ffn_norm):
    """One layer from attn_norm through ffn_norm: (time, weights + KV cache per GPU, out layout)."""
    x.scope = "layer"
    attn_layout, ffn_layout = NORM_OF[attn_norm], NORM_OF[ffn_norm]
    t = x.op("attn_norm", attn_norm)
    cur = attn_layout
    for slot, point, c in (("qkv", "mixed", qkv), ("scores", "qkv", scores),
                           ("context", "scores", context), ("out_proj", "context", out_proj)):
        dt, cur, _ = x.step(slot, c, cur, point)
        t = t + dt
    x.mixer_s = t          # the token mixer alone, attn_norm through out_proj (``piece_alone``)
    # the block's output and the residual both move into the layout of ffn_norm
    t = t + x.conv("ffn_norm", "mixed", cur, ffn_layout) \
        + x.conv("ffn_norm", "residual", attn_layout, ffn_layout) + x.op("ffn_norm", ffn_norm)
    m = x.modes
    w = (x.weight("attn_norm", attn_norm) + x.weight("qkv", m["qkv"])
         + x.weight("out_proj", m["out_proj"])
         + x.weight("ffn_norm", ffn_norm) + x.kv(m["scores"], m["context"]))
    return t, w, cur


def piece_alone(x: Gather, attn_norm, out_layout):
    """What a layer without an FFN (``ModelSpec.no_ffn``) adds to ``piece_attn``'s token mixer
    (``x.mixer_s``, attn_norm through out_proj, whose output layout is ``out_layout``): its
    output moves into the layout of the next layer's attn_norm, where its residual already is
    (no ffn_norm, no FFN, no layer boundary after it): (time, weights + KV cache per GPU without
    the ffn_norm's)."""
    x.scope = "alone"
    m = x.modes
    t = x.conv("attn_norm", "hidden", out_layout, NORM_OF[attn_norm])
    w = (x.weight("attn_norm", attn_norm) + x.weight("qkv", m["qkv"])
         + x.weight("out_proj", m["out_proj"]) + x.kv(m["scores"], m["context"]))
    return t, w


def etp_ok(x: Gather, ffn1):
    """Whether the coarse rows' expert tensor parallelism means something with FFN1's choice
    ``ffn1`` (broadcast against them): etp = 1, or the experts split by expert (ffn1 =
    experts, which ffn2 must match). etp > 1 under another FFN choice is refused, reason
    experts (docs/design.md §2: the experts are then already split over the whole tp group, or
    whole on each rank; costing it as etp = 1 would list each such strategy once per etp)."""
    return (x.tab.coarse[x.g, ETP] == 1) | (ffn1 == EXPERTS)


def piece_ffn(x: Gather, model, ffn_layout, router, ffn1, ffn2, dense: bool = False):
    """One FFN block (router side branch, FFN1, FFN2): (time, weights, out layout, pair ok)."""
    t, w, ffn1_out = piece_ffn_in(x, model, ffn_layout, router, ffn1, dense)
    conv, op, w2, out, pair_ok = piece_ffn_out(x, ffn1_out, ffn1, ffn2, dense)
    return t + conv + op, w + w2, out, pair_ok


def piece_ffn_in(x: Gather, model, ffn_layout, router, ffn1, dense: bool = False):
    """FFN1 and, for a MoE layer, the router beside it: (time, weights, FFN1's output layout)."""
    sfx = "_dense" if dense else ""
    x.scope = "ffn_dense" if dense else "ffn"
    t_ffn1, ffn1_out, ffn1_in = x.step("ffn1" + sfx, ffn1, ffn_layout, "hidden")
    t = t_ffn1
    w = x.weight("ffn1" + sfx, x.modes["ffn1" + sfx])
    if model.is_moe and not dense:
        t_router, router_out, _ = x.step("router", router, ffn_layout, "hidden")
        # the routing decision must be where the tokens are: every rank, or each rank's own (T)
        t = t + t_router + x.conv("router", "router", router_out, np.where(ffn1_in == T, T, R))
        w = w + x.weight("router", x.modes["router"])
    return t, w, ffn1_out


def piece_ffn_out(x: Gather, ffn1_out, ffn1, ffn2, dense: bool = False):
    """FFN2 after FFN1's output layout out1: (conversion time, op time, weights, out layout,
    whether the pair of choices is allowed)."""
    sfx = "_dense" if dense else ""
    slot2 = SLOT["ffn2" + sfx]
    pair_ok = (ffn1 == EXPERTS) == (ffn2 == EXPERTS)
    # `experts` on FFN2 continues FFN1's expert-local state; anything else converts the
    # intermediate activation (an unmatched experts pair is invalid: costed, then flagged)
    ffn2_in = np.where(ffn2 == EXPERTS, np.where(pair_ok, ffn1_out, ER),
                    np.where(ffn2 >= NONE, PICK[ffn1_out], FIXED_IN[slot2, ffn2]))
    ffn2_mode = MODE_OF[slot2, ffn2, ffn2_in]
    conv = x.conv("ffn2" + sfx, "inter" + sfx, ffn1_out, ffn2_in)
    return (conv, x.op("ffn2" + sfx, ffn2_mode), x.weight("ffn2" + sfx, ffn2_mode),
            MODE_OUT[slot2, ffn2_mode], pair_ok)


def piece_between(x: Gather, out, ffn_layout, attn_layout):
    """Layer boundary: the FFN output and the residual move into the next attn_norm's layout."""
    x.scope = "between"
    return x.conv("attn_norm", "hidden", out, attn_layout) \
        + x.conv("attn_norm", "residual", ffn_layout, attn_layout)


def piece_last(x: Gather, out, ffn_layout, final_norm, lm_head):
    """Last FFN output -> final norm -> LM head -> sampled ids everywhere: (time, weights,
    logits layout)."""
    t = piece_final_norm(x, out, ffn_layout, final_norm)
    t_head, final, w, logits = piece_lm_head(x, final_norm, lm_head)
    return t + t_head + final, w, logits


def piece_final_norm(x: Gather, out, ffn_layout, final_norm):
    """The last FFN output and the residual into the final norm's layout, and the norm."""
    x.scope = "last"
    final_layout = NORM_OF[final_norm]
    return x.conv("final_norm", "hidden", out, final_layout) \
        + x.conv("final_norm", "residual", ffn_layout, final_layout) + x.op("final_norm", final_norm)


def piece_lm_head(x: Gather, final_norm, lm_head):
    """LM head after the final norm, then the sampled ids to every rank: (head time, ids time,
    weights of the norm and the head, logits layout)."""
    x.scope = "last"
    t_head, logits, _ = x.step("lm_head", lm_head, NORM_OF[final_norm], "hidden")
    w = x.weight("final_norm", final_norm) + x.weight("lm_head", x.modes["lm_head"])
    return t_head, x.tab.final_s[x.g, logits], w, logits


def piece_send(x: Gather, out, ffn_layout):
    """Stage-to-stage send of the activation and the residual (split over tp when T or F)."""
    s = x.tab.send_s
    return sum(np.where((lo == T) | (lo == F), s[x.g, i], s[x.g, i + 1])
               for i, lo in ((0, out), (2, ffn_layout)))


@dataclass
class Walk:
    """Per strategy [N]: resolved modes and layouts, and the time and weights of each piece."""
    modes: dict          # slot name -> mode index
    layouts: dict        # activation name -> layout
    op_s: dict           # slot name -> op time (roofline + overhead + the op's own collectives)
    convs: list          # (slot it feeds, point, src, dst, time, scope) per inserted conversion
    attn_s: np.ndarray   # one layer from attn_norm to ffn_norm, conversions included
    ffn_s: np.ndarray    # one MoE (or dense-model) FFN block: router, FFN1, FFN2, conversions
    ffn_dense_s: np.ndarray   # one dense-layer FFN block of a MoE model (0 if none)
    between_s: np.ndarray     # layer boundary: FFN output and residual -> next attn_norm layout
    first_s: np.ndarray       # embedding and its conversion into the first attn_norm
    last_s: np.ndarray        # last FFN output -> final norm -> LM head -> sampled ids
    send_s: np.ndarray        # stage-to-stage send (activation + residual)
    layer_w: np.ndarray       # per GPU per layer: attention and norm weights + KV cache
    ffn_w: np.ndarray         # per GPU per MoE (or dense-model) layer: FFN weights
    ffn_dense_w: np.ndarray
    emb_w: np.ndarray
    tail_w: np.ndarray        # final norm + LM head
    bad: np.ndarray           # reason bits that come from the choices
    alone_s: object = 0.0     # one layer without an FFN (``piece_alone``; 0 if the model has none)
    alone_w: object = 0.0


def walk(tab: Tables, g: np.ndarray, choices: np.ndarray, model: ModelSpec,
         record: list | None = None) -> Walk:
    """Cost strategies with coarse index g [N] and choices [N, 12] piece by piece."""
    c = {op: choices[:, i] for i, op in enumerate(OPS)}
    x = Gather(tab, g, record)
    attn_layout, ffn_layout = NORM_OF[c["attn_norm"]], NORM_OF[c["ffn_norm"]]
    first, emb_w = piece_first(x, c["embedding"], attn_layout)
    attn, layer_w, attn_out = piece_attn(x, model, *(c[op] for op in OPS[1:7]))
    alone_s = alone_w = 0.0
    if model.no_ffn:
        mixer = x.mixer_s
        t_alone, alone_w = piece_alone(x, c["attn_norm"], attn_out)
        alone_s = mixer + t_alone
    ffn, ffn_w, out, pair_ok = piece_ffn(x, model, ffn_layout, c["router"], c["ffn1"], c["ffn2"])
    zero = np.zeros(len(g))
    ffn_d, ffn_dw = zero, zero
    if model.is_moe and model.dense_ffn_layers:
        ffn_d, ffn_dw, _, _ = piece_ffn(x, model, ffn_layout, c["router"], c["ffn1"], c["ffn2"],
                                        dense=True)
    bad = np.where(pair_ok & etp_ok(x, c["ffn1"]), 0, REASON_BIT["experts"])
    if not model.is_moe:
        bad |= np.where((c["ffn1"] == EXPERTS) | (c["ffn2"] == EXPERTS), REASON_BIT["experts"], 0)
    between = piece_between(x, out, ffn_layout, attn_layout)
    last, tail_w, logits = piece_last(x, out, ffn_layout, c["final_norm"], c["lm_head"])
    send = piece_send(x, out, ffn_layout)
    layouts = dict(attn_norm=attn_layout, ffn_norm=ffn_layout, final_norm=NORM_OF[c["final_norm"]],
                   attn_out=attn_out, ffn_out=out, logits=logits)
    return Walk(x.modes, layouts, x.op_s, record if record is not None else [], attn, ffn, ffn_d,
                between, first, last, send, layer_w, ffn_w, ffn_dw, emb_w, tail_w, bad, alone_s,
                alone_w)


# ----------------------------------------------------------------------------------------------
# the fused walk: the same pieces, tabulated per coarse row over the choices they depend on
#
# Layouts follow from the choices alone (PICK, FIXED_IN, MODE_OF, MODE_OUT hold no costs), so a
# strategy's path through the layouts is known without its coarse row. Each piece's time is then
# one lookup in a table built once per coarse row, with the additions done in the same order as
# ``walk``: the fused walk is bit-identical to it (tests/test_costmodel_reference.py).

# the fused pieces and their axes (choices or layouts), in the order of a row of ``Fused.flat``
PIECES = {
    "first": (3, 3), "emb_w": (3,),                        # op1, op2 | op1
    "att1": (3, 4), "att1_w": (3, 4),                      # op2, op3
    "scores": (6, 4), "context": (6, 4), "out_proj": (6, 4), "out_w": (6, 4),  # layout in, choice
    "kv": (4, 4),                                          # mode of scores, mode of context
    "to_norm": (6, 3), "to_norm_res": (6, 3),              # layout, op7 (output, residual)
    "norm": (3,), "norm_w": (3,),                          # op7
    "ffn": (3, 4, 4, 4), "ffn_w": (3, 4, 4, 4),            # op7, op8, op9, op10
    "ffn_d": (3, 4, 4, 4), "ffn_d_w": (3, 4, 4, 4),        # (dense layers of a MoE only)
    "between": (6, 3, 3),                                  # FFN output layout, op7, op2
    "last": (6, 3, 3, 4), "tail_w": (3, 4),                # layout, op7, op11, op12 | op11, op12
    "send": (6, 3),                                        # FFN output layout, op7
}


class Fused:
    """Per coarse row, each piece's time (and weights) over the choices it depends on, in one flat
    g-major array (row g = ``width`` values, piece ``name`` at ``offset[name]``, its axes as in
    ``PIECES``), and the lookup tables from choice bit fields to positions in a row."""

    def __init__(self, rows: int, names):
        self.offset, at = {}, 0
        for name in names:
            self.offset[name] = at
            at += int(np.prod(PIECES[name]))
        self.width = at
        self.flat = np.empty(rows * at)

    def view(self, name):
        """Piece ``name`` of every row, writable: [G, *axes]."""
        o, shape = self.offset[name], PIECES[name]
        rows = self.flat.reshape(-1, self.width)
        return rows[:, o:o + int(np.prod(shape))].reshape((len(rows),) + shape)

    def put(self, name, values):
        np.copyto(self.view(name), values)        # broadcast over the axes it does not depend on

    def index(self, ffn_out, ffn_bad):
        """The lookup tables, once the pieces are in: FFN output layout and reason bits per
        value of the ffn_norm..ffn2 bit field (``layouts.field``)."""
        self.ffn_bad = ffn_bad                            # [ffn_norm..ffn2 field] -> reasons
        o = dict(self.offset, to_alone=self.offset["to_norm"])
        self.path = {k: o[k] + v for k, v in PATH.items()}      # [op2..op7 bits] -> position
        embedding, attn_norm = unfield(np.arange(16), "embedding", "attn_norm")
        embedding, attn_norm = np.minimum(embedding, 2), np.minimum(attn_norm, 2)   # 3: never
        self.first = o["first"] + embedding * 3 + attn_norm      # [embedding..attn_norm field]
        self.emb_w = o["emb_w"] + embedding
        ffn_norm = np.minimum(unfield(np.arange(256), "ffn_norm", "ffn2")[0], 2)
        r = ffn_out * 3 + ffn_norm                              # FFN output layout*3 + ffn_norm
        self.between = o["between"] + r * 3                     # [ffn_norm..ffn2] (+ attn_norm)
        self.last = o["last"] + r * 12                          # (+ final_norm*4 + lm_head)
        self.send = o["send"] + r
        return self

    @property
    def rows(self) -> int:
        return len(self.flat) // self.width

    def append(self, other: "Fused") -> "Fused":
        """These rows, then ``other``'s (same model, so the same pieces)."""
        out = object.__new__(Fused)
        out.__dict__.update(self.__dict__)
        out.flat = np.concatenate([self.flat, other.flat])
        return out


def _axes(*sizes):
    """One arange per axis, shaped to broadcast against the others (an outer grid)."""
    n = len(sizes)
    return tuple(np.arange(k).reshape([1] * i + [k] + [1] * (n - 1 - i))
                 for i, k in enumerate(sizes))


def fuse(tab: Tables, model: ModelSpec, rows=None) -> Fused:
    """Tabulate the pieces of ``walk`` for coarse rows ``rows`` of ``tab`` (all: None), in that
    order, computed by the same functions
    over outer grids of the choices (broadcast: each lookup is made over the axes it depends on
    only); a piece over many choices (FFN: 192, last stage: 216) is summed from its parts by
    broadcasting, in the order the piece itself adds them."""
    rows = np.arange(len(tab.coarse)) if rows is None else np.asarray(rows)
    G = len(rows)
    dense = model.is_moe and model.dense_ffn_layers > 0
    fz = Fused(G, [k for k in PIECES if dense or not k.startswith("ffn_d")])

    def at(rank):     # lookups for the coarse rows against a grid of ``rank`` axes
        return Gather(tab, rows.reshape((G,) + (1,) * rank))

    x1, x2, x3, x4 = at(1), at(2), at(3), at(4)
    emb, attn_norm = _axes(3, 3)
    fz.put("first", piece_first(x2, emb, NORM_OF[attn_norm])[0])
    fz.put("emb_w", x1.weight("embedding", np.arange(3)))
    attn_norm, qkv = _axes(3, 4)
    fz.put("att1", x2.op("attn_norm", attn_norm)
           + x2.step("qkv", qkv, NORM_OF[attn_norm], "mixed")[0])
    fz.put("att1_w", x2.weight("attn_norm", attn_norm) + x2.weight("qkv", x2.modes["qkv"]))
    inc, ch = _axes(6, 4)
    for name, point in (("scores", "qkv"), ("context", "scores"), ("out_proj", "context")):
        fz.put(name, x2.step(name, ch, inc, point)[0])
    fz.put("out_w", x2.weight("out_proj", x2.modes["out_proj"]))
    fz.put("kv", x2.kv(*_axes(4, 4)))
    src, ffn_norm = _axes(6, 3)
    fz.put("to_norm", x2.conv("ffn_norm", "mixed", src, NORM_OF[ffn_norm]))
    fz.put("to_norm_res", x2.conv("ffn_norm", "residual", src, NORM_OF[ffn_norm]))
    fz.put("norm", x1.op("ffn_norm", np.arange(3)))
    fz.put("norm_w", x1.weight("ffn_norm", np.arange(3)))
    # FFN block [G, op7, op8, op9, op10] = (in[op7, op8, op9] + conv[op7, op9, op10]) + op[...]
    ffn_norm, router, ffn1, ffn2 = _axes(3, 4, 4, 4)
    for d in ((False, True) if dense else (False,)):
        t_in, w_in, _ = piece_ffn_in(x4, model, NORM_OF[ffn_norm], router, ffn1, d)
        conv, op, w2, out, pair_ok = piece_ffn_out(x4, FFN1_OUT[ffn_norm, ffn1], ffn1, ffn2, d)
        key = "ffn_d" if d else "ffn"
        t = fz.view(key)
        np.add(t_in, conv, out=t)
        t += op
        np.add(w_in, w2, out=fz.view(key + "_w"))
    ffn_out = np.broadcast_to(out, (3, 4, 4, 4)).ravel()                 # [op7..op10 bits]
    bad = np.broadcast_to(np.where(pair_ok, 0, REASON_BIT["experts"]), (3, 4, 4, 4)).ravel()
    if not model.is_moe:      # `experts` on a dense FFN
        lone = np.where((ffn1 == EXPERTS) | (ffn2 == EXPERTS), REASON_BIT["experts"], 0)
        bad = bad | np.broadcast_to(lone, (3, 4, 4, 4)).ravel()
    # layer boundary, last stage and send: by (FFN output layout, op7[, op2 | op11, op12])
    lo, ffn_norm, attn_norm = _axes(6, 3, 3)
    fz.put("between", piece_between(x3, lo, NORM_OF[ffn_norm], NORM_OF[attn_norm]))
    lo, ffn_norm, final_norm, lm_head = _axes(6, 3, 3, 4)
    head, ids, tail_w, _ = piece_lm_head(x4, final_norm, lm_head)
    last = fz.view("last")
    np.add(piece_final_norm(x4, lo, NORM_OF[ffn_norm], final_norm), head, out=last)
    last += ids
    fz.put("tail_w", tail_w[:, 0, 0])
    lo, ffn_norm = _axes(6, 3)
    fz.put("send", piece_send(x2, lo, NORM_OF[ffn_norm]))
    pad = (0, 64)                                  # op7 = 3 never occurs (a norm takes 0..2)
    return fz.index(np.pad(ffn_out, pad), np.pad(bad, pad))


def fused_walk(fz: Fused, g, code, model: ModelSpec):
    """``walk`` by lookups in rows g [N] of ``fz`` and packed choices ``code`` [N]: the
    pieces ``stage_max`` and ``stage_memory`` take, and the reason bits of the choices."""
    f, p = fz.flat, fz.path
    base = g * fz.width
    b = field(code, "attn_norm", "ffn_norm")
    t = f[base + p["att1"][b]]                      # attention: additions in walk's order
    for piece in ("scores", "context", "out_proj"):
        t = t + f[base + p[piece][b]]
    alone = alone_w = 0.0
    if model.no_ffn:        # a layer without an FFN: the mixer, its output into attn_norm's layout
        alone = t + f[base + p["to_alone"][b]]
        alone_w = f[base + p["att1_w"][b]] + f[base + p["out_w"][b]] + f[base + p["kv"][b]]
    for piece in ("to_norm", "to_norm_res"):
        t = t + f[base + p[piece][b]]
    attn = t + f[base + p["norm"][b]]
    layer_w = f[base + p["att1_w"][b]] + f[base + p["out_w"][b]] + f[base + p["norm_w"][b]] \
        + f[base + p["kv"][b]]
    b12 = field(code, "embedding", "attn_norm")
    first = f[base + fz.first[b12]]
    kf = field(code, "ffn_norm", "ffn2")
    bf = base + kf
    o = fz.offset
    ffn, ffn_w = f[bf + o["ffn"]], f[bf + o["ffn_w"]]
    if "ffn_d" in o:
        ffn_d, ffn_dw = f[bf + o["ffn_d"]], f[bf + o["ffn_d_w"]]
    else:
        ffn_d = ffn_dw = np.zeros(len(g))
    between = f[base + fz.between[kf] + (b12 & 3)]  # (+ attn_norm)
    k1112 = field(code, "final_norm", "lm_head")
    last = f[base + fz.last[kf] + k1112]
    send = f[base + fz.send[kf]]
    return (attn, between, ffn, ffn_d, first, last, send, layer_w, ffn_w, ffn_dw,
            f[base + fz.emb_w[b12]], f[base + (o["tail_w"] + k1112)], fz.ffn_bad[kf], alone,
            alone_w)
