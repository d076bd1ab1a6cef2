"""``lts kernels``: the measured-kernel tables lts reads, as rich tables (rows from
``cost.coverage``)."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def render_kernels(console: Console, d: dict) -> None:
    """The tables held (``d["tables"]``, cost.coverage.gpu_rows) and, given a model, which of
    its ops read them (``d["model"]``, cost.coverage.model_rows)."""
    rows = d["tables"]
    if rows:
        t = Table(title="Measured kernel tables" + (f" ({d['gpu']})" if d.get("gpu") else ""),
                  box=box.SIMPLE_HEAD)
        for col, just in (("gpu", "left"), ("op", "left"), ("engine", "left"),
                          ("release", "left"), ("formats", "left"), ("shapes", "right")):
            t.add_column(col, justify=just, overflow="fold")
        for r in rows:
            t.add_row(r["gpu"], r["title"], r["engine"], r["release"],
                      escape(", ".join(r["formats"])), f"{r['shapes']:,}")
        console.print(t)
        console.print(f"source: {escape(d['dir'])}" if d.get("dir") else
                      "source: shared/data/kernels/<gpu>/<op>/<engine>/<release>/<table>.parquet "
                      "(aiconfigurator-core 0.12.0), via scripts/kernel_tables.py")
    m = d.get("model")
    if m is None:
        return
    if not m["tables"]:
        console.print(f"{escape(d['model_name'])} on {escape(d['topology'])}: no measured "
                      f"kernels ({escape(m['why'])}); every op is costed by the roofline")
        return
    t = Table(title=f"{d['model_name']} on {d['topology']}, {m['engine']} {m['version']}: "
                    "what each op reads", box=box.SIMPLE_HEAD)
    for col in ("op", "decode", "prefill"):
        t.add_column(col)
    for r in m["ops"]:
        t.add_row(r["op"], *(("[green]table[/]" if r[ph] == "table" else "roofline")
                             for ph in ("decode", "prefill")))
    console.print(t)
    s = Table(title="tables read", box=box.SIMPLE_HEAD)
    for col in ("op", "release", "note"):
        s.add_column(col, overflow="fold")
    for r in m["tables"]:
        s.add_row(r["op"], r["release"], escape(r["note"] or "this release's own"))
    console.print(s)
    moe = m.get("moe")
    if moe:
        where = (f"{escape(moe['engine'])} {escape(moe['release'])}'s MoE table, timed with "
                 f"{escape(', '.join(moe['kernels']) or 'kernels it does not name')}"
                 if moe["engine"] else "no table")
        console.print(f"routed experts ({escape(moe['format'])}): {where}; {escape(moe['note'])}")
