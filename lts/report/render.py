"""Results -> JSON-able dicts and rich tables. The only module that imports rich (``cli.py``
gets its consoles from ``make_console`` and its progress bars from ``progress``).

JSON key names are a contract (DESIGN.md §5, README "JSON output"): add fields, never rename.
Display units (ms, GiB, us) appear only here.

Imports: specs, strategy, costmodel (Result), optables (REASONS), enginespace (runnable_on, the
variants' names), workload, units, plot, problems (``fill``), search
(``replicas``). The results of ``lts.search`` (``SearchRun``, ``Comparison``), ``lts.emit``
(``Launch``) and ``lts.bench`` are read by their attributes.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table

from ..cost.model import Result
from ..cost.tables import REASONS
from ..specs.workload import Workload
from ..specs import ModelSpec, TopologySpec, param_counts
from ..specs.strategy import (DP_ATTENTION, EXPERT_CHOICES, N_COARSE, OPS, format_strategy, strategy_dict,
                       with_experts)
from .plot import Series, frontier_svg, frontier_text
from ..engines import ENGINES, GENERIC
from ..engines.space import engine_form, engine_variants, runnable_on
from ..search.problems import fill
from ..search.methods import replicas
from ..specs.units import GB, GIB, TFLOPS, US


def make_console(no_color: bool = False, stderr: bool = False) -> Console:
    """A console on stdout (results) or stderr."""
    return Console(stderr=stderr, no_color=no_color, highlight=False)


def _num(x):
    """float for JSON; NaN/inf -> None."""
    x = float(x)
    return x if math.isfinite(x) else None


def result_dict(res: Result, i: int) -> dict:
    """The JSON *result* object of strategy i (DESIGN.md §5)."""
    d = strategy_dict(res.strategies[i])
    d.update(valid=bool(res.valid[i]), reasons=res.reason_list(i),
             tokens_per_s_per_gpu=_num(res.tokens_per_s_per_gpu[i]),
             tokens_per_s=_num(res.tokens_per_s[i]),
             tpot_ms=_num(res.tpot_s[i] * 1e3), ttft_ms=_num(res.ttft_s[i] * 1e3),
             memory_gib_per_gpu=_num(res.memory_bytes[i] / GIB), gpus=int(res.gpus[i]))
    return d


def model_dict(m: ModelSpec) -> dict:
    counts = param_counts(m)
    return {"name": m.name, "params_total": counts["params_total"],
            "params_active": counts["params_active"]}


def ops_us(ops: list) -> list:
    """``costmodel.breakdown``'s ops (seconds) in display units: each ``*_s`` key becomes
    ``*_us`` (microseconds), in place in the key order."""
    def conv(d):
        return {(k[:-2] + "_us" if k.endswith("_s") else k):
                (v * 1e6 if k.endswith("_s") else v) for k, v in d.items()}
    return [{**conv(op), "collectives": [conv(c) for c in op["collectives"]]} for op in ops]


def deploy_fields(m: ModelSpec, res, i: int, budget: int) -> dict:
    """``runnable_on`` (the engines that run result i as written), ``replicas`` (copies of its
    instance the budget holds) and ``tokens_per_s_per_cluster_gpu`` (their tokens/s over every
    GPU of the budget) of result i (a ``Result`` or a ``serve.ServeResult``)."""
    rate = (res.output_tokens_per_s_per_gpu if hasattr(res, "output_tokens_per_s_per_gpu")
            else res.tokens_per_s_per_gpu)[i]
    return {"runnable_on": list(runnable_on(m, res.strategies[i:i + 1])[0]),
            "replicas": int(budget // res.gpus[i]),
            "tokens_per_s_per_cluster_gpu": _num(rate * fill(budget, res.gpus[i]))}


def estimate_dict(m: ModelSpec, res: Result, ops: list, budget: int) -> dict:
    d = result_dict(res, 0)
    d.update(deploy_fields(m, res, 0, budget))
    d["model"] = model_dict(m)
    d["ops"] = ops_us(ops)
    return d


def serve_dict(m: ModelSpec, res, ops: list, isl: int, osl: int, engine=None,
               budget: int | None = None) -> dict:
    """JSON of ``lts estimate --phase serve``: the strategy, the closed loop's figures (README
    "JSON output") and ``ops``, the per-op cost of ``step``: one decode step of the running
    batch at the mean context isl + osl/2."""
    d = strategy_dict(res.strategies[0])
    n = int(res.running[0])
    d.update(phase="serve", isl=int(isl), osl=int(osl), concurrency=int(res.strategies[0][3]),
             valid=bool(res.valid[0]), reasons=res.reason_list(0),
             output_tokens_per_s=_num(res.output_tokens_per_s[0]),
             output_tokens_per_s_per_gpu=_num(res.output_tokens_per_s_per_gpu[0]),
             tokens_per_s_per_user=_num(res.tokens_per_s_per_user[0]),
             ttft_ms=_num(res.ttft_s[0] * 1e3), tpot_ms=_num(res.tpot_s[0] * 1e3),
             request_latency_ms=_num(res.latency_s[0] * 1e3),
             running=n, queued=max(int(res.strategies[0][3]) - n, 0),
             kv_capacity=int(res.kv_capacity[0]),
             decode_step_ms=_num(res.decode_step_s[0] * 1e3),
             mixed_step_ms=_num(res.mixed_step_s[0] * 1e3),
             memory_gib_per_gpu=_num(res.memory_bytes[0] / GIB), gpus=int(res.gpus[0]),
             engine=engine.name if engine is not None else None,
             model=model_dict(m),
             step={"kind": "decode", "requests": n, "context": int(isl) + int(osl) // 2},
             ops=ops_us(ops))
    if budget is not None:
        d.update(deploy_fields(m, res, 0, budget))
    return d


# ----------------------------------------------------------------------------------------------
# formatting helpers

SHORT = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS", "all-to-all": "A2A",
         "send": "send"}


def fmt_params(n: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= div:
            return f"{n / div:.3g}{unit}" if n / div < 100 else f"{n / div:.0f}{unit}"
    return f"{n:.0f}"


def fmt_bytes(n: float) -> str:
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= div:
            v = n / div
            return f"{v:.3g}{unit}" if v < 999.5 else f"{v:.0f}{unit}"
    return f"{n:.0f}B"


def fmt_ms(s: float) -> str:
    return "-" if not math.isfinite(s) else f"{s * 1e3:.2f}"


def fmt_s(s: float) -> str:
    """Seconds in 3 significant figures, thousands separated beyond."""
    return "-" if not math.isfinite(s) else (f"{s:.3g}" if s < 1000 else f"{s:,.0f}")


def reasons_text(res: Result, i: int) -> str:
    return "valid" if res.valid[i] else "invalid: " + ", ".join(res.reason_list(i))


# ----------------------------------------------------------------------------------------------
# tables

def _ops_table(console: Console, title: str, ops: list) -> None:
    ops = ops_us(ops)
    table = Table(title=title,
                  caption="count: instances per step; collectives: kind group bytes µs (×count)",
                  box=box.SIMPLE_HEAD)
    table.add_column("op", no_wrap=True)
    table.add_column("choice", no_wrap=True)
    table.add_column("count", justify="right")
    table.add_column("comp µs", justify="right")
    table.add_column("mem µs", justify="right")
    table.add_column("collectives")
    names = {0: "0", 1: "1", 2: "none", 3: "experts", -1: ""}
    for op in ops:
        colls = "\n".join(f"{SHORT[c['kind']]} {c['group']} {fmt_bytes(c['bytes'])} "
                          f"{c['time_us']:.1f}" + (f" ×{c['count']}" if c["count"] != op["count"]
                                                   else "")
                          for c in op["collectives"])
        table.add_row(op["name"], names[op["choice"]] + (f" {op['layout_in']}→{op['layout_out']}"
                                                         if op["layout_in"] else ""),
                      str(op["count"]), f"{op['compute_us']:.1f}", f"{op['memory_us']:.1f}",
                      colls or "-")
    console.print(table)


def _model_line(m: ModelSpec, row, gpus: int) -> str:
    counts = param_counts(m)
    s = strategy_dict(row)
    return (f"[bold]{escape(m.name)}[/] ({fmt_params(counts['params_total'])} params, "
            f"{fmt_params(counts['params_active'])} active)  tp={s['tp']} ep={s['ep']} "
            f"pp={s['pp']} batch={s['batch']}  on {gpus} GPUs")


def render_estimate(console: Console, m: ModelSpec, topo: TopologySpec, res: Result, ops: list,
                    phase: str) -> None:
    _ops_table(console, f"{escape(m.name)} on {escape(topo.name)}: cost per op instance", ops)
    lat = f"TPOT {fmt_ms(res.tpot_s[0])} ms" if phase == "decode" else \
        f"TTFT {fmt_ms(res.ttft_s[0])} ms"
    console.print(
        _model_line(m, res.strategies[0], int(res.gpus[0])) + "\n"
        f"{res.tokens_per_s_per_gpu[0]:.1f} tokens/s/GPU, {res.tokens_per_s[0]:.0f} tokens/s, "
        f"{lat}, {res.memory_bytes[0] / GIB:.1f} GiB per GPU "
        f"(of {(topo.hbm_bytes - topo.hbm_reserve_bytes) / GIB:.1f} usable): "
        + ("[green]valid[/]" if res.valid[0] else f"[red]{escape(reasons_text(res, 0))}[/]"))


def _rate(x: float) -> str:
    """A rate in 3 significant figures, thousands separated beyond."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 10_000 else f"{ms / 1e3:,.1f} s"


