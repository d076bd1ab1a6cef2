"""``lts import``: benchmark outputs -> measurement rows ``lts validate`` reads (issue 25).

Each reader takes the file a benchmark tool writes and returns its runs, one dict each: the
concurrency, the mean input and output tokens per request and the mean TTFT, TPOT and output
tokens/s. What the files do not carry (the model, the cluster, the parallel layout, the engine
and its version) comes from the command line (``rows``). Formats, read from the tools' own
releases:

- ``vllm``: ``vllm bench serve --save-result`` (vllm 0.19.0 vllm/benchmarks/serve.py: one JSON
  object, or one a line with ``--append-result``): ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``max_concurrency``, ``mean_ttft_ms``, ``mean_tpot_ms``,
  ``output_throughput``; the version from ``--metadata`` pairs when given (none by default).
- ``sglang``: ``python -m sglang.benchmark.serving`` (``sglang.bench_serving``; sglang 0.5.23
  sglang/benchmark/serving.py: a JSON line appended per run to ``--output-file``): the same
  keys, and ``server_info.version`` where the server reports it.
- ``aiperf``: ``profile_export_aiperf.json`` (aiperf 0.13.0 aiperf/exporters/
  metrics_json_exporter.py, JsonMetricResult ``{"unit", "avg", ...}`` per metric tag):
  ``time_to_first_token``, ``inter_token_latency``, ``output_token_throughput``,
  ``input_sequence_length``, ``output_sequence_length``; the concurrency from ``input_config``.
- ``genai-perf``: ``*_genai_perf.json`` (genai-perf 0.0.16 genai_perf/export_data/
  json_exporter.py: the metric stats and ``input_config``): the same metric names.

How each run was made, where the file says it (``lts validate`` then simulates that run,
docs/simulate.md): ``benchmark`` (the tool), ``num_prompts`` (``completed``), ``arrival``
(``burst``: ``request_rate`` inf behind ``max_concurrency``, every request created at once) and,
from SGLang's result, ``range_ratio`` with its ``random_input_len`` and ``random_output_len`` as
isl and osl (lengths uniform over [int(r L), L], sglang/benchmark/serving.py
``sample_random_requests``; the means of the totals otherwise). vLLM's result records no range
ratio (its random dataset spreads lengths around L when given one): its rows say none.

The TPOT of aiperf and genai-perf is their ``inter_token_latency`` (the time between output
tokens after the first, per request), vLLM's and SGLang's ``mean_tpot_ms`` the same quantity.
A run without a fixed concurrency (an open request rate) is refused: ``lts validate`` predicts
closed loops.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..engines import ENGINE_NAMES
from ..specs.errors import SpecError, cut_quoted, has_hidden, hidden_problem
from ..specs import read_text
from ..specs.model import check_json_containers, parse_json
from ..specs.limits import MAX_CONCURRENCY, MAX_MEASURED

FORMATS = ("vllm", "sglang", "aiperf", "genai-perf")
MAX_VALUE = MAX_MEASURED          # the largest number a result may hold, as validate reads
MAX_BYTES = 2**26                 # a benchmark file, 64 MiB as every input file (docs/limits.md;
                                  # per-request vLLM output is MBs): a 63 MiB result 2.9 s, 0.54 GB
MAX_RUNS = 10_000                 # runs (sweep points) one result file holds: a benchmark
                                  # sweep has tens; 10,000 JSONL runs read in ~2 s
TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}   # -> ms


def _objects(path: Path) -> list:
    """The JSON objects of a file: one document, or one a line (JSONL)."""
    text = read_text(path, "a benchmark result (.json or .jsonl)", max_bytes=MAX_BYTES)
    check_json_containers(path, "", text)        # the whole file: its lines are kept together
    try:
        data = _loads(path, "", text)
        if isinstance(data, list) and len(data) > MAX_RUNS:
            raise SpecError(path, "", f"{len(data):,} runs, more than the {MAX_RUNS:,} a file "
                                      "holds")
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if len(out) >= MAX_RUNS:      # (a 64 MiB file of "{}" lines: 10 M objects, minutes)
            raise SpecError(path, f"line {n}", f"more than {MAX_RUNS:,} runs in one file")
        if line.strip():
            try:
                out.append(_loads(path, f"line {n}", line))
            except json.JSONDecodeError as e:
                raise SpecError(path, f"line {n}", f"not JSON ({e.msg})") from None
    if not out:
        raise SpecError(path, "", "holds no JSON")
    return out


def _loads(path, where: str, text: str):
    """``specs.model.parse_json`` (JSONDecodeError passes through)."""
    return parse_json(path, where, text, "a benchmark result needs a few")


def detect(obj: dict) -> str:
    """The tool that wrote a result object (one of FORMATS), or ""."""
    if not isinstance(obj, dict):
        return ""
    if "aiperf_version" in obj or "schema_version" in obj and "time_to_first_token" in obj:
        return "aiperf"
    if "time_to_first_token" in obj and "input_config" in obj:
        return "genai-perf"
    if "mean_ttft_ms" in obj and ("server_info" in obj or "random_input_len" in obj
                                  or "dataset_name" in obj):
        return "sglang"
    if "mean_ttft_ms" in obj:
        return "vllm"
    return ""


def _server_version(path, where, obj) -> str:
    """The version an SGLang result's ``server_info`` reports ("" where none): a JSON string
    (a list or a number there was written as its text)."""
    info = obj.get("server_info")
    version = info.get("version", "") if isinstance(info, dict) else ""
    if not isinstance(version, str):
        raise SpecError(path, where, f"server_info.version: {cut_quoted(version)} is not a "
                                     "version (a JSON string)")
    if hidden_problem(version):         # (written as its escapes, it read back as another)
        raise SpecError(path, where, f"server_info.version: {hidden_problem(version)}")
    return version


def _num(path, where, obj, key):
    """A positive, finite number of a result (a time, a count, a rate)."""
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(path, where, f"{key}: {cut_quoted(v)} is not a number (is this a "
                                     f"{'/'.join(FORMATS)} result?)")
    if not (0 < v <= MAX_VALUE and math.isfinite(v)):      # (a huge int overflows isfinite)
        raise SpecError(path, where, f"{key}: {cut_quoted(v)} is not a positive number up to "
                                     f"{MAX_VALUE:g}")
    return float(v)


def _metric(path, where, obj, key, ms: bool):
    """A JsonMetricResult's average (aiperf, genai-perf), in ms for times."""
    m = obj.get(key)
    if not isinstance(m, dict) or isinstance(m.get("avg"), bool) or \
            not isinstance(m.get("avg"), (int, float)):
        raise SpecError(path, where, f"{key}: no average (expected {{\"unit\", \"avg\"}})")
    if not (math.isfinite(m["avg"]) and 0 < m["avg"] <= MAX_VALUE):
        raise SpecError(path, where, f"{key}.avg: {cut_quoted(m['avg'])} is not a positive "
                                     f"number up to {MAX_VALUE:g}")
    if not ms:
        return float(m["avg"])
    unit = str(m.get("unit", "ms")).lower()
    if unit not in TIME_UNITS:
        raise SpecError(path, where, f"{key}: unit {cut_quoted(unit)} is not a time unit")
    return float(m["avg"]) * TIME_UNITS[unit]


