"""Kernel tables in the collector's layout -> the arrays ``cost.kernels`` reads.

The layout is that of the aiconfigurator-core 0.12.0 performance tables (``shared/data/kernels``):
``<gpu>/<op>/<engine or nccl>/<release>/<table>.parquet`` (or ``.csv`` with the same columns,
which needs nothing beyond NumPy; parquet needs pyarrow). ``scripts/kernel_tables.py`` writes
lts's shipped ``lts/kernels/<gpu>.npz`` with it; ``--kernels DIR`` reads a folder of either
kind (``cost.kernels.for_engine``). Kept, per GPU and engine release:

- ``gemm``   gemm/<engine>/<release>/gemm_perf: latency on the full (m, n, k) grid per dtype;
- ``moe``    moe/<engine>/<release>/moe_perf: the fused MoE layer (routing, permutation, both
             grouped GEMMs) per (dtype, distribution, hidden, inter, topk, experts, moe_tp,
             moe_ep) over its num_tokens grid, and the kernels each was timed with;
- ``gen`` / ``ctx``   attention/<engine>/<release>/{generation,context}_attention_perf: per
             (kv dtype, heads, kv heads, head dim, window) over (batch, context length);
- ``ar``     comm/<engine>/<release>/custom_allreduce_perf and comm/nccl/<release>/nccl_perf
             all_reduce: latency per (GPUs, message bytes).

Latencies are stored as log2(milliseconds) in float16 (a step of 2^-10 relative: 0.07%), missing
grid points as NaN. Where a point was timed with several kernels (vLLM's eager and graph custom
all-reduce), the fastest is kept: the engine picks it.
"""
from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..specs.errors import LtsError, cut_quoted, decimal, has_hidden, plain


class KernelTableError(LtsError):
    """A kernel table that cannot be read."""


DTYPE_OF_TABLE = {"bfloat16": "bf16", "float16": "bf16"}   # the tables' names -> lts's


# each table's columns lts reads: (text columns, number columns); a table without one of them,
# or with a number column that does not parse, is refused naming the file, the column and the row
COLUMNS = {
    "gemm": (("gemm_dtype",), ("m", "n", "k", "latency")),
    "moe": (("moe_dtype", "distribution"), ("num_tokens", "hidden_size", "inter_size", "topk",
                                             "num_experts", "moe_tp_size", "moe_ep_size",
                                             "latency")),
    "gen": (("kv_cache_dtype",), ("batch_size", "step", "num_heads", "num_key_value_heads",
                                  "head_dim", "latency")),
    "ctx": (("kv_cache_dtype",), ("batch_size", "isl", "num_heads", "num_key_value_heads",
                                  "head_dim", "latency")),
    "ar": (("op_name",), ("num_gpus", "message_size", "latency")),
}


