"""``lts validate``: predict published serving measurements with the serve phase and compare.

A measurement file is CSV (docs/design.md §5) with the columns
``id, model, topology, gpus, tp, ep, pp, precision, isl, osl, concurrency, metric, value, source``
and an optional ``strategy``. How each row is mapped:

- ``model`` and ``topology`` are shipped short names, or files or config folders (a relative
  path resolves against the CSV's folder; ``_Loader``); a row whose cell does not load is
  *skipped* with the reason (never dropped silently). ``precision`` (empty: the model file's) overrides the
  weight and KV-cache type (``specs.with_precision``; any spelling of a weight format,
  ``units.weight_format``: fp4, bfloat16, int4_wo, awq, ...).
- The strategy is ``strategy`` when present (an ``--strategy`` string; unnamed ops take Megatron's
  choice), else the engine's own layout when the optional columns ``attention_tp``,
  ``attention_dp``, ``moe_tp``, ``moe_ep`` are filled (``engines.space.from_layout``; a layout
  lts does not cost is skipped with the reason), else Megatron's per-op sharding at ``tp``,
  ``ep``, ``pp``. A row whose tp·ep·pp is not ``gpus`` is skipped.
- The optional ``gemm_quant`` and ``moe_quant`` (any spelling of a weight format, as
  ``precision``; of one kind where both are filled: fp8 per tensor or block-scaled, NVFP4 or
  MXFP4, int4 weight-only in groups of 128 or 32; the experts' is taken) name the weights' format and
  take the place of ``precision``: a checkpoint whose format is of the same kind is costed as it
  ships, another kind replaces the quantized weights' format, the KV cache stays the model's
  (``_model_for``).
- **Two pools**: a row that fills ``prefill_`` and ``decode_`` ``num_workers``, ``batch_size``,
  ``tp_size``, ``pp_size``, ``attention_dp_size``, ``moe_tp_size``, ``moe_ep_size``
  (shared/data/serving_disagg.csv; then ``gpus``, ``tp``, ``ep``, ``pp`` may be absent) is one
  two-pool deployment at its ``concurrency``: each pool's layout as above, predicted by
  ``lts.serving.two_pool`` (batch_size: prompts per attention-DP rank in a prefill pass, running
  requests per rank at most in decode).
- The optional ``engine_version`` (else the version after the engine's name in ``source``,
  "vllm 0.12.0") picks the engine's profile: the newest release lts models that is not newer
  (``Engine.release_for``; older than all: the oldest; empty or not a number: the engine's
  served release); the rows say which (``profile``).
- The batch is the concurrency, ``concurrency``; when empty, a ``batch=`` named in
  ``strategy``; else the integer one up to the KV capacity with the highest output tokens/s
  (``serve(best_batch=True)``), as an engine's max-throughput run picks.
- ``metric`` is one of ``output_tokens_per_s`` (whole instance), ``output_tokens_per_s_per_gpu``,
  ``ttft_ms``, ``tpot_ms``; the prediction is the serve phase's (``lts.serving.serve``, the closed loop
  at concurrency C) at ``isl``/``osl`` with no SLO. A prediction that is invalid (not even one
  request fits memory, ...) is skipped with its reasons.
- The engine profile (``lts.engines``) is the optional ``engine`` column (``generic``, ``vllm``,
  ``sglang``, ``trtllm``); when the column is absent or the cell empty, the engine the ``source``
  names (TensorRT-LLM/trtllm, vLLM, SGLang: exactly one of them), else ``generic``.

A row lts cannot read (a cell not a number or out of range, an unknown metric, precision,
engine, quantization, arrival or kv_cache_dtype, an id used by an earlier row, a partial layout,
the wrong number of fields, control characters, a bad strategy, ...) is skipped with the reason,
``COLUMN: VALUE ...``, listed with the others (``read_measurements``; rows count from 1 after the
header); the other rows are predicted. A file that is not one raises one ``SpecError``:
``FILE: header: ...`` (not CSV, a missing or duplicate column) or ``FILE: holds no rows``.

Summary: count of predicted rows, median |log2(predicted/measured)|, share within 2x, and the
Spearman rank correlation inside each group of rows that differ only in the parallel config (same
model, topology, precision, engine, isl, osl, concurrency and metric; groups of >= 3 rows; groups
where either side is constant have no correlation and are left out of the mean); the same
summary for each metric and for each engine.

Cost: the rows are predicted in groups of one (model, topology, precision, engine, isl, osl), a
few evaluator calls each, vectorized over the group's rows.
"""
from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..engines import ENGINE_NAMES, ENGINES, GENERIC, engine_for_source, version_in_source
from ..engines.space import from_layout
from ..specs.errors import (LtsError, SpecError, StrategyError, count_problem, cut_quoted,
                            decimal, has_hidden, hidden_problem, plain)
from ..specs.limits import (MAX_CONCURRENCY, MAX_DEGREE, MAX_GPUS, MAX_MEASURED,
                           MAX_SIM_REQUESTS, MAX_TOKENS, MIN_MEASURED)
from . import two_pool
from .serve import serve
from ..specs import (exists, load_model, load_topology, path_problem, read_text, shipped_names,
                     with_precision)
from ..specs.strategy import (COARSE, CONCURRENCY, DEGREE_COLS, DEGREES, choices_of,
                             coarse_dict, instance_gpus, make_row, named_keys, parse_strategy)
from ..specs.units import KV_DTYPES, weight_format
from ..specs.versions import numbers

COLUMNS = ("id", "model", "topology", "gpus", "tp", "ep", "pp", "precision", "isl", "osl",
           "concurrency", "metric", "value", "source")
# optional: an engine's own layout (all four or none; engines.space.from_layout maps it) and the
# quantization of the GEMMs and the experts (shared/data/serving_moe.csv)
LAYOUT = ("attention_tp", "attention_dp", "moe_tp", "moe_ep")
QUANT_COLUMNS = ("gemm_quant", "moe_quant")
# optional: a two-pool deployment (shared/data/serving_disagg.csv), each pool's instances, the
# requests per attention-DP rank (prefill: prompts in one pass; decode: running at most) and the
# engine layout of one instance; with them gpus, tp, ep, pp may be absent (the pools say)
POOL_KEYS = ("num_workers", "batch_size", "tp_size", "pp_size", "attention_dp_size",
             "moe_tp_size", "moe_ep_size")
