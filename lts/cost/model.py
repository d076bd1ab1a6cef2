"""The cost model's entry: ``evaluate(model, topology, workload, strategies[N, WIDTH])``.

How a strategy is costed (docs/design.md §3), one layer per module, read in this order:

1. ``layouts``: the vocabulary. Layouts, each op kind's modes (choice, input layout, output
   layout) and the collective each layout conversion inserts. No costs.
2. ``cost.tables``: for each distinct coarse row (tp, ep, pp, batch), the roofline time of every op
   in every mode and of every conversion.
3. ``walk``: the 12 ops in order for N strategies at once (a loop over ops, never over
   strategies), as pieces; ``fuse`` tabulates the pieces per coarse row.
4. Assembly, here: stage time = the layers of the stage + embedding on the first stage + final
   norm and LM head on the last; TPOT = pp x (slowest stage + stage-to-stage send) (the batch
   runs as pp micro-batches, so one decode step of every sequence takes pp stage slots); prefill
   TTFT = (2pp-1) x (slowest stage + send) (pp micro-batches through pp stages). A ``mixed``
   step (the serve phase's, ``workload.compose_step``) is assembled like a decode step. Then
   memory against HBM, the SLO, and throughput (``finish``: one function for every caller,
   the exact solver's bounds included).

``breakdown`` lists one strategy's ops with their times and collectives in seconds and bytes
(``report`` converts to display units).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import latency
from .layouts import (CONVERSION, F, LAYOUT_NAMES, MODE_IN, MODE_OUT, PT, SLOT, SLOT_MODES, SLOTS,
                      T, field, pack)
from .tables import REASON_BIT, REASONS, Tables, append_tables, build_tables
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import (ETP, EXPERTS, N_COARSE, OPS, PP, TP, coarse_key, key_exact,
                               key_fields)
from .walk import Walk, fuse, fused_walk, walk
from ..specs.workload import Workload

@dataclass
class Result:
    """Evaluation of N strategies; every array is [N]. Times in seconds, memory in bytes."""
    strategies: np.ndarray
    valid: np.ndarray
    reasons: np.ndarray             # bit flags, see REASONS
    tokens_per_s_per_gpu: np.ndarray
    tokens_per_s: np.ndarray
    tpot_s: np.ndarray              # decode: time per output token (one step); prefill: nan
    ttft_s: np.ndarray              # prefill: time to first token of the batch; decode: nan
    step_s: np.ndarray              # one pipeline round (decode) or the whole prefill pass
    memory_bytes: np.ndarray        # per GPU, the fullest stage
    gpus: np.ndarray
    running: np.ndarray | None = None   # serve phase: requests running of the concurrency

    def reason_list(self, i: int) -> list:
        return [r for r in REASONS if self.reasons[i] & REASON_BIT[r]]

    def __len__(self):
        return len(self.valid)


def stage_max(model, lp, pp, attn, between, ffn, ffn_dense, first, last, send, alone=0.0):
    """Slowest pipeline stage plus the stage-to-stage send; arguments broadcast together.

    Stage s holds lp layers: the first stage adds the embedding (its first layer has no boundary
    before it), the last the final norm and LM head. Without dense layers all middle stages are
    equal; with them, see ``_candidates``. Layers without an FFN (``ModelSpec.no_ffn``, the same
    number in every stage and never a stage's last: ``kv.even_split``) cost ``alone`` each in
    place of attn + between + ffn.
    """
    head = first - between
    dense = model.dense_ffn_layers if model.is_moe else 0
    send = np.where(pp > 1, send, 0.0)
    if dense == 0:
        if model.no_ffn:
            bare = len(model.no_ffn) / pp           # layers without an FFN in each stage
            body = (lp - bare) * (attn + between + ffn) + bare * alone
        else:
            body = lp * (attn + between + ffn)
        return _with_ends(body, head, last, send, pp, np.where(pp >= 3, 0.0, -np.inf))
    # stage(c) = lp (attn + between) + (lp - dense(c)) ffn + dense(c) ffn_dense + [c = 0] head
    # + [c = pp - 1] last. The last term is the only one as large as the whole grid (the exact
    # search's last op axes), so it is added once: the last candidate is the last stage, and a
    # candidate that is the last stage in some row is in that row the same stage with the same
    # sum before ``last``, which is no larger than the sum with it (last >= 0). The result is the
    # same numbers as adding [c = pp - 1] last to every candidate (the terms, in the same order).
    cands, dense_n = _candidates(pp, model)
    layers = lp * (attn + between)
    return _worst_stage([layers + (lp - n_dense) * ffn + n_dense * ffn_dense + (cand == 0) * head
                         for cand, n_dense in zip(cands, dense_n)], last, send)


def _worst_stage(stages, last, after):
    """max(stages[0..2], stages[3] + last) + after: the candidate stages (``_candidates``'
    order) without the last stage's own term ``last`` (>= 0), which the last alone adds
    (``stage_max``), in one grid-sized buffer where ``after`` fits in it."""
    out = np.asarray(np.add(stages[-1], last))
    np.maximum(out, np.maximum(np.maximum(stages[0], stages[1]), stages[2]), out=out)
    if np.broadcast_shapes(out.shape, np.shape(after)) != out.shape:
        return out + after
    np.add(out, after, out=out)
    return out if out.ndim else out[()]


def _with_ends(body, first, last, after, pp, floor=None):
    """body + where(pp == 1, first + last, max(first, last[, floor])) + after: a stage's layers
    and the pipeline's two ends (both in one stage at pp = 1, else the larger; ``floor``, the
    middle stages at pp >= 3), the same arithmetic as written so but in one full-size buffer
    instead of seven (the exact search calls it on its whole grid)."""
    out = np.empty(np.broadcast_shapes(*(np.shape(v) for v in (body, first, last, after, pp))))
    np.maximum(first, last, out=out)
    if floor is not None:
        np.maximum(out, floor, out=out)
    one = np.broadcast_to(pp == 1, out.shape)
    if one.any():
        np.copyto(out, np.broadcast_to(first + last, out.shape), where=one)
    np.add(body, out, out=out)
    np.add(out, after, out=out)
    return out


def stage_memory(model, lp, pp, layer_w, ffn_w, ffn_dense_w, emb_w, tail_w, workspace,
                 alone_w=0.0):
    """Memory per GPU of the fullest stage; arguments broadcast together (``alone_w``: a layer
    without an FFN, as in ``stage_max``)."""
    dense = model.dense_ffn_layers if model.is_moe else 0
    if dense == 0:
        if model.no_ffn:
            bare = len(model.no_ffn) / pp
            body = (lp - bare) * (layer_w + ffn_w) + bare * alone_w
        else:
            body = lp * (layer_w + ffn_w)
        return _with_ends(body, emb_w, tail_w, workspace, pp)
    cands, dense_n = _candidates(pp, model)     # the last term added once, as in stage_max
    layers = lp * layer_w
    return _worst_stage([layers + (lp - n_dense) * ffn_w + n_dense * ffn_dense_w
                         + (cand == 0) * emb_w for cand, n_dense in zip(cands, dense_n)],
                        tail_w, workspace)


def _candidates(pp, model):
    """Stages that can be the slowest or fullest: first, second, second-to-last, last, and the
    dense-FFN layers each holds (``dense_in_stage``).

    Stage s holds layers [s*lp, (s+1)*lp); the first dense_layers are dense, so the dense count per
    stage is non-increasing in s and every per-stage sum is linear in it: over the middle stages
    the extremes sit at s=1 or s=pp-2.
    """
    pp = np.asarray(pp, dtype=np.float64)
    cands = (np.zeros_like(pp), np.minimum(1, pp - 1), np.maximum(pp - 2, 0), pp - 1)
    return cands, tuple(dense_in_stage(model, pp, c) for c in cands)


def dense_in_stage(model, pp, stage):
    """Dense-FFN layers of a MoE model in pipeline stage ``stage`` of ``pp`` (lp = layers / pp
    layers each): the leading ffn.dense_layers that fall in it, or with MoE on every moe_every-th
    layer lp - lp / moe_every in every stage (a pp whose stages hold different numbers is
    refused as indivisible: ``cost.kv.even_split``)."""
    f = model.ffn
    lp = model.layers / np.asarray(pp, dtype=np.float64)
    if f.moe_every > 1:
        return lp - lp / f.moe_every + 0.0 * np.asarray(stage)
    return np.clip(f.dense_layers - np.asarray(stage) * lp, 0, lp)


def assemble(model, tab: Tables, g, w: Walk):
    """Slowest stage (plus the stage-to-stage send) and the fullest stage's memory per GPU."""
    lp = tab.layers_per_stage[g]
    pp = tab.coarse[g, PP].astype(np.float64)
    slowest = stage_max(model, lp, pp, w.attn_s, w.between_s, w.ffn_s, w.ffn_dense_s, w.first_s,
                        w.last_s, w.send_s, w.alone_s)
    memory = stage_memory(model, lp, pp, w.layer_w, w.ffn_w, w.ffn_dense_w, w.emb_w, w.tail_w,
                          tab.workspace_bytes[g], w.alone_w)
    return slowest, memory


