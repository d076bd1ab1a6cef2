"""``lts bench``: the table of ``search.bench.measure``'s figures (its dict is the JSON)."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def render_bench(console: Console, d: dict) -> None:
    """The table of ``lts bench`` from its dict (``bench.Bench`` as a dict: the JSON)."""
    table = Table(title=f"lts bench: {escape(d['model'])} on {escape(d['topology'])}",
                  box=box.SIMPLE_HEAD, show_header=False, caption_justify="left")
    table.add_column("measure", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_row("evaluator, rows in random order",
                  f"{d['evaluations_per_s']:,.0f} strategies/s")
    table.add_row("evaluator, fusing coarse rows in the call",
                  f"{d['evaluations_per_s_fusing']:,.0f} strategies/s")
    table.add_row("evaluator, cold (tables built in the call)",
                  f"{d['evaluations_per_s_cold']:,.0f} strategies/s")
    table.add_row("evaluator, rows in coarse-row order",
                  f"{d['evaluations_per_s_grouped']:,.0f} strategies/s")
    table.add_row("its arithmetic alone, coarse-row order",
                  f"{d['kernel_per_s']:,.0f} strategies/s")
    table.add_row("its arithmetic alone, random order",
                  f"{d['kernel_per_s_random']:,.0f} strategies/s")
    table.add_row("evaluator ÷ arithmetic, coarse-row order",
                  f"{d['evaluations_per_s_grouped'] / d['kernel_per_s']:.2f}x")
    table.add_row("evaluator ÷ arithmetic, random order",
                  f"{d['evaluations_per_s'] / d['kernel_per_s_random']:.2f}x")
    table.add_row("strategies evaluated", f"{d['evaluations']:,}")
    table.add_row("lts estimate (in process)", f"{d['estimate_wall_s'] * 1e3:.1f} ms")
    for key, label in (("search_wall_s", "search (ppo, budget 4000 calls)"),
                       ("exact_wall_s", "exact optimum")):
        if d.get(key) is not None:
            table.add_row(label, f"{d[key]:.2f} s")
    notes = ["evaluator: one core, uniform random strategies, the coarse rows' tables and "
             "fused pieces built unless said; arithmetic alone: cost.model.kernel (lookups, sums, "
             "stages) on the same rows, packed beforehand. In random order the evaluator sorts "
             "the rows by coarse row (a row's pieces stay in cache) and the arithmetic alone "
             "does not: hence above 1x (docs/performance.md)"]
    if d.get("simulate_wall_s") is not None:
        table.add_row("simulated run, 5,120 requests at C = 512", f"{d['simulate_wall_s']:.2f} s")
        notes.append(f"simulated run: {escape(d['simulate_strategy'])}, lengths 819-1,024 in "
                     "and out, generic engine")
    table.caption = "\n".join(notes)
    console.print(table)