def read(path, kind: str) -> dict:
    """A ``kind`` table's columns as NumPy arrays (``COLUMNS``: its number columns as floats,
    positive and finite; other columns as they are): ``.csv`` with the csv module, ``.parquet``
    with pyarrow (a maintainer's tool; without it, a clear error)."""
    path = Path(path)
    text, numbers = COLUMNS[kind]
    if path.suffix == ".csv":
        try:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                names = reader.fieldnames or []
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise KernelTableError(f"{path}: not a readable CSV table ({e})") from None
        twice = sorted({c for c in names if names.count(c) > 1})
        if twice:       # (the csv module keeps the last of the two)
            raise KernelTableError(f"{path}: header: column {cut_quoted(twice[0])} named twice")
        header = list(rows[0]) if rows else []
        out = {k: np.array([r[k] for r in rows]) for k in header}
    else:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise KernelTableError(f"{path}: reading .parquet needs pyarrow (pip install "
                                   "pyarrow), or give the table as .csv with the same "
                                   "columns") from None
        try:
            out = {k: np.asarray(v) for k, v in pq.read_table(path).to_pydict().items()}
        except Exception as e:       # pyarrow's own errors for a file that is not parquet
            raise KernelTableError(f"{path}: not a readable parquet table ({e})") from None
    if not out or not len(next(iter(out.values()))):
        raise KernelTableError(f"{path}: no rows")
    missing = [c for c in text + numbers if c not in out]
    if missing:
        raise KernelTableError(f"{path}: no column {', '.join(missing)} (a {kind} table has "
                               f"{', '.join(text + numbers)})")
    for c in numbers:
        try:
            vals = out[c].astype(np.float64) if _decimal(out[c]) else None
        except (TypeError, ValueError):
            vals = None
        bad = np.arange(len(out[c])) if vals is None else \
            np.nonzero(~(np.isfinite(vals) & (vals > 0)))[0]
        if len(bad):
            i = int(bad[0]) if vals is not None else next(
                j for j, v in enumerate(out[c]) if not _number(v))
            raise KernelTableError(f"{path}: row {i + 1}: {c}: {cut_quoted(str(out[c][i]))} is "
                                   "not a positive number")
        frac = np.nonzero(vals != np.floor(vals))[0] if c != "latency" else ()
        if len(frac):           # a shape or count: 1.5 was read as 1
            i = int(frac[0])
            raise KernelTableError(f"{path}: row {i + 1}: {c}: {cut_quoted(str(out[c][i]))} is "
                                   "not a whole number")
        out[c] = vals
    for c in text:              # names shown in every estimate and listing: plain and short
        names = set(np.asarray(out[c]).astype(str).tolist())
        odd = sorted(n for n in names if has_hidden(n) or len(n) > MAX_NAME)
        if odd:
            i = next(j for j, v in enumerate(out[c]) if str(v) == odd[0])
            why = "contains control or bidirectional formatting characters (expected plain " \
                "text)" if has_hidden(odd[0]) else f"is longer than {MAX_NAME} characters"
            raise KernelTableError(f"{path}: row {i + 1}: {c}: {cut_quoted(odd[0])} {why}")
    return out


MAX_NAME = 64       # a table's dtype, distribution or op name (the longest shipped: 26)


def _decimal(cells) -> bool:
    """Whether a column's text cells are ASCII without "_" (NumPy, as Python's float, reads
    '٨٤٠' and '8_40' as 840; ``specs.errors.decimal``): a parquet column's numbers are."""
    if cells.dtype.kind != "U":
        return True
    try:
        return not (np.char.find(cells.astype("S"), b"_") >= 0).any()
    except UnicodeEncodeError:
        return False


def _number(v) -> bool:
    try:
        x = decimal(v) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(x) and x > 0)


def log2ms(x, axes=()):
    """log2 milliseconds in float16, each of ``axes`` (size axes: time cannot fall as a size
    grows) made non-decreasing by a minimum from the largest size down: a point slower than
    a larger shape's is a timing outlier (the GEMM tables hold 2-4x one-point spikes, e.g.
    b200_sxm gemm/vllm/0.24.0 fp8 m=16 n=768 k=6144: 24.4 us between 9.4 and 10.4), and a
    missing point takes the next larger shape's time."""
    x = np.asarray(x, dtype=np.float64)
    for a in axes:
        x = np.flip(np.fmin.accumulate(np.flip(x, a), axis=a), a)
    return np.log2(np.maximum(x, 1e-6)).astype(np.float16)


def grid(values):
    return np.array(sorted(set(int(v) for v in values)), dtype=np.int64)


def put_min(arr, idx, lat):
    """arr[idx] = min(arr[idx], lat) for repeated indices (NaN: unset)."""
    flat = np.full(arr.size, np.inf)
    np.minimum.at(flat, np.ravel_multi_index(idx, arr.shape), lat)
    flat[np.isinf(flat)] = np.nan
    return flat.reshape(arr.shape)


# A GEMM table whose fastest point (m = 1, n = k = 32) takes longer than this is the host's time
# per call, not the kernel's (vLLM 0.24.0's fp8_block tables: 55 us on H100/H200, 151-282 us on
# B200/B300/GB200/GB300/L40S, flat in m, n and k up to thousands; every other table's floor is
# 1.5-18 us): left out, the GPU's other engines' table stands in (cost.kernels)
HOST_BOUND_US = 30.0


