"""``lts search``: the JSON of a ``search.methods.SearchRun`` (``search_dict``) and its table, why the
best wins against Megatron's per-op choices (the comparison itself is ``search.explain``), the
Megatron baseline, the headroom and the footer. The serve phase's trade-off, two pools and
sizing are ``search_serve``.
"""
from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..engines import ENGINES
from ..engines.space import engine_form, engine_variants, runnable_on
from ..search.explain import explain
from ..specs.strategy import (COARSE, DP_ATTENTION, EP, EXPERT_CHOICES, TP, choices_of,
                              coarse_settings, coarse_text, format_ops, format_strategy,
                              shown_axes, with_experts)
from .format import SHORT, fmt_ms, fmt_s, fmt_us, json_safe, num
from .launch import emit_dict
from .results import (model_dict, result_dict, search_deploy_fields, search_result_dict,
                      slo_text, strategy_row, strategy_text, workload_dict)
from .search_serve import (disagg_dict, disagg_point, pareto_dict, percentile_dict,
                           render_capacity, render_frontier, render_percentile, sizing_dict,
                           sizing_disagg_dict)


# the engines' variants by name in the table (strategy.py; docs/engines.md)
NAMED_CHOICES = {EXPERT_CHOICES: "experts split", DP_ATTENTION: "DP attention",
                 with_experts(DP_ATTENTION): "DP attention, experts split"}


def changed_ops(s: dict) -> str:
    """The per-op choices of a JSON strategy that differ from Megatron's, "megatron", or the
    name of an engine variant (``NAMED_CHOICES``; the JSON has every op)."""
    row = strategy_row(s)
    named = NAMED_CHOICES.get(choices_of(row))
    if named:
        return named
    return format_ops(row, only_changed=True, sep=", ") or "megatron"


def degrees(s: dict, names=COARSE) -> str:
    """The coarse values ``names`` of a JSON strategy: tp/ep/pp/batch."""
    return coarse_text(s, names)


def versus_dict(versus) -> dict | None:
    """The ``vs_megatron`` object of a ``methods.Versus`` (None stays None): Megatron's result
    there (``megatron_serve`` when the objective is not the step's: the serve phase), then
    ``explain``'s comparison."""
    if versus is None:
        return None
    megatron = versus.megatron_serve if versus.megatron_serve is not None \
        else versus.megatron_step
    return {"megatron": result_dict(megatron, 0), **explain(versus)}


def _coll_text(e: dict, resized: bool = False) -> str:
    t = (f"{fmt_us(e['megatron_time_us'])}→{fmt_us(e['time_us'])}" if resized
         else fmt_us(e["time_us"]))
    return f"{SHORT[e['kind']]} {e['group']} @{e['op']} ×{e['count']} {t}"


def _coll_list(entries: list, resized: bool = False, limit: int = 3) -> str:
    text = ", ".join(_coll_text(e, resized) for e in entries[:limit])
    return text + (f", +{len(entries) - limit} more" if len(entries) > limit else "")


def _delta(us: float) -> str:
    return ("+" if us >= 0 else "-") + fmt_us(abs(us))


