"""Measured kernels: op times read from kernel timings of one GPU and engine release.

The tables (``lts/kernels/<gpu>.npz``, written by ``scripts/kernel_tables.py`` from
``shared/data/kernels``: the aiconfigurator-core 0.12.0 performance tables, each timed on that GPU
inside that engine release's container) hold, per engine and release:

- ``gemm``: a dense GEMM's latency on an (m, n, k) grid per weight format;
- ``moe``: the fused MoE layer (routing, permutation, both grouped GEMMs, the activation and
  quantization kernels between them) per (format, hidden, inter, top-k, experts, moe tp, moe ep,
  expert-load distribution) over the tokens entering the layer;
- ``gen`` / ``ctx``: decode and prefill attention per (KV dtype, heads, KV heads, head dim,
  window) over (sequences, context length);
- ``ar``: all-reduce per (GPUs, message bytes): the engine's custom kernel, NCCL's.

Reading is interpolation on log scales (log time against log size, multilinear between grid
points); past the grid's largest size time grows in proportion to size (the kernels are
throughput-bound there), below its smallest it stays (latency-bound). A MoE or attention shape
the tables do not hold is read from the nearest held one (``KernelSet.moe``,
``KernelSet.attention``); a format or an op class without a table is the roofline's
(``cost.tables``): the lookups return None.

A ``KernelSet`` is one GPU's tables for one engine release: each op class takes the newest
release not newer than the engine's (or, when all are newer, the oldest) and records which
(``picked``), as engine profiles do (``engines.engine.Engine.release_for``).
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..specs.versions import numbers, order_key

DATA_DIR = Path(__file__).resolve().parents[1] / "kernels"
KINDS = ("gemm", "moe", "gen", "ctx", "ar")
KIND_TITLES = {"gemm": "dense GEMM", "moe": "fused MoE layer", "gen": "decode attention",
               "ctx": "prefill attention", "ar": "all-reduce"}
MS = 1e-3
# lts weight format -> the tables' GEMM dtype (formats absent here: the roofline)
GEMM_FORMAT = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block",
               "nvfp4": "nvfp4", "w4a16": "int4_wo", "int8": "sq"}
# ... and the MoE tables' dtypes, in the order an engine prefers them: MXFP4 experts (gpt-oss) run
# with MXFP8 activations where the GPU has FP4 tensor cores (vLLM's FlashInfer TRT-LLM-gen MXFP4
# MoE on SM100, vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend; TensorRT-LLM's
# W4A8_MXFP4_MXFP8 for gpt-oss on Blackwell: moe_perf "w4a8_mxfp4_mxfp8", measured on Blackwell
# only), else with bf16 activations (Hopper: Triton / Marlin, "w4a16_mxfp4")
MOE_FORMAT = {"bf16": ("bf16",), "fp16": ("bf16",), "fp8": ("fp8",),
              "fp8_block": ("fp8_block",), "nvfp4": ("nvfp4",),
              "mxfp4": ("w4a8_mxfp4_mxfp8", "w4a16_mxfp4"), "w4a16": ("int4_wo",)}
# the expert-load distribution lts reads: the tables' milder power law (aiconfigurator's own
# default); "balanced" gives every expert the same tokens
DISTRIBUTION = {"balanced": 0, "power_law": 1}
DEFAULT_DISTRIBUTION = "power_law"
# a MoE shape the tables lack is read from the held shape nearest in these log distances:
# expert weights per token (hidden x inter), experts, top-k, hidden (KernelSet.moe_nearest),
# at the same tokens per expert, times (its expert weights / the held shape's) ^ MOE_SCALE_POWER.
# FITTED (scripts/kernel_error.py's reading: each shape of h100_sxm moe/vllm/0.24.0 left out,
# its ep = 1 rows read from the rest): the power 1.0 gives median |log2| 0.150, 0.9 0.111,
# 0.85 0.113, 0.8 0.126, 0.7 0.167 (the layer's fixed kernels do not grow with the weights);
# 0.85 and 0.9 tie, 0.85 is kept. Held out, every other GPU and engine: docs/kernels.md
# (0.080-0.152). Distances weighted otherwise ((1, 2, 1, 0), (1, 0.3, 0.3, 0), ...) did no
# better on h100_sxm or b200_sxm.
MOE_DISTANCE = np.array([1.0, 1.0, 1.0, 1.0])
MOE_SCALE_POWER = 0.85
# The MoE kernel an engine release runs where some of its tables timed another. The collector
# of vLLM 0.19.0 and 0.22.0 called vLLM's Triton fused_moe directly (kernel "vllm_fused_moe");
# from 0.24.0 it times the experts classes vLLM's backend oracle picks, and names them (the
# tables keep each row's kernel: ``kernel_build.moe``). Block-fp8 experts, per vLLM's
# model_executor/layers/fused_moe/oracle/fp8.py (select_fp8_moe_backend):
# - Blackwell (the SM100 family: B200, B300, GB200, GB300), from 0.19.0: FlashInfer's TRT-LLM-gen
#   kernels (vllm 0.19.0: _get_priority_backends puts FLASHINFER_TRTLLM first, and
#   experts/trtllm_fp8_moe.py's TrtLlmFp8ExpertsModular takes block fp8 under any routing, so
#   MiniMax-M2.5's sigmoid-with-bias router too). The 0.24.0 tables time it; 0.19.0's do not.
# - Hopper (SM 9.0), up to 0.16: FlashInfer's CUTLASS kernels (vllm 0.16.0: FLASHINFER_CUTLASS
#   is the first backend that takes block fp8 on SM 9.0, flashinfer_cutlass_moe.py
#   _supports_quant_scheme); from 0.17.0 Triton is moved first for tensor-parallel experts
#   ("On Hopper for Block Fp8, prefer Triton for TP", vllm 0.17.0 and 0.18.0). No table times
#   FlashInfer's CUTLASS kernels with experts split by tensor parallelism (0.24.0's rows of them
#   are ep > 1), so those releases read the Triton rows and ``lts kernels --model`` says so.
# A release under a rule reads the tables whose ep = 1 rows of that format timed the kernel
# it runs, while one does (``KernelSet.moe_tables``); else the others, named as not its kernel.
# (engine, table dtype) -> [(GPU tables, first release, last release (None: on), the kernel's
# name, words of the collector's names for it)] ("vllm_fused_moe" is the Triton kernel)
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200", "gb300")
HOPPER = ("h100_sxm", "h200_sxm")
ENGINE_MOE_KERNEL = {("vllm", "fp8_block"): [
    (BLACKWELL, "0.19.0", None, "FlashInfer TRT-LLM-gen", ("flashinfer_trtllm",)),
    (HOPPER, "0.0", "0.16.99", "FlashInfer CUTLASS", ("flashinfer_cutlass",)),
    (HOPPER, "0.17.0", None, "Triton", ("triton", "vllm_fused_moe"))]}


def _version(v: str) -> tuple:
    """A release's order (``specs.versions.order_key``: rc before its release)."""
    return order_key(v)


