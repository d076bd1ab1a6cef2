"""``lts search --emit ENGINE``: the launch commands of the best strategy (``emit.Launch``) and
of two pools (``emit_disagg.DisaggLaunch``), as JSON objects and as plain text of at most 80
columns.
"""
from __future__ import annotations

import textwrap

from rich.console import Console

from ..launch.launcher import command_dict, words

from ..specs.strategy import format_strategy, strategy_dict
from .format import fmt_ms
from .results import result_dict, strategy_row, strategy_text
from .search_serve import disagg_dict, disagg_text


def emit_dict(launch) -> dict:
    """The ``emit`` object of ``lts search --json --emit ENGINE`` (an ``emit.Launch``)."""
    def res(r):
        return result_dict(r, 0) if r is not None else None

    d = {"engine": launch.engine, "engine_name": launch.name,
         "version_checked": launch.version_checked, "docs": launch.docs,
         "faithful": bool(launch.faithful),
         "commands": [command_dict(role, cmd) for role, cmd in launch.commands],
         "notes": list(launch.notes), "reasons": list(launch.reasons),
         "launches": launch.chosen, "replicas": int(launch.replicas),
         "strategy": strategy_dict(launch.strategy) if launch.strategy is not None else None,
         "best_runnable": res(launch.best_runnable)}
    if not launch.faithful:
        d["nearest"] = res(launch.result)
        d["same_degrees"] = res(launch.same_degrees)
    return d


def wrap_command(cmd: str, width: int = 80) -> str:
    """A shell command as lines of at most ``width`` columns joined by backslash continuations,
    broken only between shell words (``launcher.words``: never inside a quoted argument), before
    a ``--flag``. A file-writing command (printf of a config) is kept whole."""
    groups = []
    for word in words(cmd):
        if groups and not word.startswith("--"):
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, line = [], ""
    for g in groups:
        indent = "    " if lines else ""
        if line and len(indent + line + " " + g) > width - 2:
            lines.append(line)
            line = g
        else:
            line = f"{line} {g}" if line else g
    lines.append(line)
    return " \\\n".join(lines[:1] + ["    " + ln for ln in lines[1:]])


def _estimate_line(r: dict, phase: str) -> str:
    """A result's figures (``result_dict``) in one line."""
    lat = (f"TTFT {fmt_ms(r['ttft_ms'])} ms" if phase == "prefill"
           else f"TPOT {fmt_ms(r['tpot_ms'])} ms")
    status = "valid" if r["valid"] else "invalid: " + ", ".join(r["reasons"])
    return (f"{r['tokens_per_s_per_gpu']:,.1f} tokens/s/GPU, {lat}, "
            f"{r['memory_gib_per_gpu']:.1f} GiB/GPU, {status}")


def _filler(width: int):
    """``para(text, indent="", first="")``: ``text`` filled to ``width`` columns, its first line
    indented by ``first`` (default ``indent``), never broken at a hyphen (flags, model names)."""
    def para(text, indent="", first=""):
        return textwrap.fill(text, width, initial_indent=first or indent,
                             subsequent_indent=indent, break_on_hyphens=False)
    return para


def _print_commands(console: Console, out: list, d: dict, para, width: int) -> None:
    """Print ``out`` (lines), then each of the dict's commands wrapped, then its notes."""
    out.append("")
    for c in d["commands"]:
        out.append(f"# {c['role']}")
        out.append(wrap_command(c["command"], width))
    if d["notes"]:
        out.append("")
        out.append("Notes:")
        out += [para(n, "    ", "  - ") for n in d["notes"]]
    console.print("\n".join(out), markup=False, highlight=False, soft_wrap=True)


