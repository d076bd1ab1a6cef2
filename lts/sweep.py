"""``lts sweep GRID.toml``: many search problems from one grid file, as a capacity planner asks
them — models × topologies × workloads × engines (× GPU budgets) — each answered by exactly
what ``lts search --json`` answers, one JSON line per problem.

A grid file::

    models = ["llama3.1-8b", "llama3.1-70b"]     # shipped names, files or config folders
    topologies = ["h100_dgx", "h200_dgx"]
    engines = ["vllm", "sglang"]                 # optional; "" or absent: the per-op optimum
    gpus = [8]                                   # optional GPU budgets; absent: the topology's
    method = "exact"                             # optional; any --method (seed 0)

    [[workloads]]                                # at least one
    name = "chat"                                # optional (default: workload-N)
    phase = "serve"                              # decode, prefill or serve
    isl = 1000
    osl = 500
    ttft_slo_ms = 2000                           # optional, as the flags
    tpot_slo_ms = 50

    [prices]                                     # optional: $ per GPU-hour by topology name
    h100_dgx = 2.5

Each problem is the flags of one ``lts search`` (``Problem.args``); its key (model, topology,
workload, engine, gpus) names it in the output, so a run that stops can go on: a key already in
the output file is skipped. Nothing here imports click: each problem is solved by the search's
library entry (``solve``: ``plan.plan``, what ``lts search`` calls), in the CLI's process pool.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from .engines import ENGINE_NAMES
from .search.names import METHODS
from .specs import read_toml, resolve
from .specs.errors import LtsError, SpecError, cut_quoted, hidden_problem
from .specs.limits import MAX_TOKENS
from .specs.model import KeyTwiceError, keys_once
from .specs.strategy import coarse_text, shown_axes
from .specs.workload import PHASES as STEP_PHASES

PHASES = STEP_PHASES + ("serve",)   # what --phase takes
MAX_PROBLEMS = 100_000     # a grid's problems at most (each seconds of one core)
MAX_OUTPUT_LINES = 4 * MAX_PROBLEMS     # lines of an output read back to resume: each problem
#                                         answered and solved again a few times (a file of
#                                         20,000,000 junk lines was read for 79 s)
# a grid file's bytes at most: 100,000 names of ~40 characters; reading a 4 MiB grid takes
# 1.7 s and 50 MB here (tomllib; 64 MiB, the cap of model files: 17 s and 564 MB)
MAX_GRID_BYTES = 4 * 2**20
WORKLOAD_KEYS = {"name": str, "phase": str, "isl": int, "osl": int, "context": int,
                 "ttft_slo_ms": float, "tpot_slo_ms": float}
# the workload settings a phase uses (as the search's flags: cli._phase_flags)
PHASE_KEYS = {"isl": ("serve",), "osl": ("serve",), "context": ("decode", "prefill"),
              "ttft_slo_ms": ("prefill", "serve"), "tpot_slo_ms": ("decode", "serve")}
GRID_KEYS = {"models", "topologies", "engines", "gpus", "method", "workloads", "prices"}


@dataclass(frozen=True)
class Problem:
    model: str
    topology: str
    workload: str          # its name
    engine: str            # "" for the per-op optimum
    gpus: int              # 0 for the topology's
    args: tuple            # the flags of ``lts search`` after MODEL TOPOLOGY (the key's digest)
    options: tuple = ()    # the same as ``plan.plan``'s keywords: (name, value) pairs

    @property
    def key(self) -> str:
        """model|topology|workload|engine|gpus|digest: the digest is of the whole search
        flags (the workload's settings, the method), so an edited grid solves again what
        changed."""
        digest = hashlib.sha1("\0".join(self.args).encode("utf-8")).hexdigest()[:10]
        return "|".join((self.model, self.topology, self.workload, self.engine,
                         str(self.gpus), digest))


def _strings(grid: dict, path, key: str, required: bool) -> list:
    v = grid.get(key)
    if v is None and not required:
        return [""]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise SpecError(path, key, "expected a non-empty list of strings")
    if len(v) > MAX_PROBLEMS:       # (each list is at most the product, counted below)
        raise SpecError(path, key, f"{len(v):,} entries, over the {MAX_PROBLEMS:,} problems a "
                                   "sweep takes (split the grid)")
    if len(set(v)) != len(v):
        raise SpecError(path, key, "names one entry twice")
    hidden = [x for x in v if hidden_problem(x)]
    if hidden:      # (a problem's key, shown in the summary, holds the name as written)
        raise SpecError(path, key, hidden_problem(hidden[0]))
    return v


def _once(path, key: str, names: list, canon, what: str) -> None:
    """SpecError where two of ``names`` (distinct as written) name one ``what`` (``canon``: the
    thing a name stands for; a name that does not load is left to the problem's own error)."""
    seen = {}
    for n in names:
        try:
            c = canon(n)
        except (LtsError, OSError, ValueError):
            continue
        if c in seen:
            raise SpecError(path, key, f"{cut_quoted(seen[c])} and {cut_quoted(n)} name one "
                                       f"{what}: give it once")
        seen[c] = n


def _release(text: str):
    """What an engine entry stands for: its engine and release (``Engine.release_key``: a bare
    name its served version's), a version lts cannot order as written."""
    from .engines import ENGINES
    name, _, version = text.partition("@")
    engine = ENGINES.get(name)
    if engine is None or not text:
        return text
    key = engine.release_key(version or engine.version)
    return (name, key) if key else text


def read_grid(path) -> tuple:
    """(problems, prices {topology: $ per GPU-hour}) of a grid file; SpecError on a bad key."""
    grid = read_toml(Path(path), "a sweep grid (.toml)", MAX_GRID_BYTES, "a sweep grid needs 2")
    unknown = sorted(set(grid) - GRID_KEYS)
    if unknown:
        raise SpecError(path, unknown[0], f"unknown key (expected {', '.join(sorted(GRID_KEYS))})")
    models = _strings(grid, path, "models", True)
    topologies = _strings(grid, path, "topologies", True)
    engines = _strings(grid, path, "engines", False)
    bad = [e for e in engines if e and e.split("@")[0] not in ENGINE_NAMES]
    if bad:
        raise SpecError(path, "engines", f"{cut_quoted(bad[0])} is not an engine lts knows "
                                         f"({', '.join(ENGINE_NAMES)}, with @VERSION)")
    _once(path, "models", models, lambda n: resolve("models", n).resolve(), "model file")
    _once(path, "topologies", topologies, lambda n: resolve("topologies", n).resolve(),
          "topology file")
    _once(path, "engines", engines, _release, "engine release")
    gpus = grid.get("gpus", [0])
    if not isinstance(gpus, list) or not gpus or not all(
            isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus):
        raise SpecError(path, "gpus", "expected a non-empty list of positive integers")
    if len(set(gpus)) != len(gpus):
        raise SpecError(path, "gpus", "names one budget twice")
    method = grid.get("method", "exact")
    if method not in METHODS:
        raise SpecError(path, "method", f"{cut_quoted(method)} is not one of {', '.join(METHODS)}")
    prices = grid.get("prices", {})
    if not isinstance(prices, dict) or not all(
            isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p < 1e6
            for p in prices.values()):
        raise SpecError(path, "prices", "expected a table of topology = dollars per GPU-hour "
                                        "(a positive number)")
    strays = [k for k in prices if k not in topologies]
    if strays:
        raise SpecError(path, f"prices.{strays[0]}", "is not one of the grid's topologies "
                                                     f"({', '.join(topologies)}), as written "
                                                     "there")
    loads = grid.get("workloads")
    if loads is None:
        raise SpecError(path, "workloads", "missing: at least one [[workloads]] table")
    if not isinstance(loads, list) or not loads or not all(isinstance(w, dict) for w in loads):
        raise SpecError(path, "workloads", f"{cut_quoted(loads)} is not a list of "
                                           "[[workloads]] tables (at least one)")
    count = len(models) * len(topologies) * len(loads) * len(engines) * len(gpus)
    if count > MAX_PROBLEMS:        # counted from the lists, before a problem is made
        raise SpecError(path, "", f"{count:,} problems, over the {MAX_PROBLEMS:,} a sweep "
                                  "takes (split the grid)")
    names, flags = [], []
    for i, w in enumerate(loads):
        where = f"workloads[{i}]"
        for k, v in w.items():
            typ = WORKLOAD_KEYS.get(k)
            if typ is None:
                raise SpecError(path, f"{where}.{k}", f"unknown key (expected "
                                                      f"{', '.join(WORKLOAD_KEYS)})")
            ok = isinstance(v, typ) and not isinstance(v, bool) or \
                typ is float and isinstance(v, int) and not isinstance(v, bool)
            if not ok:
                raise SpecError(path, f"{where}.{k}", f"{cut_quoted(v)} is not {typ.__name__}")
            if typ is int and not 1 <= v <= MAX_TOKENS:
                raise SpecError(path, f"{where}.{k}", f"{v} is not from 1 to {MAX_TOKENS:,}")
            if typ is float and not (v > 0 and not math.isnan(v)):
                raise SpecError(path, f"{where}.{k}", f"{cut_quoted(v)} is not a positive "
                                                      "number of milliseconds (inf: no limit)")
        phase = w.get("phase", "decode")
        if phase not in PHASES:
            raise SpecError(path, f"{where}.phase",
                            f"{cut_quoted(phase)} is not one of {', '.join(PHASES)}")
        for k in w:     # a setting the phase has no use for (the search would refuse it)
            if k in PHASE_KEYS and phase not in PHASE_KEYS[k]:
                raise SpecError(path, f"{where}.{k}", f"not with phase {cut_quoted(phase)} (only "
                                                      f"{' or '.join(PHASE_KEYS[k])})")
        name = w.get("name", f"workload-{i + 1}")
        if hidden_problem(name):        # (shown raw in the summary, it reordered the line)
            raise SpecError(path, f"{where}.name", hidden_problem(name))
        if name in names:
            raise SpecError(path, f"{where}.name", f"{cut_quoted(name)} names two workloads")
        names.append(name)
        args, options = ["--phase", phase], [("phase", phase), ("method", method)]
        for k in ("isl", "osl", "context", "ttft_slo_ms", "tpot_slo_ms"):
            if k in w:
                args += ["--" + k.replace("_", "-"), str(w[k])]
                options.append((k, float(w[k]) if k.endswith("_ms") else w[k]))
        flags.append((tuple(args), tuple(options)))
    problems = [
        Problem(m, t, name, e, g, (*f, "--method", method, "--json",
                                   *(("--engine", e) if e else ()),
                                   *(("--gpus", str(g)) if g else ())),
                (*o, *((("gpus", g),) if g else ())))
        for m in models for t in topologies for name, (f, o) in zip(names, flags)
        for e in engines for g in gpus]
    return problems, {str(k): float(v) for k, v in prices.items()}


def read_lines(out_path) -> dict:
    """The whole lines of an output file by key, the last of a key winning (a line cut short,
    or one that is not a sweep line, is none); SpecError if the file cannot be read."""
    out = {}
    p = Path(out_path)
    if not p.exists():
        return out
    try:
        with p.open("rb") as f:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        if lines > MAX_OUTPUT_LINES:
            raise SpecError(out_path, "", f"{lines:,} lines, more than a sweep of at most "
                                          f"{MAX_PROBLEMS:,} problems writes "
                                          f"({MAX_OUTPUT_LINES:,}): give another -o")
        with p.open(encoding="utf-8", errors="replace") as f:
            for text in f:
                try:
                    d = json.loads(text, parse_constant=_not_finite, object_pairs_hook=keys_once)
                except (_NotFinite, KeyTwiceError) as e:    # NaN or Infinity, a key given
                    try:        # twice: lts never writes one, so the line is kept as no answer
                        d = json.loads(text)
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(d, dict):
                        d = {"key": d.get("key"), "result": None,
                             "error": "a number that is not finite (NaN or Infinity)"
                             if isinstance(e, _NotFinite) else "a key given twice"}
                except (ValueError, RecursionError):    # (nesting past Python's stack)
                    continue
                if isinstance(d, dict) and isinstance(d.get("key"), str):
                    out[d["key"]] = d
    except OSError as e:
        raise SpecError(out_path, "", e.strerror or str(e)) from None
    return out


class _NotFinite(ValueError):
    pass


def _not_finite(token):
    raise _NotFinite(token)


def answer(d: dict):
    """(tokens/s per GPU, strategy text, model name) of an output line that holds a whole
    answer, else None: a line whose search failed or found nothing, or one edited or written
    by something else (a key missing, a degree or tokens/s that is not a finite number) is no
    answer, so the sweep solves its problem again and the summary never reads it."""
    r = d.get("result")
    b = r.get("best") if isinstance(r, dict) else None
    if not isinstance(b, dict):
        return None
    figures = [b.get(k) for k in ("tokens_per_s_per_gpu", "tokens_per_s_per_cluster_gpu")
               if k in b or k == "tokens_per_s_per_gpu"]      # (both where the line has both)
    if not all(_number(x) and x >= 0 for x in figures):
        return None
    per_gpu = figures[-1]       # of the budget's GPUs where given (docs/json.md)
    axes = shown_axes([b])       # degrees at least 1, the batch (concurrency) at least 0
    if not all(_number(b.get(a)) and b[a] >= (a != "batch") for a in axes):
        return None
    m = r.get("model")
    name = m.get("name") if isinstance(m, dict) else None
    return float(per_gpu), coarse_text(b, axes), name if isinstance(name, str) else None


def _number(v) -> bool:
    """A finite JSON number (an integer of hundreds of digits is none: no float holds it)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def done_keys(lines: dict) -> set:
    """The keys the output already answers (``answer``): the rest are solved again."""
    return {k for k, d in lines.items() if answer(d) is not None}


def ends_mid_line(path) -> bool:
    """Whether the file's last line lacks its newline (a write cut short)."""
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def line(problem: Problem, code: int, result, error: str) -> str:
    """One output line: the problem, and the search's JSON or its one-line error."""
    return json.dumps({"key": problem.key, "model": problem.model, "topology": problem.topology,
                       "workload": problem.workload, "engine": problem.engine or None,
                       "gpus": problem.gpus or None, "exit": code, "result": result,
                       "error": error or None}, allow_nan=False) + "\n"


def summary(lines: dict, problems: list, prices: dict) -> dict:
    """The best answer per (model, topology, workload) over engines and budgets, from the
    output's lines of this grid's problems (another grid's lines in the file are left out):
    {"rows": [...], "problems", "answered", "failed", "errors"}; ties go to the grid's first
    problem."""
    best, failed, errors = {}, 0, []
    for order, p in enumerate(problems):
        d = lines.get(p.key)
        if d is None:
            continue
        got = answer(d)
        if got is None:
            failed += 1
            if len(errors) < 5:
                error = d.get("error")
                errors.append(f"{p.key.rsplit('|', 1)[0]}: "
                              f"{error if isinstance(error, str) and error else 'no answer'}")
            continue
        per_gpu, strategy, name = got
        k = (p.model, p.topology, p.workload)
        if k in best and per_gpu <= best[k]["tokens_per_s_per_gpu"]:
            continue
        price = prices.get(p.topology)
        best[k] = {"key": p.key, "model": name or p.model,
                   "topology": p.topology, "workload": p.workload, "engine": p.engine or None,
                   "gpus": p.gpus or None, "strategy": strategy,
                   "tokens_per_s_per_gpu": per_gpu, "price_per_gpu_hour": price,
                   "tokens_per_dollar": per_gpu * 3600.0 / price if price else None}
    rows = sorted(best.values(), key=lambda r: (r["model"], r["workload"],
                                                -r["tokens_per_s_per_gpu"]))
    answered = sum(1 for p in problems if p.key in lines) - failed
    return {"rows": rows, "problems": len(problems), "answered": answered, "failed": failed,
            "errors": errors}


def solve(problem: Problem) -> tuple:
    """One problem through the search's library entry (``plan.plan``, as ``lts search``):
    (problem, exit status, the JSON ``lts search --json`` prints or None, the line it ends on
    or "")."""
    from .plan import parse_engine, plan, refusal
    from .report.format import json_safe
    try:
        engine, version = parse_engine(problem.engine) if problem.engine else (None, None)
        answer = plan(problem.model, problem.topology, engine=engine, engine_version=version,
                      **dict(problem.options))
        return problem, 0, json_safe(answer.dict()), ""
    except LtsError as e:
        code, why = refusal(e)
        return problem, code, None, why
    except Exception as e:      # a bug: the line says so and the sweep goes on with the rest
        return problem, 1, None, f"internal error (please report): {type(e).__name__}: {e}"


def shard(problems: list, text: str) -> list:
    """The problems of shard ``I/N`` (``--shard``): every N-th from the I-th (1 <= I <= N), in
    the grid's order; ValueError on a bad text."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"{cut_quoted(text)} is not I/N (e.g. 3/16)") from None
    if not 1 <= i <= n <= MAX_PROBLEMS:
        raise ValueError(f"{cut_quoted(text)}: I must be from 1 to N")
    return problems[i - 1::n]