def pick_release(releases, version: str) -> tuple:
    """(release, note): the newest of ``releases`` not newer than ``version``, else the oldest;
    a version with no numbers takes the newest."""
    ordered = sorted(releases, key=_version)
    if not numbers(version or ""):
        return ordered[-1], f"newest ({ordered[-1]})"
    want = _version(version)
    older = [r for r in ordered if _version(r) <= want]
    if older:
        r = older[-1]
        return r, "" if _version(r) == want else f"nearest older ({r} for {version})"
    return ordered[0], f"oldest, newer than {version} ({ordered[0]})"


@lru_cache(maxsize=None)
def _load(path: str) -> dict:
    """One GPU's arrays: a ``.npz`` lts wrote, or a folder in the collector's layout (read and
    built here: ``kernel_build``)."""
    from .kernel_build import KernelTableError, build
    if Path(path).is_dir():
        arrays, notes = build(Path(path).parent, Path(path).name)
        if not arrays and notes:        # every table it has left out: say why
            more = f" (and {len(notes) - 1:,} more)" if len(notes) > 1 else ""
            raise KernelTableError(f"{path}: no table lts reads: {notes[0]}{more}")
        return arrays
    try:
        with np.load(path) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile):
        raise KernelTableError(f"{path}: not a kernel table file (write one with "
                               "scripts/kernel_tables.py)") from None
    if "sources" not in data:
        raise KernelTableError(f"{path}: not a kernel table file (no 'sources': write it with "
                               "scripts/kernel_tables.py)")
    return data


