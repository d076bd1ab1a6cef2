"""``lts simulate``: a simulated run's figures (``simulate_dict``), its table (``render_simulate``)
and its timeline as an SVG (``simulate_svg``)."""
from __future__ import annotations

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..specs.strategy import format_strategy, instance_gpus, strategy_dict
from .format import num
from .plot import timeline_svg

POINTS = 2000        # timeline points kept in the JSON and the SVG (steps binned beyond)


def _timeline(res) -> dict:
    """The run's timeline, at most POINTS entries (each the last step of its bin; the step time
    the bin's mean per step)."""
    tl = res.timeline
    n = len(tl["start"])
    if not n:
        return {}
    take = np.unique(np.linspace(0, n - 1, min(n, POINTS)).astype(int))
    dur = np.asarray(tl["duration"]) / np.maximum(np.asarray(tl["steps"]), 1)
    return {"time_s": [float(tl["start"][i]) for i in take],
            "running": [int(tl["running"][i]) for i in take],
            "waiting": [int(tl["waiting"][i]) for i in take],
            "kv_share": [float(tl["kv_tokens"][i] / res.kv_tokens) if res.kv_tokens else 0.0
                         for i in take],
            "step_ms": [float(dur[i] * 1e3) for i in take]}


def _text(row) -> str:
    """A strategy as prose, its batch left out (the load sets the concurrency)."""
    return ", ".join(p for p in format_strategy(row, only_changed=True, sep=", ").split(", ")
                     if not p.startswith("batch="))


def simulate_dict(model, topo, engine, row, load, res, summary: dict, pools=None) -> dict:
    """JSON of ``lts simulate`` (docs/json.md); ``pools``: ((prefill instances, row), (decode
    instances, row)) of a two-pool deployment (then ``row`` is ignored)."""
    if pools is None:
        d = strategy_dict(row)
        d.pop("batch", None)
        text = _text(row)
    else:
        d = {"pools": {name: {"workers": int(w), **{k: v for k, v in strategy_dict(r).items()
                                                       if k != "batch"}}
                       for name, (w, r) in zip(("prefill", "decode"), pools)}}
        text = " + ".join(f"{name} {w} x ({_text(r)})"
                          for name, (w, r) in zip(("prefill", "decode"), pools))
    used = [(1, row)] if pools is None else pools
    d.update(model=model.name, topology=topo.name, engine=engine.name,
             engine_title=engine.title, strategy=text,
             gpus=int(sum(w * int(instance_gpus(r)) for w, r in used)),
             load={"kind": load.kind, "requests": summary["requests"],
                   "max_concurrency": load.max_concurrency or None,
                   "request_rate": num(load.request_rate) if load.kind != "burst" else None,
                   "burstiness": load.burstiness if load.kind == "gamma" else None,
                   "isl": None if load.trace else load.isl,
                   "osl": None if load.trace else load.osl,
                   "range_ratio": None if load.trace else load.range_ratio, "seed": load.seed},
             **summary, timeline=_timeline(res))
    return d


def render_simulate(console: Console, d: dict) -> None:
    load = d["load"]
    n, kind = f"{load['requests']:,} requests", load["kind"]
    if kind == "burst":
        how = f"{n} created at once behind a concurrency of {load['max_concurrency']}"
    elif kind == "trace":
        how = f"{n} of a trace"
    else:
        how = f"{n}, {'Poisson' if kind == 'poisson' else 'gamma'} arrivals at " \
              f"{load['request_rate']:g}/s" + \
              (f" (burstiness {load['burstiness']:g})" if kind == "gamma" else "")
    if load["kind"] in ("poisson", "gamma", "trace") and load["max_concurrency"]:
        how += f", at most {load['max_concurrency']} in flight"
    if load["isl"] is not None:
        lo = lambda v: max(int(v * load["range_ratio"]), 1)  # noqa: E731
        how += (f"; {lo(load['isl'])}-{load['isl']} in / {lo(load['osl'])}-{load['osl']} out"
                if load["range_ratio"] < 1 else f"; {load['isl']} in / {load['osl']} out")
    gpus = f"{d['gpus']:,} GPU{'s' if d['gpus'] != 1 else ''}"
    console.print(f"[bold]{escape(d['model'])}[/] on {escape(d['topology'])}, "
                  f"{escape(d['strategy'])} ({gpus}), {escape(d['engine_title'])}\n"
                  f"{escape(how)}")
    t = Table(box=box.SIMPLE_HEAD, title="simulated run: per request (ms)")
    t.add_column("metric")
    for c in ("mean", "p50", "p90", "p99"):
        t.add_column(c, justify="right")
    for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                      ("e2e_ms", "end to end")):
        v = d[key]
        t.add_row(name, *(f"{v[c]:,.1f}" if v[c] is not None and v[c] == v[c] else "-"
                          for c in ("mean", "p50", "p90", "p99")))
    console.print(t)
    good = ""
    if d.get("slo"):
        good = (f"; goodput {d['goodput_requests_per_s']:,.2f} requests/s "
                f"({100 * d['good_share']:.1f}% within {escape(d['slo'])})")
    console.print(
        f"{d['output_tokens_per_s']:,.1f} output tokens/s over {d['duration_s']:,.1f} s, "
        f"{d['requests_per_s']:,.2f} requests/s{good}\n"
        f"KV cache peak {100 * d['kv_peak_share']:.1f}% of {d['kv_capacity_tokens']:,.0f} tokens; "
        f"{d['preemptions']:,} preemptions; {d['steps']:,} steps")


def simulate_svg(d: dict) -> str:
    tl = d["timeline"]
    return timeline_svg(
        tl.get("time_s", []),
        [("requests", [("running", "#1f77b4", tl.get("running", [])),
                       ("waiting in the engine", "#d62728", tl.get("waiting", []))]),
         ("KV cache in use (share)", [("KV", "#2ca02c", tl.get("kv_share", []))]),
         ("step time (ms)", [("step", "#9467bd", tl.get("step_ms", []))])],
        f"{d['model']} on {d['topology']}: {d['strategy']}, {d['engine_title']}",
        f"{d['load']['requests']:,} requests ({d['load']['kind']}); TTFT mean "
        f"{d['ttft_ms']['mean']:,.0f} ms, TPOT mean {d['tpot_ms']['mean']:,.1f} ms")


def render_simulated(console: Console, s: dict | None) -> None:
    """A line of a simulated benchmark run beside an analytic estimate (``lts estimate`` of two
    pools): 10 x C requests at once behind C in flight."""
    if s is None:
        return
    if "error" in s:
        console.print(f"[bold]simulated[/]: {escape(s['error'])}")
        return
    t, p = s["ttft_ms"], s["tpot_ms"]
    console.print(f"[bold]simulated[/] benchmark run ({s['requests']:,} requests at once behind "
                  f"the concurrency, docs/simulate.md): TTFT mean {t['mean']:,.0f} ms (p50 "
                  f"{t['p50']:,.0f}, p90 {t['p90']:,.0f}, p99 {t['p99']:,.0f}), TPOT mean "
                  f"{p['mean']:.2f} ms (p90 {p['p90']:.2f}), {s['output_tokens_per_s']:,.0f} "
                  f"output tokens/s")