POOLS = ("prefill", "decode")
POOL_COLUMNS = tuple(f"{p}_{k}" for p in POOLS for k in POOL_KEYS)
POOL_OPTIONAL = ("gpus", "tp", "ep", "pp")
# their values, as precision's: any spelling of a weight format (units.weight_format; the files
# of shared/data write fp8, fp8_block, nvfp4)
# optional: how the row was measured (shared/data/README.md; docs/simulate.md): a row that says
# how its requests arrived (``arrival``) is predicted by simulating that run with its
# ``num_prompts``, ``range_ratio``, ``kv_cache_dtype``, ``max_num_batched_tokens`` and
# ``mem_fraction`` (``warmup_requests`` are awaited before the timed run: nothing to simulate).
# A burst only: a row has no column for a request rate
ARRIVALS = ("burst",)
# benchmarks whose protocol lts knows, for rows that name one (``benchmark``) without its
# settings: (arrival, range ratio, prompts per unit of concurrency), each from the tool's source
PROTOCOLS = {
    # NVIDIA/srt-slurm src/srtctl/benchmarks/sa_bench.py (build_command: random_range_ratio 0.8,
    # num_prompts_mult 10, num_warmup_mult 2, req_rate "inf") and scripts/sa-bench/bench.sh
    # (--max-concurrency C, --request-rate inf); shared/data/README.md says "about 5 x" for
    # the runs of serving_disagg.csv: the tool's default is taken
    "srt-slurm sa-bench": ("burst", 0.8, 10),
    # SemiAnalysisAI/InferenceX benchmarks/benchmark_lib.sh (--num-prompts $((CONC*10)),
    # --random-range-ratio 0.8, --request-rate inf)
    "inferencex benchmark_serving": ("burst", 0.8, 10),
}
METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_ms", "tpot_ms")
# each engine's profiles by release (scripts/calibrate.py replaces them while it fits); a row's
# engine_version picks the release (Engine.release_for)
PROFILES = {name: dict(e.profiles) for name, e in ENGINES.items()}
MIN_GROUP = 3
MAX_CSV_BYTES = 64 * 2**20   # a measurement file (100,000 rows are about 20 MB), as other inputs
MAX_ROWS = 150_000           # rows a file (100,000: lts validate 11.3 s, --json 18.0 s, 331 MiB)


@dataclass
class Measurement:
    """One parsed row of a measurement file."""
    row: int                 # data row number, from 1
    id: str
    model: str
    topology: str
    gpus: int
    tp: int
    ep: int
    pp: int
    precision: str           # "" = the model file's
    isl: int
    osl: int
    concurrency: int         # 0 = best batch
    metric: str
    value: float
    source: str
    strategy: str            # "" = the layout's, else Megatron at tp/ep/pp
    engine: str              # an lts.engines profile name
    layout: tuple = ()       # (attention_tp, attention_dp, moe_tp, moe_ep) or () when not given
    quant: str = ""          # the weight format gemm_quant/moe_quant name ("" = precision's)
    engine_version: str = ""
    pools: tuple = ()        # two pools: ((prefill POOL_KEYS values), (decode ...)) or ()
    bench: "Bench | None" = None   # how the run was measured (None: not said)


@dataclass(frozen=True)
class Bench:
    """A measured run's own settings (the benchmark columns): what ``serving.simulate``
    replays."""
    num_prompts: int
    arrival: str             # "burst": all created at once behind the concurrency limit
    range_ratio: float       # lengths uniform over [int(r L), L]
    kv_cache_dtype: str      # "" or "auto": the model's
    step_tokens: int         # the engine's token budget per step (0: its default)
    mem_fraction: float      # the engine's memory fraction (0: its default)


# the largest value of each integer column (lts.specs.limits)
MAX_CELL = {"tp": MAX_DEGREE, "ep": MAX_DEGREE, "pp": MAX_DEGREE, "gpus": MAX_GPUS,
            "isl": MAX_TOKENS, "osl": MAX_TOKENS, "concurrency": MAX_CONCURRENCY,
            "max_num_batched_tokens": MAX_TOKENS, "num_prompts": MAX_SIM_REQUESTS,
            **{c: MAX_GPUS for c in LAYOUT},
            **{c: MAX_CONCURRENCY if c.endswith("batch_size") else MAX_GPUS
               for c in POOL_COLUMNS}}


class _Skip(Exception):
    """A row lts cannot read or predict, with the reason (it is listed as skipped, not
    dropped)."""


def _int(col, text, allow_empty=False, default=0):
    text = text.strip()
    if not text and allow_empty:
        return default
    problem = count_problem(text, MAX_CELL[col])
    if problem:
        raise _Skip(f"{col}: {problem}")
    return int(text)


def read_measurements(path) -> tuple:
    """Parse and check a measurement CSV -> ([Measurement], [skipped row]). A row lts cannot
    read (a cell not a number or out of range, an unknown metric, precision, engine or
    quantization, an id used before, the wrong number of fields, control characters, ...) is
    skipped with the reason, as ``validate`` lists it: {"id", "row", "model", "topology",
    "reason"}, the cells as written (repr'd where they hold control characters). SpecError for
    the file: not a readable text file, not CSV, a missing or duplicate column, no data row."""
    file = str(path)
    text = read_text(Path(path), "a measurement .csv file", max_bytes=MAX_CSV_BYTES)
    # a stream, not text.splitlines(): a quoted line break stays in its cell (and is refused
    # below), where splitting first would join the cell's lines silently
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fieldnames = reader.fieldnames or []
    except csv.Error as e:
        raise SpecError(file, "header", f"not CSV ({e})") from None
    header = [h.strip().lstrip("\ufeff") for h in fieldnames]
    twice = [h for i, h in enumerate(header) if h and h in header[:i]]
    if twice:
        raise SpecError(file, "header", f"{twice[0]}: duplicate column")
    two_pools = any(c in header for c in POOL_COLUMNS)
    missing = [c for c in COLUMNS + (POOL_COLUMNS if two_pools else ())
               if c not in header and not (two_pools and c in POOL_OPTIONAL)]
    if missing:
        which = (f"two-pool rows take prefill_ and decode_ {', '.join(POOL_KEYS)}"
                 if missing[0] in POOL_COLUMNS else f"expected {', '.join(COLUMNS)}")
        raise SpecError(file, "header", f"{missing[0]}: missing column ({which}; the optional "
                                        "ones: docs/validation.md)")
    reader.fieldnames = header
    out, skipped, seen = [], [], {}
    rows = iter(reader)
    n = 0
    while True:
        n += 1
        try:
            raw = next(rows)
        except StopIteration:
            break
        except csv.Error as e:          # the reader goes on at the next line
            skipped.append(_skipped(n, {}, f"not CSV ({e})"))
            continue
        if n > MAX_ROWS:
            raise SpecError(file, "", f"over {MAX_ROWS:,} rows (docs/limits.md): split the file")
        try:
            out.append(_measurement(n, raw, len(header), seen))
        except _Skip as e:
            skipped.append(_skipped(n, raw, str(e)))
    if not out and not skipped:
        raise SpecError(file, "", "holds no rows (only a header)")
    return out, skipped


