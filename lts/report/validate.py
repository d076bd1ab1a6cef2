"""``lts validate``: the tables of ``serving.validate``'s dict (its JSON): predicted vs measured
per row, the skipped rows, the summary and the Spearman groups."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..specs.strategy import DEGREES, coarse_text


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


def _parallel(r: dict) -> str:
    """The degrees (tp/ep/pp), or two pools' instances x GPUs each: "P 2x8 D 1x32"."""
    if not r.get("pools"):
        return coarse_text(r, DEGREES)
    return " ".join(f"{name[0].upper()} {p['num_workers']}x"
                    f"{p['tp_size'] * p['attention_dp_size'] * p['pp_size']}"
                    for name, p in r["pools"].items())


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
                      ("/".join(DEGREES), "right"), ("isl/osl", "right"), ("batch", "right"),
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
                      _parallel(r), f"{r['isl']}/{r['osl']}",
                      f"{r['batch']}{'*' if r['best_batch'] else ''}", *metric,
                      _fmt_value(r["predicted"]), _fmt_value(r["measured"]),
                      f"[{colour}]{r['ratio']:.2f}[/]")
    console.print(table, crop=False)
    _render_skipped(console, d["skipped"])
    s = d["summary"]
    sp = s["spearman_by_group"]
    console.print(
        f"[bold]{s['count']}[/] of {d['total']} rows predicted ({len(d['skipped'])} skipped): "
        + _summary_line(s) + ", "
        f"Spearman within parallel-config groups: mean {_fmt_opt(sp['mean'], '.3f')} "
        f"(per GPU {_fmt_opt(sp['mean_per_gpu'], '.3f')}) over {len(sp['groups'])} groups")
    for key, label in (("by_metric", "metric"), ("by_engine", "engine"), ("by_model", "model")):
        parts = s.get(key) or {}
        if len(parts) > 1:
            for name, sub in parts.items():
                console.print(f"  {label} {escape(name)}: {sub['count']} rows, "
                              + _summary_line(sub))
    if d.get("residuals"):
        _render_residuals(console, d["residuals"])
    if sp["groups"]:
        groups = Table(title="Spearman rank correlation per group (rows differing only in "
                             f"{'/'.join(DEGREES)})", box=box.SIMPLE_HEAD, padding=(0, 1),
                       pad_edge=False, width=_validate_width(console))
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


def _render_skipped(console: Console, skips: list) -> None:
    """The rows not predicted (none: nothing), each with its row number and reason."""
    if not skips:
        return
    skipped = Table(title=f"Skipped: {len(skips)} row{'s' if len(skips) != 1 else ''}",
                    box=box.SIMPLE_HEAD)
    skipped.add_column("id", no_wrap=True)
    skipped.add_column("row", justify="right")
    skipped.add_column("reason", overflow="fold")
    for sk in skips[:VALIDATE_WORST]:
        skipped.add_row(escape(sk["id"]), str(sk["row"]), escape(sk["reason"]))
    if len(skips) > VALIDATE_WORST:
        skipped.caption = f"the first {VALIDATE_WORST} (all: --json)"
    console.print(skipped)


def _render_residuals(console: Console, res: dict) -> None:
    """``--by``: the residual per group of the row keys and the metric."""
    by = res["by"]
    table = Table(title="residual log2(predicted / measured) by " + ", ".join(by),
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for col in ["metric"] + by:
        table.add_column(col, no_wrap=True)
    for col in ("rows", "median", "median |.|", "within 2x"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in res["groups"]:
        table.add_row(METRIC_SHORT[g["metric"]],
                      *(escape("-" if g["key"][k] in (None, "") else str(g["key"][k]))
                        for k in by),
                      str(g["count"]), f"{g['median_log2_ratio']:+.2f}",
                      f"{g['median_abs_log2_ratio']:.2f}", f"{100 * g['within_2x']:.0f}%")
    console.print(table, crop=False)


def render_calibrate(console: Console, d: dict) -> None:
    """``lts calibrate`` from its JSON: each constant (base, fitted or why not), then median
    |log2| and within 2x per metric on the training and held-out points, before and after."""
    t = Table(title=f"lts calibrate: {d['engine']} {d['release']} profile, "
                    f"{d['train_points']} points fitted, {d['held_points']} held out",
              box=box.SIMPLE_HEAD)
    for col in ("constant", "base", "fitted"):
        t.add_column(col, justify="left" if col == "constant" else "right")
    for name, value in d["knobs"].items():
        fitted = f"{value:.4g}" if d["identified"][name] else "[yellow]not identified[/]: kept"
        t.add_row(name, f"{d['base'][name]:.4g}", fitted)
    console.print(t)
    r = Table(title="median |log2(predicted/measured)|, within 2x", box=box.SIMPLE_HEAD)
    for col in ("rows", "metric", "before", "after"):
        r.add_column(col, justify="left" if col in ("rows", "metric") else "right")
    for half, key in (("train", "train_by_metric"), ("held out", "held_by_metric")):
        for metric, s in d["before"][key].items():
            a = d["after"][key][metric]
            r.add_row(half, metric, _half(s), _half(a))
    console.print(r)
    if d["train_points"] < d["asked_points"]:
        console.print(f"[yellow]fitted {d['train_points']} of the {d['asked_points']} training "
                      "points[/]: more would not fit calibrate's bound of time "
                      "(docs/limits.md); the rest are held out")
    before, after = (d[k]["train"]["median_abs_log2_ratio"] for k in ("before", "after"))
    if before is not None and after is not None and after > before:
        console.print(f"[yellow]the fitted files predict the training rows worse than the base "
                      f"(median |log2| {before:.3f} -> {after:.3f})[/]: they cost every op by the "
                      "roofline, the base by its measured-kernel tables where it has them "
                      "(docs/validation.md); keep the base topology")
    if d["bounded"]:
        console.print(f"[yellow]the fit stopped at its bound of {d['allowed']} predictions[/]: "
                      "the constants it could not pin by then are kept at their base")
    _render_skipped(console, d["skipped"])
    console.print(f"wrote {escape(d['topology_file'])} (--topology) and "
                  f"{escape(d['overlay_file'])} (--engine-profile)", overflow="fold")


def _half(s: dict) -> str:
    if not s["count"]:
        return "-"
    return f"{s['median_abs_log2_ratio']:.3f}, {100 * s['within_2x']:.0f}%"
