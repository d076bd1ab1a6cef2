"""The exact optimum of the cost model over the whole strategy space (``search_exact``).

Not a sampler: for each coarse row the per-op choices are solved exactly from
the cost model's pieces (``walk.piece_*``, ``cost.model.stage_max``, ``stage_memory``), coarse rows
visited best bound first (see ``_Exact`` for why this is exact). The top-k is confirmed with the
evaluator itself. Decode and prefill only: the serve phase sums several steps.
"""
from __future__ import annotations

import heapq
import itertools
import time

import numpy as np

from ..cost.model import dense_in_stage, finish, stage_max, stage_memory
from ..cost.layouts import (FIXED_IN, MODE_OF, MODE_OUT, N_LAYOUTS, NORM_OF, PICK, SLOT,
                            SLOT_MODES)
from .problems import Problem, SearchResult, ServeProblem, Tracker
from ..specs.strategy import NONE, PP
from ..cost.walk import (Gather, etp_ok, piece_alone, piece_attn, piece_between, piece_ffn,
                         piece_ffn_in, piece_ffn_out, piece_first, piece_last, piece_send)


INVALID_S = 1e30      # the time of an invalid option inside the exact search


def _pairs(x, y):
    """The distinct pairs of two equal-length int arrays: ((x', y'), inverse)."""
    x, y = np.broadcast_arrays(np.asarray(x).ravel(), np.asarray(y).ravel())
    code, inv = np.unique(x * 64 + y, return_inverse=True)
    return (code // 64, code % 64), inv


def _grid(*sizes):
    """All combinations of range(n) for each size, as one flat array per position."""
    combos = np.array(list(itertools.product(*[range(n) for n in sizes])), dtype=np.int64)
    return [combos[:, i] for i in range(len(sizes))]


class _Exact:
    """Factorized costs of every fine strategy for a block of coarse rows.

    Why this is exact. Fix the coarse part (a coarse row). Every layer makes the same choices
    and the tables cost the mean layer of a stage (each layer kind, with its own window, shape
    and KV bytes per token, weighted by its share: every stage holds the kinds in the same
    numbers, ``kv.even_split``, or the row is invalid), and the cost model's step is built
    from pieces (walk.piece_*), each depending on few choices: the attention block on ops 2-7,
    the FFN block on ops 7-10, the layer boundary on the FFN output layout and ops 2 and 7, the
    first stage's extra on ops 1-2, the last stage's on the FFN output layout and ops 7, 11, 12.
    The slowest stage is lp * attn + (terms free of ops 3-6), because every stage holds lp
    layers and so lp attention blocks; memory is likewise lp * (attention weights + KV) + (terms
    free of ops 3-6). Hence for fixed ops (2, 7) the problem splits into an attention list a
    (81 options of ops 3-6: time A_a, memory W_a) and a rest list f (options of ops 1, 8-12:
    time G_f, memory M_f), and the optimum is

        min over a, f of lp*A_a + G_f   subject to   lp*W_a + M_f <= usable HBM,

    which is solved by enumerating both lists (81 x ~1300 per (op 2, op 7) pair): memory is the
    second criterion of a dynamic programme over the chain of layouts, and nothing is pruned
    except by bounds that are valid for every strategy of a coarse row. Throughput per GPU is
    batch / (steps * slowest * gpus), decreasing in the slowest stage, so for a coarse row the
    feasible minimum time is its best strategy. Coarse rows are visited in order of an upper
    bound on their throughput (the unconstrained minimum time) and the search stops when the
    bound falls below the k-th best found. A test checks the result equals brute force on spaces
    small enough to enumerate.
    """

    def __init__(self, model, choices):
        self.model = model
        n = choices
        self.n = n
        # attention side: (op2, op3, op4, op5, op6, op7)
        self.a = _grid(n[1], n[2], n[3], n[4], n[5], n[6])
        # FFN side: (op7, op8, op9, op10)
        self.f = _grid(n[6], n[7], n[8], n[9])
        self.once1 = _grid(n[0], n[1])                 # (op1, op2)
        self.once2 = _grid(n[10], n[11])               # (op11, op12)
        # the modes of the attention list's ops (qkv, scores, context, out_proj): from the
        # choices and the layouts they lead through alone (``Gather.step``), no coarse row
        cur, modes = NORM_OF[self.a[0]], []
        for slot, choice in zip(("qkv", "scores", "context", "out_proj"), self.a[1:5]):
            s = SLOT[slot]
            lin = np.where(choice >= NONE, PICK[cur], FIXED_IN[s, choice])
            modes.append(MODE_OF[s, choice, lin])
            cur = MODE_OUT[s, modes[-1]]
        self.attn_modes = tuple(modes)

    def block(self, tab, g, memory: bool = True):
        """Times and memories of both lists for rows g [C] of tables ``tab`` (``memory=False``:
        times only, the memories None)."""
        model = self.model
        n = self.n
        gg = np.asarray(g)[:, None]
        x = Gather(tab, gg)
        A, Aw, cur = piece_attn(x, model, *self.a)                     # [C, |a|]
        A, Aw, unit = self._with_alone(tab, gg, x, A, Aw, cur)
        ffn_norm, router, ffn1, ffn2 = self.f
        ffn_layout = NORM_OF[ffn_norm]
        ffn, ffn_w, out, ok = piece_ffn(x, model, ffn_layout, router, ffn1, ffn2)   # [C, |f|]
        # an unmatched `experts` pair is invalid: a huge finite time (inf would give 0 * inf = nan
        # in stages that hold no MoE layer); so is etp > 1 without `experts` (``etp_ok``)
        ffn = np.where(ok & etp_ok(x, ffn1), ffn, INVALID_S)
        out = np.broadcast_to(out, ffn.shape)          # layouts follow from the choices alone
        if model.is_moe and model.dense_ffn_layers:
            ffn_d, ffn_dw, _, _ = piece_ffn(x, model, ffn_layout, router, ffn1, ffn2, dense=True)
        else:
            ffn_d, ffn_dw = np.zeros_like(ffn), np.zeros_like(ffn)
        # broadcast axes: [C, op1, op2, f, (op11, op12)]
        emb, attn_norm = self.once1
        first, emb_w = piece_first(x, emb, NORM_OF[attn_norm])          # [C, op1*op2]
        first = first.reshape(len(g), n[0], n[1], 1, 1)
        emb_w = emb_w.reshape(len(g), n[0], n[1], 1, 1)
        attn_layout = NORM_OF[np.arange(n[1])][None, None, :, None, None]
        out5 = out[:, None, None, :, None]                  # on the 5-axis grid above
        ffn_layout5 = ffn_layout[None, None, None, :, None]
        x5 = Gather(tab, gg[:, :, None, None, None])
        between = piece_between(x5, out5, ffn_layout5, attn_layout)
        final_norm, lm_head = self.once2
        last, tail_w, _ = piece_last(x5, out5, ffn_layout5, final_norm[None, None, None, None, :],
                                     lm_head[None, None, None, None, :])
        send = piece_send(x5, out5, ffn_layout5)
        lp = tab.layers_per_stage[gg][:, :, None, None, None]
        pp = tab.coarse[gg, PP][:, :, None, None, None].astype(np.float64)
        f5 = (slice(None), None, None, slice(None), None)
        G = stage_max(model, lp, pp, 0.0, between, ffn[f5], ffn_d[f5], first, last, send)
        M = None if not memory else stage_memory(
            model, lp, pp, 0.0, ffn_w[f5], ffn_dw[f5], emb_w, tail_w,
            tab.workspace_bytes[gg][:, :, None, None, None])
        shape = np.broadcast_shapes(G.shape, first.shape, last.shape, *(
            () if M is None else (M.shape,)))
        G = np.broadcast_to(G, shape)
        # regroup by (op2, op7): attention [C, op2, op7, a'], rest [C, op2, op7, f']
        C = len(g)
        n2, n7 = n[1], n[6]
        A = A.reshape(C, n2, -1, n7).transpose(0, 1, 3, 2)
        Aw = Aw.reshape(C, n2, -1, n7).transpose(0, 1, 3, 2)
        # G: [C, op1, op2, (op7, op8, op9, op10), (op11, op12)] -> [C, op2, op7, rest]
        nf = len(ffn_norm) // n7
        G = G.reshape(C, n[0], n2, n7, nf, -1).transpose(0, 2, 3, 1, 4, 5).reshape(C, n2, n7, -1)
        if M is not None:
            M = np.broadcast_to(M, shape).reshape(C, n[0], n2, n7, nf, -1).transpose(
                0, 2, 3, 1, 4, 5).reshape(C, n2, n7, -1)
        return (lp if unit is None else unit).reshape(C), A, Aw, G, M

    def _with_alone(self, tab, gg, x, A, Aw, cur):
        """(A, Aw, None), or for a model with layers without an FFN (``ModelSpec.no_ffn``) the
        attention list's time and memory of a whole stage, (lp - bare) attention blocks and bare
        FFN-less layers (``cost.model.stage_max``: still a function of ops 2-7 alone), with
        multiplier ones in place of lp (so that lp * A is that sum exactly)."""
        model = self.model
        if not model.no_ffn:
            return A, Aw, None
        mixer = x.mixer_s
        t_alone, w_alone = piece_alone(x, self.a[0], cur)
        lp = tab.layers_per_stage[gg]
        bare = len(model.no_ffn) / tab.pp[gg]
        return ((lp - bare) * A + bare * (mixer + t_alone),
                (lp - bare) * Aw + bare * w_alone, np.ones(len(gg)))

    def least(self, tab, g):
        """A lower bound on the slowest stage of every strategy of rows g [C] of tables ``tab``,
        far cheaper than ``block``: lp * (each attention-block op at its fastest mode + each FFN
        op at its fastest). Every stage holds lp attention blocks and lp FFN blocks (dense or
        MoE), each op runs once per block in one of its modes, and every other term adds time
        (conversions; a stage's boundaries and head, (lp - 1) * between + first >= 0, see
        ``cost.model.stage_max``)."""
        g = np.asarray(g)
        op = tab.op_total_s[g]

        def fastest(*slots):
            return sum(op[:, SLOT[s], :len(SLOT_MODES[s])].min(axis=1) for s in slots)

        attn = fastest("attn_norm", "qkv", "scores", "context", "out_proj", "ffn_norm")
        ffn = fastest("ffn1", "ffn2", *(("router",) if self.model.is_moe else ()))
        lp = tab.layers_per_stage[g]
        dense = self.model.is_moe and self.model.dense_ffn_layers
        if self.model.no_ffn:   # bare layers: the mixer alone, no ffn_norm, no FFN
            if dense:
                ffn = np.minimum(ffn, fastest("ffn1_dense", "ffn2_dense"))
            bare = len(self.model.no_ffn) / tab.pp[g]
            return lp * (attn - fastest("ffn_norm")) + (lp - bare) * (fastest("ffn_norm") + ffn)
        if dense:
            # the slowest stage takes at least the last stage's time (``stage_max``'s candidates
            # include it): its lp layers hold the fewest dense FFNs, the leading dense layers
            # (``dense_in_stage``; MoE every k-th layer: as many in every stage). Counting each
            # layer as the cheaper of the two FFNs instead left DeepSeek-V3's bound ~6x below
            # its least step (61 dense-width FFNs where 58 of its 61 layers are MoE)
            d = dense_in_stage(self.model, tab.pp[g].astype(np.float64), tab.pp[g] - 1)
            return lp * attn + (lp - d) * ffn + d * fastest("ffn1_dense", "ffn2_dense")
        return lp * (attn + ffn)

    def least_layer(self, tab, g):
        """A lower bound on the slowest stage of every strategy of rows g [C] between ``least``
        and ``least_exact`` in cost and in value: lp * (the attention block at its least for
        ops 3-6, conversions included (``_least_attn``) + the FFN block at its least for the
        same ffn_norm), at the least (op2, op7). Only the layer boundaries and the pipeline's
        ends are left out, each >= 0 (``least``); with dense layers the last stage's count of
        them, as in ``least``. Models with layers without an FFN: ``least``."""
        model, n = self.model, self.n
        if model.no_ffn:
            return self.least(tab, g)
        g = np.asarray(g)
        C = len(g)
        x = Gather(tab, g[:, None])
        A = self._least_attn(x, C)                                            # [C, op2, op7]
        # the FFN block's least per ffn_norm: FFN1 and the router's side branch over (op7,
        # router, FFN1), least over the router (FFN2 does not depend on it), then FFN2 over
        # (op7, FFN1, FFN2): the numbers ``piece_ffn`` gives over its 144 combinations, as
        # in ``_least_attn``
        in7, route, in1 = _grid(n[6], n[7], n[8])
        out7, out1, out2 = _grid(n[6], n[8], n[9])
        shape = (C, n[6], n[8], n[9])

        def ffn_least(dense):
            t_in, _, lay1 = piece_ffn_in(x, model, NORM_OF[in7], route, in1, dense=dense)
            t_in = t_in.reshape(C, n[6], n[7], n[8]).min(axis=2)             # [C, op7, ffn1]
            lay1 = np.broadcast_to(lay1, in7.shape).reshape(n[6], n[7], n[8])[:, 0]
            conv, op, _, _, ok = piece_ffn_out(x, lay1[out7, out1], out1, out2, dense=dense)
            t = t_in[..., None] + conv.reshape(shape) + op.reshape(shape)
            t = np.where(ok.reshape(shape[1:]) & etp_ok(x, out1).reshape(shape), t, INVALID_S)
            return t.reshape(C, 1, n[6], -1).min(axis=3)                          # [C, 1, op7]

        lp = tab.layers_per_stage[g][:, None, None]
        if model.is_moe and model.dense_ffn_layers:
            d = dense_in_stage(model, tab.pp[g].astype(np.float64), tab.pp[g] - 1)[:, None, None]
            t = (lp * A + (lp - d) * ffn_least(False) + d * ffn_least(True)).min(axis=(1, 2))
        else:
            t = (lp * (A + ffn_least(False))).min(axis=(1, 2))
        # its sums are grouped unlike the stage's own: a relative 1e-12 below them, so that
        # rounding can never lift the bound over the time it bounds
        return t * (1.0 - 1e-12)

    def least_memory(self, tab, g):
        """A lower bound on the fullest stage's memory per GPU of every strategy of rows g [C]:
        the last stage's lp layers, each op's weights at its smallest mode and the least KV
        cache, + workspace. The fullest stage holds at least what the last one does, whose dense
        layers (a MoE's first ones) are the fewest; the embedding and the head only add
        (``cost.model.stage_memory``)."""
        g = np.asarray(g)
        w = tab.weight_bytes[g]

        def least(*slots):
            return sum(w[:, SLOT[s], :len(SLOT_MODES[s])].min(axis=1) for s in slots)

        layer = least("attn_norm", "qkv", "out_proj", "ffn_norm") \
            + tab.kv_layer_bytes[g].min(axis=(1, 2))
        lp = tab.layers_per_stage[g]
        ffn = lp * least("ffn1", "ffn2", *(("router",) if self.model.is_moe else ()))
        if self.model.is_moe and self.model.dense_ffn_layers:
            dense = dense_in_stage(self.model, tab.pp[g], tab.pp[g] - 1)
            ffn = ffn + dense * (least("ffn1_dense", "ffn2_dense") - ffn / lp)
        if self.model.no_ffn:   # bare layers: no ffn_norm, no FFN
            paired = lp - len(self.model.no_ffn) / tab.pp[g]
            return lp * (layer - least("ffn_norm")) + paired * (least("ffn_norm") + ffn / lp) \
                + tab.workspace_bytes[g]
        return lp * layer + ffn + tab.workspace_bytes[g]

    def least_exact(self, tab, g, memory: bool = False):
        """The least slowest stage over every strategy of rows g [C] (``block``'s minimum) at a
        fraction of its cost, or a lower bound on it for models with dense layers. The rest
        list's time splits as ``cost.model.stage_max`` builds it: terms of (op2, f), the first
        stage's head of (op1, op2) and the last stage's of (f, op11, op12), joined by a sum
        (pp = 1) or a max (pp > 1), both monotone in each term, whose variables are disjoint.
        So the head and the last stage's term can take their least values first: the minimum
        is then over (op2, f) alone. With dense layers the slowest of several candidate stages
        is taken after those minima, which bounds it from below. With ``memory``, also the
        least fullest stage's memory the same way (``cost.model.stage_memory``: the embedding's
        weights of (op1, op2) and the last stage's of (f, op11, op12), joined by a sum or a
        max), exact for models without dense layers: (times [C], memories [C]). Floating-point
        addition and max are monotone, so each minimum taken first is the same number
        ``block``'s full grid gives."""
        model, n = self.model, self.n
        g = np.asarray(g)
        C = len(g)
        x = Gather(tab, g[:, None])
        if model.no_ffn:                # the attention list enumerated
            A, Aw, cur = piece_attn(x, model, *self.a)                        # [C, |a|]
            A, Aw, unit = self._with_alone(tab, g[:, None], x, A, Aw, cur)
            A = A.reshape(C, n[1], -1, n[6]).min(axis=2)                      # [C, op2, op7]
        else:                           # its least time by layouts, the same numbers
            A, unit = self._least_attn(x, C), None
            if memory:
                Aw = self._attn_weights(x)                                    # [C, |a|]
        ffn_norm, router, ffn1, ffn2 = self.f
        ffn_layout = NORM_OF[ffn_norm]
        ffn, ffn_w, out, ok = piece_ffn(x, model, ffn_layout, router, ffn1, ffn2)  # [C, |f|]
        ffn = np.where(ok & etp_ok(x, ffn1), ffn, INVALID_S)
        out = np.broadcast_to(out, ffn.shape)
        dense = model.is_moe and model.dense_ffn_layers
        ffn_d, ffn_dw = piece_ffn(x, model, ffn_layout, router, ffn1, ffn2, dense=True)[:2] \
            if dense else (np.zeros_like(ffn),) * 2
        emb, attn_norm = self.once1
        first, emb_w = piece_first(x, emb, NORM_OF[attn_norm])
        first = first.reshape(C, n[0], n[1]).min(axis=1)                      # [C, op2]
        x3 = Gather(tab, g[:, None, None])
        final_norm, lm_head = self.once2
        # the tail depends on f through its two layouts alone: costed once per distinct pair
        (out_u, lay_u), inv = _pairs(out[0], ffn_layout)
        last, tail_w, _ = piece_last(x3, out_u[None, :, None], lay_u[None, :, None],
                                     final_norm[None, None, :], lm_head[None, None, :])
        last = last.min(axis=2)[:, inv]                                        # [C, |f|]
        send = piece_send(x, out_u[None, :], lay_u[None, :])[:, inv]          # [C, |f|]
        between = piece_between(x3, out_u[None, None, :], lay_u[None, None, :],
                                NORM_OF[np.arange(n[1])][None, :, None])[:, :, inv]  # [C, op2, |f|]
        lp = tab.layers_per_stage[g][:, None, None]
        pp = tab.coarse[g, PP][:, None, None].astype(np.float64)
        G = stage_max(model, lp, pp, 0.0, between, ffn[:, None, :], ffn_d[:, None, :],
                      first[:, :, None], last[:, None, :], send[:, None, :])  # [C, op2, |f|]
        G = G.reshape(C, n[1], n[6], -1).min(axis=3)                          # [C, op2, op7]
        if memory:
            emb_w = np.broadcast_to(emb_w, (C, n[0] * n[1])).reshape(C, n[0], n[1]).min(axis=1)
            tail_w = np.broadcast_to(tail_w, (C, len(out_u), tail_w.shape[-1])).min(axis=2)[:, inv]
            M = stage_memory(model, lp, pp, 0.0, ffn_w[:, None, :], ffn_dw[:, None, :],
                             emb_w[:, :, None], tail_w[:, None, :],
                             tab.workspace_bytes[g][:, None, None])
            M = np.broadcast_to(M, G.shape[:2] + (ffn.shape[-1],)).reshape(
                C, n[1], n[6], -1).min(axis=3)                                 # [C, op2, op7]
            Aw = Aw.reshape(C, n[1], -1, n[6]).min(axis=2)
        if unit is not None:     # A is a whole stage's attention side already
            lp = unit[:, None, None]
        if memory:
            return (lp * A + G).min(axis=(1, 2)), (lp * Aw + M).min(axis=(1, 2))
        return (lp * A + G).min(axis=(1, 2))

    def _attn_weights(self, x: Gather) -> np.ndarray:
        """``piece_attn``'s weights and KV cache of the attention list [C, |a|], alone: its
        modes follow from the choices (``self.attn_modes``), the same sum in the same order."""
        attn_norm, *_, ffn_norm = self.a
        qkv, scores, context, out_proj = self.attn_modes
        return (x.weight("attn_norm", attn_norm) + x.weight("qkv", qkv)
                + x.weight("out_proj", out_proj) + x.weight("ffn_norm", ffn_norm)
                + x.kv(scores, context))

    def _least_attn(self, x: Gather, C: int) -> np.ndarray:
        """The least time of ``piece_attn`` over ops 3-6 for each (op2, op7) [C, op2, op7], by
        a shortest path over layouts instead of the 81 combinations: a step's time depends on
        its choice and incoming layout alone (``Gather.step``), and the block's time is a
        left-to-right sum, so the least sum of the paths that reach a layout, plus the next
        step, is the least over those paths of their sums plus it (floating-point addition is
        monotone): the same number the enumeration gives, at a few lookups per layout."""
        n = self.n
        L = np.arange(N_LAYOUTS)
        # V[C, op2, layout]: the least time from attn_norm to this point in that layout
        V = np.full((C, n[1], N_LAYOUTS), np.inf)
        for c2 in range(n[1]):
            V[:, c2, NORM_OF[c2]] = x.op("attn_norm", c2)[:, 0]
        for slot, point, k in (("qkv", "mixed", 2), ("scores", "qkv", 3),
                               ("context", "scores", 4), ("out_proj", "context", 5)):
            s = SLOT[slot]
            inc, ch = L[:, None], np.arange(n[k])[None, :]                  # [layout, choice]
            lin = np.where(ch >= NONE, PICK[inc], FIXED_IN[s, ch])
            mode = MODE_OF[s, ch, lin]
            dt = x.conv(slot, point, inc.ravel().repeat(n[k]), lin.ravel()) \
                + x.op(slot, mode.ravel())                                  # [C, layout*choice]
            to = MODE_OUT[s, mode].ravel()
            cand = V.repeat(n[k], axis=2) + dt[:, None, :]                  # [C, op2, l*c]
            V = np.full_like(V, np.inf)
            for out in np.unique(to):
                V[:, :, out] = cand[:, :, to == out].min(axis=2)
        A = np.empty((C, n[1], n[6]))
        for c7 in range(n[6]):
            ffn_layout = NORM_OF[c7]
            into = (V + x.conv("ffn_norm", "mixed", L, ffn_layout)[:, None, :]).min(axis=2)
            resid = x.conv("ffn_norm", "residual", NORM_OF[np.arange(n[1])], ffn_layout)
            A[:, :, c7] = into + resid + x.op("ffn_norm", c7)
        return A

    def decode(self, grid_shape, g, i2, i7, ia, irest):
        """Indices of the optimum back to a full index row (``g``: a row of the coarse grid of
        shape ``grid_shape``)."""
        n = self.n
        attention = np.unravel_index(ia, (n[2], n[3], n[4], n[5]))        # qkv .. out_proj
        emb, router, ffn1, ffn2, final_norm, lm_head = np.unravel_index(
            irest, (n[0], n[7], n[8], n[9], n[10], n[11]))
        coarse = np.unravel_index(g, grid_shape)
        return np.array([*coarse, emb, i2, *attention, i7, router, ffn1, ffn2, final_norm, lm_head],
                        dtype=np.int64)


def coarse_bounds(problem: Problem, rows=None, progress=None) -> np.ndarray:
    """Phase 1 of ``search_exact``: an upper bound on the tokens/s/GPU of coarse rows ``rows``
    (default: every row the tables do not rule out) [len(rows)] (-inf where no strategy of the
    row can be valid), from its unconstrained least time and least memory. No evaluator call;
    the two minima depend on the tables alone, not on the SLO, and are kept with them for the
    next search (each row's computed once, when first asked for)."""
    p, tab = problem, problem.tables
    rows = np.flatnonzero(tab.fixed_invalid == 0) if rows is None else np.asarray(rows)
    t_min, m_min = tab.extra.setdefault("exact_bounds", (np.full(len(tab.coarse), np.nan),
                                                         np.full(len(tab.coarse), np.nan)))
    new = rows[np.isnan(t_min[rows])]
    if len(new):
        ex = _Exact(p.model, p.space.choices)
        # without dense layers the minima come from the pieces' own minima (least_exact: the
        # same numbers, a fraction of the work); with them, from the whole grid
        separable = not (p.model.is_moe and p.model.dense_ffn_layers)
        for i in range(0, len(new), 256):
            g = new[i:i + 256]
            if separable:
                t, m_min[g] = ex.least_exact(tab, g, memory=True)
            else:
                lp, A, Aw, G, M = ex.block(tab, g)
                t = (lp[:, None, None] * A.min(-1) + G.min(-1)).min((1, 2))
                m_min[g] = (lp[:, None, None] * Aw.min(-1) + M.min(-1)).min((1, 2))
            t_min[g] = np.where(t < INVALID_S, t, np.inf)
            if progress:
                progress(0)
    return _score(p, rows, t_min[rows], m_min[rows]) if len(rows) else np.zeros(0)


def _in_bound_order(problem: Problem, cand, progress=None):
    """The rows ``cand`` whose ``coarse_bounds`` are finite, in the order of those bounds, best
    first (ties: the lower row first), as (row, bound) pairs, tightening lazily: rows are taken
    in the order of ``cheap_bounds`` (above ``coarse_bounds``, at a hundredth of the cost) and
    tightened 256 at a time, and a tightened row is given out only once no row still untightened
    could come before it. The same sequence as sorting every row's ``coarse_bounds``."""
    # (raised by 1e-9: its sums are grouped unlike least_exact's, and rounding must never put
    # a row's cheap bound under its tight one)
    cheap = cheap_bounds(problem)[cand] * (1 + 1e-9)
    keep = np.isfinite(cheap)
    cand, cheap = cand[keep], cheap[keep]
    order = np.argsort(-cheap, kind="stable")
    heap, pos = [], 0
    while True:
        if pos < len(order) and (not heap or -heap[0][0] <= cheap[order[pos]]):
            rows = cand[order[pos:pos + 256]]
            pos += 256
            for r, b in zip(rows, coarse_bounds(problem, rows, progress)):
                if np.isfinite(b):
                    heapq.heappush(heap, (-float(b), int(r)))
            continue
        if not heap:
            return
        b, r = heapq.heappop(heap)
        yield r, -b


def cheap_bounds(problem: Problem) -> np.ndarray:
    """A looser upper bound than ``coarse_bounds`` on each coarse row's tokens/s/GPU [G] (-inf
    where no strategy of the row can be valid) at a hundredth of its cost: the least time of
    ``_Exact.least`` and the least memory of ``_Exact.least_memory``. No evaluator call. The
    two minima depend on the tables alone and are kept with them (a pool's searches under
    each TPOT limit and instance-size bound share them)."""
    p, tab = problem, problem.tables
    cand = np.flatnonzero(tab.fixed_invalid == 0)
    kept = tab.extra.get("cheap_bounds")
    if kept is None or not np.array_equal(kept[0], cand):
        ex = _Exact(p.model, p.space.choices)
        kept = tab.extra["cheap_bounds"] = (cand, ex.least(tab, cand), ex.least_memory(tab, cand))
    ub = np.full(len(tab.coarse), -np.inf)
    ub[cand] = _score(p, cand, *kept[1:])
    return ub


def guide_bounds(problem: Problem, chunk: int = 512) -> np.ndarray:
    """An upper bound on each coarse row's tokens/s/GPU [G] (-inf where no strategy of the row
    can be valid) for the agent to aim with: the least time of ``_Exact.least_exact`` (the
    row's true least time for models without dense layers) and the least memory of
    ``_Exact.least_memory``, on the rows ``cheap_bounds`` leaves. No evaluator call; the times
    are kept with the tables for the next search on them."""
    p, tab = problem, problem.tables
    ub = cheap_bounds(p)
    g = np.flatnonzero(np.isfinite(ub))
    if not len(g):
        return ub
    ex = _Exact(p.model, p.space.choices)
    times = tab.extra.setdefault("guide_times", np.full(len(tab.coarse), np.nan))
    new = g[np.isnan(times[g])]
    for i in range(0, len(new), chunk):
        times[new[i:i + chunk]] = ex.least_exact(tab, new[i:i + chunk])
    t = times[g]
    ub[g] = _score(p, g, np.where(t < INVALID_S, t, np.inf), ex.least_memory(tab, g))
    return ub


def _score(problem: Problem, g, slowest, memory):
    """Throughput per GPU of the budget (``Problem.fill``) of rows g where valid (memory, SLO),
    else -inf: ``cost.model.finish``."""
    p = problem
    valid, _, per_gpu, *_ = finish(p.topo, p.work, p.tables, g, slowest, memory, 0)
    return np.where(valid & np.isfinite(slowest), per_gpu * p.fill(p.tables.gpus[g]), -np.inf)


def within_memory(lp, A, Aw, G, M, usable):
    """The least slowest stage lp * A_a + G_f of one coarse row over its grid (op2, op7, a, f)
    subject to lp * Aw_a + M_f <= usable, and its flat index (the first of equals): what
    ``argmin`` over the whole grid gives ((inf, 0) where nothing fits), at the cost of a sort
    of each rest list instead of the grid. For fixed (op2, op7, a) the sum lp * Aw_a + M_f is
    monotone in M_f, so the fitting f are a prefix of the rest list sorted by M (its end found
    by bisection with the sum itself, as the grid tests it), and the least G over a prefix is
    a running minimum; the least time of an a is lp * A_a + that minimum (addition is
    monotone). The index: the first (op2, op7, a) whose least is the row's, then the first
    fitting f there whose time equals it."""
    P, F = A.shape[0] * A.shape[1], G.shape[-1]
    A, Aw = A.reshape(P, -1), Aw.reshape(P, -1)
    G, M = G.reshape(P, F), M.reshape(P, F)
    order = np.argsort(M, axis=1, kind="stable")
    Ms = np.take_along_axis(M, order, axis=1)                        # [P, F] ascending
    run = np.minimum.accumulate(np.take_along_axis(G, order, axis=1), axis=1)
    x = lp * Aw                                                      # [P, a]
    # the fitting prefix of each (pair, a): the first f (in memory order) whose sum with x, as
    # the grid computes it, is over the limit, by bisection on that monotone test
    lo, hi = np.zeros(x.shape, dtype=np.int64), np.full(x.shape, F)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        fits = x + np.take_along_axis(Ms, np.minimum(mid, F - 1), axis=1) <= usable
        lo, hi = np.where((lo < hi) & fits, mid + 1, lo), np.where((lo < hi) & ~fits, mid, hi)
    k, rows = lo, np.arange(P)[:, None]
    least = np.where(k > 0, lp * A + run[rows, np.maximum(k - 1, 0)], np.inf)
    least = np.where(least < INVALID_S, least, np.inf)               # [P, a]
    best = least.min()
    if not np.isfinite(best):
        return np.inf, 0
    i, a = divmod(int(np.flatnonzero(least.ravel() == best)[0]), least.shape[1])
    t = lp * A[i, a] + G[i]
    f = int(np.flatnonzero((x[i, a] + M[i] <= usable) & (t == best))[0])
    return best, (i * A.shape[1] + a) * F + f


def search_exact(problem: Problem, budget: int = 0, rng=None, top: int = 10,
                 progress=None, block: int = 4, max_gpus: int | None = None) -> SearchResult:
    """The optimum of the cost model over the whole space, and the best strategy of each of the
    next best coarse rows (the top-k). See ``_Exact`` for why it is exact.

    ``max_gpus``: only instances of at most that many GPUs (the space of a smaller budget). The
    bounds of phase 1 and each row solved in phase 2 are kept with the tables, so a second call
    on them (another SLO or GPU bound) solves only rows not solved before."""
    if isinstance(problem, ServeProblem):
        raise ValueError("the exact search costs one phase (decode or prefill); the serve phase "
                         "sums a prefill and decode steps at several contexts")
    t0 = time.perf_counter()
    p = problem
    ex = _Exact(p.model, p.space.choices)
    tab = p.tables

    cand = np.flatnonzero(tab.fixed_invalid == 0)
    if max_gpus is not None:
        cand = cand[tab.gpus[cand] <= max_gpus]
    ordered = _in_bound_order(p, cand, progress)
    # phase 2: exact per coarse row, best bounds first, until the bound cannot beat the k-th best
    found = []        # (score, index row)
    visited = 0
    # each row's least time within memory and where it is: free of the SLO and of max_gpus, so
    # kept with the tables for the next search on them (another limit or instance-size bound)
    solved = tab.extra.setdefault("exact_rows", {})
    while True:
        g = list(itertools.islice(ordered, block))
        if not g:
            break
        bound, g = g[0][1], np.array([r for r, _ in g], dtype=np.int64)
        kth = sorted(s for s, _ in found)[-top] if len(found) >= top else -np.inf
        if bound <= kth:
            break
        new = np.array([gj for gj in g if int(gj) not in solved], dtype=np.int64)
        if len(new):
            lp, A, Aw, G, M = ex.block(tab, new)
            shape = A.shape[1:3] + (A.shape[3], G.shape[3])
            for j, gj in enumerate(new):
                solved[int(gj)] = (*within_memory(lp[j], A[j], Aw[j], G[j], M[j], p.usable),
                                   shape)
        t_best = np.array([solved[int(gj)][0] for gj in g])
        visited += len(g)
        scores = _score(p, g, t_best, 0.0)    # memory was checked per strategy above
        for j, gj in enumerate(g):
            if not np.isfinite(scores[j]):
                continue
            _, flat, shape = solved[int(gj)]
            i2, i7, ia, irest = np.unravel_index(flat, shape)
            found.append((scores[j], ex.decode(p.grid_shape, gj, i2, i7, ia, irest)))
        if progress:
            progress(0)
    found.sort(key=lambda r: -r[0])
    found = found[:top]
    tr = Tracker(p, top)
    if found:
        idx = np.array([r[1] for r in found])
        res = p.evaluate(idx, count=False)      # confirm with the evaluator itself
        tr.add(idx, p.score(res))
    n_space = int(np.prod(p.space.choices)) * len(cand)
    return tr.result("exact", t0, {"coarse_rows": int(len(cand)), "coarse_rows_solved": visited,
                                   "strategies_covered": n_space})