def gemm(path, notes: list):
    d = read(path, "gemm")
    # the m = 2^j + 1 / 16 i + 1 probes (one row past a tile) are dropped: lts interpolates
    # between tile sizes, and they double the table
    keep = ~np.isin(d["m"] - 1, d["m"]) | (d["m"] <= 17)
    d = {c: v[keep] for c, v in d.items()}
    out = {}
    for dt in sorted(set(d["gemm_dtype"])):
        sel = d["gemm_dtype"] == dt
        m, n, k = grid(d["m"][sel]), grid(d["n"][sel]), grid(d["k"][sel])
        idx = (np.searchsorted(m, d["m"][sel]), np.searchsorted(n, d["n"][sel]),
               np.searchsorted(k, d["k"][sel]))
        lat = put_min(np.zeros((len(m), len(n), len(k))), idx, d["latency"][sel])
        name = DTYPE_OF_TABLE.get(dt, dt)
        if np.nanmin(lat) * 1e3 > HOST_BOUND_US:
            notes.append(f"{path}: {cut_quoted(str(dt))} left out: its fastest GEMM takes "
                         f"{np.nanmin(lat) * 1e3:,.0f} us, over {HOST_BOUND_US:.0f} us: the "
                         "host's time per call, not a kernel's (latency is in ms)")
            continue
        out[f"{name}|m"], out[f"{name}|n"], out[f"{name}|k"] = m, n, k
        out[f"{name}|lat"] = log2ms(lat, (0, 1, 2))
    return out


MOE_KEYS = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
# balanced routing and the milder power law (aiconfigurator's default); power_law_1.2 dropped
DISTRIBUTIONS = ("balanced", "power_law_1.01")


def moe(path):
    d = read(path, "moe")
    dts = sorted(set(d["moe_dtype"]))
    tok = grid(d["num_tokens"])
    dist = np.array([DISTRIBUTIONS.index(x) if x in DISTRIBUTIONS else -1
                     for x in d["distribution"]])
    dt = np.array([dts.index(x) for x in d["moe_dtype"]])
    keys = np.stack([dt, dist] + [d[k].astype(np.int64) for k in MOE_KEYS], axis=1)
    ok = dist >= 0
    uk, inv = np.unique(keys[ok], axis=0, return_inverse=True)
    lat = put_min(np.zeros((len(uk), len(tok))),
                  (inv.ravel(), np.searchsorted(tok, d["num_tokens"][ok])), d["latency"][ok])
    # the kernels each row was timed with, where the table says (``kernel_source``: the
    # collector's name, e.g. "vllm_fused_moe", the Triton kernel called directly): an engine may
    # run another (``cost.kernels.ENGINE_MOE_KERNEL``)
    kernel = [set() for _ in uk]
    if "kernel_source" in d:
        for i, name in zip(inv.ravel(), d["kernel_source"][ok].tolist()):
            kernel[i].add(str(name))
    return {"keys": uk, "tokens": tok, "lat": log2ms(_fewer_ranks_bound(uk, lat), (1,)),
            "dtypes": np.array([DTYPE_OF_TABLE.get(x, x) for x in dts]),
            "kernels": np.array([",".join(sorted(k)) for k in kernel])}