def gpu_path(gpu: str, data_dir=None):
    """Where ``gpu``'s tables are in ``data_dir`` (lts's own without one): ``<gpu>.npz``, else a
    ``<gpu>/`` folder in the collector's layout; None if neither."""
    d = Path(data_dir) if data_dir else DATA_DIR
    for p in (d / f"{gpu}.npz", d / gpu):
        if gpu and p.exists():
            return p
    return None


def gpus(data_dir=None) -> list:
    """The GPUs with tables in ``data_dir`` (lts's own without one): ``.npz`` stems and folders
    holding ``<op>/<engine>/<release>/<table>.parquet`` or ``.csv``."""
    d = Path(data_dir) if data_dir else DATA_DIR
    folders = {p.name for p in d.iterdir() if p.is_dir()
               and any(f.suffix in (".parquet", ".csv") for f in p.glob("*/*/*/*.*"))} \
        if d.is_dir() else set()
    return sorted({p.stem for p in d.glob("*.npz")} | folders)


_LOG_GRIDS: dict = {}       # id(grid) -> (grid, its log2): a table's axes, taken once


def _log_grid(grid):
    kept = _LOG_GRIDS.get(id(grid))
    if kept is None or kept[0] is not grid:
        kept = _LOG_GRIDS[id(grid)] = (grid, np.log2(grid.astype(np.float64)))
    return kept[1]


def _axis(grid, x):
    """(lower index, weight of the upper, log2 overshoot past the largest point) of sizes x on
    a grid, in log2."""
    lg = _log_grid(grid)
    lx = np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1e-12))
    over = np.maximum(lx - lg[-1], 0.0)
    lx = np.clip(lx, lg[0], lg[-1])
    if len(lg) == 1:
        z = np.zeros(lx.shape, dtype=np.int64)
        return z, np.zeros(lx.shape), over
    i = np.clip(np.searchsorted(lg, lx, side="right") - 1, 0, len(lg) - 2)
    w = (lx - lg[i]) / (lg[i + 1] - lg[i])
    return i, w, over


def _timed_row(row, grid):
    """(log2 sizes, values) of a one-axis table's timed (finite) points, as ``_lerp`` reads
    them; (None, None) where none is timed."""
    row = row.astype(np.float64)
    ok = np.isfinite(row)
    if not ok.any():
        return None, None
    return _log_grid(grid)[ok], row[ok]


def _interp_timed(lg, row, x, slope):
    """A one-axis table at sizes ``x`` from its ``_timed_row``: NumPy's interpolation over the
    timed points, past the last of them ``slope`` x log2 overshoot (NaN: none timed)."""
    x = np.asarray(x, dtype=np.float64)
    if lg is None:
        return np.full(x.shape, np.nan)
    lx = np.log2(np.maximum(x, 1e-12))
    return np.interp(lx, lg, row) + slope * np.maximum(lx - lg[-1], 0.0)