def _why_rows(grid: Table, why: dict, best: dict, phase: str, fill: float) -> None:
    """The rows of "why it wins" (or loses) of a ``vs_megatron`` object against the best
    result ``best``; ``fill``: the share of the budget copies of its instance keep busy
    (Megatron's tokens/s per GPU there, per GPU of the budget)."""
    mw = why["megatron"]
    at = coarse_settings(best)
    loses = mw["valid"] and mw["tokens_per_s_per_gpu"] > best["tokens_per_s_per_gpu"]
    grid.add_row("[bold]Why it loses[/]" if loses else "[bold]Why it wins[/]",
                 f"against Megatron's per-op choices at the same {at} "
                 + (f"({mw['tokens_per_s_per_gpu'] * float(fill):,.1f} tokens/s/GPU)"
                    if mw["valid"] else f"(invalid there: {', '.join(mw['reasons'])})"))
    changes = why["avoids"] or why["adds"] or why["resized"]
    same = why["step_ms"] == why["megatron_step_ms"] and mw["valid"] and not changes
    if same:
        grid.add_row("", "its per-op choices cost the same as Megatron's there"
                     + (" (tp=1: nothing to shard)" if best["tp"] == 1 else "")
                     + "; only the degrees and batch separate it from Megatron's best")
    for key, label in (("avoids", "  avoids"), ("adds", "  adds"), ("resized", "  resizes")):
        if why[key]:
            grid.add_row(label, escape(_coll_list(why[key], resized=key == "resized")))
    if not same and not changes:
        grid.add_row("", "the same collectives")
    if not same and why["step_ms"] is not None and why["megatron_step_ms"] is not None:
        delta = why["step_ms"] - why["megatron_step_ms"]
        grid.add_row("  decode step" if phase == "serve" else "  step",
                     f"{why['megatron_step_ms']:.2f} → {why['step_ms']:.2f} ms "
                     f"({delta:+.2f} ms; summed over layers: collectives "
                     f"{_delta(why['collectives_delta_us'])}, ops "
                     f"{_delta(why['ops_delta_us'])})")


def search_dict(run, launch=None) -> dict:
    """The JSON of ``lts search`` (docs/json.md) from a ``search.methods.SearchRun`` that found
    a strategy, and the ``emit.Launch`` of ``--emit`` if any."""
    sr, res, p, mega_best = run.result, run.top, run.problem, run.megatron_best
    d = {"method": run.method, "budget": run.budget, "evaluations": sr.evaluations,
         "wall_s": run.wall_s, "seed": run.seed, "best": result_dict(res, 0),
         "top": [result_dict(res, i) for i in range(len(res))],
         "megatron_best": search_result_dict(run, mega_best) if mega_best is not None else None,
         "stats": json_safe(sr.stats),
         "model": model_dict(p.model), "topology": p.topo.name,
         "workload": workload_dict(p),
         "vs_megatron": versus_dict(run.versus)}
    for r, i in ((d["best"], 0), *((t, i) for i, t in enumerate(d["top"]))):
        r.update(search_deploy_fields(run, res, i))
    d["engine_space"] = p.engine_space
    any_best = run.best_any_sharding
    if any_best is not None:
        d["best_any_sharding"] = search_result_dict(run, any_best)
        d["headroom"] = num(run.headroom)
    if run.problem.phase == "serve":
        d["pareto"] = pareto_dict(run.pareto, run) + [disagg_point(dg)
                                                       for dg in run.disagg_pareto]
        d["sizing"] = sizing_dict(run.sizing, run)
        d["sizing_disagg"] = sizing_disagg_dict(run.sizing_disagg)
        d["disagg"] = disagg_dict(run.disagg)
        d["slo_percentile"] = percentile_dict(run.percentile, run)
    if launch is not None:
        d["emit"] = emit_dict(launch)
    return d


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
            if engine_variants(p.engine_space, p.model, row[TP], row[EP]) else
            f"a layout {engine} does not run (tp={row[TP]} with ep={row[EP]})")
    return (f"{what} would add {(run.headroom - 1) * 100:.1f}%: "
            f"{format_strategy(any_best.strategies[0], only_changed=True, sep=', ')} at "
            f"{float(p.per_cluster_gpu(any_best)[0]):,.1f} tokens/s per GPU of the budget "
            f"(the best of the whole per-op space, {run.any_sharding.method}"
            + (f"; {', '.join(ENGINES[e].label for e in on)} run{'s' if len(on) == 1 else ''} "
               "it)" if on else "; no engine runs it as written)"))


OPS_BESIDE = 100      # columns from which the ops vs Megatron stay in the ranked table


