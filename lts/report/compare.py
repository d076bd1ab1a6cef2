"""``lts compare``: the JSON of a ``search.methods.Comparison`` (``compare_dict``) and its table, a row
per method, rendered from that dict."""
from __future__ import annotations

from dataclasses import asdict

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..engines import ENGINES, GENERIC
from .results import model_dict, result_dict, slo_text, workload_dict


def compare_dict(cmp) -> dict:
    """The JSON of ``lts compare`` from a ``search.methods.Comparison`` (exact found a strategy)."""
    def result(r):
        return result_dict(r.evaluated, 0) if r.best is not None else None

    p = cmp.problem
    return {"methods": [asdict(s) for s in cmp.summaries], "exact": result(cmp.exact),
            "megatron": result(cmp.megatron), "seeds": cmp.seeds, "budget": cmp.budget,
            "model": model_dict(p.model), "topology": p.topo.name, "workload": workload_dict(p),
            "engine_space": p.engine_space}


def render_compare(console: Console, d: dict) -> None:
    """The table of ``lts compare`` from its ``compare_dict``: a line per ``methods`` entry."""
    title = f"{d['model']['name']} on {d['topology']}: {d['seeds']} seeds × {d['budget']} calls"
    space = d["engine_space"]
    workload = f"{d['workload']['phase']}, {slo_text(d['workload'])}" + (
        f"; {ENGINES[space].label}'s space" if space != GENERIC else "")
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

    for r in d["methods"]:
        table.add_row(escape(r["method"]), str(r["seeds"]), tps(r["mean_tokens_per_s_per_gpu"]),
                      f(r["table1"], ".3f"), tps(r["best_tokens_per_s_per_gpu"]),
                      f(r["figure3"], ".3f"), f(r["fraction_of_exact_mean"], ".3f"),
                      f(r["fraction_of_exact_best"], ".3f"), f(r["wall_s_mean"], ".2f"))
    console.print(table)