def _lerp(table, grids, xs, slopes):
    """Multilinear interpolation of log2 ``table`` [len(g) for g in grids] at sizes ``xs``
    (broadcast together); past the last point each axis adds slope x log2 overshoot. NaN
    corners are left out of the weighted mean (weights renormalised); all-NaN: NaN. One axis:
    over its timed (finite) points, past the last of them the slope."""
    xs = np.broadcast_arrays(*[np.asarray(x, dtype=np.float64) for x in xs])
    if len(grids) == 1:     # one axis: NumPy's own interpolation over the timed points (a
        # row timed at fewer sizes than the grid has NaN past its last: it extends from there)
        return _interp_timed(*_timed_row(table, grids[0]), xs[0], slopes[0])
    parts = [_axis(g, x) for g, x in zip(grids, xs)]
    # all 2^n corners at once, corner c on the leading axis (axis a upper where bit a of c):
    # one gather, and the sums over the corners in corner order, as a loop over them would add
    corner = np.arange(1 << len(grids)).reshape((-1,) + (1,) * xs[0].ndim)
    idx, w = [], 1.0
    for a, (i, wa, _) in enumerate(parts):
        up = (corner >> a) & 1
        idx.append(np.minimum(i + up, len(grids[a]) - 1))       # one point: weight 0 above
        w = w * np.where(up == 1, wa, 1.0 - wa)
    v = table[tuple(idx)].astype(np.float64)
    good = np.isfinite(v)
    w = np.where(good, w, 0.0)
    num = np.add.reduce(w * np.where(good, v, 0.0), axis=0)
    den = np.add.reduce(w, axis=0)
    out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    for (_, _, over), s in zip(parts, slopes):
        out = out + s * over
    return out


def _names(timed: str, words) -> bool:
    """Whether any of the collector's kernel names ``timed`` (joined by commas) holds one of
    ``words``."""
    return any(w in name for name in timed.split(",") for w in words)


