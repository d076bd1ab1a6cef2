"""The serve phase's part of ``lts search``: the trade-off (``pareto``: the frontier of output
tokens/s per GPU over tokens/s per user, as JSON, characters or SVG), two pools (``disagg``),
replicas and sizing for a request rate; with ``--slo-percentile``, the top checked by
simulation (``percentile_dict``).
"""
from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..engines import ENGINES
from ..specs.strategy import (COARSE, COL, CONCURRENCY, DEGREES, coarse_text, format_strategy,
                              strategy_dict)
from .format import num
from .plot import Series, frontier_svg, frontier_text
from .results import result_dict, search_deploy_fields, slo, strategy_text


def pareto_dict(res, run) -> list:
    """The ``pareto`` list of ``lts search --json`` (serve): each frontier point's strategy and
    figures, in order of tokens/s per user."""
    if res is None:
        return []
    return [{**strategy_dict(res.strategies[i]),
             "tokens_per_s_per_gpu": num(res.tokens_per_s_per_gpu[i]),
             "tokens_per_s_per_user": num(1.0 / res.tpot_s[i]),
             "ttft_ms": num(res.ttft_s[i] * 1e3), "tpot_ms": num(res.tpot_s[i] * 1e3),
             "mode": "agg", **search_deploy_fields(run, res, i)} for i in range(len(res))]


def disagg_dict(dg) -> dict | None:
    """The ``disagg`` object of a serve search (null: no disaggregated deployment fits)."""
    if dg is None:
        return None
    return {"prefill": result_dict(dg.prefill, 0), "decode": result_dict(dg.decode, 0),
            "prefill_instances": dg.prefill_instances, "decode_instances": dg.decode_instances,
            "gpus": dg.gpus, "tokens_per_s_per_gpu": num(dg.tokens_per_s_per_gpu),
            "tokens_per_s_per_cluster_gpu": num(dg.tokens_per_s_per_cluster_gpu),
            "ttft_ms": num(dg.ttft_s * 1e3), "tpot_ms": num(dg.tpot_s * 1e3),
            "requests_per_s": num(dg.requests_per_s), "transfer_ms": num(dg.transfer_s * 1e3),
            "concurrency": dg.concurrency or None,
            "decode_topology": getattr(dg, "decode_topology", None)}


def disagg_point(dg) -> dict:
    """A point of the two-pool frontier in the ``pareto`` list (``mode`` "disagg")."""
    return {"mode": "disagg", "prefill": strategy_dict(dg.prefill.strategies[0]),
            "decode": strategy_dict(dg.decode.strategies[0]),
            "prefill_instances": dg.prefill_instances, "decode_instances": dg.decode_instances,
            "gpus": dg.gpus, "tokens_per_s_per_gpu": num(dg.tokens_per_s_per_gpu),
            "tokens_per_s_per_user": num(1.0 / dg.tpot_s), "ttft_ms": num(dg.ttft_s * 1e3),
            "tpot_ms": num(dg.tpot_s * 1e3)}


def disagg_text(d: dict) -> str:
    """A disaggregated deployment (``disagg_dict``) in one line (no markup)."""
    n_pre = d["prefill_instances"]
    return (f"{n_pre} prefill instance{'s' if n_pre != 1 else ''} "
            f"of {strategy_text(d['prefill'])} + {d['decode_instances']} decode of "
            f"{strategy_text(d['decode'])}"
            + (f" on {d['decode_topology']}" if d.get("decode_topology") else "")
            + f": {d['gpus']} GPUs, "
            f"{d['tokens_per_s_per_gpu']:,.1f} output tokens/s per GPU used"
            + (f" ({d['tokens_per_s_per_cluster_gpu']:,.1f} per GPU of the budget)"
               if d["tokens_per_s_per_cluster_gpu"] else "")
            + f", TTFT {d['ttft_ms']:,.0f} ms, TPOT {d['tpot_ms']:.1f} ms"
            + (f" at {d['concurrency']:,} clients" if d.get("concurrency") else ""))


