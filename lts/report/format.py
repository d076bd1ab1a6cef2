"""What every command's output shares: the consoles, the progress bar on stderr, JSON-safe
values and the display formats of numbers (ms, bytes, parameter counts). Display units appear
only in the report.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

# rich is imported where a console is made (``make_console``, ``progress``), not with this
# module: the CLI imports it at start-up, and ``lts --help`` prints through click alone


MIN_WIDTH = 80   # columns a table is laid out in at least: narrower, rich elides the numbers
                 # (COLUMNS=20); the terminal wraps the lines instead


def make_console(no_color: bool = False, stderr: bool = False) -> Console:
    """A console on stdout (results) or stderr, at least MIN_WIDTH columns wide."""
    from rich.console import Console
    console = Console(stderr=stderr, no_color=no_color, highlight=False)
    if console.width < MIN_WIDTH:
        console.width = MIN_WIDTH
    return console


def num(x):
    """float for JSON; NaN/inf -> None."""
    x = float(x)
    return x if math.isfinite(x) else None


SHORT = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS", "all-to-all": "A2A",
         "send": "send"}


def fmt_params(n: float) -> str:
    """A parameter count: 3 significant figures and T, B or M (``1.61T``)."""
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= div:
            return f"{n / div:.3g}{unit}" if n / div < 100 else f"{n / div:.0f}{unit}"
    return f"{n:.0f}"


def fmt_bytes(n: float) -> str:
    """Bytes in 3 significant figures and G, M or K (binary units)."""
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= div:
            v = n / div
            return f"{v:.3g}{unit}" if v < 999.5 else f"{v:.0f}{unit}"
    return f"{n:.0f}B"


def fmt_ms(ms) -> str:
    """A time in ms of a JSON dict (None: not finite)."""
    return "-" if ms is None else f"{ms:.2f}"


def fmt_s(ms) -> str:
    """A time in ms of a JSON dict (None: not finite) as seconds in 3 significant figures,
    thousands separated beyond."""
    if ms is None:
        return "-"
    s = ms / 1e3
    return f"{s:.3g}" if s < 1000 else f"{s:,.0f}"


def fmt_us(us: float) -> str:
    """A time in µs, as ms from 1 ms."""
    return f"{us / 1e3:.2f} ms" if abs(us) >= 1e3 else f"{us:.0f} µs"


def json_safe(obj):
    """numpy scalars and containers of them -> plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item"):
        obj = obj.item()
    if isinstance(obj, float):
        return num(obj)
    return obj


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
            from rich.markup import escape
            self.progress.update(self.task, description=escape(text))

    def set_total(self, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=total)


@contextmanager
def progress(total, description: str, disable: bool = False):
    """A transient progress bar on stderr (off when ``disable`` or stderr is not a terminal);
    ``total=None`` shows an indeterminate bar. Yields an ``_Advance`` callback."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                               TextColumn, TimeElapsedColumn)
    console = Console(stderr=True, highlight=False)
    if disable or not console.is_terminal:
        yield _Advance(None, None)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield _Advance(bar, bar.add_task(escape(description), total=total))