# JSON's names for what a run can be instead of an object (the message of a file that holds one)
_JSON_KINDS = {type(None): "null", bool: "true or false", int: "integer", float: "number",
               str: "string", list: "array"}


def _closed(path, where, rate) -> None:
    """Refuse a run paced at a request rate: absent, null or infinite (a number or the text
    "inf"/"Infinity" as the tools write it) is a closed loop; a finite rate, NaN, or text
    naming anything else ("10") is not what lts validate predicts."""
    if rate is None or isinstance(rate, float) and math.isinf(rate) and rate > 0 or \
            isinstance(rate, str) and rate.strip().lower() in ("inf", "+inf", "infinity"):
        return
    raise SpecError(path, where, f"request_rate: {cut_quoted(rate)} paces the requests (or is no "
                                 "rate): a rate-limited run is not the closed loop of C clients "
                                 "lts validate predicts (run with an infinite request rate)")


def _find(obj, key, kinds=(int,)):
    """The first value of ``key`` of one of ``kinds`` anywhere in nested dicts and lists (a bool
    is none), or None."""
    if isinstance(obj, dict):
        if isinstance(obj.get(key), kinds) and not isinstance(obj.get(key), bool):
            return obj[key]
        items = obj.values()
    elif isinstance(obj, list):
        items = obj
    else:
        return None
    for v in items:
        got = _find(v, key, kinds)
        if got is not None:
            return got
    return None