def row_problem(cells: dict) -> str:
    """Why ``read_measurements`` would skip a row of these cells (as a CSV writer writes them:
    each str(), None empty), or "" where it reads it: the check of every writer of measurement
    rows (``lts import``), so that what lts writes, lts validate reads."""
    raw = {k: "" if c is None else str(c) for k, c in cells.items()}
    try:
        _measurement(0, raw, len(raw), {})
    except _Skip as e:
        return str(e)
    return ""


def _skipped(n: int, raw: dict, why: str) -> dict:
    """A row read but not taken, as ``validate`` lists it: its id, model and topology cells
    (each repr'd where it holds control characters; "" where the row has none), the reason."""
    cells = {k: plain((v if isinstance(v, str) else "").strip())
             for k, v in raw.items() if k in ("id", "model", "topology")}
    return {"id": cells.get("id", ""), "row": n, "model": cells.get("model", ""),
            "topology": cells.get("topology", ""), "reason": why}


def _measurement(n: int, raw: dict, fields: int, seen: dict) -> Measurement:
    """Data row ``n`` of a measurement file (``raw``, csv.DictReader's, of a header of
    ``fields`` columns) -> its Measurement; ``seen``: the ids of the rows before (this one's
    added). _Skip with the reason the row cannot be read."""
    if None in raw or any(v is None for v in raw.values()):
        given = sum(v is not None for k, v in raw.items() if k is not None) \
            + len(raw.get(None) or [])
        raise _Skip(f"has {given} fields: expected {fields}, one per column of the header")
    r = {k: (v or "").strip() for k, v in raw.items()}
    for k, v in r.items():
        if has_hidden(v):
            raise _Skip(f"{k}: {hidden_problem(v)}")
    if not r["id"]:
        raise _Skip("id: '' is empty: expected a row identifier")
    if r["id"] in seen:
        raise _Skip(f"id: {cut_quoted(r['id'])} is also row {seen[r['id']]} (each row needs its "
                    "own id)")
    seen[r["id"]] = n
    strategy = r.get("strategy", "")
    given = [c for c in LAYOUT if r.get(c)]
    if given and len(given) < len(LAYOUT):
        missing = [c for c in LAYOUT if c not in given]
        raise _Skip(f"{missing[0]}: empty, but {given[0]} is given (the layout is all of "
                    f"{', '.join(LAYOUT)} or none)")
    layout = tuple(_int(c, r.get(c, "")) for c in LAYOUT) if given else ()
    pooled = [c for c in POOL_COLUMNS if r.get(c)]
    if pooled and len(pooled) < len(POOL_COLUMNS):
        missing = [c for c in POOL_COLUMNS if c not in pooled]
        raise _Skip(f"{missing[0]}: empty, but {pooled[0]} is given (a two-pool row fills "
                    "every prefill_ and decode_ column)")
    if pooled and (layout or strategy):
        raise _Skip(f"{'strategy' if strategy else LAYOUT[0]}: given with the two pools' "
                    "columns (a row is one pool or two)")
    pools = tuple(tuple(_int(f"{p}_{k}", r[f"{p}_{k}"]) for k in POOL_KEYS)
                  for p in POOLS) if pooled else ()
    tp = _int("tp", r.get("tp", ""), allow_empty=bool(strategy or layout or pools), default=1)
    ep = _int("ep", r.get("ep", ""), allow_empty=True, default=1)
    pp = _int("pp", r.get("pp", ""), allow_empty=True, default=1)
    gpus = _int("gpus", r.get("gpus", ""), allow_empty=bool(pools), default=0)
    isl, osl = _int("isl", r["isl"]), _int("osl", r["osl"])
    conc = _int("concurrency", r["concurrency"], allow_empty=True, default=0)
    if r["metric"] not in METRICS:
        raise _Skip(f"metric: {cut_quoted(r['metric'])} is not one of {', '.join(METRICS)}")
    if r["precision"]:
        _format("precision", r["precision"])
    try:
        value = decimal(r["value"])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and MIN_MEASURED <= value <= MAX_MEASURED):
        raise _Skip(f"value: {cut_quoted(r['value'])} is not a number from {MIN_MEASURED:g} to "
                    f"{MAX_MEASURED:g}")
    engine = r.get("engine", "").lower()
    engine = engine_for_source(engine) or engine if engine not in ENGINE_NAMES else engine
    if engine and engine not in ENGINE_NAMES:
        raise _Skip(f"engine: {cut_quoted(engine)} is not one of {', '.join(ENGINE_NAMES)} "
                    "(or empty)")
    engine = engine or engine_for_source(r["source"]) or GENERIC
    quants = {c: _format(c, r[c]) for c in QUANT_COLUMNS if r.get(c)}
    if len({_KIND.get(q, q) for q in quants.values()}) > 1:
        raise _Skip(f"gemm_quant {cut_quoted(r['gemm_quant'])} and moe_quant "
                    f"{cut_quoted(r['moe_quant'])} differ: lts costs one format for the "
                    "quantized weights")
    # two of one kind (fp8 GEMMs beside block-scaled fp8 experts): the experts' (_model_for
    # keeps a checkpoint of that kind as it ships)
    quant = quants.get("moe_quant") or quants.get("gemm_quant", "")
    version = r.get("engine_version", "") or version_in_source(r["source"], engine)
    bench = _bench(r, conc, pools)
    return Measurement(n, r["id"], r["model"], r["topology"], gpus, tp, ep, pp, r["precision"],
                       isl, osl, conc, r["metric"], value, r["source"], strategy, engine,
                       layout, quant, version, pools, bench)


def _format(col: str, cell: str) -> str:
    """A format cell (precision, gemm_quant, moe_quant) in any of its spellings -> its
    WEIGHT_FORMATS name (``units.weight_format``); _Skip listing what is accepted."""
    try:
        return weight_format(cell)
    except ValueError as e:
        raise _Skip(f"{col}: {e}") from None