CHUNK = 16384


def _times(model, tables, fz, g, at, code):
    """Slowest stage, fullest stage's memory and the choices' reason bits of strategies of coarse
    rows g (rows ``at`` of ``fz``) and packed choices ``code``."""
    (attn, between, ffn, ffn_d, first, last, send,
     layer_w, ffn_w, ffn_dw, emb_w, tail_w, bad, alone, alone_w) = fused_walk(fz, at, code, model)
    # etp > 1 only under ffn1 = experts (``walk.etp_ok``)
    bad = bad | np.where((tables.coarse[g, ETP] == 1) | (field(code, "ffn1", "ffn1") == EXPERTS),
                         0, REASON_BIT["experts"])
    lp, pp = tables.layers_per_stage[g], tables.pp[g]
    slowest = stage_max(model, lp, pp, attn, between, ffn, ffn_d, first, last, send, alone)
    memory = stage_memory(model, lp, pp, layer_w, ffn_w, ffn_dw, emb_w, tail_w,
                          tables.workspace_bytes[g], alone_w)
    return slowest, memory, bad


class FusedRows:
    """The fused pieces (``walk.fuse``) of the coarse rows of one set of tables that have been
    asked for enough: a call's rows are fused once the strategies asked of them, over all calls,
    pay for it (``ROW_COST`` a row). A search's small batches (PPO: 32 strategies) walk op by op;
    a large batch fuses its rows at once; a long search of mid-sized batches (random search, 64 Ki
    strategies over moe1.6t's 4,550 rows) fuses them at its third call. Kept in
    ``tables.extra``."""

    # fusing a coarse row costs about as much as walking this many strategies op by op
    # (moe1.6t, 4,550 rows: 12 us a row, 0.4 us a strategy)
    ROW_COST = 32
    MIN_CALL = 1024       # smaller calls never fuse (a fuse call has a fixed cost of ~1 ms)

    def __init__(self):
        self.fused = None                           # Fused of the rows met, in order met
        self.at = np.zeros(0, dtype=np.int64)       # coarse row -> its row in ``fused`` (-1)
        self.asked = np.zeros(0, dtype=np.int64)    # strategies asked of each row not fused

    @staticmethod
    def of(tables: Tables) -> "FusedRows":
        return tables.extra.setdefault("fused", FusedRows())

    def _grow(self, tables: Tables):
        extra = len(tables.coarse) - len(self.at)
        if extra > 0:               # new tables, or tables appended to (TableCache)
            self.at = np.concatenate([self.at, np.full(extra, -1, dtype=np.int64)])
            self.asked = np.concatenate([self.asked, np.zeros(extra, dtype=np.int64)])

    def worth(self, tables: Tables, g) -> bool:
        """Whether to evaluate strategies of coarse rows g by the fused walk: every row is fused,
        or the call is large and the strategies asked of its unfused rows pay for fusing them."""
        self._grow(tables)
        missing = g[self.at[g] < 0]
        if len(missing) == 0:
            return True
        if len(g) < self.MIN_CALL:
            return False
        counts = np.bincount(missing, minlength=len(tables.coarse))
        self.asked += counts
        rows = counts > 0
        return self.asked[rows].sum() >= self.ROW_COST * np.count_nonzero(rows)

    def rows(self, tables: Tables, model: ModelSpec, g) -> tuple:
        """(Fused, row of each of the coarse rows g in it), fusing the rows not met before."""
        self._grow(tables)
        G = len(tables.coarse)
        at = self.at[g]
        new = at < 0
        if new.any():
            rows = np.flatnonzero(np.bincount(g[new], minlength=G))
            fz = fuse(tables, model, rows)
            start = 0 if self.fused is None else self.fused.rows
            self.fused = fz if self.fused is None else self.fused.append(fz)
            self.at[rows] = start + np.arange(len(rows))
            at = self.at[g]
        return self.fused, at