def read(path, fmt: str = "auto") -> list:
    """The runs of one benchmark file: [{"format", "concurrency", "isl", "osl", "ttft_ms",
    "tpot_ms", "output_tokens_per_s", "backend", "version"}]; SpecError naming the file and the
    run."""
    path = Path(path)
    runs = []
    objects = _objects(path)
    if not objects:
        raise SpecError(path, "", "holds no runs")
    for i, obj in enumerate(objects, 1):
        where = f"run {i}"
        if not isinstance(obj, dict):
            kind = _JSON_KINDS.get(type(obj), type(obj).__name__)
            raise SpecError(path, where, f"a JSON {kind}, not a result object")
        found = detect(obj)
        kind = found if fmt == "auto" else fmt
        if found not in ("", kind):         # (an SGLang result always has dataset_name)
            raise SpecError(path, where, f"reads as {found}'s result, not {kind}'s (--format "
                                         "names the tool that wrote it)")
        if kind not in FORMATS:
            raise SpecError(path, where, "not a result of vllm bench serve, sglang "
                                         "bench_serving, aiperf or genai-perf (--format names one)")
        if kind in ("vllm", "sglang"):
            done = _num(path, where, obj, "completed")
            if done != int(done):
                raise SpecError(path, where, f"completed: {cut_quoted(obj['completed'])} is "
                                             "not a whole number of requests")
            _closed(path, where, obj.get("request_rate"))
            conc = obj.get("max_concurrency")
            run = {"isl": _num(path, where, obj, "total_input_tokens") / done,
                   "osl": _num(path, where, obj, "total_output_tokens") / done,
                   "ttft_ms": _num(path, where, obj, "mean_ttft_ms"),
                   "tpot_ms": _num(path, where, obj, "mean_tpot_ms"),
                   "output_tokens_per_s": _num(path, where, obj, "output_throughput"),
                   # the server the benchmark called ("vllm", "sglang", ...) and the version
                   # an SGLang server reports (server_info); vLLM's result records none
                   "backend": str(obj.get("backend", "")).lower(),
                   "version": _server_version(path, where, obj),
                   "bench": _bench(path, where, obj, kind, done)}
        else:
            _closed(path, where, _find(obj.get("input_config"), "request_rate", (int, float, str)))
            conc = _find(obj.get("input_config"), "concurrency")
            run = {"isl": _metric(path, where, obj, "input_sequence_length", False),
                   "osl": _metric(path, where, obj, "output_sequence_length", False),
                   "ttft_ms": _metric(path, where, obj, "time_to_first_token", True),
                   "tpot_ms": _metric(path, where, obj, "inter_token_latency", True),
                   "output_tokens_per_s": _metric(path, where, obj, "output_token_throughput",
                                                  False),
                   "backend": "", "version": "", "bench": {}}
        if conc is None:
            raise SpecError(path, where, "no fixed concurrency (max_concurrency / concurrency): "
                                         "lts validate predicts closed loops of C clients")
        if isinstance(conc, bool) or not isinstance(conc, int) or \
                not 1 <= conc <= MAX_CONCURRENCY:
            raise SpecError(path, where, f"concurrency: {cut_quoted(conc)} is not an integer "
                                         f"from 1 to {MAX_CONCURRENCY:,} (what lts validate "
                                         "reads)")
        if run["isl"] < 1 or run["osl"] < 1:        # (rows() rounds them up to 1)
            raise SpecError(path, where, f"tokens per request ({run['isl']:.4g} in, "
                                         f"{run['osl']:.4g} out) below one")
        run.update(format=kind, concurrency=int(conc))
        spread = run["bench"].pop("lengths", None)
        if spread is not None:          # the longest lengths, which the range ratio spreads
            run["isl"], run["osl"] = spread
        runs.append(run)
    return runs


