"""The ``lts`` command line. The only module that imports click; it wires the others together.

Exit status: 0 success, 1 bad input file or nothing feasible (LtsError), 2 bad flags (click).
Results go to stdout (rich tables, or JSON with --json); progress and diagnostics to stderr.
"""
from __future__ import annotations

import json
import sys
import time

import click
import numpy as np
from rich.console import Console

from . import report
from .costmodel import PHASES, Workload, breakdown, evaluate
from .errors import LtsError, StrategyError
from .specs import load_model, load_topology, shipped_names
from .strategy import Space
from .units import DTYPE_BYTES

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _console(no_color: bool, stderr: bool = False) -> Console:
    return Console(stderr=stderr, no_color=no_color, highlight=False)


def _emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


def _load(model: str, topology: str, precision=None):
    try:
        return load_model(model, precision), load_topology(topology)
    except LtsError as e:
        raise click.ClickException(str(e)) from None


def output_options(fn):
    fn = click.option("--no-color", is_flag=True, help="Plain output without colour.")(fn)
    fn = click.option("json_", "--json", is_flag=True, help="Print JSON (keys in the README).")(fn)
    return fn


def workload_options(fn):
    """Flags describing what is served (DESIGN.md §1 Workload)."""
    opts = [
        click.option("--phase", type=click.Choice(PHASES), default="decode", show_default=True,
                     help="decode: one token per sequence per step; prefill: whole prompts."),
        click.option("--context", type=click.IntRange(1, 10_000_000), default=16384,
                     show_default=True, help="Context (KV cache) length in tokens; prompt length "
                                             "in prefill."),
        click.option("--tpot-slo-ms", type=click.FloatRange(0, min_open=True), default=50.0,
                     show_default=True, help="Decode SLO: time per output token."),
        click.option("--ttft-slo-ms", type=click.FloatRange(0, min_open=True), default=None,
                     help="Prefill SLO: time to first token (none by default)."),
        click.option("--gpus", type=click.IntRange(1), default=None,
                     help="Device budget (default: every GPU of the topology)."),
        click.option("--precision", type=click.Choice(sorted(DTYPE_BYTES)), default=None,
                     help="Override the weight and KV-cache type (e.g. fp8)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _workload(phase, context, tpot_slo_ms, ttft_slo_ms, gpus) -> Workload:
    return Workload(phase=phase, context=context, tpot_slo_ms=tpot_slo_ms,
                    ttft_slo_ms=ttft_slo_ms or 0.0, gpus=gpus or 0)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="lts", message="lts %(version)s")
def cli():
    """lts (Learn to Shard): find the fastest way to serve a large language model on a GPU
    cluster, from a roofline cost model of the model (a TOML file, a HuggingFace config.json or a
    shipped name) and the cluster (a TOML file or shipped name).

    \b
    Examples:
      lts estimate moe1.6t h100_dgx --strategy "tp=8,ep=16,pp=4,batch=64"
      lts estimate llama3.1-70b h100_dgx --strategy "tp=8,batch=64" --json
      lts models
      lts bench
    """


@cli.command()
@click.argument("model")
@click.argument("topology")
@click.option("--strategy", "strategy_text", required=True,
              help='Degrees, batch and per-op choices, e.g. "tp=8,ep=16,pp=4,batch=64,ffn2=1". '
                   "Ops not named take Megatron's choice; ops: embedding, attn_norm, qkv, scores, "
                   "context, out_proj, ffn_norm, router, ffn1, ffn2, final_norm, lm_head; "
                   "choices: 0, 1, none, experts.")
@workload_options
@output_options
def estimate(model, topology, strategy_text, phase, context, tpot_slo_ms, ttft_slo_ms, gpus,
             precision, json_, no_color):
    """Cost one strategy: per-op compute, memory and collectives, then throughput, latency and
    memory per GPU. Exit status 1 if the strategy is invalid (memory, SLO, budget, ...)."""
    m, topo = _load(model, topology, precision)
    from .strategy import parse_strategy
    try:
        row = parse_strategy(strategy_text, m.is_moe)
    except StrategyError as e:
        raise click.BadParameter(str(e).split(": ", 1)[1], param_hint="'--strategy'") from None
    work = _workload(phase, context, tpot_slo_ms, ttft_slo_ms, gpus)
    res, ops = breakdown(m, topo, work, row)
    if json_:
        _emit_json(report.estimate_dict(m, res, ops))
    else:
        report.render_estimate(_console(no_color), m, topo, res, ops, phase)
    if not res.valid[0]:
        sys.exit(1)


@cli.command()
@click.option("--show", "show", metavar="NAME", default=None,
              help="Print one model's parsed shape and parameter counts (a shipped name or a "
                   "path to a TOML file or config.json).")
@output_options
def models(show, json_, no_color):
    """List the shipped models with their sizes."""
    try:
        if show:
            m = load_model(show)
            if json_:
                _emit_json(report.models_rows([(show, m)])[0])
            else:
                report.render_model_show(_console(no_color), m)
            return
        rows = report.models_rows([(n, load_model(n)) for n in shipped_names("models")])
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    if json_:
        _emit_json(rows)
    else:
        report.render_models(_console(no_color), rows)


@cli.command()
@output_options
def topologies(json_, no_color):
    """List the shipped topologies (GPUs, memory, links)."""
    try:
        rows = report.topologies_rows([(n, load_topology(n)) for n in shipped_names("topologies")])
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    if json_:
        _emit_json(rows)
    else:
        report.render_topologies(_console(no_color), rows)


@cli.command()
@click.argument("model", default="moe1.6t")
@click.argument("topology", default="h100_dgx")
@click.option("--evaluations", type=click.IntRange(1000), default=1_000_000, show_default=True,
              help="Random strategies to evaluate for the throughput figure.")
@click.option("--seed", type=int, default=0, show_default=True)
@output_options
def bench(model, topology, evaluations, seed, json_, no_color):
    """Measure this machine: evaluator strategies/s (one core) and estimate wall time."""
    m, topo = _load(model, topology)
    work = Workload()
    space = Space.for_model(m, work.budget(topo))
    rng = np.random.default_rng(seed)
    strategies = space.decode(space.sample(rng, evaluations))
    evaluate(m, topo, work, strategies[:1000])          # warm up
    t0 = time.perf_counter()
    evaluate(m, topo, work, strategies)
    eval_s = time.perf_counter() - t0
    from .strategy import megatron_row
    t0 = time.perf_counter()
    breakdown(m, topo, work, megatron_row(8, 1, 1, 64))
    est_s = time.perf_counter() - t0
    d = {"model": m.name, "topology": topo.name, "evaluations": evaluations,
         "evaluations_per_s": evaluations / eval_s, "estimate_wall_s": est_s,
         "search_wall_s": None, "exact_wall_s": None}
    if json_:
        _emit_json(d)
    else:
        report.render_bench(_console(no_color), d)


def main():
    cli(prog_name="lts")


if __name__ == "__main__":
    main()