def tables_for(model, topo, work, strategies):
    """Tables for the distinct coarse rows of strategies [N, WIDTH], and each row's index into them."""
    coarse, inverse = group_coarse(strategies)
    return build_tables(model, topo, work, coarse), inverse


def group_coarse(strategies):
    """Distinct coarse rows [G, N_COARSE] of strategies [N, WIDTH] in ascending coarse order,
    and each strategy's index into them.

    Without a sort: the fields of each row's key are ranked through tables over their ranges and
    the ranks combine into one dense code per row (O(N); ``np.unique`` sorts, ~4x slower at 1 M)."""
    s = np.asarray(strategies, dtype=np.int64)
    coarse = s[:, :N_COARSE]
    if len(s) < CHUNK or not key_exact(coarse):
        _, first, inverse = np.unique(coarse, axis=0, return_index=True, return_inverse=True)
        return coarse[first], inverse.ravel()
    code, sizes, values = 0, [], []
    for field in key_fields(coarse_key(s)):
        seen = np.zeros(int(field.max()) + 1, dtype=bool)
        seen[field] = True
        values.append(np.flatnonzero(seen))
        sizes.append(len(values[-1]))
        code = code * sizes[-1] + (np.cumsum(seen) - 1)[field]
    if np.prod(sizes, dtype=np.float64) > 1 << 26:     # sparse combinations: sort the keys
        _, first, inverse = np.unique(coarse_key(coarse), return_index=True, return_inverse=True)
        return coarse[first], inverse.ravel()
    used = np.zeros(int(np.prod(sizes)), dtype=bool)     # at most N of them are true
    used[code] = True
    idx = np.unravel_index(np.flatnonzero(used), sizes)
    return np.stack([v[k] for v, k in zip(values, idx)], axis=1), (np.cumsum(used) - 1)[code]