def _bench(path, where, obj: dict, kind: str, done: float) -> dict:
    """How a vLLM or SGLang run was made (module docstring): {} where the file does not say."""
    if obj.get("max_concurrency") is None:
        return {}
    out = {"benchmark": "vllm bench serve" if kind == "vllm" else "sglang bench_serving",
           "num_prompts": int(done), "arrival": "burst"}
    r = obj.get("random_range_ratio")
    if kind == "sglang" and obj.get("dataset_name") == "random" and \
            isinstance(r, (int, float)) and not isinstance(r, bool):
        if not (math.isfinite(r) and 0 < r <= 1):
            raise SpecError(path, where, f"random_range_ratio: {cut_quoted(r)} is not in (0, 1]")
        out["range_ratio"] = float(r)
        out["lengths"] = (_num(path, where, obj, "random_input_len"),
                          _num(path, where, obj, "random_output_len"))
    return out


METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
HEADER = ("id", "model", "topology", "gpus", "tp", "ep", "pp", "precision", "isl", "osl",
          "concurrency", "metric", "value", "source", "strategy", "engine", "engine_version",
          "benchmark", "num_prompts", "arrival", "range_ratio")


def _escaped(text: str) -> str:
    """A cell lts validate reads as plain text: control and bidirectional formatting characters
    (a file name's, a version's) written as their escapes (``\\x1b``), the rest as it is."""
    return repr(text)[1:-1] if has_hidden(text) else text


def stems(paths) -> list:
    """Each result file's name in its rows' ids, distinct: the stem, with the folder's name
    where two files share a stem (aiperf and genai-perf name every export alike), then a
    counter."""
    names = [Path(p).stem for p in paths]
    if len(set(names)) < len(names):
        names = [f"{Path(p).resolve().parent.name}-{Path(p).stem}" for p in paths]
    if len(set(names)) < len(names):
        names = [f"{i + 1}-{n}" for i, n in enumerate(names)]
    return names


def rows(path, runs: list, model: str, topology: str, gpus: int, tp: int, ep: int, pp: int,
         strategy: str = "", engine: str = "", engine_version: str = "",
         precision: str = "", stem: str = "") -> list:
    """Measurement rows (dicts of HEADER) of a file's runs: one per run and metric, isl and osl
    the runs' means rounded, the deployment facts the flags give; ids from ``stem`` (default
    the file's)."""
    from .validate import row_problem       # (validate's imports: not at lts's start)
    out = []
    stem = stem or Path(path).stem
    for i, run in enumerate(runs, 1):
        # the engine: the flag, else the server the result names where lts has its profile; a
        # version the result reports belongs to that server only
        served = engine or (run["backend"] if run["backend"] in ENGINE_NAMES else "")
        version = engine_version or (run["version"] if run["backend"] == served else "")
        tool = {"vllm": "vllm bench serve", "sglang": "sglang bench_serving",
                "aiperf": "aiperf", "genai-perf": "genai-perf"}[run["format"]]
        for metric in METRICS:
            row = {
                "id": _escaped(f"{stem}-{i}-{metric}" if len(runs) > 1 else f"{stem}-{metric}"),
                "model": model, "topology": topology, "gpus": gpus, "tp": tp, "ep": ep,
                "pp": pp, "precision": precision, "isl": max(int(round(run["isl"])), 1),
                "osl": max(int(round(run["osl"])), 1), "concurrency": run["concurrency"],
                "metric": metric, "value": f"{run[metric]:.6g}",
                "source": _escaped(f"{tool} {Path(path).name}" + (f" ({served} {version})"
                                                                  if served and version else "")),
                "strategy": strategy, "engine": served, "engine_version": _escaped(version),
                **{k: run["bench"].get(k, "") for k in ("benchmark", "num_prompts", "arrival",
                                                        "range_ratio")}}
            # what lts writes, lts validate reads: its own row checks (values, tokens, degrees,
            # GPUs, requests), one rule per value
            problem = row_problem(row)
            if problem:
                raise SpecError(path, f"run {i}", f"{problem} (lts validate would not read its "
                                                  f"{metric} row)")
            out.append(row)
    return out