@dataclass
class KernelSet:
    """One GPU's measured kernels for one engine release (``for_engine``)."""
    gpu: str
    engine: str
    version: str
    data: dict = field(repr=False)
    # kind -> (release, note, source table, the tables' engine: this one's or "nccl")
    picked: dict = field(default_factory=dict)
    distribution: str = DEFAULT_DISTRIBUTION
    fallback: tuple = ()     # the GPU's other engines, in the order their tables stand in
    # lookups that depend only on their arguments, kept (a problem builds its cost tables a
    # few hundred times, each asking the same shapes): key -> result
    memo: dict = field(default_factory=dict, repr=False, compare=False)
    # whether MoE tables are chosen by the kernel the engine runs (ENGINE_MOE_KERNEL); off, each
    # table is read as timed (scripts/kernel_error.py: a table's shapes read from its own rows)
    engine_kernels: bool = True

    def _memo(self, key, make):
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def _candidates(self, kind):
        """Table prefixes to try for ``kind``, in order: the picked release of this engine, its
        other releases (newest first), the GPU's other engines' newest (``fallback``)."""
        return self._memo(("candidates", kind), lambda: self._find_candidates(kind))

    def _find_candidates(self, kind):
        own = self._prefix(kind)
        if own is None:
            return []
        eng = self.picked[kind][3]
        rest = [f"{kind}|{eng}|{r}|" for r in reversed(releases(self.data, kind, eng))]
        return [own] + [p for p in rest if p != own] + \
            [f"{kind}|{e}|{releases(self.data, kind, e)[-1]}|" for e in self.fallback
             if releases(self.data, kind, e)]

    def _prefix(self, kind):
        p = self.picked.get(kind)
        return None if p is None else f"{kind}|{p[3]}|{p[0]}|"

    def gemm_source(self, fmt: str):
        """The table prefix a GEMM in ``fmt`` reads: this engine release's, else (a format its
        table lacks or that was left out as host-bound: scripts/kernel_tables.py) the same
        GPU's newest table of another engine (``fallback``), else None."""
        dt = GEMM_FORMAT.get(fmt)
        if dt is None:
            return None
        return self._memo(("gemm", dt), lambda: next(
            (p + dt for p in self._candidates("gemm") if p + dt + "|lat" in self.data), None))

    def gemm(self, fmt: str, m, n, k):
        """Seconds of a dense GEMM [m, k] x [k, n] with weights in ``fmt``, or None."""
        p = self.gemm_source(fmt)
        if p is None:
            return None
        d = self.data
        g = [d[f"{p}|{a}"] for a in "mnk"]
        return MS * np.exp2(_lerp(d[p + "|lat"], g, (m, n, k), (1.0, 1.0, 1.0)))

    def moe_tables(self, dt: str) -> list:
        """The tables (``_candidates``, in order) that hold MoE dtype ``dt`` (the tables'
        name), less those that timed a kernel this engine release does not run on this GPU
        while another holds the one it runs (``ENGINE_MOE_KERNEL``)."""
        return self._memo(("moe_tables", dt), lambda: self._moe_tables(dt))

    def _moe_tables(self, dt: str) -> list:
        held = [p for p in self._candidates("moe") if dt in list(self.data[p + "dtypes"])]
        rule = self.moe_kernel_run(dt)
        runs = [p for p in held if rule and _names(self.moe_kernels(p, dt), rule[1])]
        return runs or held

    def moe_kernel_run(self, dt: str):
        """(name, words of the collector's names for it) of the MoE kernel this engine release
        runs for dtype ``dt`` on this GPU where a rule says (``ENGINE_MOE_KERNEL``), else None."""
        if not self.engine_kernels:
            return None
        have = numbers(self.version or "")
        for gpus_, first, last, name, words in ENGINE_MOE_KERNEL.get((self.engine, dt), ()):
            if self.gpu in gpus_ and (not have or _version(first) <= _version(self.version)) \
                    and (last is None or (have and _version(self.version) <= _version(last))):
                return name, words
        return None

    def moe_kernels(self, prefix: str, dt: str, shape=None) -> str:
        """The kernels the ep = 1 rows of dtype ``dt`` in table ``prefix`` (of ``shape``
        (hidden, inter, top-k, experts) only, if given) were timed with, joined ("" where the
        table does not say: one written before the names were kept, or a user's without the
        column)."""
        d = self.data
        if prefix + "kernels" not in d:
            return ""
        keys = d[prefix + "keys"]
        sel = (keys[:, 0] == list(d[prefix + "dtypes"]).index(dt)) & (keys[:, 7] == 1)
        if shape is not None:
            sel &= (keys[:, 2:6] == np.asarray(shape)).all(axis=1)
        return ",".join(sorted(set(",".join(d[prefix + "kernels"][sel].tolist()).split(","))
                               - {""}))

    def moe_source(self, fmt: str, hidden, inter, top_k, experts):
        """What ``moe`` reads for this format and shape: a dict of the table (``prefix``,
        ``engine``, ``release``), its ``dtype``, the ``shape`` read (this one, or the nearest
        held), the ``kernels`` those rows were timed with, and ``runs``: the kernel this engine
        release runs there where a rule says (``moe_kernel_run``), else None; None where no
        table holds the format. Kept per shape (every cost-table build asks it)."""
        return self._memo(("moe_source", fmt, hidden, inter, top_k, experts),
                          lambda: self._moe_source(fmt, hidden, inter, top_k, experts))

    def _moe_source(self, fmt: str, hidden, inter, top_k, experts):
        p, rows = self.moe_rows(fmt, hidden, inter, top_k, experts)
        shape = (hidden, inter, top_k, experts)
        if p is None:
            p, rows, shape = self.moe_nearest(fmt, hidden, inter, top_k, experts)
            if p is None:
                return None
        dt = str(self.data[p + "dtypes"][int(self.data[p + "keys"][rows[0], 0])])
        _, engine, release, _ = p.split("|")
        rule = self.moe_kernel_run(dt)
        timed = self.moe_kernels(p, dt, shape)
        return {"prefix": p, "engine": engine, "release": release, "dtype": dt,
                "shape": tuple(int(v) for v in shape), "held": shape == (hidden, inter, top_k,
                                                                         experts),
                "kernels": timed.split(",") if timed else [],
                "runs": None if rule is None else rule[0],
                "runs_timed": None if rule is None or not timed else _names(timed, rule[1])}

    def moe_rows(self, fmt: str, hidden, inter, top_k, experts) -> tuple:
        """``_moe_rows``, kept per shape."""
        return self._memo(("moe_rows", fmt, hidden, inter, top_k, experts),
                          lambda: self._moe_rows(fmt, hidden, inter, top_k, experts))

    def _moe_rows(self, fmt: str, hidden, inter, top_k, experts) -> tuple:
        """(table prefix, row indices) of the fused-MoE rows of this shape, the first table
        (``_candidates``) and dtype (``MOE_FORMAT``, in the engine's order) that holds it, or
        (None, None)."""
        d = self.data
        for dt in MOE_FORMAT.get(fmt, ()):
            for p in self.moe_tables(dt):
                names = list(d[p + "dtypes"])
                keys = d[p + "keys"]
                want = np.array([names.index(dt), DISTRIBUTION[self.distribution], hidden,
                                 inter, top_k, experts])
                rows = np.nonzero((keys[:, :6] == want).all(axis=1))[0]
                if len(rows):
                    return p, rows
        return None, None

    def moe_nearest(self, fmt: str, hidden, inter, top_k, experts, exclude=None) -> tuple:
        """``_moe_nearest``, kept per shape."""
        return self._memo(("moe_nearest", fmt, hidden, inter, top_k, experts, exclude),
                          lambda: self._moe_nearest(fmt, hidden, inter, top_k, experts,
                                                    exclude))

    def _moe_nearest(self, fmt: str, hidden, inter, top_k, experts, exclude=None) -> tuple:
        """(table prefix, rows, its shape (hidden, inter, top-k, experts)) of the held MoE shape
        nearest this one (log distance of the expert weights per token h x inter, the expert
        count, top-k, hidden), the first dtype (``MOE_FORMAT``) any table holds; (None, None,
        None) without one."""
        d = self.data
        want = np.log(np.array([hidden * inter, experts, top_k, hidden], dtype=np.float64))
        for dt in MOE_FORMAT.get(fmt, ()):
            best = None
            for p in self.moe_tables(dt):
                names = list(d[p + "dtypes"])
                keys = d[p + "keys"]
                keys = keys[(keys[:, 0] == names.index(dt))
                            & (keys[:, 1] == DISTRIBUTION[self.distribution])]
                for shape in {tuple(r) for r in keys[:, 2:6].tolist()} - {exclude}:
                    h, i, k, e = shape
                    dist = (MOE_DISTANCE * np.abs(
                        np.log(np.array([h * i, e, k, h], dtype=np.float64)) - want)).sum()
                    if best is None or dist < best[0]:
                        best = (dist, p, shape)
            if best is not None:
                p, shape = best[1], best[2]
                return p, self.moe_rows(fmt, *shape)[1], shape
        return None, None, None

    def moe(self, fmt: str, hidden, inter, top_k, experts, tp, ep, tokens, exclude=None):
        """Seconds of the fused MoE layer on one rank for each (tp, ep, tokens) ([G] arrays:
        ``tokens`` the distinct tokens entering the layer, each expert split over ``tp`` ranks,
        the experts spread over ``ep``), or None when no table holds this format; NaN where the
        table has no such tp.

        Expert parallelism is read as fewer experts per rank: the table's ep = 1 row at the same
        tokens (each rank's experts get the same tokens per expert as all experts at ep = 1)
        times ep ^ -MOE_SCALE_POWER (a rank's expert weights and pairs are 1/ep of the layer's).
        The tables' own ep > 1 rows are not read: their num_tokens counts a rank's tokens in
        some and the layer's in others (h100_sxm moe/vllm/0.24.0 balanced, 16,384 tokens: the
        MiniMax-M2.5 shape 7.2 ms at ep 1 -> 1.3 at ep 8, as 1/8 of the layer's work would; the
        DeepSeek-V3 shape 19.1 -> 13.9, as a rank with 16,384 tokens of its own would), which
        the table does not say.

        A shape the tables lack is read from the nearest held shape (``moe_nearest``) at the
        same tokens per expert, times the ratio of the expert weights
        (experts x hidden x inter) ^ MOE_SCALE_POWER: at equal tokens per expert both a
        weight-read-bound and a compute-bound grouped GEMM grow with it; the error of both
        readings is measured by leaving each held shape out (scripts/kernel_error.py:
        ``exclude``, a held shape, is left out)."""
        p, rows = self.moe_rows(fmt, hidden, inter, top_k, experts)
        scale, tok_scale = 1.0, 1.0
        if p is None or exclude == (hidden, inter, top_k, experts):
            p, rows, ref = self.moe_nearest(fmt, hidden, inter, top_k, experts, exclude)
            if p is None:
                return None
            h, i, k, e = ref
            scale = ((experts * hidden * inter) / float(e * h * i)) ** MOE_SCALE_POWER
            tok_scale = (top_k / float(experts)) * (e / float(k))
        d = self.data
        keys, lat, tok = d[p + "keys"], d[p + "lat"], d[p + "tokens"]
        tp, ep, tokens = np.broadcast_arrays(np.asarray(tp, dtype=np.int64),
                                             np.asarray(ep, dtype=np.float64),
                                             np.asarray(tokens, dtype=np.float64))
        out = np.full(tp.shape, np.nan)
        for r in rows:
            if keys[r, 7] != 1:
                continue
            sel = keys[r, 6] == tp
            if sel.any():
                out[sel] = _lerp(lat[r], [tok], (tokens[sel] * tok_scale,), (1.0,))
        return MS * np.exp2(out) * scale * np.maximum(ep, 1.0) ** -MOE_SCALE_POWER

    def attention(self, phase: str, kv_dtype: str, heads, kv_heads, head_dim, window, batch,
                  length, exclude=None):
        """Seconds of one layer's attention kernel, ``phase`` "gen" (decode: ``length`` tokens
        in the cache) or "ctx" (prefill of ``length``-token prompts), ``batch`` sequences, per
        rank's ``heads`` and ``kv_heads``; None without a table for the KV dtype, head dim and
        window. A (heads, KV heads) pair the table lacks is read from the nearest held pair (log
        distance) times the ratio of the work that bounds the kernel: decode reads the KV heads'
        cache (x kv_heads / held kv_heads), prefill computes each head's scores (x heads / held
        heads); ``exclude`` (a held pair) is left out, for the leave-one-out error
        (scripts/kernel_error.py)."""
        found = self._memo(("attention", phase, kv_dtype, heads, kv_heads, head_dim, window,
                            exclude), lambda: self._attention_row(
            phase, kv_dtype, heads, kv_heads, head_dim, window, exclude))
        if found is None:
            return None
        p, r, scale = found
        d = self.data
        # decode grows with the cache read (slope 1 in length), prefill quadratically
        slope = 1.0 if phase == "gen" else 2.0
        v = _lerp(d[p + "lat"][r], [d[p + "batch"], d[p + "length"]], (batch, length),
                  (1.0, slope))
        return MS * np.exp2(v) * scale

    def _attention_row(self, phase, kv_dtype, heads, kv_heads, head_dim, window, exclude):
        """(prefix, row, scale) ``attention`` reads, or None (its docstring)."""
        p = self._prefix(phase)
        if p is None:
            return None
        d = self.data
        kvs = list(d[p + "kv_dtypes"])
        kv = "bf16" if kv_dtype in ("bf16", "fp16") else kv_dtype
        if kv not in kvs:
            return None
        keys = d[p + "keys"]
        same = (keys[:, 0] == kvs.index(kv)) & (keys[:, 3] == head_dim) & (keys[:, 4] == window)
        if exclude is not None:
            same &= ~((keys[:, 1] == exclude[0]) & (keys[:, 2] == exclude[1]))
        rows = np.nonzero(same)[0]
        if not len(rows):
            return None
        # nearest in the heads that bound the kernel (decode: KV heads; prefill: heads), the
        # other as a tie-break
        lh = np.abs(np.log(keys[rows, 1] / float(heads)))
        lk = np.abs(np.log(keys[rows, 2] / float(kv_heads)))
        dist = lk + 0.1 * lh if phase == "gen" else lh + 0.1 * lk
        r = rows[np.argmin(dist)]
        scale = (kv_heads / float(keys[r, 2])) if phase == "gen" else (heads / float(keys[r, 1]))
        return p, r, scale

    def allreduce(self, gpus, nbytes):
        """Seconds of an all-reduce of ``nbytes`` over ``gpus`` GPUs (the engine's custom kernel
        where it has one), or None."""
        p = self._prefix("ar")
        if p is None:
            return None
        d = self.data
        lat, grid = d[p + "lat"], d[p + "gpus"]
        gpus, nbytes = np.broadcast_arrays(np.asarray(gpus, dtype=np.float64),
                                           np.asarray(nbytes, dtype=np.float64))
        out = np.empty(gpus.shape)
        for g in np.unique(gpus):      # a timed GPU count: its row alone (the common case)
            sel = gpus == g
            j = int(np.searchsorted(grid, g))
            if j < len(grid) and grid[j] == g:
                # _lerp's one-axis case, its timed points taken once per row (a problem
                # builds its cost tables a few hundred times, each asking every row)
                timed = self._memo(("ar_row", p, j), lambda: _timed_row(lat[j], d[p + "bytes"]))
                out[sel] = _interp_timed(*timed, nbytes[sel], 1.0)
            else:
                out[sel] = _lerp(lat, [grid, d[p + "bytes"]], (g, nbytes[sel]), (1.0, 1.0))
        return MS * np.exp2(out)

    def as_dict(self) -> dict:
        """The JSON of what this set reads (``lts estimate --json``'s ``kernels``)."""
        return {"gpu": self.gpu, "engine": self.engine, "version": self.version,
                "tables": [{"op": k, "release": r, "note": n, "source": src}
                           for k, r, n, src in self.describe()]}

    def describe(self) -> list:
        """[(kind, release, note, source table)] of what this set reads."""
        return [(k, *self.picked[k][:3]) for k in KINDS if k in self.picked]