class TableCache:
    """Coarse tables of one model, topology and workload for every coarse row seen so far.

    For callers that evaluate many small batches whose coarse rows are not known in advance
    (the serve phase's running batch depends on each strategy's memory): tables are built only
    for coarse rows not seen before and appended. The appended tables keep the arrays
    ``evaluate`` needs, not the per-collective records of ``breakdown``.
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload):
        self.model, self.topo, self.work = model, topo, work
        self.keys = np.zeros(0, dtype=np.int64)     # sorted coarse keys
        self.rows = np.zeros(0, dtype=np.int64)     # their rows in self.tables
        self.tables = None                          # (rows past ``used``: spare, never indexed)
        self.used = 0

    def evaluate(self, strategies) -> Result:
        strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
        if not key_exact(strategies[:, :N_COARSE]):   # degrees beyond the key: no cache
            return evaluate(self.model, self.topo, self.work, strategies)
        g = self.index(strategies)          # (may grow the tables: first)
        return evaluate(self.model, self.topo, self.work, strategies, tables=self.tables,
                        coarse_index=g)

    def index(self, strategies) -> np.ndarray:
        """Each row's index into ``self.tables`` [N], building the coarse rows not seen before
        (rows [N, >= 4]: their first four columns are the coarse part; keys must be exact)."""
        strategies = np.asarray(strategies, dtype=np.int64)
        keys = coarse_key(strategies[:, :N_COARSE])
        uniq, first = np.unique(keys, return_index=True)
        at = np.minimum(np.searchsorted(self.keys, uniq), max(len(self.keys) - 1, 0))
        new = self.keys[at] != uniq if len(self.keys) else np.ones(len(uniq), dtype=bool)
        if new.any():
            built = build_tables(self.model, self.topo, self.work,
                                 strategies[first[new], :N_COARSE])
            start = self.used
            if self.tables is None:
                self.tables = built
            else:   # the fused pieces of the rows seen so far are kept
                fused = FusedRows.of(self.tables)
                self.tables = append_tables(self.tables, start, built)
                self.tables.extra["fused"] = fused
            self.used += len(built.coarse)
            keys_all = np.concatenate([self.keys, uniq[new]])
            rows_all = np.concatenate([self.rows, start + np.arange(int(new.sum()))])
            order = np.argsort(keys_all, kind="stable")
            self.keys, self.rows = keys_all[order], rows_all[order]
        return self.rows[np.searchsorted(self.keys, keys)]


def evaluate(model: ModelSpec, topo: TopologySpec, work: Workload, strategies,
             tables: Tables | None = None, coarse_index=None, return_walk=False):
    """Evaluate strategies [N, WIDTH] -> Result with arrays [N].

    Args:
        tables: precomputed coarse tables (with ``coarse_index`` [N] into them), to skip grouping.
        return_walk: also return the Walk (per-op pieces) for breakdowns.
    """
    strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
    code = pack(strategies, check=True)
    if tables is None:
        tables, coarse_index = tables_for(model, topo, work, strategies)
    g = np.asarray(coarse_index)
    if return_walk:
        w = walk(tables, g, strategies[:, N_COARSE:], model, record=[])
        slowest, memory = assemble(model, tables, g, w)
        fields_ = finish(topo, work, tables, g, slowest, memory, w.bad)
        return Result(strategies, *fields_), w, tables
    if FusedRows.of(tables).worth(tables, g):
        slowest, memory, bad = _stages(model, tables, g, code)
    else:   # few strategies for the rows it would fuse: the op walk, in chunks
        parts = []
        for i in range(0, len(g), CHUNK):
            w = walk(tables, g[i:i + CHUNK], strategies[i:i + CHUNK, N_COARSE:], model)
            parts.append((*assemble(model, tables, g[i:i + CHUNK], w), w.bad))
        slowest, memory, bad = (np.concatenate(x) for x in zip(*parts)) if parts else \
            (np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))
    return Result(strategies, *finish(topo, work, tables, g, slowest, memory, bad))


def _stages(model, tables: Tables, g, code):
    """Slowest stage, fullest stage's memory and the choices' reason bits, by the fused walk in
    chunks. A large batch is walked in the order of its coarse rows, so that the tables of a row
    stay in cache while its strategies are costed (about 2x faster over many coarse rows); a
    batch given in that order (g never falls) is walked as it is."""
    cache = FusedRows.of(tables)
    fz, at = cache.rows(tables, model, g)
    G = len(tables.coarse)
    if len(g) <= CHUNK or G == 1 or not (g[1:] < g[:-1]).any():
        return _chunks(model, tables, fz, g, at, code)
    order = np.argsort(g.astype(np.uint16) if G <= 1 << 16 else g, kind="stable")
    g = np.repeat(np.arange(G), np.bincount(g, minlength=G))
    out = _chunks(model, tables, fz, g, cache.at[g], code[order])
    for k, v in enumerate(out):
        out[k] = np.empty_like(v)
        out[k][order] = v
    return out


def _chunks(model, tables: Tables, fz, g, at, code) -> list:
    """``_times`` of rows g (rows ``at`` of ``fz``), chunk by chunk (each chunk's temporaries
    stay in cache): [slowest stage, fullest stage's memory, reason bits]."""
    n = len(g)
    out = [np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)]
    for i in range(0, n, CHUNK):
        j = slice(i, i + CHUNK)
        for o, v in zip(out, _times(model, tables, fz, g[j], at[j], code[j])):
            o[j] = v
    return out