def _fraction(col, text) -> float:
    try:
        x = decimal(text)
    except ValueError:
        x = math.nan
    if not (0.0 < x <= 1.0):
        raise _Skip(f"{col}: {cut_quoted(text)} is not a number in (0, 1]")
    return x


def _bench(r: dict, conc: int, pools) -> "Bench | None":
    """A row's benchmark settings (``Bench``) when it says how its requests arrived (or names a
    benchmark whose protocol lts knows, ``PROTOCOLS``) and has a concurrency; else None."""
    arrival = r.get("arrival", "").lower()
    known = PROTOCOLS.get(r.get("benchmark", "").lower())
    if not arrival and known is not None:
        arrival = known[0]
        r = {**r, "range_ratio": r.get("range_ratio") or str(known[1]),
             "num_prompts": r.get("num_prompts") or (str(known[2] * conc) if conc else "")}
    if not arrival:
        return None
    if arrival not in ARRIVALS:
        raise _Skip(f"arrival: {cut_quoted(arrival)} is not one of {', '.join(ARRIVALS)} "
                    "(or empty)")
    if not conc:
        return None
    prompts = _int("num_prompts", r.get("num_prompts", ""), allow_empty=True, default=10 * conc)
    ratio = _fraction("range_ratio", r["range_ratio"]) if r.get("range_ratio") else 1.0
    kv = r.get("kv_cache_dtype", "").lower()
    kv = "fp8" if kv.startswith("fp8") else "" if kv in ("", "auto") else kv
    if kv and kv not in KV_DTYPES:
        raise _Skip(f"kv_cache_dtype: {cut_quoted(kv)} is not one of auto, "
                    f"{', '.join(KV_DTYPES)} (or empty)")
    tokens = _int("max_num_batched_tokens", r.get("max_num_batched_tokens", ""),
                  allow_empty=True, default=0)
    frac = _fraction("mem_fraction", r["mem_fraction"]) if r.get("mem_fraction") else 0.0
    return Bench(prompts, arrival, ratio, kv, tokens, frac)


def _strategy_row(m: Measurement, model) -> tuple:
    """(strategy row, best batch?) for a measurement: its ``strategy``, else its engine layout,
    else Megatron's at tp/ep/pp. _Skip where the strategy does not parse or the layout is not
    one lts costs."""
    if m.strategy:
        try:
            row = parse_strategy(m.strategy, model.is_moe)
        except StrategyError as e:
            raise _Skip(f"strategy: {cut_quoted(m.strategy)}: {str(e).split(': ', 1)[1]}") from None
        named_batch = "batch" in named_keys(m.strategy)
    elif m.layout:
        try:
            tp, ep, choices, etp = from_layout(model, *m.layout)
        except ValueError as e:
            raise _Skip(f"layout {'/'.join(map(str, m.layout))} (attention tp/dp, moe tp/ep): "
                        f"{e}") from None
        row, named_batch = make_row(choices, tp=tp, ep=ep, etp=etp), False
    else:
        row, named_batch = make_row(tp=m.tp, ep=m.ep, pp=m.pp), False
    if m.concurrency:
        row[CONCURRENCY] = m.concurrency
    return row, not (m.concurrency or named_batch)


# weight formats of one kind: a row's quantization names the kind a checkpoint's format is of
# (int4 weight-only: AWQ's and GPTQ's groups of 128, Kimi-K2.5's of 32, the kernel tables' int4_wo)
_KIND = {"fp8": "fp8", "fp8_block": "fp8", "mxfp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4", "w4a16": "int4",
         "w4a16_zp": "int4", "w4a16_g32": "int4"}


class _Loader:
    """A measurement file's ``model`` or ``topology`` cells: a shipped name, else a file or
    config folder (a relative path resolves against the CSV's folder), each loaded once; a cell
    that does not load is a skip reason (``why``), never a crash."""

    def __init__(self, what: str, kind: str, load, where: Path):
        self.what, self.load, self.where = what, load, where
        self.shipped = set(shipped_names(kind))
        self.loaded, self.errors = {}, {}

    def why(self, cell: str) -> str:
        """The reason a cell cannot be loaded ("" when it can)."""
        if cell not in self.loaded and cell not in self.errors:
            ref = cell if cell in self.shipped or Path(cell).is_absolute() else \
                str(self.where / cell)
            if cell not in self.shipped and path_problem(ref):
                self.errors[cell] = f"{self.what} {cut_quoted(cell)}: {path_problem(ref)}"
            elif cell not in self.shipped and not exists(ref):
                self.errors[cell] = (f"{self.what} {cut_quoted(cell)} is not shipped, nor a "
                                     "file or folder "
                                     f"(relative paths resolve against {self.where})")
            else:
                try:
                    self.loaded[cell] = self.load(ref)
                except SpecError as e:
                    self.errors[cell] = f"{self.what} {cut_quoted(cell)}: {e}"
        return self.errors.get(cell, "")

    def get(self, cell: str):
        return self.loaded[cell]


def _pool_rows(m: Measurement, model) -> tuple:
    """(prefill row, decode row) of a two-pool measurement: each pool's engine layout
    (``engines.space.from_layout``); _Skip where lts does not cost it."""
    rows = []
    for name, (workers, batch, tp, pp, adp, mtp, mep) in zip(POOLS, m.pools):
        if pp != 1:
            raise _Skip(f"{name} pool: pp {pp} (lts costs the engine layouts of one stage)")
        try:
            t, e, choices, etp = from_layout(model, tp, adp, mtp, mep)
        except ValueError as err:
            raise _Skip(f"{name} pool layout {tp}/{adp}/{mtp}/{mep} (attention tp/dp, moe "
                        f"tp/ep): {err}") from None
        rows.append(make_row(choices, tp=t, ep=e, etp=etp))
    return tuple(rows)


def _model_for(spec, precision: str, quant: str):
    """The model a row's ``precision`` or quantization columns describe. The quantization
    columns name the weights only: a checkpoint whose own format is of the same kind (fp8 per
    tensor or block-scaled; NVFP4 or MXFP4) is costed as it ships (gpt-oss-120b's MXFP4 in a
    row saying nvfp4); another kind replaces the quantized groups' format
    (``specs.with_precision``) and the KV cache stays the model's (the rows do not record it;
    the engines' default, "auto", is the model's)."""
    if quant:
        if _KIND.get(quant, quant) == _KIND.get(spec.precision.weights, spec.precision.weights):
            return spec
        return with_precision(spec, quant, kv_cache=spec.precision.kv_cache)
    return with_precision(spec, precision) if precision else spec