def sizing_dict(sizing, run) -> dict | None:
    """The ``sizing`` object of ``lts search --request-rate`` (null without it or when nothing
    was found)."""
    if sizing is None:
        return None
    return {"request_rate": sizing.request_rate, "instances": sizing.instances,
            "gpus": sizing.gpus, "fits": sizing.fits,
            "strategy": {**result_dict(sizing.result, 0),
                         "requests_per_s": num(sizing.result.tokens_per_s[0] / run.problem.osl)}}


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


def _frontier_whose(run, short: bool = False) -> str:
    """Where a serve search's frontier points come from: the exact frontier over the concurrency
    grid (the powers of two and the KV capacity) of the whole space or of the engine's, plus each
    top strategy at its best integer concurrency; else what the method found."""
    if run.method != "exact":
        return f"best {run.method} found" if short else "found"
    space = ("the whole space" if not run.problem.in_engine_space else
             f"{ENGINES[run.problem.engine_space].label}'s space")
    if short:
        return f"{space}, exact on the concurrency grid"
    return (f"of {space} (exact at the powers of two and the KV capacity, and the best "
            "strategies at their best integer concurrency)")


def pareto_svg(run) -> str:
    """``lts search --plot``: the SVG of a serve search's frontier (``plot.frontier_svg``)."""
    p = run.problem
    points, chosen, limit = _frontier(run)
    ttft = slo("TTFT", p.ttft_slo_ms)
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
        x_limit=limit, limit_label=slo("TPOT", p.tpot_slo_ms),
        note=f"every point meets {ttft}" if ttft else "",
        subtitle=f"{p.engine.title}, {p.isl} in / {p.osl} out tokens per request")


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


def render_capacity(console: Console, d: dict, running: int) -> None:
    """Replicas of the best strategy on the device budget, two pools against one and, with
    ``--request-rate``, the fewest GPUs that serve it, from a serve search's ``search_dict``;
    ``running``: the requests in the best's running batch (not in the JSON)."""
    best, w, budget = d["best"], d["workload"], d["workload"]["gpus"]
    size = best["gpus"]
    console.print(f"[bold]Replicas[/] {budget:,} GPU{'s hold' if budget != 1 else ' holds'} "
                  f"{best['replicas']:,} instance{'s' if best['replicas'] != 1 else ''} of the "
                  f"best ({size} GPU{'s' if size != 1 else ''} each): "
                  f"{best['tokens_per_s_per_cluster_gpu']:,.1f} output tokens/s per GPU of the "
                  "budget", overflow="fold")
    dg, agg = d["disagg"], best["tokens_per_s_per_cluster_gpu"]     # per GPU of the budget
    if dg is None:
        console.print("[bold]Disaggregated[/] no prefill pool and decode pool fit the GPU budget"
                      + (" and the SLOs" if w["tpot_slo_ms"] or w["ttft_slo_ms"] else "")
                      + " together" + (" (one output token: no decode)" if w["osl"] < 2 else ""),
                      overflow="fold")
    else:
        win = dg["tokens_per_s_per_cluster_gpu"] / agg
        console.print(
            f"[bold]Disaggregated[/] {escape(disagg_text(dg))}; "
            + (f"two pools win, {win:.2f}× one pool" if win > 1 else
               f"one pool wins, {1 / win:.2f}× two pools") + " per GPU of the budget"
            + f" (decode steps without prefill chunks: TPOT {dg['tpot_ms']:.1f} vs "
            f"{best['tpot_ms']:.1f} ms at batch {dg['decode']['batch']} vs {int(running)})",
            overflow="fold")
    sz = d["sizing"]
    if sz is not None:
        n = sz["instances"]
        console.print(f"[bold]Sizing[/] {sz['request_rate']:g} requests/s: {n:,} "
                      f"instance{'s' if n != 1 else ''} of {escape(strategy_text(sz['strategy']))} "
                      f"({sz['strategy']['requests_per_s']:,.2f} requests/s each), "
                      f"{sz['gpus']:,} GPUs"
                      + ("" if sz["fits"] else f": more than the {budget:,} GPUs of the budget"),
                      overflow="fold")
    two = d["sizing_disagg"]
    if two is not None:
        versus = "" if sz is None else f" vs {sz['gpus']:,} with one pool"
        console.print(f"[bold]Sizing[/] (two pools) {two['request_rate']:g} requests/s: "
                      f"{escape(disagg_text(two['deployment']))}, "
                      f"{two['deployment']['requests_per_s']:,.2f} requests/s{versus}"
                      + ("" if two["fits"] else f": more than the {budget:,} GPUs of the budget"),
                      overflow="fold")