def kernel(model: ModelSpec, topo: TopologySpec, work: Workload, tables: Tables, g, code):
    """The evaluator's arithmetic alone, for ``lts bench`` to compare with: the fused walk's
    lookups and additions, the stages and ``finish``, over rows g [N] of ``tables`` whose
    pieces are fused and packed choices ``code`` [N] given in coarse-row order (so a row's
    pieces stay in cache). ``evaluate`` adds what a caller needs around it: packing and
    checking the choices, fusing new rows, the grouping by coarse row and the caller's order.
    Returns ``finish``'s arrays."""
    fz, at = FusedRows.of(tables).rows(tables, model, g)
    return finish(topo, work, tables, g, *_chunks(model, tables, fz, g, at, code))


def finish(topo: TopologySpec, work: Workload, tables: Tables, g, slowest, memory, bad):
    """Step time, throughput, SLO and memory checks from the slowest stage and the fullest
    stage's memory: the Result fields after ``strategies``, in order."""
    pp, batch, gpus = tables.pp[g], tables.batch[g], tables.gpus[g]
    reasons = tables.fixed_invalid[g] | bad
    prefill = work.phase not in ("decode", "mixed")
    # a decode step is its batch's TPOT, a prefill pass its prompts' TTFT (no queue)
    step = latency.step_s(pp, slowest, topo.step_overhead_s, fill_drain=prefill)
    if prefill:     # a pass chunked to the engine's budget: its steps (tables.steps)
        step = step * tables.steps[g]
    if not prefill:
        tpot, ttft = step, np.full(len(g), np.nan)
        tokens = batch / step
        reasons |= np.where(tpot > work.tpot_slo_ms * 1e-3, REASON_BIT["slo"], 0)
    else:
        tpot, ttft = np.full(len(g), np.nan), step
        tokens = batch * work.context / step
        if work.ttft_slo_ms:
            reasons |= np.where(ttft > work.ttft_slo_ms * 1e-3, REASON_BIT["slo"], 0)
    usable = topo.hbm_bytes - topo.hbm_reserve_bytes
    reasons |= np.where(memory > usable, REASON_BIT["memory"], 0)
    return reasons == 0, reasons, tokens / gpus, tokens, tpot, ttft, step, memory, gpus