def render_emit(console: Console, launch, phase: str, width: int = 80) -> None:
    """Plain text, at most ``width`` columns, of an ``emit.Launch`` (its ``emit_dict``, and the
    best strategy as found, which the dict does not carry): the engine, whether the commands
    run the best strategy as found, the nearest runnable strategy if not, the commands, and
    notes."""
    d, para = emit_dict(launch), _filler(width)
    name = d["engine_name"]
    out = [para(f"Launch with {name} (flags checked against {name} "
                f"{d['version_checked']}: docs/engines.md)")]

    best = strategy_text(strategy_dict(launch.best))
    if d["faithful"]:
        out.append(para(f"Faithful: the commands run the best strategy as found ({best})."))
    else:
        found = ""
        if launch.best_result is not None:
            found = f"; {launch.best_result.tokens_per_s_per_gpu[0]:,.1f} tokens/s/GPU"
        out.append(para(f"NOT FAITHFUL: {name} cannot run the best strategy as found "
                        f"({best}{found}):"))
        out += [para(r, "    ", "  - ") for r in d["reasons"]]
        same, runnable = d["same_degrees"], d["best_runnable"]
        if same is not None:
            out.append(para(f"Same degrees with {name}'s sharding: {strategy_text(same)}", "  "))
            out.append(para(_estimate_line(same, phase), "    ", "    "))
        else:
            out.append(para(f"Same degrees: {name} cannot run them at all.", "  "))
        if runnable is not None and same is not None and \
                strategy_row(runnable) == strategy_row(same):
            out.append(para(f"It is also the best strategy {name} can run.", "  "))
        elif runnable is not None:
            out.append(para(f"Best {name} can run: {strategy_text(runnable)}", "  "))
            out.append(para(_estimate_line(runnable, phase), "    ", "    "))
        what = {"same_degrees": f"the same degrees with {name}'s sharding",
                "best_runnable": f"the best strategy {name} can run",
                "none": "nothing"}[d["launches"]]
        out.append(para(f"The commands below run {what}, not the best strategy found."))
    _print_commands(console, out, d, para, width)


def emit_disagg_dict(dl) -> dict:
    """The ``emit_disagg`` object of ``lts search --phase serve --json --emit ENGINE`` (an
    ``emit_disagg.DisaggLaunch``): the commands of the two-pool deployment."""
    return {"engine": dl.engine, "engine_name": dl.name, "version_checked": dl.version_checked,
            "docs": dl.docs, "faithful": bool(dl.faithful),
            "prefill_faithful": bool(dl.prefill.faithful),
            "decode_faithful": bool(dl.decode.faithful),
            "deployment": disagg_dict(dl.deployment), "gpus": dl.gpus,
            "commands": [command_dict(role, cmd) for role, cmd in dl.commands],
            "notes": list(dl.notes),
            "prefill_reasons": list(dl.prefill.reasons), "decode_reasons": list(dl.decode.reasons)}


def render_emit_disagg(console: Console, dl, width: int = 80) -> None:
    """Plain text, at most ``width`` columns, of an ``emit_disagg.DisaggLaunch`` (its
    ``emit_disagg_dict``, and the strategy each pool runs, which the dict does not carry): the
    two-pool deployment's commands (as ``render_emit``), after whether each pool runs its
    strategy as found."""
    d, para = emit_disagg_dict(dl), _filler(width)
    name = d["engine_name"]
    out = [para(f"Launch the two pools with {name} (flags checked against {name} "
                f"{d['version_checked']}: {d['docs']})")]
    for pool, launch in (("prefill", dl.prefill), ("decode", dl.decode)):
        reasons = d[f"{pool}_reasons"]
        if d[f"{pool}_faithful"]:
            out.append(para(f"{pool}: faithful, the strategy as found.", "  "))
        else:
            runs = ("nothing" if launch.strategy is None else
                    format_strategy(launch.strategy, only_changed=True, sep=", "))
            out.append(para(f"{pool}: NOT FAITHFUL ({len(reasons)} per-op choice"
                            f"{'s' if len(reasons) != 1 else ''} it cannot run); "
                            f"{name} runs {runs}", "    ", "  "))
    if d["deployment"] is not None:
        what = "as found" if d["faithful"] else "paired again for the strategies it runs"
        out.append(para(f"Deployment ({what}): {disagg_text(d['deployment'])}"))
    _print_commands(console, out, d, para, width)