def releases(data: dict, kind: str, engine: str) -> list:
    """The releases of ``engine`` with a ``kind`` table in one GPU's data."""
    pre = f"{kind}|{engine}|"
    return sorted({k.split("|")[2] for k in data if k.startswith(pre)}, key=_version)


@lru_cache(maxsize=None)
def for_engine(gpu: str, engine: str, version: str, data_dir: str = "",
               distribution: str = "") -> KernelSet | None:
    """The measured kernels of ``gpu`` (a table file's stem: "h100_sxm") for ``engine`` at
    ``version``, or None when lts has no tables for that GPU or engine."""
    path = gpu_path(gpu, data_dir)
    if path is None:
        return None
    data = _load(str(path))
    if "sources" not in data:
        return None
    sources = json.loads(str(data["sources"]))
    picked = {}
    for kind in KINDS:
        # all-reduce: the engine's custom kernel, else NCCL's
        for eng in ((engine, "nccl") if kind == "ar" else (engine,)):
            rels = releases(data, kind, eng)
            if rels:
                r, note = pick_release(rels, version if eng == engine else "")
                if eng != engine:
                    note = f"NCCL {r}: no {engine} table"
                picked[kind] = (r, note, sources[kind][f"{eng}|{r}"], eng)
                break
    if not picked:
        return None
    others = tuple(e for e in ("sglang", "trtllm", "vllm") if e != engine)
    return KernelSet(gpu, engine, version, data, picked, distribution or DEFAULT_DISTRIBUTION,
                     others)


def source_of(ks: KernelSet, prefix: str) -> str:
    """The source table of table ``prefix`` ("kind|engine|release|") of ``ks``'s GPU."""
    kind, engine, release, _ = prefix.split("|")
    return json.loads(str(ks.data["sources"]))[kind].get(f"{engine}|{release}", "")