def render_serve(console: Console, m: ModelSpec, topo: TopologySpec, res, ops: list, isl: int,
                 osl: int, engine, chosen: bool = False) -> None:
    """``lts estimate --phase serve``: the per-op table of one decode step of the running batch,
    then the closed loop's figures (one set: everything below is the same run). ``chosen``: the
    concurrency was picked (the highest output tokens/s), not given."""
    d = serve_dict(m, res, [], isl, osl, engine)
    step = d["step"]
    head = _model_line(m, res.strategies[0], d["gpus"])
    if d["kv_capacity"] < 1:            # not one request fits: no loop to describe
        console.print(head + f"\n[red]invalid: {escape(', '.join(d['reasons']))}[/]: not one "
                      f"request of {isl + osl} tokens fits the KV cache on {escape(engine.title)} "
                      f"(weights and buffers take {d['memory_gib_per_gpu']:.1f} GiB per GPU with "
                      f"one request, of {topo.hbm_bytes / GIB:.1f} GiB)")
        return
    plural = "s" if step["requests"] != 1 else ""
    _ops_table(console, f"{escape(m.name)} on {escape(topo.name)}: one decode step of the "
                        f"running batch ({step['requests']} request{plural} at context "
                        f"{step['context']}, {d['decode_step_ms']:.2f} ms), cost per op instance",
               ops)
    kv = f"the KV cache holds {d['kv_capacity']}"
    if d["queued"]:
        capped = engine.holds(d["kv_capacity"]) < d["kv_capacity"]
        running = (f"{d['running']} running, {d['queued']} waiting: "
                   + (f"the engine runs at most {engine.max_running}; " if capped else "") + kv)
    else:
        running = f"{d['running']} running; {kv}"
    how = " (the highest output tokens/s)" if chosen else ""
    tpot = (f"TPOT {d['tpot_ms']:.2f} ms, {d['tokens_per_s_per_user']:.1f} tokens/s per user"
            if d["tpot_ms"] is not None else "no TPOT (one output token)")
    status = "[green]valid[/]" if d["valid"] else f"[red]invalid: {escape(', '.join(d['reasons']))}[/]"
    console.print(
        head + "\n"
        f"[bold]serve[/] on {escape(engine.title)}: {isl} in / {osl} out tokens per request, "
        f"concurrency {d['concurrency']}{how} ({running}): {status}\n"
        f"{_rate(d['output_tokens_per_s'])} output tokens/s, "
        f"{_rate(d['output_tokens_per_s_per_gpu'])} per GPU; TTFT {_ms(d['ttft_ms'])}, {tpot}, "
        f"request latency {d['request_latency_ms'] / 1e3:,.2f} s\n"
        f"steps: decode {d['decode_step_ms']:.2f} ms, with a prefill chunk "
        f"{d['mixed_step_ms']:.2f} ms; {d['memory_gib_per_gpu']:.1f} GiB per GPU with "
        f"{d['running']} request{'s' if d['running'] != 1 else ''} of {isl + osl} tokens")


def models_rows(specs: list) -> list:
    rows = []
    for name, m in specs:
        c = param_counts(m)
        rows.append({"name": name, "display_name": m.name, "kind": m.ffn.kind,
                     "attention": m.attention.kind, "layers": m.layers, "hidden": m.hidden,
                     "params_total": c["params_total"], "params_active": c["params_active"],
                     "params_published": m.params_published or None,
                     "weights": m.precision.weights,
                     "weight_gib": c["params_total"] * m.precision.weight_bytes / GIB})
    return rows


def render_models(console: Console, rows: list) -> None:
    table = Table(title="Shipped models", box=box.SIMPLE_HEAD)
    for col, just in (("name", "left"), ("kind", "left"), ("layers", "right"),
                      ("params", "right"), ("active", "right"), ("weights", "right")):
        table.add_column(col, justify=just, no_wrap=True)
    for r in rows:
        kind = f"{r['kind']}/{r['attention']}"
        table.add_row(escape(r["name"]), kind, str(r["layers"]), fmt_params(r["params_total"]),
                      fmt_params(r["params_active"]),
                      f"{r['weights']} {r['weight_gib']:.0f} GiB")
    console.print(table)