def _profile_of(engine: str, release: tuple, topo):
    """The engine's profile of ``release`` = (profile release, the row's engine version) on
    ``topo``'s GPU, reading the measured kernels of that version (``EngineProfile.kernels``)."""
    return PROFILES[engine][release[0]].for_gpu(topo).with_kernels(release[1])


def _record(m: Measurement, spec, engine: str, release: str, p: float, **parallel) -> dict:
    """One predicted row of ``validate``'s output: the measurement, the model's formats, the
    prediction and its ratio, and ``parallel`` (gpus, the coarse axes (tp, ep, pp, batch),
    best_batch, running, strategy, layout; two pools: the degrees None and their ``pools``), in
    that order."""
    out = {"id": m.id, "model": m.model, "topology": m.topology,
           "precision": m.precision or spec.precision.weights,
           "weights": spec.precision.weights, "kv_cache": spec.precision.kv_cache}
    # an axis a measurement does not give (dcp) is 1 on a one-pool row, None on a two-pool one
    one = parallel.get("tp") is not None
    out.update({k: parallel.pop(k, 1 if one else None) for k in ("gpus", *COARSE, "best_batch")})
    out.update({"isl": m.isl, "osl": m.osl, "concurrency": m.concurrency or None,
                "metric": m.metric, "engine": engine, "running": parallel.pop("running"),
                "predicted": p, "measured": m.value, "ratio": p / m.value,
                "log2_ratio": math.log2(p / m.value), "strategy": parallel.pop("strategy"),
                "layout": parallel.pop("layout"), "engine_version": m.engine_version or None,
                "profile": release})
    out.update(parallel)
    return out


# What predicting rows costs, counted before any is predicted (``work_s``): each simulated
# deployment builds its step tables once (``simulate.prepare``, or ``two_pool_sim``'s pair), each
# distinct run simulates its requests, each closed-loop group is one ``serve`` call (a search
# over the batch where the row names no concurrency). Measured on the development machine (2
# cores, 2026-11-29), each figure the largest of the shipped files' means:
# - a deployment's step tables: 0.15-0.26 s (MiniMax-M2.5 on B200 tp=4, vLLM, isl/osl 1,024-8,192);
# - a simulated request: 33 us (MiniMax-M2.5 on B200 rows of serving_moe.csv), 45 us (all of
#   serving_moe.csv), 10-140 us over C 1-1,024 (most at small C, or with the KV cache full);
#   one of two pools: ~3 us (serving_disagg.csv, 1.03 M requests in 59 runs, 11.7 s in all);
# - a serve call: 22 ms (serving_calibration.csv, 32 groups), 53 ms searching the batch
#   (calibration.csv, 144 groups).
PREPARE_S = 0.2
REQUEST_S = 6e-5
STEPS_PER_REQUEST = 4   # a simulated run's count covers this many scheduler steps a request and
STEPS_PER_RUN = 1_000   # this many more: serving_moe.csv's ~600 runs take 1.18 M for 459,200
                        # requests (2.6 a request; at C = 4, 690 for 40), 37,000 past these
STEP_S = 6e-6           # a step past them: a KV cache that preempts without end takes ~5 us a
                        # step (2,000 requests of 100 in, 120,000 out at C = 2,000 on llama3.1-8b,
                        # one H100, vLLM: 2,500,000 steps in 12.5 s); counted as the run goes,
                        # against what is left of WORK_S, which bounds each run's steps
POOL_REQUEST_S = 1e-5
GROUP_S = 0.03
BEST_GROUP_S = 0.08
ROW_S = 6e-5         # a row's grouping and record (100,000 rows: 6 s beside 5.2 s of reading)
READ_S = 5.2e-5      # a row read (read_measurements; 100,000 rows: 5.2 s)
# the predictions one ``lts validate`` makes, in work_s's seconds (the count is 1-1.7x the time
# measured here: all of serving_moe.csv 58 counted, 41 s measured; 1,000 rows each its own
# closed-loop group 30 counted, 21.7 s); the rows of the groups past it are skipped with the reason
WORK_S = 60.0


def over(bound_s: float | None = None) -> str:
    """Why a row past the bound of predictions (``WORK_S``, or a caller's) is skipped."""
    if bound_s is None:
        return (f"past lts validate's bound of {WORK_S:.0f} s of predictions a file "
                "(docs/limits.md): split the file")
    return (f"past the bound of {bound_s:.1f} s of predictions this command has for the file "
            "(docs/limits.md): split the file")


def _over(items, skipped: dict, why: str) -> None:
    """The rows of a group past the bound: skipped, with the reason."""
    for m, *_ in items:
        skipped[m.row] = why


def _run_s(key, items) -> float:
    """A simulated deployment's count: its step tables and its distinct runs' requests."""
    distinct = {(m.concurrency, m.bench.num_prompts): m.bench.num_prompts for m, _ in items}
    return PREPARE_S + (POOL_REQUEST_S if key[9] == "pools" else REQUEST_S) * \
        sum(distinct.values())


def _group_s(best: bool) -> float:
    """A closed-loop group's count: one serve call (searching the batch where ``best``)."""
    return BEST_GROUP_S if best else GROUP_S


def work_s(runs: dict, pooled: dict, jobs: dict) -> float:
    """The seconds predicting these groups (``validate``'s, by kind) takes here, about."""
    return (sum(_run_s(key, items) for key, items in runs.items()) + GROUP_S * len(pooled)
            + sum(_group_s(key[6]) for key in jobs))


SIM_METRICS = {"ttft_ms": lambda s: s["ttft_ms"]["mean"], "tpot_ms": lambda s: s["tpot_ms"]["mean"],
               "output_tokens_per_s": lambda s: s["output_tokens_per_s"]}


