"""``lts sweep``'s summary: the best answer per model, GPU and workload (``lts.sweep.summary``),
one table per workload."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def render_sweep(console: Console, d: dict) -> None:
    """A table per workload (model, GPU, the best engine and strategy, tokens/s per GPU and per
    dollar), the prices, then where the lines are."""
    priced = any(r["tokens_per_dollar"] is not None for r in d["rows"])
    workloads = list(dict.fromkeys(r["workload"] for r in d["rows"]))
    console.print(f"lts sweep: the best of {d['answered']:,} answered problems "
                  f"({d['failed']:,} without an answer) per model, topology and workload")
    for w in workloads:
        t = Table(title=f"workload {escape(w)}", box=box.SIMPLE_HEAD)
        cols = ["model", "topology", "engine", "GPUs", "tp/ep/pp/b", "tok/s/GPU"] + \
            (["M tok/$"] if priced else [])
        mine = [r for r in d["rows"] if r["workload"] == w]
        widest = {"model": max(len(r["model"]) for r in mine),
                  "topology": max(len(r["topology"]) for r in mine)}
        for c in cols:      # names fold onto lines only where they must; numbers never elide
            if c in ("model", "topology", "engine"):
                t.add_column(c, overflow="fold", min_width=min(widest.get(c, 6), 24))
            else:
                t.add_column(c, justify="left" if c == "tp/ep/pp/b" else "right",
                             no_wrap=True)
        for r in d["rows"]:
            if r["workload"] != w:
                continue
            row = [escape(r["model"]), escape(r["topology"]), escape(r["engine"] or "(per-op)"),
                   f"{r['gpus']:,}" if r["gpus"] else "all", r["strategy"],
                   f"{r['tokens_per_s_per_gpu']:,.1f}"]
            if priced:
                row.append("-" if r["tokens_per_dollar"] is None else
                           f"{r['tokens_per_dollar'] / 1e6:,.2f}")
            t.add_row(*row)
        console.print(t)
    prices = {r["topology"]: r["price_per_gpu_hour"] for r in d["rows"]
              if r["price_per_gpu_hour"] is not None}
    if prices:
        console.print("prices ($ per GPU-hour, from the grid): " + ", ".join(
            f"{escape(k)} {v:.2f}" for k, v in sorted(prices.items())), overflow="fold")
    for e in d["errors"]:
        console.print(f"[yellow]without an answer[/]: {escape(e)}", overflow="fold")
    if d["failed"] > len(d["errors"]):
        console.print(f"(and {d['failed'] - len(d['errors']):,} more: their lines' \"error\")")
    console.print(f"{d['problems']:,} problems of the grid in {escape(d['file'])} (one `lts "
                  f"search --json` answer a line); this run: {d['ran']:,} solved "
                  f"({d['resolved']:,} of them again: their lines held no whole answer), "
                  f"{d['skipped']:,} already answered, {d['wall_s']:.1f} s with {d['jobs']} "
                  "job(s)", overflow="fold")