def render_model_show(console: Console, m: ModelSpec) -> None:
    c = param_counts(m)
    a, f = m.attention, m.ffn
    table = Table(title=escape(m.name), box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("key", no_wrap=True)
    table.add_column("value")
    rows = [("source", m.source), ("layers", m.layers), ("hidden", m.hidden), ("vocab", m.vocab),
            ("attention", f"{a.kind}: {a.heads} heads, {a.kv_heads} kv heads, head_dim {a.head_dim}"
             + (f", kv_lora {a.kv_lora_rank}, q_lora {a.q_lora_rank}, rope {a.qk_rope_head_dim},"
                f" v_head {a.v_head_dim}" if a.kind == "mla" else ""))]
    if f.kind == "moe":
        rows.append(("ffn", f"moe: {f.experts} experts top-{f.top_k}, expert width "
                            f"{f.expert_intermediate}, shared width {f.shared_intermediate}, "
                            f"{f.dense_layers} dense layers of width {f.intermediate}, "
                            f"{'gated' if f.gated else 'not gated'}"))
    else:
        rows.append(("ffn", f"dense: width {f.intermediate}, {'gated' if f.gated else 'not gated'}"))
    rows += [("precision", f"weights {m.precision.weights}, kv {m.precision.kv_cache}, "
                           f"activations {m.precision.activations}"),
             ("tie_embeddings", m.tie_embeddings),
             ("params total", f"{c['params_total']:.4g}" + (
                 f" (published {m.params_published:.4g}, "
                 f"{100 * (c['params_total'] / m.params_published - 1):+.1f}%)"
                 if m.params_published else "")),
             ("params active", f"{c['params_active']:.4g}")]
    for k, v in rows:
        table.add_row(k, escape(str(v)))
    console.print(table)


def topologies_rows(specs: list) -> list:
    return [{"name": name, "gpu": t.gpu_name, "gpus": t.gpus, "gpus_per_node": t.gpus_per_node,
             "nodes": t.nodes, "hbm_gib": t.hbm_bytes / GIB,
             "bf16_tflops": t.peak_flops["bf16"] / TFLOPS,
             "links": [{"name": l.name, "span_gpus": l.span_gpus,
                        "bandwidth_gb_s": l.bandwidth_bytes_s / GB,
                        "latency_us": l.latency_s / US, "efficiency": l.efficiency}
                       for l in t.links]}
            for name, t in specs]


def render_topologies(console: Console, rows: list) -> None:
    table = Table(title="Shipped topologies", box=box.SIMPLE_HEAD)
    for col, just in (("name", "left"), ("gpu", "left"), ("gpus", "right"), ("HBM", "right"),
                      ("links (span, GB/s per GPU)", "left")):
        table.add_column(col, justify=just)
    for r in rows:
        links = ", ".join(f"{l['name']} {l['span_gpus']} {l['bandwidth_gb_s']:g}" for l in r["links"])
        table.add_row(escape(r["name"]), escape(r["gpu"]),
                      f"{r['gpus']} ({r['nodes']}×{r['gpus_per_node']})",
                      f"{r['hbm_gib']:.0f} GiB", escape(links))
    console.print(table)


def render_bench(console: Console, d: dict) -> None:
    table = Table(title=f"lts bench: {escape(d['model'])} on {escape(d['topology'])}",
                  box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("measure", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_row("evaluator (one core, tables and fused pieces built)",
                  f"{d['evaluations_per_s']:,.0f} strategies/s")
    table.add_row("evaluator, fusing the coarse rows in the call",
                  f"{d['evaluations_per_s_fusing']:,.0f} strategies/s")
    table.add_row("evaluator, cold (coarse tables built in the call)",
                  f"{d['evaluations_per_s_cold']:,.0f} strategies/s")
    table.add_row("strategies evaluated", f"{d['evaluations']:,}")
    table.add_row("lts estimate (in process)", f"{d['estimate_wall_s'] * 1e3:.1f} ms")
    for key, label in (("search_wall_s", "search (ppo, budget 4000 calls)"),
                       ("exact_wall_s", "exact optimum")):
        if d.get(key) is not None:
            table.add_row(label, f"{d[key]:.2f} s")
    console.print(table)


# ----------------------------------------------------------------------------------------------
# progress (stderr)

class _Advance:
    """The ``progress`` callback of the searchers: ``advance(n)`` after n evaluator calls (0:
    still working); ``describe(text)`` relabels the bar."""

    def __init__(self, progress: Progress | None, task):
        self.progress, self.task = progress, task

    def __call__(self, n: int) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def describe(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=escape(text))

    def set_total(self, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=total)


@contextmanager
def progress(total, description: str, disable: bool = False):
    """A transient progress bar on stderr (off when ``disable`` or stderr is not a terminal);
    ``total=None`` shows an indeterminate bar. Yields an ``_Advance`` callback."""
    console = Console(stderr=True, highlight=False)
    if disable or not console.is_terminal:
        yield _Advance(None, None)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield _Advance(bar, bar.add_task(escape(description), total=total))


# ----------------------------------------------------------------------------------------------
# lts search

def json_safe(obj):
    """numpy scalars and containers of them -> plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item"):
        obj = obj.item()
    if isinstance(obj, float):
        return _num(obj)
    return obj


# the engines' variants by name in the table (strategy.py; docs/engines.md)
NAMED_CHOICES = {EXPERT_CHOICES: "experts split", DP_ATTENTION: "DP attention",
                 with_experts(DP_ATTENTION): "DP attention, experts split"}


def changed_ops(row) -> str:
    """The per-op choices of a strategy row that differ from Megatron's, "megatron", or the
    name of an engine variant (``NAMED_CHOICES``; the JSON has every op)."""
    named = NAMED_CHOICES.get(tuple(int(c) for c in row[N_COARSE:]))
    if named:
        return named
    parts = format_strategy(row, only_changed=True).split(",")[4:]
    return ", ".join(parts) if parts else "megatron"


def degrees(row) -> str:
    return "/".join(str(int(v)) for v in row[:4])


def _collectives(ops: list) -> dict:
    """(kind, group, op) -> (instances, total µs) of a breakdown, summed over the model."""
    out = {}
    for op in ops:
        for c in op["collectives"]:
            key = (c["kind"], c["group"], op["name"])
            n, t = out.get(key, (0, 0.0))
            out[key] = (n + c["count"], t + c["time_us"] * c["count"])
    return out


def _op_time_us(ops: list) -> float:
    return sum(op["time_us"] * op["count"] for op in ops)


def why_dict(res: Result, ops: list, mres: Result, mops: list,
             megatron: Result | None = None) -> dict:
    """Why a strategy beats Megatron's per-op choices at the same tp/ep/pp/batch: collectives
    (kind, group, op) it avoids, adds or resizes (instances and µs summed over the model), and
    the step-time difference. ``res``/``ops`` and ``mres``/``mops`` come from costmodel.breakdown
    (one step); ``megatron``: the result to report for Megatron's choices when the objective is
    not that step's (the serve phase), else ``mres``.
    """
    ops, mops = ops_us(ops), ops_us(mops)
    a, b = _collectives(ops), _collectives(mops)

    def entry(key, n, t, **extra):
        return {"kind": key[0], "group": key[1], "op": key[2], "count": int(n),
                "time_us": float(t), **extra}

    avoids = [entry(k, *b[k]) for k in b if k not in a]
    adds = [entry(k, *a[k]) for k in a if k not in b]
    resized = [entry(k, *a[k], megatron_time_us=float(b[k][1])) for k in a
               if k in b and abs(a[k][1] - b[k][1]) > max(0.01 * max(a[k][1], b[k][1]), 1.0)]
    for lst, key in ((avoids, "time_us"), (adds, "time_us")):
        lst.sort(key=lambda e: -e[key])
    resized.sort(key=lambda e: -abs(e["time_us"] - e["megatron_time_us"]))
    coll = sum(t for _, t in a.values()) - sum(t for _, t in b.values())
    return {"megatron": result_dict(megatron if megatron is not None else mres, 0),
            "avoids": avoids, "adds": adds, "resized": resized,
            "collectives_delta_us": float(coll),
            "ops_delta_us": float(_op_time_us(ops) - _op_time_us(mops)),
            "step_ms": _num(res.step_s[0] * 1e3), "megatron_step_ms": _num(mres.step_s[0] * 1e3)}


def fmt_us(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if abs(us) >= 1e3 else f"{us:.0f} µs"


def _coll_text(e: dict, resized: bool = False) -> str:
    t = (f"{fmt_us(e['megatron_time_us'])}→{fmt_us(e['time_us'])}" if resized
         else fmt_us(e["time_us"]))
    return f"{SHORT[e['kind']]} {e['group']} @{e['op']} ×{e['count']} {t}"


def _coll_list(entries: list, resized: bool = False, limit: int = 3) -> str:
    text = ", ".join(_coll_text(e, resized) for e in entries[:limit])
    return text + (f", +{len(entries) - limit} more" if len(entries) > limit else "")


def _delta(us: float) -> str:
    return ("+" if us >= 0 else "-") + fmt_us(abs(us))


def limit_ms(ms):
    """An SLO in ms for JSON: null when not given or inf (no limit)."""
    return ms if ms and math.isfinite(ms) else None


def _slo(name: str, ms) -> str:
    return f"{name} ≤ {ms:g} ms" if limit_ms(ms) else ""


def slo_text(problem) -> str:
    """The workload in words (context or request shape, and the SLOs): of a search problem
    (``lts.problems.Problem`` or ``ServeProblem``) or a ``Workload``."""
    if problem.phase == "serve":
        slos = [_slo("TPOT", problem.tpot_slo_ms), _slo("TTFT", problem.ttft_slo_ms)]
        return f"{problem.isl} in / {problem.osl} out tokens per request, " + \
            (", ".join(x for x in slos if x) or "no SLO")
    work = problem if isinstance(problem, Workload) else problem.work
    if work.phase == "decode":
        return f"context {work.context}, " + (_slo("TPOT", work.tpot_slo_ms) or "no TPOT SLO")
    return f"prompt {work.context}, " + (_slo("TTFT", work.ttft_slo_ms) or "no TTFT SLO")


def workload_dict(problem) -> dict:
    """The ``workload`` object of ``lts search --json`` (a Problem or ServeProblem)."""
    w, topo = problem.work, problem.topo
    if problem.phase == "serve":
        return {"phase": "serve", "isl": problem.isl, "osl": problem.osl,
                "tpot_slo_ms": limit_ms(problem.tpot_slo_ms),
                "ttft_slo_ms": limit_ms(problem.ttft_slo_ms),
                "gpus": w.budget(topo), "engine": problem.engine.name}
    return {"phase": w.phase, "context": w.context, "tpot_slo_ms": limit_ms(w.tpot_slo_ms),
            "ttft_slo_ms": limit_ms(w.ttft_slo_ms), "gpus": w.budget(topo)}


def versus_dict(versus) -> dict | None:
    """``why_dict`` of a ``search.Versus`` (None stays None)."""
    if versus is None:
        return None
    return why_dict(versus.step, versus.ops, versus.megatron_step, versus.megatron_ops,
                    versus.megatron_serve)


def search_dict(run, launch=None) -> dict:
    """The JSON of ``lts search`` (README "JSON output") from a ``search.SearchRun`` that found
    a strategy, and the ``emit.Launch`` of ``--emit`` if any."""
    sr, res, p, mega_best = run.result, run.top, run.problem, run.megatron_best
    d = {"method": run.method, "budget": run.budget, "evaluations": sr.evaluations,
         "wall_s": run.wall_s, "seed": run.seed, "best": result_dict(res, 0),
         "top": [result_dict(res, i) for i in range(len(res))],
         "megatron_best": _search_result(run, mega_best) if mega_best is not None else None,
         "stats": json_safe(sr.stats),
         "model": model_dict(p.model), "topology": p.topo.name,
         "workload": workload_dict(p),
         "vs_megatron": versus_dict(run.versus)}
    for r, i in ((d["best"], 0), *((t, i) for i, t in enumerate(d["top"]))):
        r.update(_replica_fields(run, res, i))
    d["engine_space"] = p.engine_space
    any_best = run.best_any_sharding
    if any_best is not None:
        d["best_any_sharding"] = _search_result(run, any_best)
        d["headroom"] = _num(run.headroom)
    if run.problem.phase == "serve":
        d["pareto"] = pareto_dict(run.pareto, run) + [disagg_point(dg)
                                                       for dg in run.disagg_pareto]
        d["sizing"] = sizing_dict(run.sizing, run)
        d["sizing_disagg"] = sizing_disagg_dict(run.sizing_disagg)
        d["disagg"] = disagg_dict(run.disagg)
    if launch is not None:
        d["emit"] = emit_dict(launch)
    return d


def _search_result(run, res) -> dict:
    """A search's one-row result with ``replicas``, ``tokens_per_s_per_cluster_gpu`` and
    ``runnable_on``, as ``best`` and ``top`` have them."""
    d = result_dict(res, 0)
    d.update(_replica_fields(run, res, 0))
    return d


def _replica_fields(run, res, i) -> dict:
    """``deploy_fields`` of result i of a search (per GPU of the budget: the objective, as
    ``Problem.per_cluster_gpu``)."""
    p = run.problem
    return deploy_fields(p.model, res, i, p.work.budget(p.topo))


def headroom_text(run) -> str | None:
    """The headroom line: what a per-op sharding the named engine lacks would add (None: no
    engine named, or the engine already runs the best of the whole space)."""
    any_best = run.best_any_sharding
    if any_best is None:
        return None
    p = run.problem
    engine = ENGINES[p.engine_space].label
    form = engine_form(p.model, any_best.strategies)
    on = runnable_on(p.model, form)[0]
    row = [int(v) for v in form[0]]
    what = (f"a per-op sharding {engine} does not implement"
            if engine_variants(p.engine_space, p.model, row[0], row[1]) else
            f"a layout {engine} does not run (tp={row[0]} with ep={row[1]})")
    return (f"{what} would add {(run.headroom - 1) * 100:.1f}%: "
            f"{format_strategy(any_best.strategies[0], only_changed=True)} at "
            f"{float(p.per_cluster_gpu(any_best)[0]):,.1f} tokens/s per GPU of the budget "
            f"(the best of the whole per-op space, {run.any_sharding.method}"
            + (f"; {', '.join(ENGINES[e].label for e in on)} run{'s' if len(on) == 1 else ''} "
               "it)" if on else "; no engine runs it as written)"))


def pareto_dict(res, run) -> list:
    """The ``pareto`` list of ``lts search --json`` (serve): each frontier point's strategy and
    figures, in order of tokens/s per user."""
    if res is None:
        return []
    return [{**strategy_dict(res.strategies[i]),
             "tokens_per_s_per_gpu": _num(res.tokens_per_s_per_gpu[i]),
             "tokens_per_s_per_user": _num(1.0 / res.tpot_s[i]),
             "ttft_ms": _num(res.ttft_s[i] * 1e3), "tpot_ms": _num(res.tpot_s[i] * 1e3),
             "mode": "agg", **_replica_fields(run, res, i)} for i in range(len(res))]


def disagg_dict(dg) -> dict | None:
    """The ``disagg`` object of a serve search (null: no disaggregated deployment fits)."""
    if dg is None:
        return None
    return {"prefill": result_dict(dg.prefill, 0), "decode": result_dict(dg.decode, 0),
            "prefill_instances": dg.prefill_instances, "decode_instances": dg.decode_instances,
            "gpus": dg.gpus, "tokens_per_s_per_gpu": _num(dg.tokens_per_s_per_gpu),
            "tokens_per_s_per_cluster_gpu": _num(dg.tokens_per_s_per_cluster_gpu),
            "ttft_ms": _num(dg.ttft_s * 1e3), "tpot_ms": _num(dg.tpot_s * 1e3),
            "requests_per_s": _num(dg.requests_per_s), "transfer_ms": _num(dg.transfer_s * 1e3)}


def disagg_point(dg) -> dict:
    """A point of the two-pool frontier in the ``pareto`` list (``mode`` "disagg")."""
    return {"mode": "disagg", "prefill": strategy_dict(dg.prefill.strategies[0]),
            "decode": strategy_dict(dg.decode.strategies[0]),
            "prefill_instances": dg.prefill_instances, "decode_instances": dg.decode_instances,
            "gpus": dg.gpus, "tokens_per_s_per_gpu": _num(dg.tokens_per_s_per_gpu),
            "tokens_per_s_per_user": _num(1.0 / dg.tpot_s), "ttft_ms": _num(dg.ttft_s * 1e3),
            "tpot_ms": _num(dg.tpot_s * 1e3)}


def disagg_text(dg) -> str:
    """A disaggregated deployment in one line (no markup)."""
    return (f"{dg.prefill_instances} prefill instance{'s' if dg.prefill_instances != 1 else ''} "
            f"of {format_strategy(dg.prefill.strategies[0], only_changed=True)} + "
            f"{dg.decode_instances} decode of "
            f"{format_strategy(dg.decode.strategies[0], only_changed=True)}: {dg.gpus} GPUs, "
            f"{dg.tokens_per_s_per_gpu:,.1f} output tokens/s per GPU used"
            + (f" ({dg.tokens_per_s_per_cluster_gpu:,.1f} per GPU of the budget)"
               if dg.tokens_per_s_per_cluster_gpu else "")
            + f", TTFT {dg.ttft_s * 1e3:,.0f} ms, TPOT {dg.tpot_s * 1e3:.1f} ms")


def sizing_dict(sizing, run) -> dict | None:
    """The ``sizing`` object of ``lts search --request-rate`` (null without it or when nothing
    was found)."""
    if sizing is None:
        return None
    return {"request_rate": sizing.request_rate, "instances": sizing.instances,
            "gpus": sizing.gpus, "fits": sizing.fits,
            "strategy": {**result_dict(sizing.result, 0),
                         "requests_per_s": _num(sizing.result.tokens_per_s[0] / run.problem.osl)}}


def sizing_disagg_dict(sizing) -> dict | None:
    """The ``sizing_disagg`` object of ``lts search --request-rate`` (null without it or when no
    two pools meet the SLOs): the fewest GPUs of prefill and decode instances that serve the
    rate (``deployment``: as ``disagg``), and whether they fit the budget."""
    if sizing is None:
        return None
    dg = sizing.deployment
    return {"request_rate": sizing.request_rate, "gpus": dg.gpus, "fits": sizing.fits,
            "prefill_instances": dg.prefill_instances, "decode_instances": dg.decode_instances,
            "deployment": disagg_dict(dg)}


def _frontier(run):
    """(frontier points [(tokens/s per user, tokens/s per GPU)], the best's point, the least
    tokens/s per user the TPOT limit allows or None) of a serve ``SearchRun``."""
    res, best = run.pareto, run.best
    points = [] if res is None else [(float(1.0 / t), float(v)) for t, v in
                                     zip(res.tpot_s, res.tokens_per_s_per_gpu)]
    chosen = (float(1.0 / best.tpot_s[0]), float(best.tokens_per_s_per_gpu[0]))
    chosen = chosen if all(map(math.isfinite, chosen)) else None     # osl 1: no TPOT
    tpot = run.problem.tpot_slo_ms
    limit = 1e3 / tpot if tpot and math.isfinite(tpot) else None
    return points, chosen, limit


def render_capacity(console: Console, run) -> None:
    """Replicas of the best strategy on the device budget and, with ``--request-rate``, the
    fewest GPUs that serve it."""
    res, budget = run.best, run.problem.work.budget(run.problem.topo)
    rep = _replica_fields(run, res, 0)
    size = int(res.gpus[0])
    console.print(f"[bold]Replicas[/] {budget:,} GPU{'s hold' if budget != 1 else ' holds'} "
                  f"{rep['replicas']:,} instance{'s' if rep['replicas'] != 1 else ''} of the "
                  f"best ({size} GPU{'s' if size != 1 else ''} each): "
                  f"{rep['tokens_per_s_per_cluster_gpu']:,.1f} output tokens/s per GPU of the "
                  "budget", overflow="fold")
    dg, agg = run.disagg, float(run.problem.per_cluster_gpu(res)[0])   # per GPU of the budget
    if dg is None:
        p = run.problem
        console.print("[bold]Disaggregated[/] no prefill pool and decode pool fit the GPU budget"
                      + (" and the SLOs" if limit_ms(p.tpot_slo_ms) or limit_ms(p.ttft_slo_ms)
                         else "") + " together" + (" (one output token: no decode)"
                                                   if p.osl < 2 else ""), overflow="fold")
    else:
        win = dg.tokens_per_s_per_cluster_gpu / agg
        console.print(
            f"[bold]Disaggregated[/] {escape(disagg_text(dg))}; "
            + (f"two pools win, {win:.2f}× one pool" if win > 1 else
               f"one pool wins, {1 / win:.2f}× two pools") + " per GPU of the budget"
            + f" (decode steps without prefill chunks: TPOT {dg.tpot_s * 1e3:.1f} vs "
            f"{res.tpot_s[0] * 1e3:.1f} ms at batch {int(dg.decode.strategies[0][3])} vs "
            f"{int(res.running[0])})", overflow="fold")
    sz = run.sizing
    if sz is not None:
        row = format_strategy(sz.result.strategies[0], only_changed=True)
        rps = sz.result.tokens_per_s[0] / run.problem.osl
        console.print(f"[bold]Sizing[/] {sz.request_rate:g} requests/s: {sz.instances:,} "
                      f"instance{'s' if sz.instances != 1 else ''} of {escape(row)} "
                      f"({rps:,.2f} requests/s each), {sz.gpus:,} GPUs"
                      + ("" if sz.fits else f": more than the {budget:,} GPUs of the budget"),
                      overflow="fold")
    two = run.sizing_disagg
    if two is not None:
        dg = two.deployment
        versus = "" if sz is None else f" vs {sz.gpus:,} with one pool"
        console.print(f"[bold]Sizing[/] (two pools) {two.request_rate:g} requests/s: "
                      f"{escape(disagg_text(dg))}, {dg.requests_per_s:,.2f} requests/s{versus}"
                      + ("" if two.fits else f": more than the {budget:,} GPUs of the budget"),
                      overflow="fold")


def pareto_svg(run) -> str:
    """``lts search --plot``: the SVG of a serve search's frontier (``plot.frontier_svg``)."""
    p = run.problem
    points, chosen, limit = _frontier(run)
    ttft = _slo("TTFT", p.ttft_slo_ms)
    series = [Series("one pool (aggregated), " + _frontier_whose(run, short=True),
                     "#1f6fb4", points)]
    if run.disagg_pareto:
        series.append(Series("two pools (disaggregated)", "#e67e22",
                             [(1.0 / dg.tpot_s, dg.tokens_per_s_per_gpu)
                              for dg in run.disagg_pareto]))
    return frontier_svg(
        series,
        f"{p.model.name} on {p.topo.name} ({p.work.budget(p.topo)} GPU"
        f"{'s' if p.work.budget(p.topo) != 1 else ''}): serving trade-off",
        "tokens/s per user (1000 / TPOT ms)", "output tokens/s per GPU", chosen=chosen,
        x_limit=limit, limit_label=_slo("TPOT", p.tpot_slo_ms),
        note=f"every point meets {ttft}" if ttft else "",
        subtitle=f"{p.engine.title}, {p.isl} in / {p.osl} out tokens per request")


def _frontier_whose(run, short: bool = False) -> str:
    """Where a serve search's frontier points come from: the exact frontier over the concurrency
    grid (the powers of two and the KV capacity) of the whole space or of the engine's, plus each
    top strategy at its best integer concurrency; else what the method found."""
    if run.method != "exact":
        return f"best {run.method} found" if short else "found"
    space = ("the whole space" if run.problem.engine_space == GENERIC else
             f"{ENGINES[run.problem.engine_space].label}'s space")
    if short:
        return f"{space}, exact on the concurrency grid"
    return (f"of {space} (exact at the powers of two and the KV capacity, and the best "
            "strategies at their best integer concurrency)")


def render_frontier(console: Console, run) -> None:
    """The serving trade-off of a serve search in plain characters (80 columns)."""
    points, chosen, limit = _frontier(run)
    if not points:
        return
    whose = _frontier_whose(run)
    console.print(f"[bold]Trade-off[/] ({len(points)} point{'s' if len(points) != 1 else ''}: "
                  f"for each tokens/s per user, the best output tokens/s per GPU {whose}; "
                  "* the best" + (", : the TPOT limit)" if limit else ")"))
    for line in frontier_text(points, chosen, limit):
        console.print(line, markup=False, highlight=False)
    console.print(" " * 11 + "tokens/s per user (1000 / TPOT ms) →  ↑ output tokens/s per GPU",
                  markup=False, highlight=False)


def render_search(console: Console, run) -> None:
    """The ranked table, "why it wins" and the footer of ``lts search``, from a
    ``search.SearchRun`` that found a strategy: its top rows evaluated, ``versus`` (None when
    the best is Megatron's own choice) and the Megatron baseline's best (None if Megatron has
    no feasible strategy).
    """
    m, topo, phase = run.problem.model, run.problem.topo, run.problem.phase
    budget = run.problem.work.budget(topo)
    slo, sr, res = slo_text(run.problem), run.result, run.top
    mega_score, mega_best = run.megatron.best_score, run.megatron_best
    why, wall_s, seed = versus_dict(run.versus), run.wall_s, run.seed
    latency = "TTFT ms" if phase == "prefill" else "TPOT ms"
    table = Table(title=f"{escape(m.name)} on {escape(topo.name)}: best strategies "
                        f"({escape(sr.method)})",
                  caption=f"{phase}, {escape(slo)}; tok/s/GPU: of the {budget:,}-GPU budget, "
                          f"filled by copies of the instance (×n); used: per GPU the copies "
                          f"use; on: runs as written on v vLLM, s SGLang, t TensorRT-LLM; "
                          f"×Meg: tok/s/GPU ÷ Megatron's best",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("tp/ep/pp/b", no_wrap=True)
    table.add_column("ops vs Megatron", overflow="fold", ratio=1, min_width=8)
    table.add_column("on", no_wrap=True)
    table.add_column("×n", justify="right", no_wrap=True)
    table.add_column("tok/s/GPU", justify="right", no_wrap=True)
    table.add_column("used", justify="right", no_wrap=True)
    table.add_column(latency, justify="right", no_wrap=True)
    serving = phase == "serve"    # the closed loop: both latencies, b the concurrency; the
    if serving:                   # KV cache fills the memory by design (GiB/GPU in --json)
        table.add_column("TTFT s", justify="right", no_wrap=True)
    else:
        table.add_column("GiB/GPU", justify="right", no_wrap=True)
    table.add_column("×Meg", justify="right", no_wrap=True)
    cluster, copies = run.problem.per_cluster_gpu(res), replicas(run.problem, res)
    on = runnable_on(m, res.strategies)
    for i in range(len(res)):
        row = res.strategies[i]
        tps = cluster[i]
        lat = res.ttft_s[i] if phase == "prefill" else res.tpot_s[i]
        ratio = f"{tps / mega_score:.3f}" if math.isfinite(mega_score) and mega_score > 0 else "-"
        third = fmt_s(res.ttft_s[i]) if serving else f"{res.memory_bytes[i] / GIB:.1f}"
        table.add_row(str(i + 1), degrees(row), escape(changed_ops(row)),
                      "".join(e[0] for e in on[i]) or "-", f"{int(copies[i]):,}", f"{tps:,.1f}",
                      f"{res.tokens_per_s_per_gpu[i]:,.1f}", fmt_ms(lat), third, ratio)
    console.print(table)
    best = res.strategies[0]
    at = f"tp={best[0]} ep={best[1]} pp={best[2]} batch={best[3]}"
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold", ratio=1)
    if why is None:
        grid.add_row("[bold]Why it wins[/]",
                     f"it is Megatron's own per-op sharding at {at}; " +
                     ("the megatron method searches no other per-op choices."
                      if sr.method == "megatron" else "no per-op change helps there."))
    else:
        mw = why["megatron"]
        loses = mw["valid"] and mw["tokens_per_s_per_gpu"] > res.tokens_per_s_per_gpu[0]
        grid.add_row("[bold]Why it loses[/]" if loses else "[bold]Why it wins[/]",
                     f"against Megatron's per-op choices at the same {at} "
                     + (f"({mw['tokens_per_s_per_gpu'] * float(run.problem.fill(res.gpus[0])):,.1f} "
                        "tokens/s/GPU)" if mw["valid"] else
                        f"(invalid there: {', '.join(mw['reasons'])})"))
        same = why["step_ms"] == why["megatron_step_ms"] and mw["valid"] and not (
            why["avoids"] or why["adds"] or why["resized"])
        if same:
            grid.add_row("", "its per-op choices cost the same as Megatron's there"
                         + (" (tp=1: nothing to shard)" if best[0] == 1 else "")
                         + "; only the degrees and batch separate it from Megatron's best")
        for key, label in (("avoids", "  avoids"), ("adds", "  adds"), ("resized", "  resizes")):
            if why[key]:
                grid.add_row(label, escape(_coll_list(why[key], resized=key == "resized")))
        if not same and not (why["avoids"] or why["adds"] or why["resized"]):
            grid.add_row("", "the same collectives")
        if not same and why["step_ms"] is not None and why["megatron_step_ms"] is not None:
            d = why["step_ms"] - why["megatron_step_ms"]
            grid.add_row("  decode step" if phase == "serve" else "  step",
                         f"{why['megatron_step_ms']:.2f} → {why['step_ms']:.2f} ms "
                         f"({d:+.2f} ms; summed over layers: collectives "
                         f"{_delta(why['collectives_delta_us'])}, ops "
                         f"{_delta(why['ops_delta_us'])})")
    if mega_best is not None:
        tps = cluster[0]
        mtps = float(run.problem.per_cluster_gpu(mega_best)[0])
        grid.add_row("[bold]Megatron best[/]",
                     f"{format_strategy(mega_best.strategies[0], only_changed=True)}: {mtps:,.1f} "
                     f"tokens/s/GPU; the best is {tps / mtps:.3f}× that")
    else:
        grid.add_row("[bold]Megatron best[/]", "none: Megatron's per-op sharding has no feasible "
                                               "strategy here")
    head = headroom_text(run)
    if head is not None:
        grid.add_row("[bold]Headroom[/]", escape(head))
    elif run.any_sharding is not None:
        grid.add_row("[bold]Headroom[/]",
                     f"none: {ENGINES[run.problem.engine_space].label} runs the best of "
                     f"the whole per-op space ({run.any_sharding.method})")
    console.print(grid)
    if serving:
        render_frontier(console, run)
        render_capacity(console, run)
    stats = "".join(f", {k.replace('_', ' ')} {v:,}" if isinstance(v, int) else
                    f", {k.replace('_', ' ')} {v}" for k, v in sr.stats.items())
    console.print(f"[dim]{escape(sr.method)}: {sr.evaluations:,} evaluations, {wall_s:.2f} s, "
                  f"seed {seed}{escape(stats)}[/]", overflow="fold")


# ----------------------------------------------------------------------------------------------
# lts search --emit

def emit_dict(launch) -> dict:
    """The ``emit`` object of ``lts search --json --emit ENGINE`` (an ``emit.Launch``)."""
    def res(r):
        return result_dict(r, 0) if r is not None else None

    d = {"engine": launch.engine, "engine_name": launch.name,
         "version_checked": launch.version_checked, "docs": launch.docs,
         "faithful": bool(launch.faithful),
         "commands": [{"role": role, "command": cmd} for role, cmd in launch.commands],
         "notes": list(launch.notes), "reasons": list(launch.reasons),
         "launches": launch.chosen, "replicas": int(launch.replicas),
         "strategy": strategy_dict(launch.strategy) if launch.strategy is not None else None,
         "best_runnable": res(launch.best_runnable)}
    if not launch.faithful:
        d["nearest"] = res(launch.result)
        d["same_degrees"] = res(launch.same_degrees)
    return d


def wrap_command(cmd: str, width: int = 80) -> str:
    """A shell command as lines of at most ``width`` columns joined by backslash continuations,
    broken only before a ``--flag`` (never inside a quoted argument)."""
    groups = []
    for word in cmd.split(" "):
        if groups and not word.startswith("--"):
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, line = [], ""
    for g in groups:
        indent = "    " if lines else ""
        if line and len(indent + line + " " + g) > width - 2:
            lines.append(line)
            line = g
        else:
            line = f"{line} {g}" if line else g
    lines.append(line)
    return " \\\n".join(lines[:1] + ["    " + ln for ln in lines[1:]])


def _estimate_line(res: Result, phase: str) -> str:
    lat = (f"TTFT {fmt_ms(res.ttft_s[0])} ms" if phase == "prefill"
           else f"TPOT {fmt_ms(res.tpot_s[0])} ms")
    return (f"{res.tokens_per_s_per_gpu[0]:,.1f} tokens/s/GPU, {lat}, "
            f"{res.memory_bytes[0] / GIB:.1f} GiB/GPU, {reasons_text(res, 0)}")


def _print_commands(console: Console, out: list, commands, notes, para, width: int) -> None:
    """Print ``out`` (lines), then each (role, command) wrapped, then the notes."""
    out.append("")
    for role, cmd in commands:
        out.append(f"# {role}")
        out.append(wrap_command(cmd, width))
    if notes:
        out.append("")
        out.append("Notes:")
        out += [para(n, "    ", "  - ") for n in notes]
    console.print("\n".join(out), markup=False, highlight=False, soft_wrap=True)


def render_emit(console: Console, launch, phase: str, width: int = 80) -> None:
    """Plain text, at most ``width`` columns: the engine, whether the commands run the best
    strategy as found, the nearest runnable strategy if not, the commands, and notes."""
    import textwrap

    def para(text, indent="", first=""):
        return textwrap.fill(text, width, initial_indent=first or indent,
                             subsequent_indent=indent, break_on_hyphens=False)

    out = [para(f"Launch with {launch.name} (flags checked against {launch.name} "
                f"{launch.version_checked}: docs/engines.md)")]
    def strat(row):          # spaced so that long strategies wrap between entries
        return format_strategy(row, only_changed=True).replace(",", ", ")

    best = strat(launch.best)
    if launch.faithful:
        out.append(para(f"Faithful: the commands run the best strategy as found ({best})."))
    else:
        found = ""
        if launch.best_result is not None:
            found = f"; {launch.best_result.tokens_per_s_per_gpu[0]:,.1f} tokens/s/GPU"
        out.append(para(f"NOT FAITHFUL: {launch.name} cannot run the best strategy as found "
                        f"({best}{found}):"))
        out += [para(r, "    ", "  - ") for r in launch.reasons]
        if launch.same_degrees is not None:
            out.append(para(f"Same degrees with {launch.name}'s sharding: "
                            f"{strat(launch.same_degrees.strategies[0])}", "  "))
            out.append(para(_estimate_line(launch.same_degrees, phase), "    ", "    "))
        else:
            out.append(para(f"Same degrees: {launch.name} cannot run them at all.", "  "))
        same_row = (launch.same_degrees.strategies[0] if launch.same_degrees is not None
                    else None)
        if launch.best_runnable is not None and same_row is not None and \
                (launch.best_runnable.strategies[0] == same_row).all():
            out.append(para(f"It is also the best strategy {launch.name} can run.", "  "))
        elif launch.best_runnable is not None:
            out.append(para(f"Best {launch.name} can run: "
                            f"{strat(launch.best_runnable.strategies[0])}", "  "))
            out.append(para(_estimate_line(launch.best_runnable, phase), "    ", "    "))
        what = {"same_degrees": f"the same degrees with {launch.name}'s sharding",
                "best_runnable": f"the best strategy {launch.name} can run",
                "none": "nothing"}[launch.chosen]
        out.append(para(f"The commands below run {what}, not the best strategy found."))
    _print_commands(console, out, launch.commands, launch.notes, para, width)


def emit_disagg_dict(dl) -> dict:
    """The ``emit_disagg`` object of ``lts search --phase serve --json --emit ENGINE`` (an
    ``emit_disagg.DisaggLaunch``): the commands of the two-pool deployment."""
    return {"engine": dl.engine, "engine_name": dl.name, "version_checked": dl.version_checked,
            "docs": dl.docs, "faithful": bool(dl.faithful),
            "prefill_faithful": bool(dl.prefill.faithful),
            "decode_faithful": bool(dl.decode.faithful),
            "deployment": disagg_dict(dl.deployment), "gpus": dl.gpus,
            "commands": [{"role": role, "command": cmd} for role, cmd in dl.commands],
            "notes": list(dl.notes),
            "prefill_reasons": list(dl.prefill.reasons), "decode_reasons": list(dl.decode.reasons)}


def render_emit_disagg(console: Console, dl, width: int = 80) -> None:
    """Plain text, at most ``width`` columns: the two-pool deployment's commands (as
    ``render_emit``), after whether each pool runs its strategy as found."""
    import textwrap

    def para(text, indent="", first=""):
        return textwrap.fill(text, width, initial_indent=first or indent,
                             subsequent_indent=indent, break_on_hyphens=False)

    out = [para(f"Launch the two pools with {dl.name} (flags checked against {dl.name} "
                f"{dl.version_checked}: {dl.docs})")]
    for pool, launch in (("prefill", dl.prefill), ("decode", dl.decode)):
        if launch.faithful:
            out.append(para(f"{pool}: faithful, the strategy as found.", "  "))
        else:
            runs = ("nothing" if launch.strategy is None else
                    format_strategy(launch.strategy, only_changed=True).replace(",", ", "))
            out.append(para(f"{pool}: NOT FAITHFUL ({len(launch.reasons)} per-op choice"
                            f"{'s' if len(launch.reasons) != 1 else ''} it cannot run); "
                            f"{dl.name} runs {runs}", "    ", "  "))
    if dl.deployment is not None:
        what = "as found" if dl.faithful else "paired again for the strategies it runs"
        out.append(para(f"Deployment ({what}): {disagg_text(dl.deployment)}"))
    _print_commands(console, out, dl.commands, dl.notes, para, width)


# ----------------------------------------------------------------------------------------------
# lts compare

def compare_dict(cmp) -> dict:
    """The JSON of ``lts compare`` from a ``search.Comparison`` (exact found a strategy)."""
    def result(r):
        return result_dict(r.evaluated, 0) if r.best is not None else None

    p = cmp.problem
    return {"methods": [asdict(s) for s in cmp.summaries], "exact": result(cmp.exact),
            "megatron": result(cmp.megatron), "seeds": cmp.seeds, "budget": cmp.budget,
            "model": model_dict(p.model), "topology": p.topo.name, "workload": workload_dict(p),
            "engine_space": p.engine_space}


def render_compare(console: Console, cmp) -> None:
    """The table of ``lts compare`` from a ``search.Comparison``: a line per ``MethodSummary``
    (the ``methods`` entries of the JSON)."""
    p = cmp.problem
    title = f"{p.model.name} on {p.topo.name}: {cmp.seeds} seeds × {cmp.budget} calls"
    workload = f"{p.phase}, {slo_text(p)}" + (
        f"; {ENGINES[p.engine_space].label}'s space" if p.engine_space != GENERIC else "")
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, padding=(0, 0), show_edge=False,
                  caption=escape(workload) + ". Table 1: mean over seeds ÷ random walk's mean; "
                          "Fig. 3: best over seeds ÷ Megatron's best; of exact: fraction of "
                          "the optimum")
    for col in ("method", "seeds", "mean\ntok/s/GPU", "Table 1\n÷ RW", "best\ntok/s/GPU",
                "Fig. 3\n÷ Meg", "of exact\nmean", "of exact\nbest", "wall s\nmean"):
        table.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    def tps(x):
        return "-" if x is None else f"{x:,.1f}" if x < 1e4 else f"{x:,.0f}"

    for r in cmp.summaries:
        table.add_row(escape(r.method), str(r.seeds), tps(r.mean_tokens_per_s_per_gpu),
                      f(r.table1, ".3f"), tps(r.best_tokens_per_s_per_gpu),
                      f(r.figure3, ".3f"), f(r.fraction_of_exact_mean, ".3f"),
                      f(r.fraction_of_exact_best, ".3f"), f(r.wall_s_mean, ".2f"))
    console.print(table)


# ----------------------------------------------------------------------------------------------
# lts validate

METRIC_SHORT = {"output_tokens_per_s": "tok/s", "output_tokens_per_s_per_gpu": "tok/s/GPU",
                "ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms"}


VALIDATE_WIDTH = 104     # the widest row (ids, mixtral-8x22b, 20000/2000) without folding
ID_WIDTH = 28            # ids longer than this fold
ID_MIN_WIDTH = 19        # what is left of VALIDATE_WIDTH beside the other columns


def _validate_width(console: Console):
    """A fixed table width where the console is narrower than the widest row (a pipe: 80),
    so ids and model names are never truncated; else rich's own sizing."""
    return VALIDATE_WIDTH if console.width < VALIDATE_WIDTH else None


def _fmt_value(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def _fmt_opt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


VALIDATE_ROWS = 400      # a larger file shows its rows furthest from the measurement only
VALIDATE_WORST = 50


def _summary_line(s: dict) -> str:
    return (f"median |log2(predicted/measured)| {_fmt_opt(s['median_abs_log2_ratio'], '.3f')}, "
            f"within 2x {_fmt_opt(None if s['within_2x'] is None else 100 * s['within_2x'], '.1f')}%")


def render_validate(console: Console, d: dict) -> None:
    """Predicted vs measured per row (the furthest ones of a large file), the skipped rows with
    their reasons, and the summary: overall, per metric, per engine, per parallel-config group."""
    rows = d["rows"]
    shown = rows
    if len(rows) > VALIDATE_ROWS:
        shown = sorted(rows, key=lambda r: -abs(r["log2_ratio"]))[:VALIDATE_WORST]
    table = Table(title=f"{escape(d['file'])}: predicted (serve phase) vs measured",
                  caption="batch: concurrency, or * the one with the highest output tokens/s; "
                          "ratio = predicted / measured", box=box.SIMPLE_HEAD,
                  padding=(0, 1), pad_edge=False, width=_validate_width(console))
    if shown is not rows:
        table.title += (f": the {len(shown)} rows furthest from the measurement of "
                        f"{len(rows)} (all rows: --json)")
    metrics = sorted({r["metric"] for r in rows})
    if len(metrics) == 1:      # one metric: name it in the title, not in every row
        table.title += f" ({metrics[0]})"
    for col, just in (("id", "left"), ("model", "left"), ("topology", "left"),
                      ("tp/ep/pp", "right"), ("isl/osl", "right"), ("batch", "right"),
                      ("metric", "left"), ("predicted", "right"), ("measured", "right"),
                      ("ratio", "right")):
        if col == "id":         # long ids fold onto more lines; every other column stays whole
            longest = max((len(r["id"]) for r in shown), default=2)
            table.add_column(col, overflow="fold", max_width=ID_WIDTH,
                             min_width=min(longest, ID_MIN_WIDTH))
        elif col != "metric" or len(metrics) > 1:
            table.add_column(col, justify=just, no_wrap=True, min_width=len(col))
    for r in shown:
        colour = "green" if abs(r["log2_ratio"]) <= 1.0 else "red"
        metric = [METRIC_SHORT[r["metric"]]] if len(metrics) > 1 else []
        table.add_row(escape(r["id"]), escape(r["model"]), escape(r["topology"]),
                      f"{r['tp']}/{r['ep']}/{r['pp']}", f"{r['isl']}/{r['osl']}",
                      f"{r['batch']}{'*' if r['best_batch'] else ''}", *metric,
                      _fmt_value(r["predicted"]), _fmt_value(r["measured"]),
                      f"[{colour}]{r['ratio']:.2f}[/]")
    console.print(table, crop=False)
    if d["skipped"]:
        n_skip = len(d["skipped"])
        skipped = Table(title=f"Skipped: {n_skip} row{'s' if n_skip != 1 else ''}",
                        box=box.SIMPLE_HEAD)
        skipped.add_column("id", no_wrap=True)
        skipped.add_column("row", justify="right")
        skipped.add_column("reason")
        for sk in d["skipped"][:VALIDATE_WORST]:
            skipped.add_row(escape(sk["id"]), str(sk["row"]), escape(sk["reason"]))
        if len(d["skipped"]) > VALIDATE_WORST:
            skipped.caption = f"the first {VALIDATE_WORST} (all: --json)"
        console.print(skipped)
    s = d["summary"]
    sp = s["spearman_by_group"]
    console.print(
        f"[bold]{s['count']}[/] of {d['total']} rows predicted ({len(d['skipped'])} skipped): "
        + _summary_line(s) + ", "
        f"Spearman within parallel-config groups: mean {_fmt_opt(sp['mean'], '.3f')} "
        f"(per GPU {_fmt_opt(sp['mean_per_gpu'], '.3f')}) over {len(sp['groups'])} groups")
    for key, label in (("by_metric", "metric"), ("by_engine", "engine")):
        parts = s.get(key) or {}
        if len(parts) > 1:
            for name, sub in parts.items():
                console.print(f"  {label} {escape(name)}: {sub['count']} rows, "
                              + _summary_line(sub))
    if sp["groups"]:
        groups = Table(title="Spearman rank correlation per group (rows differing only in "
                             "tp/ep/pp)", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                       width=_validate_width(console))
        for col, just in (("model", "left"), ("topology", "left"), ("precision", "left"),
                          ("engine", "left"), ("isl/osl", "right"), ("batch", "right"),
                          ("metric", "left"), ("rows", "right"), ("spearman", "right"),
                          ("per GPU", "right")):
            groups.add_column(col, justify=just, no_wrap=True, min_width=len(col))
        worst = sorted(sp["groups"], key=lambda g: (g["spearman"] if g["spearman"] is not None
                                                   else 2.0))
        for g in worst[:VALIDATE_WORST]:
            groups.add_row(escape(g["model"]), escape(g["topology"]), escape(g["precision"]),
                           escape(g["engine"]), f"{g['isl']}/{g['osl']}",
                           str(g["concurrency"] or "best"), METRIC_SHORT[g["metric"]],
                           str(len(g["ids"])), _fmt_opt(g["spearman"], ".2f"),
                           _fmt_opt(g["spearman_per_gpu"], ".2f"))
        if len(worst) > VALIDATE_WORST:
            groups.caption = f"the {VALIDATE_WORST} lowest of {len(worst)} (all: --json)"
        console.print(groups, crop=False)


__all__ = ["OPS", "REASONS"]