def _simulated(spec, topo, prof, bench: Bench, items, two: bool = False,
               left_s: float = math.inf, why_over: str = ""):
    """((measurement, record fields, skip reason) of the rows of one deployment that say how
    they were measured, the seconds of work past their count, of it the runs' that ended):
    each distinct run (concurrency, number of prompts) simulated once (``serving.simulate``;
    ``two``: two pools, ``serving.two_pool_sim``, the items' rows a (prefill, decode) pair),
    its mean TTFT, TPOT or output tokens/s compared. A run's steps past ``STEPS_PER_REQUEST``
    a request and ``STEPS_PER_RUN`` count ``STEP_S`` each against ``left_s``; a run that would
    pass it stops there, its rows skipped (``why_over``). A two-pool run reserves each
    request's room: it never preempts, and its events are a few a request."""
    from .simulate import Load, TooManySteps, prepare, run
    from .two_pool import ranks
    from .two_pool_sim import prepare_pools, run_pools
    if bench.kv_cache_dtype:
        spec = with_precision(spec, None, kv_cache=bench.kv_cache_dtype)
    if bench.step_tokens:
        prof = replace(prof, step_tokens=bench.step_tokens)
    prof = prof.with_memory_fraction(bench.mem_fraction)
    m0, row = items[0]
    loads = {}
    for m, _ in items:
        prompts = m.bench.num_prompts
        loads[(m.concurrency, prompts)] = Load(
            isl=m.isl, osl=m.osl, num_prompts=prompts, max_concurrency=m.concurrency,
            range_ratio=bench.range_ratio, seed=0)
    gpus = 0
    try:
        if two:
            (pw, _, *_), (dw, dbatch, *_) = m0.pools
            pre, dec = row
            dep = prepare_pools(spec, topo, prof, pre, pw, dec, dw,
                                dbatch * int(ranks(spec, dec[None, :])[0]), list(loads.values()))
            gpus = sum(w * int(instance_gpus(r)) for w, r in ((pw, pre), (dw, dec)))
        else:
            dep = prepare(spec, topo, row, prof, list(loads.values()))
    except LtsError as e:
        return [(m, None, f"simulation: {e}") for m, _ in items], 0.0, 0.0
    done = {}
    out = []
    extra_s = done_s = 0.0
    for m, _ in items:
        k = (m.concurrency, m.bench.num_prompts)
        if k not in done:
            paid = STEPS_PER_REQUEST * k[1] + STEPS_PER_RUN
            try:
                if two:
                    done[k] = run_pools(dep, loads[k]).summary()
                else:
                    left = max(left_s - extra_s, 0.0)
                    r = run(dep, loads[k], max_loops=paid + int(min(left / STEP_S, 1e12)))
                    extra_s += STEP_S * max(r.loops - paid, 0)
                    done_s += STEP_S * max(r.loops - paid, 0)
                    done[k] = r.summary()
            except TooManySteps as e:   # past simulate's bound of steps, or the file's
                extra_s += STEP_S * max(e.steps - paid, 0)
                done[k] = why_over if e.caller else f"simulation: {e}"
            except LtsError as e:
                done[k] = f"simulation: {e}"
        s = done[k]
        if isinstance(s, str):
            out.append((m, None, s))
            continue
        if m.metric not in SIM_METRICS:
            out.append((m, None, f"{m.metric}: not predicted by a simulation yet"))
            continue
        spread = s[m.metric] if isinstance(s.get(m.metric), dict) else {}
        out.append((m, {"value": float(SIM_METRICS[m.metric](s)), "running": m.concurrency,
                        "predicted_by": "simulation", **({"gpus": gpus} if two else {}),
                        "simulated": {"requests": s["requests"], "preemptions": s["preemptions"],
                                      "kv_peak_share": s["kv_peak_share"],
                                      **{p: spread[p] for p in ("p50", "p90", "p99")
                                         if p in spread}}}, ""))
    return out, extra_s, done_s


def _predicted(res, i, metric):
    return {"output_tokens_per_s": res.output_tokens_per_s[i],
            "output_tokens_per_s_per_gpu": res.output_tokens_per_s_per_gpu[i],
            "ttft_ms": res.ttft_s[i] * 1e3, "tpot_ms": res.tpot_s[i] * 1e3}[metric]