# ----------------------------------------------------------------------------------------------
# per-op breakdown of one strategy (for `lts estimate`)

def breakdown(model: ModelSpec, topo: TopologySpec, work: Workload, strategy) -> tuple:
    """(Result of one strategy, list of per-op dicts) with times per op instance and counts.

    Each op dict: name, count (instances per step on one GPU's pipeline), compute_s, memory_s,
    time_s (roofline + overhead), weight_bytes, collectives (kind, group, bytes, time_s, count)
    -- the collectives the op needs itself and the layout conversions inserted in front of it.
    Seconds and bytes; ``report.results.ops_us`` gives the display units.
    """
    res, w, tab = evaluate(model, topo, work, np.asarray(strategy)[None], return_walk=True)
    g = 0
    layers = model.layers
    # layers without an FFN (model.no_ffn) have no ffn_norm, FFN or boundary after the FFN
    paired = model.ffn_layers
    moe_layers = model.moe_layers if model.is_moe else paired
    dense_layers = model.dense_ffn_layers if model.is_moe else 0
    count = {"first": 1, "last": 1, "layer": layers, "between": paired - 1,
             "ffn": moe_layers, "ffn_dense": dense_layers, "alone": layers - paired}
    slot_count = {op: layers for op in OPS}
    slot_count.update(embedding=1, final_norm=1, lm_head=1, router=moe_layers, ffn1=moe_layers,
                      ffn_norm=paired,
                      ffn2=moe_layers, router_dense=0, ffn1_dense=dense_layers,
                      ffn2_dense=dense_layers)
    ops = []
    for slot in SLOTS:
        if slot not in w.modes or slot_count[slot] == 0:
            continue
        if slot == "router" and not model.is_moe:
            continue
        s, mode = SLOT[slot], int(w.modes[slot][0])
        colls = [{"kind": kind, "group": group, "bytes": float(nb[g]), "time_s": float(t[g]),
                  "count": slot_count[slot]}
                 for kind, group, nb, t in tab.intrinsic.get((s, mode), []) if t[g] > 0]
        for feeds, point, src, dst, t, scope in w.convs:
            if feeds == slot and t[0] > 0:
                kind = CONVERSION.get((int(src[0]), int(dst[0])))
                nb = tab.conv_bytes[g, PT[point]]
                colls.append({"kind": kind, "group": "tp",
                              "bytes": float(nb / tab.coarse[g, TP] if kind == "all-to-all"
                                             else nb),
                              "time_s": float(t[0]),
                              "count": paired if feeds == "ffn_norm" else count[scope],
                              "layout": LAYOUT_NAMES[int(src[0])] + "->"
                              + LAYOUT_NAMES[int(dst[0])]})
        if slot == "lm_head":
            out = int(w.layouts["logits"][0])
            t = float(tab.final_s[g, out])
            if t > 0:
                kind = "all-gather" if out in (T, F) else "all-reduce"
                nb = tab.extra["ids_bytes"][g] if out == T else tab.conv_bytes[g, PT["logits"]]
                colls.append({"kind": kind, "group": "tp", "bytes": float(nb), "time_s": t,
                              "count": 1, "layout": f"{LAYOUT_NAMES[out]}->ids"})
        ops.append({"name": slot, "choice": int(SLOT_MODES[slot][mode][0]),
                    "layout_in": LAYOUT_NAMES[MODE_IN[s, mode]],
                    "layout_out": LAYOUT_NAMES[MODE_OUT[s, mode]],
                    "count": slot_count[slot],
                    "compute_s": float(tab.compute_s[g, s, mode]),
                    "memory_s": float(tab.memory_s[g, s, mode]),
                    "time_s": float(tab.time_s[g, s, mode]),
                    "weight_bytes": float(tab.weight_bytes[g, s, mode]),
                    "collectives": colls})
        if slot in ("ffn1", "ffn2") and "expert_load" in tab.extra:
            # the busiest rank's routed pairs over the mean (cost.expert_load)
            ops[-1]["expert_load"] = float(tab.extra["expert_load"][g, mode])
    pp = int(tab.coarse[g, PP])
    if pp > 1 and w.send_s[0] > 0:
        ops.append({"name": "stage_send", "choice": -1, "layout_in": "", "layout_out": "",
                    "count": pp, "compute_s": 0.0, "memory_s": 0.0, "time_s": 0.0,
                    "weight_bytes": 0.0,
                    "collectives": [{"kind": "send", "group": "pp",
                                     "bytes": float(tab.send_bytes[g, 1]
                                                    + tab.send_bytes[g, 3]),
                                     "time_s": float(w.send_s[0]), "count": pp}]})
    return res, ops
