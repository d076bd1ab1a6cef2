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
the output file is skipped. Nothing here imports click: the CLI runs each problem's flags
through its own search command, in a process pool.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .specs import _toml, read_text
from .specs.errors import SpecError
from .specs.limits import MAX_TOKENS
from .specs.workload import PHASES as STEP_PHASES

PHASES = STEP_PHASES + ("serve",)   # what --phase takes
MAX_PROBLEMS = 100_000     # a grid's problems at most (each seconds of one core)
WORKLOAD_KEYS = {"name": str, "phase": str, "isl": int, "osl": int, "context": int,
                 "ttft_slo_ms": float, "tpot_slo_ms": float}
GRID_KEYS = {"models", "topologies", "engines", "gpus", "method", "workloads", "prices"}


@dataclass(frozen=True)
class Problem:
    model: str
    topology: str
    workload: str          # its name
    engine: str            # "" for the per-op optimum
    gpus: int              # 0 for the topology's
    args: tuple            # the flags of ``lts search`` after MODEL TOPOLOGY

    @property
    def key(self) -> str:
        return "|".join((self.model, self.topology, self.workload, self.engine,
                         str(self.gpus)))


def _strings(grid: dict, path, key: str, required: bool) -> list:
    v = grid.get(key)
    if v is None and not required:
        return [""]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise SpecError(path, key, "expected a non-empty list of strings")
    if len(set(v)) != len(v):
        raise SpecError(path, key, "names one entry twice")
    return v


def read_grid(path) -> tuple:
    """(problems, prices {topology: $ per GPU-hour}) of a grid file; SpecError on a bad key."""
    try:
        grid = _toml.loads(read_text(Path(path), "a sweep grid (.toml)"))
    except _toml.TOMLDecodeError as e:
        raise SpecError(path, "", f"invalid TOML ({e})") from None
    unknown = sorted(set(grid) - GRID_KEYS)
    if unknown:
        raise SpecError(path, unknown[0], f"unknown key (expected {', '.join(sorted(GRID_KEYS))})")
    models = _strings(grid, path, "models", True)
    topologies = _strings(grid, path, "topologies", True)
    engines = _strings(grid, path, "engines", False)
    gpus = grid.get("gpus", [0])
    if not isinstance(gpus, list) or not gpus or not all(
            isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus):
        raise SpecError(path, "gpus", "expected a non-empty list of positive integers")
    method = grid.get("method", "exact")
    if not isinstance(method, str):
        raise SpecError(path, "method", f"{method!r} is not a string")
    prices = grid.get("prices", {})
    if not isinstance(prices, dict) or not all(
            isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p < 1e6
            for p in prices.values()):
        raise SpecError(path, "prices", "expected a table of topology = dollars per GPU-hour "
                                        "(a positive number)")
    loads = grid.get("workloads")
    if not isinstance(loads, list) or not loads or not all(isinstance(w, dict) for w in loads):
        raise SpecError(path, "workloads", "missing: at least one [[workloads]] table")
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
                raise SpecError(path, f"{where}.{k}", f"{v!r} is not {typ.__name__}")
            if typ is int and not 1 <= v <= MAX_TOKENS:
                raise SpecError(path, f"{where}.{k}", f"{v} is not from 1 to {MAX_TOKENS:,}")
        phase = w.get("phase", "decode")
        if phase not in PHASES:
            raise SpecError(path, f"{where}.phase", f"{phase!r} is not one of {', '.join(PHASES)}")
        name = w.get("name", f"workload-{i + 1}")
        if name in names:
            raise SpecError(path, f"{where}.name", f"{name!r} names two workloads")
        names.append(name)
        args = ["--phase", phase]
        for k in ("isl", "osl", "context", "ttft_slo_ms", "tpot_slo_ms"):
            if k in w:
                args += ["--" + k.replace("_", "-"), str(w[k])]
        flags.append(tuple(args))
    problems = [
        Problem(m, t, name, e, g, (*f, "--method", method, "--json",
                                   *(("--engine", e) if e else ()),
                                   *(("--gpus", str(g)) if g else ())))
        for m in models for t in topologies for name, f in zip(names, flags)
        for e in engines for g in gpus]
    if len(problems) > MAX_PROBLEMS:
        raise SpecError(path, "", f"{len(problems):,} problems, over the {MAX_PROBLEMS:,} a "
                                  "sweep takes (split the grid)")
    return problems, {str(k): float(v) for k, v in prices.items()}


def done_keys(out_path) -> set:
    """The keys of the problems the output file already answers (a line cut short by a stop
    is not one)."""
    keys = set()
    p = Path(out_path)
    if not p.exists():
        return keys
    with p.open(encoding="utf-8") as f:
        for line in f:
            try:
                keys.add(json.loads(line)["key"])
            except (ValueError, KeyError, TypeError):
                continue
    return keys


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


def summary(out_path, prices: dict) -> dict:
    """The best answer per (model, topology, workload) over engines and budgets, from every
    line of the output file: {"rows": [...], "problems", "answered", "failed"}."""
    best, problems, failed = {}, 0, 0
    with Path(out_path).open(encoding="utf-8") as f:
        for text in f:
            try:
                d = json.loads(text)
            except ValueError:
                continue
            problems += 1
            r = d.get("result")
            if not r or not r.get("best"):
                failed += 1
                continue
            b = r["best"]
            per_gpu = b.get("tokens_per_s_per_cluster_gpu", b.get("tokens_per_s_per_gpu"))
            k = (d["model"], d["topology"], d["workload"])
            if k not in best or (per_gpu, best[k]["key"]) > (best[k]["tokens_per_s_per_gpu"],
                                                             d["key"]):   # ties: the first key
                price = prices.get(d["topology"])
                best[k] = {"key": d["key"],
                           "model": r["model"]["name"] if isinstance(r.get("model"), dict)
                           else d["model"], "topology": d["topology"], "workload": d["workload"],
                           "engine": d["engine"], "gpus": d["gpus"],
                           "strategy": f"{b['tp']}/{b['ep']}/{b['pp']}/{b['batch']}",
                           "tokens_per_s_per_gpu": per_gpu,
                           "price_per_gpu_hour": price,
                           "tokens_per_dollar": per_gpu * 3600.0 / price if price else None}
    rows = sorted(best.values(), key=lambda r: (r["model"], r["workload"],
                                                -r["tokens_per_s_per_gpu"]))
    return {"rows": rows, "problems": problems, "answered": problems - failed,
            "failed": failed}
