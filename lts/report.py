"""Results -> JSON-able dicts and rich tables. The only module besides cli.py that imports rich.

JSON key names are a contract (DESIGN.md §5, README "JSON output"): add fields, never rename.
Display units (ms, GiB, us) appear only here.

Imports: specs, strategy, costmodel (types and constants), units.
"""
from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .costmodel import REASONS, Result
from .specs import ModelSpec, TopologySpec, param_counts
from .strategy import OPS, strategy_dict
from .units import GIB


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


def estimate_dict(m: ModelSpec, res: Result, ops: list) -> dict:
    d = result_dict(res, 0)
    d["model"] = model_dict(m)
    d["ops"] = ops
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
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}B"


def fmt_ms(s: float) -> str:
    return "-" if not math.isfinite(s) else f"{s * 1e3:.2f}"


def reasons_text(res: Result, i: int) -> str:
    return "valid" if res.valid[i] else "invalid: " + ", ".join(res.reason_list(i))


# ----------------------------------------------------------------------------------------------
# tables

def render_estimate(console: Console, m: ModelSpec, topo: TopologySpec, res: Result, ops: list,
                    phase: str) -> None:
    counts = param_counts(m)
    table = Table(title=f"{escape(m.name)} on {escape(topo.name)}: cost per op instance",
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
    s = result_dict(res, 0)
    lat = f"TPOT {fmt_ms(res.tpot_s[0])} ms" if phase == "decode" else \
        f"TTFT {fmt_ms(res.ttft_s[0])} ms"
    console.print(
        f"[bold]{escape(m.name)}[/] ({fmt_params(counts['params_total'])} params, "
        f"{fmt_params(counts['params_active'])} active)  tp={s['tp']} ep={s['ep']} pp={s['pp']} "
        f"batch={s['batch']}  on {s['gpus']} GPUs\n"
        f"{res.tokens_per_s_per_gpu[0]:.1f} tokens/s/GPU, {res.tokens_per_s[0]:.0f} tokens/s, "
        f"{lat}, {res.memory_bytes[0] / GIB:.1f} GiB per GPU "
        f"(of {(topo.hbm_bytes - topo.hbm_reserve_bytes) / GIB:.1f} usable): "
        + ("[green]valid[/]" if res.valid[0] else f"[red]{escape(reasons_text(res, 0))}[/]"))


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
             "bf16_tflops": t.peak_flops["bf16"] / 1e12,
             "links": [{"name": l.name, "span_gpus": l.span_gpus,
                        "bandwidth_gb_s": l.bandwidth_bytes_s / 1e9,
                        "latency_us": l.latency_s * 1e6, "efficiency": l.efficiency}
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
    table.add_row("evaluator (one core)", f"{d['evaluations_per_s']:,.0f} strategies/s")
    table.add_row("strategies evaluated", f"{d['evaluations']:,}")
    table.add_row("lts estimate (in process)", f"{d['estimate_wall_s'] * 1e3:.1f} ms")
    for key, label in (("search_wall_s", "search (ppo, 4000 calls)"),
                       ("exact_wall_s", "exact optimum")):
        if d.get(key) is not None:
            table.add_row(label, f"{d[key]:.2f} s")
    console.print(table)


__all__ = ["OPS", "REASONS"]