def _fewer_ranks_bound(keys, lat):
    """A MoE layer on more ranks is no slower than on fewer at the same tokens: each rank holds
    a share of the other's experts (ep) or of each expert (tp) and gets no more of the tokens'
    work; a row slower than the same shape on fewer ranks (moe_tp halved, or moe_ep) is a
    timing outlier and takes that time (h100_sxm moe/trtllm/1.3.0rc10 fp8 Mixtral-8x22B at
    moe_tp 8: 0.98 ms at 1,024 tokens, 0.42 ms at moe_tp 4, 0.25 ms in 1.3.0rc20). Rows are
    visited by growing tp x ep, so a bound carries along a chain of doublings."""
    lat = lat.copy()
    index = {tuple(k): i for i, k in enumerate(keys.tolist())}
    for i in np.argsort(keys[:, 6] * keys[:, 7], kind="stable"):
        k = keys[i].tolist()
        for col in (6, 7):
            if k[col] % 2 == 0:
                j = index.get(tuple(k[:col] + [k[col] // 2] + k[col + 1:]))
                if j is not None:
                    lat[i] = np.fmin(lat[i], lat[j])
    return lat


ATTN_KEYS = ("num_heads", "num_key_value_heads", "head_dim", "window_size")


def attention(path, length):
    """length: 'step' (generation: tokens already in the cache) or 'isl' (context)."""
    d = read(path, "gen" if length == "step" else "ctx")
    kvs = sorted(set(d["kv_cache_dtype"]))
    kv = np.array([kvs.index(x) for x in d["kv_cache_dtype"]])
    n = len(kv)   # older tables have no window column: full attention
    keys = np.stack([kv] + [d[k].astype(np.int64) if k in d else np.zeros(n, np.int64)
                            for k in ATTN_KEYS], axis=1)
    uk, inv = np.unique(keys, axis=0, return_inverse=True)
    b, L = grid(d["batch_size"]), grid(d[length])
    lat = put_min(np.zeros((len(uk), len(b), len(L))),
                  (inv.ravel(), np.searchsorted(b, d["batch_size"]),
                   np.searchsorted(L, d[length])), d["latency"])
    return {"keys": uk, "batch": b, "length": L, "lat": log2ms(lat, (1, 2)),
            "kv_dtypes": np.array([DTYPE_OF_TABLE.get(x, x) for x in kvs])}


def allreduce(path):
    d = read(path, "ar")
    sel = d["op_name"] == "all_reduce"
    if "nccl_dtype" in d:
        sel &= d["nccl_dtype"] == "half"
    if not sel.any():
        return {}
    g, s = grid(d["num_gpus"][sel]), grid(d["message_size"][sel])
    lat = put_min(np.zeros((len(g), len(s))), (np.searchsorted(g, d["num_gpus"][sel]),
                                               np.searchsorted(s, d["message_size"][sel])),
                  d["latency"][sel])
    return {"gpus": g, "bytes": s, "lat": log2ms(lat, (1,))}


def build(src: Path, gpu: str) -> tuple:
    """(arrays, notes) of one GPU's folder ``src/gpu`` in the collector's layout
    ``<op>/<engine>/<release>/<table>.{parquet,csv}``: the arrays ``cost.kernels`` reads (keys
    ``kind|engine|release|name``; ``sources``: per kind, the source table of each engine
    release, as JSON) and a line per table left out. No table: empty arrays."""
    arrays, sources, notes = {}, defaultdict(dict), []
    files = sorted(f for f in (Path(src) / gpu).glob("*/*/*/*.*")
                   if f.suffix in (".parquet", ".csv"))
    for f in files:
        op, engine, release, table = f.parts[-4], f.parts[-3], f.parts[-2], f.stem
        rel = f"{gpu}/{op}/{engine}/{release}/{f.name}"
        if has_hidden(rel):     # (a release is shown in every estimate: never raw)
            raise KernelTableError(f"{plain(str(f))}: a folder or file name contains control "
                                   "or bidirectional formatting characters (expected plain text)")
        kind, parts = None, {}
        if op == "gemm" and table == "gemm_perf":
            kind, parts = "gemm", gemm(f, notes)
        elif op == "moe" and table == "moe_perf":
            kind, parts = "moe", moe(f)
        elif op == "attention" and table == "generation_attention_perf":
            kind, parts = "gen", attention(f, "step")
        elif op == "attention" and table == "context_attention_perf":
            kind, parts = "ctx", attention(f, "isl")
        elif op == "comm" and table in ("custom_allreduce_perf", "nccl_perf"):
            kind, parts = "ar", allreduce(f)
        if not parts:
            continue
        for name, a in parts.items():
            arrays[f"{kind}|{engine}|{release}|{name}"] = a
        sources[kind][f"{engine}|{release}"] = rel
    if arrays:
        arrays["sources"] = np.array(json.dumps(sources, sort_keys=True))
    return arrays, notes