def render_search(console: Console, d: dict, run) -> None:
    """The ranked table, "why it wins" and the footer of ``lts search``, from its
    ``search_dict`` (``top``, ``vs_megatron``, ``megatron_best``) and the ``search.methods.SearchRun``
    for what the JSON does not carry: the headroom's engine forms, the serve phase's frontier
    and the method's raw stats."""
    w, phase, top = d["workload"], d["workload"]["phase"], d["top"]
    mega_best = d["megatron_best"]
    mega_score = mega_best["tokens_per_s_per_cluster_gpu"] if mega_best else math.nan
    latency = "TTFT ms" if phase == "prefill" else "TPOT ms"
    table = Table(title=f"{escape(d['model']['name'])} on {escape(d['topology'])}: best "
                        f"strategies ({escape(d['method'])})",
                  caption=f"{phase}, {escape(slo_text(w))}; tok/s/GPU: of the {w['gpus']:,}-GPU "
                          f"budget, filled by copies of the instance (×n); used: per GPU the "
                          f"copies use; on: runs as written on v vLLM, s SGLang, t TensorRT-LLM; "
                          f"×Meg: tok/s/GPU ÷ Megatron's best",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    axes = shown_axes(top)          # cp where some row has it
    table.add_column("/".join("b" if n == "batch" else n for n in axes), no_wrap=True)
    # below OPS_BESIDE columns the ops would fold mid-name in a column a few letters wide:
    # they go under the table, a line per rank
    ops_beside = console.width >= OPS_BESIDE
    if ops_beside:
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
    for i, t in enumerate(top):
        tps = t["tokens_per_s_per_cluster_gpu"]
        lat = t["ttft_ms"] if phase == "prefill" else t["tpot_ms"]
        ratio = f"{tps / mega_score:.3f}" if math.isfinite(mega_score) and mega_score > 0 else "-"
        third = fmt_s(t["ttft_ms"]) if serving else f"{t['memory_gib_per_gpu']:.1f}"
        table.add_row(str(i + 1), degrees(t, axes),
                      *([escape(changed_ops(t))] if ops_beside else []),
                      "".join(e[0] for e in t["runnable_on"]) or "-", f"{t['replicas']:,}",
                      f"{tps:,.1f}", f"{t['tokens_per_s_per_gpu']:,.1f}", fmt_ms(lat), third,
                      ratio)
    console.print(table)
    if not ops_beside and top:
        ops = Table.grid(padding=(0, 1))
        ops.add_column(justify="right", no_wrap=True)
        ops.add_column(overflow="fold", ratio=1)
        ops.add_row("", "[bold]ops vs Megatron[/], by rank:")
        for i, t in enumerate(top):
            ops.add_row(str(i + 1), escape(changed_ops(t)))
        console.print(ops)
    best, why = d["best"], d["vs_megatron"]
    at = coarse_settings(best)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold", ratio=1)
    if why is None:
        grid.add_row("[bold]Why it wins[/]",
                     f"it is Megatron's own per-op sharding at {at}; " +
                     ("the megatron method searches no other per-op choices."
                      if d["method"] == "megatron" else "no per-op change helps there."))
    else:
        _why_rows(grid, why, best, phase, run.problem.fill(best["gpus"]))
    if mega_best is not None:
        tps, mtps = best["tokens_per_s_per_cluster_gpu"], mega_best["tokens_per_s_per_cluster_gpu"]
        grid.add_row("[bold]Megatron best[/]",
                     f"{strategy_text(mega_best)}: {mtps:,.1f} tokens/s/GPU; the best is "
                     f"{tps / mtps:.3f}× that")
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
        render_capacity(console, d, run.best.running[0])
        render_percentile(console, d.get("slo_percentile"))
    stats = "".join(f", {k.replace('_', ' ')} {v:,}" if isinstance(v, int) else
                    f", {k.replace('_', ' ')} {v}" for k, v in run.result.stats.items())
    console.print(f"[dim]{escape(d['method'])}: {d['evaluations']:,} evaluations, "
                  f"{d['wall_s']:.2f} s, seed {d['seed']}{escape(stats)}[/]", overflow="fold")