def _ranks(v) -> np.ndarray:
    """Ranks from 0, ties sharing their mean rank."""
    v = np.asarray(v, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    _, first, counts = np.unique(v[order], return_index=True, return_counts=True)
    r = np.empty(len(v))
    r[order] = np.repeat(first + (counts - 1) / 2.0, counts)
    return r


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties); nan if either side is constant."""
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / den if den > 0 else math.nan


def validate(path, progress=None, by: tuple = (), tune=None, only=None,
             steady: bool = False, work_only: bool = False, read=None,
             bound_s: float | None = None, meter: dict | None = None):
    """Predict every row of a measurement file; the JSON dict of ``lts validate --json``
    (with ``by``, row keys of ``BY_KEYS``: the residuals by those keys and the metric).

    ``progress``: a progress bar's callback (``report.format.progress``): ``set_total(groups)`` once,
    then ``progress(1)`` after each prediction group. ``tune``: (topology, engine profile) ->
    the pair to predict with (``serving.calibrate``'s fitted constants, an engine overlay).
    ``only``: the row ids to predict (the others are left out, as if not in the file).
    A row that says how it was measured (``Bench``) is predicted by simulating its run
    (``serving.simulate``; its record says ``"predicted_by": "simulation"``), unless ``steady``:
    then, as every other row, by the closed loop's steady state. ``work_only``: predict
    nothing; the seconds predicting them would take, about (``work_s``, and ``ROW_S`` a row).
    ``read``: the file's ``read_measurements``, read once by a caller that predicts it often.
    ``bound_s``: the work (``work_s``'s seconds) predicting may take, ``WORK_S`` unless given:
    the groups past it, and the runs that would step past it, are skipped with the reason.
    ``meter``: where given, ``meter["work_s"]`` is set to the work counted (``work_s`` of the
    groups predicted and the steps their runs took past their count), ``meter["extra_s"]`` to
    those steps' share of the runs whose rows were predicted."""
    file = str(path)
    meas, unread = read_measurements(path) if read is None else read
    if only is not None:
        meas = [m for m in meas if m.id in only]
        unread = [u for u in unread if u["id"] in only]
    where = Path(path).resolve().parent
    models = _Loader("model", "models", load_model, where)
    topos = _Loader("topology", "topologies", load_topology, where)
    skipped, jobs = {}, defaultdict(list)    # (model, topo, precision, isl, osl, best, engine)
    pooled = defaultdict(list)               # two-pool rows, by (model, ..., engine, release)
    runs = defaultdict(list)                 # simulated rows, by deployment (_sim_key)
    specs = {}
    for m in meas:
        why = models.why(m.model) or topos.why(m.topology)
        if m.metric == "tpot_ms" and m.osl < 2:
            why = "tpot_ms at osl 1: a request of one output token has no time per output token"
        if why:
            skipped[m.row] = why
            continue
        key = (m.model, m.precision, m.quant)
        if key not in specs:
            specs[key] = _model_for(models.get(m.model), m.precision, m.quant)
        why = specs[key].window_excess(m.isl + m.osl, f"isl + osl = {m.isl:,} + {m.osl:,} tokens")
        if why:
            skipped[m.row] = why
            continue
        why = ENGINES[m.engine].vendor_problem(topos.get(m.topology), m.topology)
        if why:             # as lts estimate and search refuse it
            skipped[m.row] = why
            continue
        # the profile's release and the row's own version (the measured kernels' release)
        release = (ENGINES[m.engine].release_for(m.engine_version), m.engine_version)
        if m.pools:
            if not m.concurrency:
                skipped[m.row] = "two pools are predicted at a concurrency: the cell is empty"
                continue
            try:
                pre, dec = _pool_rows(m, specs[key])
            except _Skip as e:
                skipped[m.row] = str(e)
                continue
            used = sum(w * int(instance_gpus(r)) for (w, *_), r in zip(m.pools, (pre, dec)))
            if m.gpus and used != m.gpus:
                skipped[m.row] = f"the pools use {used} GPUs but gpus = {m.gpus}"
                continue
            if m.bench is not None and not steady:
                runs[(m.model, m.topology, m.precision, m.quant, m.isl, m.osl, m.engine,
                      release, replace(m.bench, num_prompts=0), "pools",
                      m.pools)].append((m, (pre, dec)))
                continue
            pooled[(m.model, m.topology, m.precision, m.quant, m.isl, m.osl, m.engine,
                    release)].append((m, pre, dec))
            continue
        try:
            row, best = _strategy_row(m, specs[key])
        except _Skip as e:
            skipped[m.row] = str(e)
            continue
        used = int(instance_gpus(row))
        if used != m.gpus:
            skipped[m.row] = f"{'·'.join(DEGREES)} = {used} but gpus = {m.gpus}"
            continue
        if m.bench is not None and not steady:
            runs[(m.model, m.topology, m.precision, m.quant, m.isl, m.osl, m.engine, release,
                  replace(m.bench, num_prompts=0), choices_of(row),
                  tuple(int(row[c]) for c in DEGREE_COLS))].append((m, row))
            continue
        jobs[(m.model, m.topology, m.precision, m.quant, m.isl, m.osl, best, m.engine,
              release)].append((m, row))
    if work_only:
        return work_s(runs, pooled, jobs) + ROW_S * len(meas)
    topo_specs = {name: topos.get(name) for name in {k[1] for k in (*jobs, *pooled, *runs)}}
    predicted = {}
    if progress:
        progress.set_total(len(jobs) + len(pooled) + len(runs))
    spent = ROW_S * len(meas)      # work_s of the rows and of the groups predicted so far
    bound = WORK_S if bound_s is None else bound_s
    why_over = over(bound_s)

    pending = work_s(runs, pooled, jobs)    # the counts of the groups not yet reached
    extra_done = 0.0                        # the steps past their count of runs predicted

    def within(cost, items) -> bool:
        """Whether a group of this cost is predicted: else its rows are skipped (``_over``)."""
        nonlocal spent, pending
        pending -= cost
        if spent + cost > bound:
            _over(items, skipped, why_over)
            if progress:
                progress(1)
            return False
        spent += cost
        return True
    for key, items in runs.items():
        model, topo, prec, quant, isl, osl, engine, release, bench = key[:9]
        if not within(_run_s(key, items), items):
            continue
        spec, t = specs[(model, prec, quant)], topo_specs[topo]
        prof = _profile_of(engine, release, t)
        if tune is not None:
            t, prof = tune(t, prof)
        two = key[9] == "pools"
        # steps past the runs' count come from what the counts of every group leave
        out, extra_s, done_s = _simulated(spec, t, prof, bench, items, two,
                                          bound - spent - max(pending, 0.0), why_over)
        spent += extra_s
        extra_done += done_s
        for m, rec, why in out:
            if why:
                skipped[m.row] = why
                continue
            if two:
                parallel = dict(gpus=rec.pop("gpus"), **dict.fromkeys(DEGREES), strategy=None,
                                layout=None, pools={name: dict(zip(POOL_KEYS, vals))
                                                    for name, vals in zip(POOLS, m.pools)})
            else:
                parallel = dict(gpus=m.gpus, **dict(zip(DEGREES, key[-1])),
                                strategy=m.strategy or None, layout=list(m.layout) or None)
            predicted[m.row] = _record(
                m, spec, engine, release[0], rec.pop("value"), batch=m.concurrency,
                best_batch=False, running=rec.pop("running"), **parallel, **rec)
        if progress:
            progress(1)
    for (model, topo, prec, quant, isl, osl, engine, release), items in pooled.items():
        if not within(GROUP_S, items):
            continue
        spec, t = specs[(model, prec, quant)], topo_specs[topo]
        prof = _profile_of(engine, release, t)
        if tune is not None:
            t, prof = tune(t, prof)
        pre, dec = (np.stack([r[j] for _, *r in items]) for j in (0, 1))
        pick = lambda j, w: np.array([m.pools[j][w] for m, _, _ in items])  # noqa: E731
        # batch_size is per attention-DP rank: an instance's prompts per pass and slots
        res = two_pool.estimate(spec, t, prof,
                                pre, pick(0, 0), pick(0, 1) * two_pool.ranks(spec, pre),
                                dec, pick(1, 0), pick(1, 1) * two_pool.ranks(spec, dec),
                                isl, osl, [m.concurrency for m, _, _ in items])
        if progress:
            progress(1)
        for i, (m, pre, dec) in enumerate(items):
            if not res.valid[i]:
                skipped[m.row] = "prediction invalid: " + ", ".join(res.reason_list(i))
                continue
            predicted[m.row] = _record(
                m, spec, engine, release[0], float(_predicted(res, i, m.metric)),
                gpus=int(res.gpus[i]), **dict.fromkeys(DEGREES), batch=m.concurrency,
                best_batch=False, running=int(round(float(res.running[i]))), strategy=None,
                layout=None, pools={name: dict(zip(POOL_KEYS, vals))
                                    for name, vals in zip(POOLS, m.pools)})
    for (model, topo, prec, quant, isl, osl, best, engine, release), items in jobs.items():
        if not within(_group_s(best), items):
            continue
        rows = np.stack([row for _, row in items])
        spec, t = specs[(model, prec, quant)], topo_specs[topo]
        prof = _profile_of(engine, release, t)
        if tune is not None:
            t, prof = tune(t, prof)
        res = serve(spec, t, rows, isl, osl, best_batch=best, engine=prof)
        if progress:
            progress(1)
        for i, (m, _) in enumerate(items):
            if not res.valid[i]:
                skipped[m.row] = ("prediction invalid: " + ", ".join(res.reason_list(i))
                                 + f" (batch {int(res.strategies[i, CONCURRENCY])})")
                continue
            predicted[m.row] = _record(
                m, spec, engine, release[0], float(_predicted(res, i, m.metric)), gpus=m.gpus,
                **coarse_dict(res.strategies[i]), best_batch=best, running=int(res.running[i]),
                strategy=m.strategy or None, layout=list(m.layout) or None)
    if meter is not None:
        meter["work_s"], meter["extra_s"] = spent, extra_done
    rows = [predicted[m.row] for m in meas if m.row in predicted]
    skips = sorted(unread + [{"id": m.id, "row": m.row, "model": m.model, "topology": m.topology,
                              "reason": skipped[m.row]} for m in meas if m.row in skipped],
                   key=lambda u: u["row"])
    out = {"file": file, "rows": rows, "skipped": skips, "summary": summarize(rows),
           "total": len(meas) + len(unread)}
    if by:
        out["residuals"] = {"by": list(by), "groups": residuals(rows, tuple(by))}
    return out


def unread_versions(rows: list) -> str:
    """The note for predicted rows whose engine_version lts cannot read as a release (no
    leading number: '[1]', 'nightly', a number of 30 digits; over 40 characters): each is
    predicted with the release ``Engine.release_for`` reads in it, its engine's served one
    where none (tests/test_versions.py); "" for none."""
    odd = [r for r in rows if r["engine_version"] and not (
        len(r["engine_version"]) <= 40 and numbers(r["engine_version"]))]   # (as --engine's)
    if not odd:
        return ""
    r = odd[0]
    return (f"Note: {len(odd):,} {'rows name' if len(odd) != 1 else 'row names'} an engine "
            f"version lts cannot read as a release ({plain(r['id'])}: "
            f"{cut_quoted(r['engine_version'])}): "
            f"each is predicted with the release lts reads in it, else its engine's served one "
            f"({r['engine']} {r['profile']} for that one)")


def none_predicted(file, skipped: list) -> str:
    """The one line for a file no row of which could be predicted (``skipped``: every row, as
    ``validate`` lists them): how many, and the first one's reason."""
    first = skipped[0]
    return (f"no row of {plain(str(file))} could be predicted ({len(skipped)} skipped; row "
            f"{first['row']}: {first['reason']})")


# the row keys ``lts validate --by`` groups the residuals by
BY_KEYS = ("model", "topology", "engine", "profile", "precision", "weights", "gpus", *DEGREES,
           "isl", "osl", "concurrency")


def residuals(rows: list, by: tuple) -> list:
    """The signed residual log2(predicted / measured) of the rows grouped by the ``by`` keys and
    the metric: [{"metric", "key": {k: value}, "count", "median_log2_ratio" (signed: > 0
    predicted high), "median_abs_log2_ratio", "within_2x"}], in order of metric then key."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["metric"],) + tuple(r[k] for k in by)].append(r["log2_ratio"])

    def order(item):
        return tuple((v is None, v if isinstance(v, (int, float)) else str(v)) for v in item[0])
    out = []
    for key, v in sorted(groups.items(), key=order):
        a = np.asarray(v)
        out.append({"metric": key[0], "key": dict(zip(by, key[1:])), "count": len(v),
                    "median_log2_ratio": float(np.median(a)),
                    "median_abs_log2_ratio": float(np.median(np.abs(a))),
                    "within_2x": float(np.mean(np.abs(a) <= 1.0))})
    return out


def summarize(rows: list, split: bool = True) -> dict:
    """count, median |log2 ratio|, share within 2x, Spearman per parallel-config group; with
    ``split``, the same for each metric (``by_metric``), engine (``by_engine``) and model
    (``by_model``)."""
    groups = _groups(rows)
    d = _summary(rows, groups)
    if split:
        for key, name in (("metric", "by_metric"), ("engine", "by_engine"), ("model", "by_model")):
            d[name] = {v: _summary([r for r in rows if r[key] == v],
                                   [g for g in groups if g[key] == v])
                       for v in sorted({r[key] for r in rows})}
    return d


def _groups(rows: list) -> list:
    """Spearman rank correlation of each group of >= MIN_GROUP rows that differ only in the
    parallel config (same model, topology, precision, engine, isl, osl, concurrency, metric)."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["model"], r["topology"], r["precision"], r["engine"], r["isl"], r["osl"],
                r["concurrency"], r["metric"])].append(r)
    out = []
    for (model, topo, prec, engine, isl, osl, conc, metric), g in groups.items():
        if len(g) < MIN_GROUP:
            continue
        rho = spearman([r["predicted"] for r in g], [r["measured"] for r in g])
        # whole-instance throughput grows with the GPU count almost by construction; per GPU
        # says whether the model ranks the configs' efficiency (tokens/s per GPU) right
        per = metric == "output_tokens_per_s"
        rho_gpu = spearman(*([r[k] / (r["gpus"] if per else 1) for r in g]
                             for k in ("predicted", "measured"))) if per else rho
        out.append({"model": model, "topology": topo, "precision": prec, "engine": engine,
                    "isl": isl, "osl": osl, "concurrency": conc, "metric": metric,
                    "ids": [r["id"] for r in g], "spearman": _finite(rho),
                    "spearman_per_gpu": _finite(rho_gpu)})
    return out


def _summary(rows: list, groups: list) -> dict:
    if not rows:
        return {"count": 0, "median_abs_log2_ratio": None, "within_2x": None,
                "spearman_by_group": {"mean": None, "mean_per_gpu": None, "groups": []}}
    a = np.abs([r["log2_ratio"] for r in rows])

    def mean(key):
        vals = [g[key] for g in groups if g[key] is not None]
        return float(np.mean(vals)) if vals else None
    return {"count": len(rows), "median_abs_log2_ratio": float(np.median(a)),
            "within_2x": float(np.mean(a <= 1.0)),
            "spearman_by_group": {"mean": mean("spearman"),
                                  "mean_per_gpu": mean("spearman_per_gpu"), "groups": groups}}


def _finite(x):
    return x if math.isfinite(x) else None