def percentile_dict(check, run) -> dict | None:
    """JSON of a percentile check (``search.percentile``): each checked deployment with the
    search's figures and the simulation's at the concurrency that meets the percentile."""
    if check is None:
        return None
    p = check.percentile
    rows = []
    for c in check.checked:
        s = c.summary or {"ttft_ms": None, "tpot_ms": None}
        rows.append({"strategy": ", ".join(
                         x for x in format_strategy(c.row, only_changed=True, sep=", ")
                         .split(", ") if not x.startswith(f"{COARSE[CONCURRENCY]}=")),
                     **{n: int(c.row[COL[n]]) for n in DEGREES},
                     "search_concurrency": int(c.row[CONCURRENCY]),
                     "search_tokens_per_s_per_cluster_gpu": num(c.analytic_score),
                     "concurrency": c.concurrency or None,
                     "tokens_per_s_per_cluster_gpu": num(c.score) if c.concurrency else None,
                     "ttft_ms": s["ttft_ms"], "tpot_ms": s["tpot_ms"],
                     "meets": bool(c.concurrency), "skipped": c.skipped,
                     "simulations": c.simulations})
    return {"percentile": p, "checked": rows, "wall_s": num(check.wall_s),
            "best": rows[0] if rows and rows[0]["meets"] else None}


def render_percentile(console: Console, d: dict) -> None:
    """The percentile check's table under a serve search (``percentile_dict``)."""
    if d is None:
        return
    p = d["percentile"]
    t = Table(title=f"checked by simulation at p{p} (10 x C requests at once behind C in "
                    "flight, lengths over [0.8 L, L])", box=box.SIMPLE_HEAD, pad_edge=False,
              collapse_padding=True,
              caption="b, tok/s/GPU: the search's (the analytic loop's means within the "
                      f"limits); p{p} b: the largest concurrency whose simulated p{p} TTFT and "
                      f"TPOT meet the limits, its tok/s/GPU and its p{p} TTFT and TPOT (not "
                      "run: its search score is over 5% below the best simulated)")
    layout = "/".join(DEGREES)
    for col in ("#", layout, "b", "tok/s/GPU", f"p{p} b", f"p{p} tok/s/GPU", "TTFT ms",
                "TPOT ms"):
        t.add_column(col, justify="left" if col == layout else "right", no_wrap=True)
    for i, r in enumerate(d["checked"]):
        key = f"p{p}"
        head = (str(i + 1), coarse_text(r, DEGREES), str(r["search_concurrency"]),
                f"{r['search_tokens_per_s_per_cluster_gpu']:,.1f}")
        if r["skipped"]:
            t.add_row(*head, "-", "not run", "-", "-")
            continue
        t.add_row(*head, str(r["concurrency"]) if r["meets"] else "none",
                  f"{r['tokens_per_s_per_cluster_gpu']:,.1f}" if r["meets"] else "-",
                  f"{r['ttft_ms'][key]:,.1f}", f"{r['tpot_ms'][key]:,.2f}")
    console.print(t)
    degrees = [tuple(r[n] for n in DEGREES) for r in d["checked"]]
    alike = [i for i, g in enumerate(degrees) if degrees.count(g) > 1]
    if alike:       # the same degrees, other per-op choices: say which row is which
        console.print("rows of the same degrees differ in their per-op choices: " + "; ".join(
            f"{i + 1}: {escape(d['checked'][i]['strategy'])}" for i in alike))
    b = d["best"]
    if b is None:
        console.print(f"[red]none of the checked deployments meets the limits at p{p}[/]")
    else:
        console.print(f"[bold]p{p} answer[/]: {escape(b['strategy'])} at concurrency "
                      f"{b['concurrency']}: {b['tokens_per_s_per_cluster_gpu']:,.1f} tokens/s "
                      f"per GPU (checked in {d['wall_s']:.2f} s)")
