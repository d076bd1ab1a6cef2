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
                  f"({d['failed']:,} without an answer) per model, GPU and workload")
    for w in workloads:
        t = Table(title=f"workload {escape(w)}", box=box.SIMPLE_HEAD)
        cols = ["model", "topology", "engine", "tp/ep/pp/b", "tok/s/GPU"] + \
            (["M tokens/$"] if priced else [])
        for c in cols:      # names fold onto lines; numbers never elide
            t.add_column(c, overflow="fold") if c in cols[:3] else \
                t.add_column(c, justify="left" if c == cols[3] else "right", no_wrap=True)
        for r in d["rows"]:
            if r["workload"] != w:
                continue
            row = [escape(r["model"]), escape(r["topology"]), escape(r["engine"] or "(per-op)"),
                   r["strategy"], f"{r['tokens_per_s_per_gpu']:,.1f}"]
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
    console.print(f"{d['problems']:,} lines in {escape(d['file'])} (one `lts search --json` "
                  f"answer each); this run: {d['ran']:,} solved, {d['skipped']:,} already there, "
                  f"{d['wall_s']:.1f} s with {d['jobs']} job(s)", overflow="fold")
