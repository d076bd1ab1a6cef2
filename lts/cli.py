"""The ``lts`` command line. The only module that imports click; it wires the others together.

Each command parses and checks its flags, calls the library (``plan.plan`` for a search,
``search.methods.compare``, ``bench.measure``, ``cost.model.breakdown``, ``serve.serve``,
``validate.validate``, ``emit.launch``) and prints the result through ``report`` (rich tables,
or JSON with --json).

Exit status: 0 success, 1 bad input file or nothing feasible (LtsError), 2 bad flags (click;
the library's FlagError and UsageError: ``_refusals``).
Results go to stdout (rich tables, or JSON with --json); progress and diagnostics to stderr.
"""
from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path
from dataclasses import asdict

import click

from . import plan
from .engines import ENGINE_NAMES, GENERIC, REAL_ENGINES
from .report.format import json_safe, make_console, progress
from .search.names import METHODS, STOCHASTIC
from .serving.imports import FORMATS as IMPORT_FORMATS
from .serving.spec import MAX_SPEC_TOKENS
from .specs import load_model, load_topology, shipped_names
from .specs.errors import (FlagError, LtsError, StrategyError, UsageError, cut, cut_quoted,
                           decimal, plain)
from .specs.strategy import COARSE, DEGREES
from .specs.limits import (MAX_BENCH, MAX_CONCURRENCY, MAX_CP, MAX_DEGREE, MAX_ETP, MAX_GPUS,
                           MAX_JOBS, MAX_OFFLOAD_GIB, MAX_REQUEST_RATE, MAX_SEED,
                           MAX_SEEDS, MAX_SERVE_TOP, MAX_SIM_REQUESTS, MAX_TOKENS, MAX_TOP)
from .specs.units import KV_DTYPES, weight_format
from .specs.workload import PHASES, Workload


def _later(module: str, name: str):
    """``module``'s function ``name``, imported at its first call: start-up imports what every
    command needs and each command the rest (the cost model, the searches, their reports: about
    70 ms of a 0.3 s start-up; docs/performance.md)."""
    def call(*args, **kwargs):
        import importlib
        return getattr(importlib.import_module(module, __package__), name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    return call


render_bench = _later(".report.bench", "render_bench")
compare_dict = _later(".report.compare", "compare_dict")
render_compare = _later(".report.compare", "render_compare")
estimate_dict = _later(".report.estimate", "estimate_dict")
render_estimate = _later(".report.estimate", "render_estimate")
render_serve = _later(".report.estimate", "render_serve")
render_two_pool = _later(".report.estimate", "render_two_pool")
render_simulated = _later(".report.simulate", "render_simulated")
serve_dict = _later(".report.estimate", "serve_dict")
two_pool_dict = _later(".report.estimate", "two_pool_dict")
render_emit = _later(".report.launch", "render_emit")
render_emit_disagg = _later(".report.launch", "render_emit_disagg")
prefix_dict = _later(".report.results", "prefix_dict")
spec_dict = _later(".report.results", "spec_dict")
render_search = _later(".report.search", "render_search")
pareto_svg = _later(".report.search_serve", "pareto_svg")
render_calibrate = _later(".report.validate", "render_calibrate")
render_validate = _later(".report.validate", "render_validate")
measure = _later(".search.bench", "measure")
breakdown = _later(".cost.model", "breakdown")
run_compare = _later(".search.methods", "compare")

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# Every flag value is checked at the boundary, one rule per kind of value (lts.specs.limits; bad flags
# exit 2).


class Count(click.IntRange):
    """click's IntRange whose refusals show a long value cut (``specs.errors.cut``): an integer
    flag given 5,000 digits said all of them. Digits are ASCII: ``int()`` also reads other
    scripts' digits ('٨') and underscores ('1_0'), which no other reader of lts takes."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and (not value.isascii() or "_" in value):
            self.fail(f"{cut_quoted(value)} is not a valid integer (ASCII digits, no _)", param,
                      ctx)
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as e:
            text = str(value)
            if len(text) <= 60:
                raise
            grouped = f"{int(text):,}" if text.strip().isdigit() and len(text) < 4300 else None
            message = e.message.replace(text, cut(text))
            if grouped:
                message = message.replace(grouped, cut(grouped))
            self.fail(message, param, ctx)


class Milliseconds(click.ParamType):
    """A time limit in ms: a positive number; ``inf`` means no limit; nan is refused."""
    name = "MS"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            x = value
        else:
            try:
                x = decimal(str(value).strip())
            except ValueError:
                self.fail(f"{cut_quoted(value)} is not a number of milliseconds", param, ctx)
        if math.isnan(x) or x <= 0:
            self.fail(f"{cut_quoted(value)} is not a positive number of milliseconds (inf: no "
                      "limit)", param, ctx)
        return x


MS = Milliseconds()


class WeightFormat(click.ParamType):
    """--precision: a weight format in any of its spellings (``units.weight_format``: any case,
    "-" for "_"), as the ``WEIGHT_FORMATS`` name it means (what the rest of lts reads)."""
    name = "FORMAT"

    def convert(self, value, param, ctx):
        try:
            return weight_format(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


PRECISION = WeightFormat()


class Finite(click.FloatRange):
    """click.FloatRange refusing nan and infinities (FloatRange lets nan through every bound:
    each comparison with it is false), the one rule for every bounded float flag."""

    def convert(self, value, param, ctx):
        if isinstance(value, str):          # ASCII, no "_" (float reads '٨' and '1_0')
            try:
                decimal(value)
            except ValueError:
                self.fail(f"{cut_quoted(value)} is not a decimal number", param, ctx)
        x = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(x):
            self.fail(f"{cut_quoted(value)} is not a finite number", param, ctx)
        return super().convert(x, param, ctx)


def _emit_json(obj) -> None:
    """JSON on stdout, streamed (a 100,000-row validate result is never one string); a value
    that is not finite (an absurd but accepted input can overflow a time) is null."""
    buf = []
    for chunk in json.JSONEncoder(indent=2, allow_nan=False).iterencode(json_safe(obj)):
        buf.append(chunk)
        if len(buf) >= 65536:
            sys.stdout.write("".join(buf))
            buf.clear()
    sys.stdout.write("".join(buf) + "\n")


def _print(json_: bool, no_color: bool, d, render, *extra) -> None:
    """Every command's output: its dict ``d`` as JSON with --json, else ``render(console, d,
    *extra)`` on stdout (``extra``: what the table shows that the JSON does not carry)."""
    if json_:
        _emit_json(d)
    else:
        render(make_console(no_color), d, *extra)


def _load(model: str, topology: str, precision=None, kv_cache_dtype=None):
    """The model and topology (``plan.load``) with the current command's flags: its expert
    placement and the checks of its values (context window, --gpus, engine)."""
    ctx = click.get_current_context()
    with _refusals():
        return plan.load(model, topology, precision, kv_cache_dtype, ctx.meta.get("lts_experts"),
                         {**ctx.params, "defaulted": _defaulted()})


def _defaulted() -> frozenset:
    """The current command's flags the user did not give (their values are the defaults)."""
    ctx = click.get_current_context()
    return frozenset(n for n in ctx.params
                     if ctx.get_parameter_source(n) == click.core.ParameterSource.DEFAULT)


@contextmanager
def _refusals():
    """The library's refusals as click's (``plan.refusal``: the same exit status and line):
    a bad flag's value, flags that do not go together (exit 2), anything else (exit 1)."""
    try:
        yield
    except FlagError as e:
        raise click.BadParameter(e.reason, param_hint=e.hint) from None
    except UsageError as e:
        raise click.UsageError(str(e)) from None
    except LtsError as e:
        raise click.ClickException(str(e)) from None


def _check_budget(budget: int, methods, phase: str, flag: str = "--budget",
                  method_flag: str = "--method") -> None:
    with _refusals():
        plan.check_budget(budget, methods, phase, flag, method_flag)


def output_options(fn):
    fn = click.option("--no-color", is_flag=True, help="Plain output without colour.")(fn)
    fn = click.option("json_", "--json", is_flag=True, help="Print JSON (keys in docs/json.md).")(fn)
    return fn


def spec_options(fn):
    """Speculative decoding in the serve phase (``serving.spec``; docs/serving.md)."""
    opts = [
        click.option("--spec", "spec_text", default=None, metavar="mtp|eagle|draft:MODEL",
                     help="serve: speculative decoding: the model's multi-token-prediction "
                          "layers (mtp), an EAGLE-3 head (eagle) or a draft model "
                          "(draft:MODEL, a shipped name or file); each step verifies "
                          "--spec-tokens drafts per request (docs/serving.md)."),
        click.option("--spec-tokens", type=Count(1, MAX_SPEC_TOKENS), default=None,
                     help="serve, with --spec: tokens drafted per step (default: mtp the "
                          "model's MTP layers, else 3)."),
        click.option("--acceptance", type=Finite(0, 1), default=None,
                     help="serve, with --spec: the chance each drafted token is accepted "
                          "(default for mtp 0.85, DeepSeek-V3 report; required otherwise, or "
                          "--accepted-length)."),
        click.option("--accepted-length", type=Finite(1, MAX_SPEC_TOKENS + 1),
                     default=None, metavar="L",
                     help="serve, with --spec: a measured mean of tokens per step (1 to "
                          "--spec-tokens + 1) instead of --acceptance."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def prefix_options(fn):
    """Prefix caching in the serve phase (``serving.prefix``; docs/serving.md)."""
    opts = [
        click.option("--prefix-hit", type=Finite(0, 1), default=None, metavar="F",
                     help="serve: the fraction of each prompt's tokens already in the KV cache "
                          "(prefix caching: not prefilled; at most all but the last token)."),
        click.option("--prefixes", type=Count(1, MAX_CONCURRENCY), default=1,
                     show_default=True,
                     help="serve, with --prefix-hit: distinct cached prefixes, their KV cache "
                          "held once each (1: a shared system prompt; one per conversation: "
                          "as many as the clients)."),
        click.option("--kv-offload", type=Finite(0, MAX_OFFLOAD_GIB, min_open=True),
                     default=None, metavar="GIB",
                     help="serve, with --prefix-hit and an engine (vllm, sglang, trtllm): GiB of "
                          "host memory per GPU for the cached prefixes the GPU does not hold; "
                          "a hit there is copied back over the GPU's host link "
                          "(gpu.host_bandwidth_gb_s) before its prefill. Default: every prefix "
                          "on the GPU (docs/serving.md)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _prefix(phase, prefix_hit, prefixes, kv_offload=None, isl: int = 1):
    """The PrefixCache the flags name (None without --prefix-hit); one-line usage errors."""
    _prefix_alone(prefix_hit)
    with _refusals():
        return plan.prefix_cache(phase, prefix_hit, prefixes, kv_offload, isl)


def _prefix_alone(prefix_hit) -> None:
    """Refuse --prefixes or --kv-offload without --prefix-hit."""
    if prefix_hit is None:
        for flag in ("prefixes", "kv_offload"):
            if _flag_given(flag):
                raise click.UsageError(f"--{flag.replace('_', '-')}: only with --prefix-hit")


def _spec_alone(spec_text) -> None:
    """Refuse --spec-tokens, --acceptance or --accepted-length without --spec."""
    given = [f"--{n.replace('_', '-')}" for n in ("spec_tokens", "acceptance", "accepted_length")
             if _flag_given(n)]
    if spec_text is None and given:
        raise click.UsageError(f"{', '.join(given)}: only with --spec")


def _offload_checks(prefix, profile, topo) -> None:
    with _refusals():
        plan.offload_checks(prefix, profile, topo)


def _speculation(m, phase, spec_text, spec_tokens, acceptance, accepted_length):
    """The Speculation the flags name (None without --spec); one-line usage errors."""
    _spec_alone(spec_text)
    with _refusals():
        return plan.speculation(m, phase, spec_text, spec_tokens, acceptance, accepted_length)


def workload_options(fn):
    """Flags describing what is served (docs/design.md §1 Workload)."""
    return _workload_flags(fn, PHASES, "decode: one token per sequence per step; prefill: whole "
                                       "prompts.")


def serve_workload_options(concurrency: bool):
    """The workload flags plus the serve phase and its request shape (``--concurrency``: a fixed
    batch, for estimate; a search chooses the batch itself)."""
    def decorate(fn):
        fn = _workload_flags(fn, PHASES + ("serve",),
                             "decode: one token per sequence per step; prefill: whole prompts; "
                             "serve: requests of --isl input and --osl output tokens, back to "
                             "back (output tokens/s).")
        opts = [
            click.option("--isl", type=Count(1, MAX_TOKENS), default=1024,
                         show_default=True, help="serve: input tokens per request."),
            click.option("--osl", type=Count(1, MAX_TOKENS), default=1024,
                         show_default=True, help="serve: output tokens per request."),
            click.option("--engine", type=EngineParam(), default=None,
                         help=("serve: the engine profile (scheduler defaults, KV-cache memory, "
                               "time per step; docs/serving.md); NAME@VERSION picks the "
                               "profile of that release (vllm@0.12). Default: generic."
                               if concurrency else
                               "The engine to deploy on: every method ranks only the strategies "
                               "it runs as written (docs/engines.md; search also reports the "
                               "headroom of the whole per-op space); serve: also its profile "
                               "(scheduler defaults, KV-cache memory, time per step; "
                               "NAME@VERSION: that release's profile, e.g. vllm@0.12; default "
                               "the newest). Default: the --emit engine if given, else generic "
                               "(the whole space).")),
        ]
        if concurrency:
            opts.append(click.option(
                "--concurrency", type=Count(1, MAX_CONCURRENCY), default=None,
                help="serve: requests in flight, kept constant: a finished request is replaced "
                     "at once (default: the strategy's batch= if named, else the concurrency "
                     "with the highest output tokens/s)."))
        for opt in reversed(opts):
            fn = opt(fn)
        return fn
    return decorate


def _workload_flags(fn, phases, phase_help):
    opts = [
        click.option("--phase", type=click.Choice(phases), default="decode", show_default=True,
                     help=phase_help),
        click.option("--context", type=Count(1, MAX_TOKENS), default=16384,
                     show_default=True, help="Context (KV cache) length in tokens; prompt length "
                                             "in prefill."),
        click.option("--tpot-slo-ms", type=MS, default=plan.TPOT_SLO_MS,
                     show_default=True, help="Decode SLO: time per output token (serve: only "
                                             "when given)."),
        click.option("--ttft-slo-ms", type=MS, default=None,
                     help="Prefill and serve SLO: time to first token (none by default)."),
        click.option("--gpus", type=Count(1), default=None,
                     help="Device budget (default: every GPU of the topology)."),
        click.option("--precision", type=PRECISION, default=None,
                     help="Override the weight format: bf16, fp16, fp32, fp8, int8, fp8_block, "
                          "mxfp8, nvfp4, mxfp4, w4a16, w4a16_zp, w4a16_g32, w4a16_nvfp4, w4a8, "
                          "or another name of one (bfloat16, fp8_per_tensor, int4_wo, awq, gptq, "
                          "w4afp8, ...: docs/design.md §1; any case); bf16 fp16 fp32 fp8 int8 "
                          "also set the KV cache."),
        click.option("--kv-cache-dtype", type=click.Choice(("auto",) + KV_DTYPES),
                     default="auto", show_default=True,
                     help="KV-cache type (auto: the model's, from the checkpoint, else the "
                          "activation type)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _problem(m, topo, phase, context, tpot_slo_ms, ttft_slo_ms, gpus, isl, osl, engine,
             spec=None, prefix=None, max_cp=1, max_etp=1):
    """The search problem of the flags (``plan.problem``; the TPOT limit only when given on
    the command line)."""
    return plan.problem(m, topo, phase, context,
                        tpot_slo_ms if _flag_given("tpot_slo_ms") else None, ttft_slo_ms, gpus,
                        isl, osl, engine, spec, prefix, max_cp, max_etp)


def _phase_flags(phase: str, any_phase=()) -> None:
    """Refuse a flag the phase does not use: the serve-only flags in another phase
    (``any_phase``: flags this command takes in every phase), an SLO on a time the phase has
    not (a decode step has no TTFT, a prefill pass no TPOT)."""
    params = click.get_current_context().params
    for flag, other, why in (("ttft_slo_ms", "decode", "a decode step has no TTFT"),
                             ("tpot_slo_ms", "prefill", "a prefill pass has no TPOT")):
        if phase == other and flag in params and _flag_given(flag):
            raise click.UsageError(f"--{flag.replace('_', '-')}: not with --phase {phase} ({why}"
                                   f"; --phase serve bounds both)")
    # (an --engine-profile overlay holds the serving loop's constants: no other phase reads it)
    ctx = click.get_current_context()
    takes = {p.name for p in ctx.command.params}       # (engine_profile is not a kwarg)
    given = [f"--{n.replace('_', '-')}" for n in ("isl", "osl", "concurrency", "engine",
                                                  "engine_profile")
             if n in takes and n not in any_phase and _flag_given(n)]
    if phase != "serve" and given:
        raise click.UsageError(f"{', '.join(given)}: only with --phase serve")
    if phase == "serve" and _flag_given("context"):
        raise click.UsageError("--context: not with --phase serve (its contexts come from "
                               "--isl and --osl)")


def _flag_given(name: str) -> bool:
    return click.get_current_context().get_parameter_source(name) == \
        click.core.ParameterSource.COMMANDLINE


class EngineParam(click.ParamType):
    """--engine NAME or NAME@VERSION: the engine's name (what the engine space, --emit and the
    JSON use); the version picks its profile release (``Engine.release_for``), kept in the
    context for ``_profile``."""
    name = "engine"

    def get_metavar(self, param, *args, **kwargs):
        return "[" + "|".join(ENGINE_NAMES) + "][@VERSION]"

    def convert(self, value, param, ctx):
        try:
            name, version = plan.parse_engine(value)
        except FlagError as e:
            self.fail(e.reason, param, ctx)
        if version is not None and ctx is not None:
            ctx.meta["lts_engine_version"] = version     # its profile's and kernels' release
        return name


def _deployment_files(fmt, path, launch, disagg_launch, problem, model_arg) -> list:
    """(what, path or None, text or None, why not or None) of each deployment file
    ``--emit-format`` asks for: the one instance's, and the two pools' when they are emitted
    (written to ``path`` and beside it when given). A deployment the format cannot express is
    its reason, and the others are still written."""
    from .launch.deploy import DeployError, one_pool, two_pools
    from .launch.emit import model_key
    key = model_key(model_arg) or _model_label(model_arg)
    wanted = [("one instance", lambda: one_pool(fmt, launch, problem, key))]
    if disagg_launch is not None:
        wanted.append(("two pools", lambda: two_pools(fmt, disagg_launch, key)))
    files = []
    for i, (what, make) in enumerate(wanted):
        try:
            text, why = make(), None
        except DeployError as e:
            text, why = None, str(e)
        where = None
        if path is not None and text is not None:
            where = path if i == 0 else _beside(path, ".two-pools")
            _check_output(str(where), "--emit-file")
            try:
                with open(where, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                raise click.ClickException(f"--emit-file {where}: {e.strerror or e}") from None
        files.append((what, where, text, why))
    return files


def _model_label(model_arg: str) -> str:
    """A short name for a model given as a file or folder (deployment files' names)."""
    p = Path(model_arg)
    return (p.parent.name if p.suffix.lower() == ".json" else p.stem if p.suffix else p.name) \
        or "model"


def _beside(path: str, tag: str, suffix: str | None = None) -> str:
    """``path`` with ``tag`` before its suffix (lts.sbatch -> lts.two-pools.sbatch), or with
    ``tag`` and ``suffix`` after its stem (f.toml, "-engine", ".toml" -> f-engine.toml); a path
    that is not a regular file's (/dev/null, /dev/stdout) stays itself."""
    p = Path(path)
    if p.exists() and not p.is_file():
        return path
    if suffix is not None:
        return str(p.with_name(p.stem + tag + suffix))
    return str(p.with_name(p.stem + tag + p.suffix)) if p.suffix else path + tag


def _profile(topo, engine: str | None, emit: str | None = None):
    """The engine profile of --engine (its NAME@VERSION release, else the newest), else of the
    --emit engine, else generic (``plan.profile``), with the command's --engine-profile,
    --kernels and --no-kernels; its notes said once on stderr."""
    meta = click.get_current_context().meta
    with _refusals():
        return plan.profile(topo, engine, emit,
                            meta.get("lts_engine_version") if engine else None,
                            meta.get("lts_overlay"), meta.get("lts_kernel_dir"),
                            bool(meta.get("lts_no_kernels")), _note)


def _note(text: str) -> None:
    """Say ``text`` on stderr, once in a command."""
    said = click.get_current_context().meta.setdefault("lts_said", set())
    if text not in said:
        said.add(text)
        click.echo(text, err=True)


def _load_overlay(ctx, param, value):
    if value is None:
        return None
    from .serving.calibrate import load_overlay
    try:
        ctx.meta["lts_overlay"] = load_overlay(value)
    except LtsError as e:
        raise click.BadParameter(str(e)) from None
    return value


def engine_profile_option(fn):
    return click.option("--engine-profile", "engine_profile", default=None,
                        metavar="OVERLAY.toml", callback=_load_overlay, expose_value=False,
                        is_eager=True,
                        help="serve: an engine profile overlay written by lts calibrate (its "
                             "fitted time per step and per request replace the engine's).")(fn)


def _kernels_dir(ctx, param, value):
    """--kernels DIR: every GPU's tables in it read now, so that a malformed one is this flag's
    error, not a traceback in the middle of a search."""
    if value is not None:
        from .cost.kernels import _load, gpu_path, gpus
        if ctx.meta.get("lts_no_kernels"):      # (--no-kernels is eager: seen first, nothing read)
            raise click.UsageError("--kernels and --no-kernels: give one or the other", ctx)
        if not Path(value).is_dir():       # (click's file_okay=False lets a FIFO through)
            raise click.BadParameter(f"{plain(value)}: not a folder", ctx, param)
        if not gpus(value):
            raise click.BadParameter(
                f"{value}: no kernel tables in this folder (<gpu>.npz as "
                "scripts/kernel_tables.py writes them, or the collector's "
                "<gpu>/<op>/<engine>/<release>/<table>.csv)", ctx, param)
        for gpu in gpus(value):
            try:
                data = _load(str(gpu_path(gpu, value)))
            except LtsError as e:
                raise click.BadParameter(str(e), ctx, param) from None
            if "sources" not in data:
                raise click.BadParameter(
                    f"{gpu_path(gpu, value)}: no table lts reads (gemm/*/*/gemm_perf, "
                    "moe/*/*/moe_perf, attention/*/*/{generation,context}_attention_perf, "
                    "comm/*/*/custom_allreduce_perf or nccl_perf)", ctx, param)
        ctx.meta["lts_kernel_dir"] = str(value)
    return value


def _no_kernels(ctx, param, value):
    if value:
        ctx.meta["lts_no_kernels"] = True
    return value


def kernel_options(fn):
    """--kernels DIR and --no-kernels: where the measured kernel times come from (docs/kernels.md)."""
    fn = click.option("--no-kernels", is_flag=True, callback=_no_kernels, expose_value=False,
                      is_eager=True,
                      help="Cost every op by the roofline, not from measured kernel timings "
                           "(docs/kernels.md).")(fn)
    return click.option("--kernels", "kernel_dir", default=None, metavar="DIR",
                        type=click.Path(exists=True, file_okay=False), callback=_kernels_dir,
                        expose_value=False,
                        help="Kernel tables of your own GPUs in place of lts's: <gpu>.npz as "
                             "scripts/kernel_tables.py writes them, or the collector's "
                             "<gpu>/<op>/<engine>/<release>/<table>.csv (docs/kernels.md).")(fn)


def _expert_flag(ctx, param, value):
    """Keep an expert-placement flag's value for ``_load`` (the commands never see it)."""
    if value is not None and value is not False:
        ctx.meta.setdefault("lts_experts", {})[param.name] = value
    return value


def expert_options(fn):
    """--redundant-experts, --eplb and --expert-load: how a MoE model's experts are placed and
    loaded (``specs.with_expert_placement``; docs/design.md §3 "Expert load")."""
    opts = [
        click.option("--redundant-experts", "redundant_experts",
                     type=Count(0, MAX_DEGREE), default=None, metavar="N",
                     callback=_expert_flag, expose_value=False,
                     help="MoE: N extra expert copies over the expert-parallel group, placed by "
                          "the engine's load balancer (EPLB, implied): experts + N slots must "
                          "divide over ep, each GPU holds its share of them, the busiest rank's "
                          "load evens out (vLLM --eplb-config num_redundant_experts, SGLang "
                          "--ep-num-redundant-experts, TensorRT-LLM load_balancer.num_slots)."),
        click.option("--eplb", "eplb", is_flag=True, callback=_expert_flag, expose_value=False,
                     help="MoE: the engine's expert-parallel load balancer places the experts by "
                          "their load (without --redundant-experts: no extra copies)."),
        click.option("--expert-load", "expert_load", type=click.Choice(("power-law", "uniform")),
                     default=None, callback=_expert_flag, expose_value=False,
                     help="MoE: the routed load the costs assume: power-law (the default: "
                          "experts as skewed as the measured kernels' collector draws them, "
                          "alpha 1.01, so the busiest expert-parallel rank gets more than its "
                          "share) or uniform (every expert alike)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _with_kernel_flags(profile):
    """The profile as --kernels / --no-kernels say (unchanged without them)."""
    meta = click.get_current_context().meta
    return plan.with_kernels(profile, meta.get("lts_kernel_dir"), bool(meta.get("lts_no_kernels")))


def pool_options(what: str):
    """--prefill, --decode and their instances: a two-pool deployment (estimate, simulate);
    ``what`` begins each flag's help."""
    def decorate(fn):
        opts = [
            click.option("--prefill", "prefill_text", default=None, metavar="STRATEGY",
                         help=f"{what}: one prefill instance's strategy (as --strategy); batch= "
                              "the prompts it runs in one pass (default: one per attention-DP "
                              "rank)."),
            click.option("--prefill-workers", type=Count(1, MAX_GPUS), default=1,
                         show_default=True, help=f"{what}: prefill instances."),
            click.option("--decode", "decode_text", default=None, metavar="STRATEGY",
                         help=f"{what}: one decode instance's strategy; batch= the requests it "
                              "runs at most (default: what its KV cache and the engine hold)."),
            click.option("--decode-workers", type=Count(1, MAX_GPUS), default=1,
                         show_default=True, help=f"{what}: decode instances.")]
        for opt in reversed(opts):
            fn = opt(fn)
        return fn
    return decorate


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
      lts search moe1.6t h100_dgx
      lts search llama3.1-70b h100_dgx --gpus 8 --method ppo --json
      lts estimate moe1.6t h100_dgx --strategy "tp=8,ep=16,pp=4,batch=64"
      lts compare mixtral-8x7b h100_dgx --gpus 8 --seeds 5 --budget 1000
      lts models
      lts bench
    """


@cli.command()
@click.argument("model")
@click.argument("topology")
@click.option("--strategy", "strategy_text", default=None,
              help='Degrees, batch and per-op choices, e.g. "tp=8,ep=16,pp=4,batch=64,ffn2=1". '
                   "Ops not named take Megatron's choice; ops: embedding, attn_norm, qkv, scores, "
                   "context, out_proj, ffn_norm, router, ffn1, ffn2, final_norm, lm_head; "
                   "choices: 0, 1, none, experts. Required, unless two pools are given "
                   "(--prefill and --decode).")
@pool_options("serve, two pools")
@click.option("--decode-topology", default=None, metavar="TOPOLOGY",
              help="serve, two pools: run the decode pool on this topology (another GPU type; "
                   "the KV cache then crosses both networks). Default: TOPOLOGY.")
@serve_workload_options(concurrency=True)
@spec_options
@prefix_options
@engine_profile_option
@kernel_options
@expert_options
@output_options
def estimate(model, topology, strategy_text, prefill_text, prefill_workers, decode_text,
             decode_workers, decode_topology, phase, context, tpot_slo_ms, ttft_slo_ms, gpus, precision,
             kv_cache_dtype, isl, osl, engine, concurrency, spec_text, spec_tokens, acceptance,
             accepted_length, prefix_hit, prefixes, kv_offload, json_, no_color):
    """Cost one strategy: per-op compute, memory and collectives, then throughput, latency and
    memory per GPU. Exit status 1 if the strategy is invalid (memory, SLO, budget, ...).

    With --phase serve: the closed loop an engine runs under a benchmark at --concurrency C
    (C requests in flight, each of --isl input and --osl output tokens, a finished one replaced
    at once): output tokens/s (instance, per GPU, per user), TTFT, TPOT and request latency, the
    running batch the KV cache holds; the per-op table is one decode step of the running batch.

    Two pools (--phase serve --prefill STRATEGY --decode STRATEGY, with --prefill-workers and
    --decode-workers instances): the same loop across both, the prefill queue and pass, the KV
    transfer over the link joining the pools, the engine's handoff and the decode pool's steps
    (default concurrency: what the decode pool holds; docs/serving.md)."""
    m, topo = _load(model, topology, precision, kv_cache_dtype)
    from .specs.strategy import CONCURRENCY, named_keys, parse_strategy, with_coarse
    spec = _speculation(m, phase, spec_text, spec_tokens, acceptance, accepted_length)
    prefix = _prefix(phase, prefix_hit, prefixes, kv_offload, isl)
    pooled = prefill_text is not None or decode_text is not None
    if pooled:
        _two_pool_flags(strategy_text, prefill_text, decode_text, phase)
        if kv_offload is not None:
            raise click.UsageError("--kv-offload: one pool only (the two-pool loop holds every "
                                   "prefix on the GPU)")
    elif strategy_text is None:
        raise click.UsageError("--strategy is required (or two pools: --prefill and --decode "
                               "with --phase serve)")
    for flag in ("prefill_workers", "decode_workers", "decode_topology"):
        if not pooled and _flag_given(flag):
            raise click.UsageError(f"--{flag.replace('_', '-')}: only with --prefill and "
                                   "--decode (two pools)")
    if pooled:
        _phase_flags(phase)
        if decode_topology is not None and gpus:
            raise click.UsageError("--gpus: not with --decode-topology (each pool fits its own "
                                   "topology)")
        topo2 = _load(model, decode_topology, precision, kv_cache_dtype)[1] \
            if decode_topology is not None else None
        if topo2 is not None and topo2.name == topo.name:
            topo2 = None                # the same cluster: one topology, as without the flag
        _estimate_two_pools(m, topo, prefill_text, prefill_workers, decode_text, decode_workers,
                            isl, osl, engine, concurrency, gpus, json_, no_color, spec, topo2,
                            prefix)
        return
    try:
        row = parse_strategy(strategy_text, m.is_moe)
    except StrategyError as e:
        raise click.BadParameter(str(e).split(": ", 1)[1], param_hint="'--strategy'") from None
    _phase_flags(phase)
    if phase == "serve":
        from .serving.serve import decode_workload, serve
        profile = _profile(topo, engine)
        _offload_checks(prefix, profile, topo)
        named = "batch" in named_keys(strategy_text)
        _one_concurrency(strategy_text, row, concurrency, "--concurrency")
        if concurrency is not None:
            row[CONCURRENCY] = concurrency
        res = serve(m, topo, row, isl, osl, best_batch=concurrency is None and not named,
                    tpot_slo_ms=tpot_slo_ms if _flag_given("tpot_slo_ms") else None,
                    ttft_slo_ms=ttft_slo_ms, gpus=gpus or 0, engine=profile,
                    attention_dp=profile.name != GENERIC, spec=spec, prefix=prefix)
        step_row = with_coarse(res.strategies[0], batch=res.running[0])   # the running batch
        seen = profile.topology(topo)          # as the engine sees it: its kernels read
        _, ops = breakdown(m, seen, decode_workload(isl, osl, gpus or 0), step_row)
        _print(json_, no_color, {**serve_dict(m, res, ops, isl, osl, profile, gpus or topo.gpus),
                                 "kernels": None if seen.kernels is None
                                 else seen.kernels.as_dict(),
                                 "concurrency_chosen": concurrency is None and not named,
                                 "speculation": spec_dict(spec),
                                 "prefix_cache": prefix_dict(prefix, isl, res)},
               render_serve, topo, profile)
        if not res.valid[0]:
            sys.exit(1)
        return
    work = _workload(phase, context, tpot_slo_ms, ttft_slo_ms, gpus)
    res, ops = breakdown(m, topo, work, row)
    _print(json_, no_color, estimate_dict(m, res, ops, gpus or topo.gpus), render_estimate, topo,
           phase)
    if not res.valid[0]:
        sys.exit(1)


def _two_pool_flags(strategy_text, prefill_text, decode_text, phase) -> None:
    """The flags of a two-pool estimate go together and with --phase serve only."""
    if strategy_text is not None:
        raise click.UsageError("--strategy: not with --prefill/--decode (one pool or two)")
    if prefill_text is None or decode_text is None:
        raise click.UsageError("--prefill and --decode go together (two pools)")
    if phase != "serve":
        raise click.UsageError("--prefill, --decode: only with --phase serve")
    for flag in ("tpot_slo_ms", "ttft_slo_ms"):
        if _flag_given(flag):
            raise click.UsageError(f"--{flag.replace('_', '-')}: not with two pools (estimate "
                                   "reports their TTFT and TPOT; lts search --phase serve "
                                   "applies SLOs)")


def _one_concurrency(strategy_text: str, row, value, flag: str) -> None:
    """UsageError where the strategy's batch= and ``flag`` (``value``; None: not given) set the
    requests in flight to two numbers (estimate's --concurrency, simulate's --max-concurrency):
    one of them would be dropped silently."""
    from .specs.strategy import CONCURRENCY, named_keys
    if value is not None and "batch" in named_keys(strategy_text) and \
            int(row[CONCURRENCY]) != value:
        raise click.UsageError(f"--strategy batch={int(row[CONCURRENCY]):,} and {flag} "
                               f"{value:,} disagree (both set the requests in flight): give one")


def _estimate_two_pools(m, topo, prefill_text, prefill_workers, decode_text, decode_workers,
                        isl, osl, engine, concurrency, gpus, json_, no_color, spec=None,
                        topo2=None, prefix=None) -> None:
    """``lts estimate`` of a given two-pool deployment (``serving.two_pool``)."""
    from .serving import two_pool
    from .specs.strategy import BATCH, instance_gpus, named_keys, parse_strategy
    rows, named = [], []
    for text, flag in ((prefill_text, "--prefill"), (decode_text, "--decode")):
        try:
            rows.append(parse_strategy(text, m.is_moe))
        except StrategyError as e:
            raise click.BadParameter(str(e).split(": ", 1)[1], param_hint=f"'{flag}'") from None
        named.append("batch" in named_keys(text))
    pre, dec = rows
    profile = _profile(topo, engine)
    prompts = pre[BATCH] if named[0] else 0
    slots = dec[BATCH] if named[1] else 0
    g_pre = prefill_workers * int(instance_gpus(pre))
    g_dec = decode_workers * int(instance_gpus(dec))
    if topo2 is None and g_pre + g_dec > (gpus or topo.gpus):
        raise click.UsageError(f"the pools use {g_pre + g_dec:,} GPUs, more than the budget of "
                               f"{gpus or topo.gpus:,} (--gpus, or the topology's)")
    for pool, used, t in (("prefill", g_pre, topo), ("decode", g_dec, topo2)):
        if t is not None and topo2 is not None and used > t.gpus:
            raise click.UsageError(f"the {pool} pool uses {used:,} GPUs, more than {t.name} "
                                   f"has ({t.gpus:,})")
    profile2 = _profile(topo2, engine) if topo2 is not None else None
    est = lambda c: two_pool.estimate(m, topo, profile, [pre], prefill_workers, prompts,  # noqa: E731
                                      [dec], decode_workers, slots, isl, osl, c, gpus or 0,
                                      spec, topo2, profile2, prefix)
    conc = concurrency or max(int(est(1).decode_slots[0]), 1)
    res = est(conc)
    simulated = None
    if res.valid[0] and spec is None and prefix is None:
        # the benchmark run of that deployment, request by request (serving.two_pool_sim)
        from .serving.simulate import Load
        from .serving.two_pool_sim import prepare_pools, run_pools
        load = Load(isl=isl, osl=osl, num_prompts=10 * conc, max_concurrency=conc)
        try:
            with progress(None, "simulating", disable=json_):
                simulated = run_pools(prepare_pools(
                    m, topo, profile, pre, prefill_workers, dec, decode_workers, slots, [load],
                    gpus or 0, topo2, profile2, prefill_prompts=prompts), load).summary()
        except LtsError as e:
            simulated = {"error": str(e)}
    pre[BATCH] = res.prompts[0]                     # what the loop ran: per instance
    dec[BATCH] = res.decode_slots[0] // decode_workers
    _print(json_, no_color, {**two_pool_dict(m, res, pre, dec, (prefill_workers, decode_workers),
                                             isl, osl, conc, profile),
                             "speculation": spec_dict(spec),
                             "decode_topology": topo2.name if topo2 is not None else None,
                             "prefix_cache": prefix_dict(prefix, isl),
                             "simulated": simulated},
           lambda console, d, *a: (render_two_pool(console, d, *a),
                                   render_simulated(console, d["simulated"])),
           topo, profile)
    if not res.valid[0]:
        sys.exit(1)


@cli.command()
@click.argument("model")
@click.argument("topology")
@click.option("--method", type=click.Choice(list(METHODS)), default="exact", show_default=True,
              help="exact: the optimum of the cost model (the default: as fast as the agent on "
                   "the benchmark, docs/search-quality.md); ppo: the paper's agent, guided "
                   "by the exact solver's bounds; ppo-paper: the paper's agent and settings; "
                   "random-walk, anneal, random: baselines; megatron: Megatron's per-op "
                   f"sharding over every {'/'.join(COARSE)}.")
@click.option("--budget", type=Count(1), default=4000, show_default=True,
              help="Evaluator calls (ignored by megatron and exact).")
@click.option("--seed", type=Count(0, MAX_SEED), default=0, show_default=True,
              help="Random seed.")
@click.option("--top", type=Count(1, MAX_TOP), default=10, show_default=True,
              help=f"Strategies to list (at most {MAX_SERVE_TOP} with --phase serve and "
                   "--method exact, which proves each).")
@click.option("--emit", "emit", type=click.Choice(REAL_ENGINES), default=None,
              help="After the table, print the command line that runs the best strategy on this "
                   "engine, or say it cannot and print the nearest strategy it runs (docs/launch.md).")
@click.option("--emit-format", "emit_format",
              type=click.Choice(("shell", "slurm", "k8s-lws", "dynamo")), default="shell",
              show_default=True,
              help="With --emit: the commands (shell), a Slurm batch script (slurm), Kubernetes "
                   "LeaderWorkerSet manifests (k8s-lws) or an NVIDIA Dynamo "
                   "DynamoGraphDeployment (dynamo); printed after the commands unless "
                   "--emit-file is given (docs/launch.md).")
@click.option("--emit-file", "emit_file", type=click.Path(dir_okay=False, writable=True),
              default=None, metavar="FILE",
              help="With --emit-format: write the deployment file here (a two-pool "
                   "deployment's beside it, FILE with .two-pools before its suffix).")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, writable=True), default=None,
              metavar="FILE.svg",
              help="--phase serve: write the trade-off (for each tokens/s per user the best "
                   "output tokens/s per GPU found, exact with --method exact; the SLO line and "
                   "the chosen point) as SVG.")
@click.option("--request-rate", type=Finite(0, MAX_REQUEST_RATE, min_open=True),
              default=None, metavar="R",
              help="--phase serve: also the fewest GPUs whose instances serve R requests/s "
                   "within the SLOs, among the strategies found.")
@click.option("--decode-topology", default=None, metavar="TOPOLOGY",
              help="--phase serve: pair the two-pool deployment's prefill pool on TOPOLOGY with "
                   "a decode pool on this topology (another GPU type); --gpus counts both "
                   "pools' GPUs.")
@click.option("--max-cp", type=Count(1, MAX_CP), default=1, show_default=True,
              help="Context parallelism up to this degree (powers of two) in the space. A "
                   "prefill pass splits each prompt's tokens over cp more GPUs (--phase "
                   "prefill; --phase serve: the prefill pool of two pools); a decode step "
                   "splits the KV cache by tokens over dcp of its tp ranks (--phase decode; "
                   "--phase serve: one pool, the decode pool of two) (docs/design.md §2).")
@click.option("--moe-tp", "max_etp", type=Count(1, MAX_ETP), default=1,
              show_default=True,
              help="Expert tensor parallelism up to this degree (powers of two, at most tp) in "
                   "the space: under ffn1/ffn2 = experts each expert split over etp of the tp "
                   "ranks, the experts over tp x ep / etp groups (the engines' moe_tp x moe_ep; "
                   "SGLang and TensorRT-LLM run it). A MoE model's; no more GPUs "
                   "(docs/design.md §2).")
@click.option("--slo-percentile", type=click.Choice(("50", "90", "99")), default=None,
              help="--phase serve: the limits are on this percentile, not the mean: the top "
                   "deployments are checked by simulating a benchmark run (10 x C requests at "
                   "once) and each concurrency lowered until the simulated percentile meets "
                   "them; the best checked is the answer (docs/simulate.md).")
@serve_workload_options(concurrency=False)
@spec_options
@prefix_options
@engine_profile_option
@kernel_options
@expert_options
@output_options
def search(model, topology, method, budget, seed, top, emit, emit_format, emit_file, plot,
           request_rate, max_cp, max_etp,
           decode_topology, slo_percentile, phase, context, tpot_slo_ms, ttft_slo_ms, gpus,
           precision, kv_cache_dtype, isl, osl, engine, spec_text, spec_tokens, acceptance,
           accepted_length, prefix_hit, prefixes, kv_offload, json_, no_color):
    """Search the strategy space for the highest tokens/s per GPU that fits memory and the SLO;
    print the best strategies against Megatron's and why the best one wins. Exit status 1 if
    nothing is feasible.

    \b
    Examples:
      lts search moe1.6t h100_dgx
      lts search llama3.1-70b h100_dgx --gpus 16 --method ppo --seed 3
      lts search deepseek-v3 h200_dgx --phase prefill --context 4096 --ttft-slo-ms 2000 --json
      lts search mixtral-8x7b h100_dgx --gpus 8 --emit vllm
      lts search llama3.1-70b h100_dgx --gpus 8 --phase serve --isl 1000 --osl 1000
      lts search mixtral-8x7b h100_dgx --gpus 8 --phase serve --plot tradeoff.svg
    """
    _phase_flags(phase, any_phase=("engine",))
    if emit is None and (_flag_given("emit_format") or emit_file is not None):
        raise click.UsageError("--emit-format and --emit-file write the deployment of --emit "
                               "ENGINE: give --emit")
    if emit_file is not None and emit_format == "shell" and not _flag_given("emit_format"):
        raise click.UsageError("--emit-file: say which file with --emit-format (shell, slurm, "
                               "k8s-lws, dynamo)")
    if plot is not None and phase != "serve":
        raise click.UsageError("--plot draws the serving trade-off: it needs --phase serve")
    read = _inputs(model, topology, decode_topology)
    _check_output(plot, "--plot", read)
    _check_output(emit_file, "--emit-file", read)
    if emit_file:
        _check_output(str(_beside(emit_file, ".two-pools")), "--emit-file", read)
    if request_rate is not None and phase != "serve":
        raise click.UsageError("--request-rate sizes a serving deployment: it needs --phase serve")
    _prefix_alone(prefix_hit)
    _spec_alone(spec_text)
    meta = click.get_current_context().meta
    with _refusals():
        answer = plan.plan(
            model, topology, method=method, budget=budget, seed=seed, top=top, phase=phase,
            context=context, isl=isl, osl=osl,
            tpot_slo_ms=tpot_slo_ms if _flag_given("tpot_slo_ms") else None,
            ttft_slo_ms=ttft_slo_ms, gpus=gpus, precision=precision,
            kv_cache_dtype=kv_cache_dtype, engine=engine,
            engine_version=meta.get("lts_engine_version") if engine else None, emit=emit,
            request_rate=request_rate, max_cp=max_cp, max_etp=max_etp,
            decode_topology=decode_topology, slo_percentile=slo_percentile, spec=spec_text,
            spec_tokens=spec_tokens, acceptance=acceptance, accepted_length=accepted_length,
            prefix_hit=prefix_hit, prefixes=prefixes, kv_offload=kv_offload,
            overlay=meta.get("lts_overlay"), kernel_dir=meta.get("lts_kernel_dir"),
            no_kernels=bool(meta.get("lts_no_kernels")), experts=meta.get("lts_experts"),
            bar=lambda total, label: progress(total, label, disable=json_), note=_note,
            defaulted=_defaulted())
    problem, run = answer.problem, answer.run
    launch, disagg_launch = answer.launch, answer.disagg_launch
    if plot is not None:
        _write_file(plot, pareto_svg(run), "--plot", _inputs(model, topology, decode_topology))
    files = _deployment_files(emit_format, emit_file, launch, disagg_launch, problem, model) \
        if launch is not None and (emit_format != "shell" or emit_file is not None) else []
    d = answer.dict()
    if files:
        d["deployment_files"] = [{"format": emit_format, "deployment": what, "path": path,
                                  "content": text, "error": why}
                                 for what, path, text, why in files]

    def render(console, d):
        render_search(console, d, run)
        if launch is not None:
            console.print()
            render_emit(console, launch, phase)
        if disagg_launch is not None:
            console.print()
            render_emit_disagg(console, disagg_launch)
        for what, path, text, why in files:
            console.print()
            if why is not None:
                console.print(f"--emit-format {emit_format}: no file for {what}: {why}",
                              markup=False, highlight=False)
            elif path is None:
                console.print(f"# --emit-format {emit_format}: {what}", markup=False,
                              highlight=False)
                console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
            else:
                console.print(f"Wrote {path} ({emit_format}: {what})", markup=False,
                              highlight=False)
    _print(json_, no_color, d, render)
    refused = [f"{what}: {why}" for what, _, _, why in files if why is not None]
    if refused:            # asked for a file it could not write: say so in the exit status too
        raise click.ClickException(f"--emit-format {emit_format}: " + "; ".join(refused))
    if run.percentile is not None and run.percentile.best is None:
        # nothing meets the limits at the percentile asked: as a search with nothing feasible
        raise click.ClickException(f"no checked deployment meets the limits at "
                                   f"p{slo_percentile} (the search's top "
                                   f"{len(run.percentile.checked)}, simulated)")


def _methods(ctx, param, value):
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in STOCHASTIC + ("megatron", "exact")]
    if bad or not names:
        raise click.BadParameter(f"{cut_quoted(bad[0] if bad else value)} is not one of "
                                 f"{', '.join(STOCHASTIC)} (megatron and exact always run)")
    return list(dict.fromkeys(n for n in names if n in STOCHASTIC))


@cli.command()
@click.argument("model")
@click.argument("topology")
@click.option("--seeds", type=Count(1, MAX_SEEDS), default=10, show_default=True,
              help="Seeds 0..N-1 for each stochastic method.")
@click.option("--budget", type=Count(1), default=4000, show_default=True,
              help="Evaluator calls per run.")
@click.option("--methods", default="ppo,random-walk,anneal,random", show_default=True,
              callback=_methods,
              help="Comma-separated stochastic methods (megatron and exact always run once).")
@serve_workload_options(concurrency=False)
@engine_profile_option
@kernel_options
@expert_options
@output_options
def compare(model, topology, seeds, budget, methods, phase, context, tpot_slo_ms, ttft_slo_ms,
            gpus, precision, kv_cache_dtype, isl, osl, engine, json_, no_color):
    """Run every method on the same problem: the paper's Table 1 (mean best tokens/s/GPU over
    seeds, normalized to random walk), Figure 3 (best over seeds, normalized to Megatron), each
    method's fraction of the exact optimum and its wall time. Exit status 1 if nothing is
    feasible.

    \b
    Examples:
      lts compare moe1.6t h100_dgx --seeds 10
      lts compare llama3.1-8b h100_dgx --gpus 8 --seeds 3 --budget 500 --methods ppo,anneal
      lts compare llama3.1-70b h100_dgx --gpus 8 --phase serve --isl 4000 --osl 1000 --seeds 3
    """
    _phase_flags(phase, any_phase=("engine",))
    _check_budget(budget * seeds, methods, phase, "--seeds x --budget", "--methods")
    m, topo = _load(model, topology, precision, kv_cache_dtype)
    problem = _problem(m, topo, phase, context, tpot_slo_ms, ttft_slo_ms, gpus, isl, osl,
                       _profile(topo, engine, None))
    with progress(seeds * budget * len(methods), "exact", disable=json_) as advance:
        cmp = run_compare(problem, methods, seeds, budget, progress=advance,
                          on_run=advance.describe)
    if cmp.exact.best is None:
        raise click.ClickException(str(plan.infeasible(problem, "the exact optimum: none "
                                                             "exists")))
    _print(json_, no_color, compare_dict(cmp), render_compare)


@cli.command()
@click.option("--show", "show", metavar="NAME", default=None,
              help="Print one model's parsed shape and parameter counts (a shipped name or a "
                   "path to a TOML file or config.json), its layer kinds, weight formats and "
                   "the KV cache one request holds.")
@click.option("--context", "contexts", type=Count(1, MAX_TOKENS), multiple=True,
              default=(4096, 131072), show_default=True, metavar="TOKENS",
              help="--show: the contexts at which to give a request's KV bytes (repeatable).")
@output_options
def models(show, contexts, json_, no_color):
    """List the shipped models with their sizes."""
    from .report.catalog import model_show_dict, models_rows, render_model_show, render_models
    if show is not None:
        m = _loaded(lambda: load_model(show))
        _print(json_, no_color, model_show_dict(show, m, contexts), render_model_show, m)
    else:
        _print(json_, no_color,
               _loaded(lambda: models_rows([(n, load_model(n)) for n in shipped_names("models")])),
               render_models)


@cli.command()
@output_options
def topologies(json_, no_color):
    """List the shipped topologies (GPUs, memory, links)."""
    from .report.catalog import render_topologies, topologies_rows
    _print(json_, no_color,
           _loaded(lambda: topologies_rows([(n, load_topology(n))
                                            for n in shipped_names("topologies")])),
           render_topologies)


@cli.command()
@click.argument("gpu", required=False, default=None)
@click.option("--model", "model", default=None, metavar="MODEL",
              help="Also list which of this model's ops read a table and which the roofline "
                   "(with --topology and --engine).")
@click.option("--topology", "topology", default=None, metavar="TOPOLOGY",
              help="With --model: the topology (its [gpu] kernels key names the tables).")
@click.option("--engine", type=EngineParam(), default="vllm", show_default=True,
              help="With --model: the engine (and @VERSION) whose measured kernels are read.")
@click.option("--precision", type=PRECISION, default=None,
              help="With --model: the weight format (as for estimate).")
@kernel_options
@output_options
def kernels(gpu, model, topology, engine, precision, json_, no_color):
    """List the measured kernel timings lts costs ops from (docs/kernels.md): per GPU, the op
    classes, engines, releases, formats and shapes its tables hold; with --model and --topology,
    which of the model's ops are read from them under --engine and which by the roofline. Exit
    status 1 for a GPU without tables.

    \b
    Examples:
      lts kernels
      lts kernels h100_sxm
      lts kernels --model minimax-m2.5 --topology b200_dgx --engine vllm@0.19.0
    """
    from .cost.coverage import gpu_rows, model_rows
    from .cost.kernels import gpus
    from .report.kernels import render_kernels
    data_dir = click.get_current_context().meta.get("lts_kernel_dir")
    known = gpus(data_dir)
    if gpu is not None and gpu not in known:
        raise click.ClickException(f"no kernel tables for GPU {cut_quoted(gpu)} (tables: "
                                   f"{', '.join(known)})")
    if (model is None) != (topology is None):
        raise click.UsageError("--model and --topology come together")
    given = [f"--{name}" for name in ("precision", "engine") if name not in _defaulted()]
    if model is None and given:
        raise click.UsageError(f"{given[0]} is read with --model and --topology")
    rows = [r for r in gpu_rows(data_dir) if gpu is None or r["gpu"] == gpu]
    d = {"gpu": gpu, "dir": data_dir, "tables": rows if gpu is not None or model is None else []}
    if model is not None:
        m, topo = _load(model, topology, precision)
        seen = _profile(topo, engine).topology(topo)
        d.update(model_name=m.name, topology=topo.name, model=model_rows(m, seen))
        if seen.kernels is None:
            from .cost.kernels import gpu_path
            from .engines.profiles import MEASURED_ENGINES
            meta = click.get_current_context().meta
            d["model"]["why"] = (
                "the topology names no kernel tables" if not topo.kernel_gpu
                else "--no-kernels" if meta.get("lts_no_kernels")
                else f"no tables named {cut_quoted(topo.kernel_gpu)}"
                if gpu_path(topo.kernel_gpu, data_dir) is None
                else f"the {engine} engine reads none" if engine not in MEASURED_ENGINES
                else f"no {engine} table on {topo.kernel_gpu}")
    _print(json_, no_color, d, render_kernels)


def _loaded(load):
    """``load()``, a bad file turned into one error line."""
    try:
        return load()
    except LtsError as e:
        raise click.ClickException(str(e)) from None


@cli.command()
@click.argument("model", default="moe1.6t")
@click.argument("topology", default="h100_dgx")
@click.option("--evaluations", type=Count(1000, MAX_BENCH), default=1_000_000,
              show_default=True,
              help="Random strategies to evaluate for the throughput figure.")
@click.option("--seed", type=Count(0, MAX_SEED), default=0, show_default=True,
              help="Seeds the random strategies evaluated (the ppo search runs seed 0).")
@click.option("--no-search", is_flag=True,
              help="Skip the search timings (ppo with a budget of 4000 calls, and exact).")
@output_options
def bench(model, topology, evaluations, seed, no_search, json_, no_color):
    """Measure this machine, all in process: the evaluator's strategies/s on one core (random
    strategies, with the coarse rows' tables and fused pieces built as a search has them; also
    building them in the call, and with the rows given in coarse-row order), its arithmetic
    alone on the same rows (cost.model.kernel) and the ratio of the two, an estimate's wall
    time, and the wall time of a 4000-call ppo search (seed 0), of the exact optimum and of a
    simulated benchmark run. docs/performance.md explains each line."""
    m, topo = _load(model, topology)
    _print(json_, no_color, asdict(measure(m, topo, evaluations, seed, searches=not no_search)),
           render_bench)


def _by_keys(ctx, param, value):
    from .serving.validate import BY_KEYS
    if not value:
        return ()
    keys = tuple(k.strip() for k in value.split(","))
    if value.strip() == "":
        raise click.BadParameter(f"{cut_quoted(value)}: expected row keys of {', '.join(BY_KEYS)}, "
                                 "comma-separated")
    bad = [k for k in keys if k not in BY_KEYS]
    if bad or len(set(keys)) < len(keys):
        raise click.BadParameter(f"{cut_quoted(value)}: expected distinct row keys of "
                                 f"{', '.join(BY_KEYS)}, comma-separated")
    return keys


@cli.command()
@click.argument("measurements", metavar="MEASUREMENTS.csv")
@click.option("--by", "by", default="", callback=_by_keys, metavar="KEY[,KEY...]",
              help="Also print the residual log2(predicted/measured) by these row keys and the "
                   "metric: median (signed), median |.|, within 2x. Keys: model, topology, "
                   f"engine, profile, precision, weights, gpus, {', '.join(DEGREES)}, isl, "
                   "osl, concurrency (e.g. --by concurrency, --by tp,isl).")
@click.option("--steady", is_flag=True,
              help="Predict every row by the closed loop's steady state, also the rows that "
                   "say how they were measured (by default those are simulated: docs/"
                   "simulate.md).")
@engine_profile_option
@kernel_options
@output_options
def validate(measurements, by, steady, json_, no_color):
    """Predict published serving measurements with the serve phase (requests of isl input and
    osl output tokens back to back) and compare: per row predicted, measured and their ratio.
    The model and topology columns take shipped names, files or config folders (relative paths
    resolve against the CSV's folder); rows lts cannot read (a bad or unknown cell, a repeated
    id, ...), whose model or topology does not load, or whose prediction is invalid, are listed
    as skipped with the reason; a file where no row can be predicted exits 1. Rows that say how
    they were measured (arrival, num_prompts, range_ratio, ...) are predicted by simulating that
    benchmark run, request by request (lts simulate). Summary: median
    |log2(predicted/measured)|, share within 2x, and the Spearman rank correlation inside
    groups that differ only in the parallel config. Exit status 1 for a file that is not a
    measurement file (not CSV, a missing column, no rows: docs/validation.md).

    \b
    Examples:
      lts validate ../shared/data/calibration.csv
      lts validate measurements.csv --json
      lts validate tests/data/measurements/serving_moe.csv --by model,topology
    """
    from .serving.validate import none_predicted, unread_versions, validate as run_validate
    try:
        with progress(None, "predicting", disable=json_) as advance:
            overlay = click.get_current_context().meta.get("lts_overlay")
            tune = lambda t, p: (t, _with_kernel_flags(                    # noqa: E731
                plan.overlaid(p, overlay) if overlay is not None and plan.fits(p, overlay)
                else p))
            d = run_validate(measurements, progress=advance, by=by, tune=tune, steady=steady)
            if overlay is not None and not any(
                    r["engine"] == overlay["name"] and (not overlay["release"] or
                                                        r["profile"] == overlay["release"])
                    for r in d["rows"]):
                raise click.UsageError(
                    f"--engine-profile: the overlay is for {overlay['name']} "
                    f"{overlay['release']}".rstrip() + ": no row of the file takes that profile")
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    if not d["rows"]:          # nothing to compare: a failure, not an answer (no empty table;
        if json_:              # the JSON still carries each skipped row's reason)
            _print(json_, no_color, d, render_validate)
        raise click.ClickException(none_predicted(measurements, d["skipped"]))
    note = unread_versions(d["rows"])
    if note:
        _note(note)
    _print(json_, no_color, d, render_validate)


@cli.command()
@click.argument("model")
@click.argument("topology")
@click.option("--strategy", "strategy_text", default=None,
              help='The deployment: "tp=8,ep=1,pp=1" and per-op choices as in estimate (a '
                   'batch= must equal --max-concurrency: the load sets the requests in flight).')
@pool_options("two pools")
@click.option("--engine", type=EngineParam(), default=None,
              help="The engine whose scheduler runs the requests (NAME@VERSION: that release's "
                   "profile). Default: generic.")
@click.option("--isl", type=Count(1, MAX_TOKENS), default=1024, show_default=True,
              help="Input tokens per request (the longest, with --range-ratio).")
@click.option("--osl", type=Count(1, MAX_TOKENS), default=1024, show_default=True,
              help="Output tokens per request (the longest, with --range-ratio).")
@click.option("--range-ratio", type=Finite(0.0, 1.0, min_open=True), default=1.0,
              show_default=True,
              help="Lengths uniform over [int(r*L), L] (InferenceX benchmark_serving.py "
                   "--random-range-ratio; its sweeps use 0.8).")
@click.option("--num-prompts", type=Count(1, MAX_SIM_REQUESTS), default=None,
              help="Requests in the run (default: 10 x --max-concurrency, else 1,000).")
@click.option("--max-concurrency", type=Count(1, MAX_CONCURRENCY), default=None,
              help="Requests in flight at most (vllm bench serve --max-concurrency). Without "
                   "--request-rate: every request is created at once behind this limit, a burst.")
@click.option("--request-rate", type=Finite(0, MAX_REQUEST_RATE, min_open=True), default=None,
              help="An open loop: requests arrive at this rate per second.")
@click.option("--burstiness", type=Finite(0, 1e6, min_open=True), default=1.0,
              show_default=True,
              help="With --request-rate: gamma-distributed gaps of this shape (1: Poisson; "
                   "vllm bench serve --burstiness).")
@click.option("--warmups", type=Count(0, MAX_SIM_REQUESTS), default=0,
              help="Warm-up requests the benchmark runs and awaits first (InferenceX "
                   "--num-warmups): they leave an idle server, so the timed run is the same.")
@click.option("--trace", "trace_path", default=None, metavar="FILE",
              help="Replay a trace: a CSV of arrival_s,isl,osl, Mooncake's JSONL or the Azure "
                   "LLM inference CSV (docs/simulate.md).")
@click.option("--seed", type=Count(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the lengths and arrival times.")
@click.option("--ttft-slo-ms", type=MS, default=None, help="Goodput: TTFT at most this.")
@click.option("--tpot-slo-ms", type=MS, default=None, help="Goodput: TPOT at most this.")
@click.option("--gpus", type=Count(1), default=None,
              help="Device budget (default: every GPU of the topology).")
@click.option("--precision", type=PRECISION, default=None,
              help="Override the weight format (as in estimate).")
@click.option("--kv-cache-dtype", type=click.Choice(("auto",) + KV_DTYPES), default="auto",
              show_default=True, help="KV-cache type (auto: the model's).")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, writable=True), default=None,
              metavar="FILE.svg", help="Also write the run over time as an SVG: running and "
                                       "waiting requests, KV cache in use, step time.")
@engine_profile_option
@kernel_options
@expert_options
@output_options
def simulate(model, topology, strategy_text, prefill_text, prefill_workers, decode_text,
             decode_workers, engine, isl, osl, range_ratio, num_prompts, max_concurrency,
             request_rate, burstiness, warmups, trace_path, seed, ttft_slo_ms, tpot_slo_ms, gpus,
             precision, kv_cache_dtype, plot, json_, no_color):
    """Simulate a benchmark run of one deployment, request by request: the engine's scheduler
    decides each step (admission, chunked prefill, KV blocks, preemption) and the cost model
    times it. Reports TTFT, TPOT, inter-token latency and end-to-end latency (mean, p50, p90,
    p99), output tokens/s, goodput within the SLOs, the KV cache's peak use and preemptions
    (docs/simulate.md). Two pools: --prefill and --decode (with --prefill-workers and
    --decode-workers instances) in place of --strategy. Exit status 1 if not one request fits.

    \b
    Examples:
      lts simulate llama3.1-8b h100_dgx --strategy tp=1 --engine vllm --max-concurrency 64
      lts simulate gpt-oss-120b h200_dgx --strategy tp=2 --engine vllm --request-rate 20 --num-prompts 2000 --isl 2048 --osl 256
      lts simulate qwen3-32b h100_dgx --strategy tp=2 --engine sglang --trace tests/data/traces/mooncake.jsonl --plot run.svg
      lts simulate deepseek-v3 h200_dgx --prefill tp=1,ep=8 --decode tp=8,batch=64 --engine sglang --max-concurrency 64
    """
    import math as _m
    from .report.format import progress as bar
    from .serving.simulate import Load, prepare, run
    from .serving.traces import read_trace
    from .specs.strategy import parse_strategy
    render_simulate = _later(".report.simulate", "render_simulate")
    simulate_dict = _later(".report.simulate", "simulate_dict")
    simulate_svg = _later(".report.simulate", "simulate_svg")
    _check_output(plot, "--plot", _inputs(model, topology, trace_path))
    m, topo = _load(model, topology, precision, kv_cache_dtype)
    pooled = prefill_text is not None or decode_text is not None
    if pooled and (prefill_text is None or decode_text is None):
        raise click.UsageError("two pools need both --prefill and --decode")
    if pooled and strategy_text is not None:
        raise click.UsageError("--strategy: not with --prefill and --decode (one pool or two)")
    if not pooled and strategy_text is None:
        raise click.UsageError("--strategy is required (or two pools: --prefill and --decode)")
    for flag in ("prefill_workers", "decode_workers"):
        if not pooled and _flag_given(flag):
            raise click.UsageError(f"--{flag.replace('_', '-')}: only with --prefill and "
                                   "--decode (two pools)")
    rows = []
    for text, flag in ((prefill_text, "--prefill"), (decode_text, "--decode")) if pooled \
            else ((strategy_text, "--strategy"),):
        try:
            rows.append(parse_strategy(text, m.is_moe))
        except StrategyError as e:
            raise click.BadParameter(str(e).split(": ", 1)[1], param_hint=f"'{flag}'") from None
    if not pooled:      # one pool runs --max-concurrency; batch= names the same number or none
        _one_concurrency(strategy_text, rows[0], max_concurrency, "--max-concurrency")
        from .specs.strategy import named_keys
        if max_concurrency is None and "batch" in named_keys(strategy_text):
            raise click.UsageError("--strategy batch=: without --max-concurrency the load "
                                   "(--request-rate, --trace) sets the requests in flight; give "
                                   "--max-concurrency to cap them, or leave batch= out")
    if pooled:
        from .specs.strategy import BATCH, instance_gpus, named_keys
        used = sum(w * int(instance_gpus(r))
                   for w, r in ((prefill_workers, rows[0]), (decode_workers, rows[1])))
        if used > (gpus or topo.gpus):
            raise click.UsageError(f"the pools use {used:,} GPUs, more than the budget of "
                                   f"{gpus or topo.gpus:,} (--gpus, or the topology's)")
        slots = int(rows[1][BATCH]) if "batch" in named_keys(decode_text) else 0
        prompts = int(rows[0][BATCH]) if "batch" in named_keys(prefill_text) else 0
    if trace_path is not None:
        given = [f"--{n.replace('_', '-')}" for n in ("isl", "osl", "range_ratio", "num_prompts",
                                                      "request_rate", "burstiness", "seed")
                 if _flag_given(n)]
        if given:
            raise click.UsageError(f"{', '.join(given)}: not with --trace (the trace gives "
                                   "each request's arrival and lengths)")
        try:
            trace = read_trace(trace_path)
        except LtsError as e:
            raise click.ClickException(str(e)) from None
        longest = max(trace, key=lambda r: r[1] + r[2])
        why = m.window_excess(longest[1] + longest[2], f"its longest request, {longest[1]:,} "
                                                       f"input + {longest[2]:,} output tokens,")
        if why:
            raise click.ClickException(f"{plain(trace_path)}: {why}")
        load = Load(max_concurrency=max_concurrency or 0, seed=seed, trace=trace)
    else:
        if request_rate is None and max_concurrency is None:
            raise click.UsageError("say how requests come: --max-concurrency C (all created at "
                                   "once behind C in flight, a benchmark's burst), "
                                   "--request-rate R (an open loop) or --trace FILE")
        if request_rate is None and _flag_given("burstiness"):
            raise click.UsageError("--burstiness: only with --request-rate")
        load = Load(isl=isl, osl=osl, num_prompts=num_prompts or (0 if max_concurrency else 1000),
                    max_concurrency=max_concurrency or 0,
                    request_rate=request_rate if request_rate is not None else _m.inf,
                    burstiness=burstiness, range_ratio=range_ratio, seed=seed)
    profile = _profile(topo, engine)
    try:
        if pooled:
            from .serving.two_pool_sim import prepare_pools, run_pools
            dep = prepare_pools(m, topo, profile, rows[0], prefill_workers, rows[1],
                                decode_workers, slots, [load], gpus or 0,
                                prefill_prompts=prompts)
            with bar(None, "simulating", disable=json_):
                res = run_pools(dep, load)
        else:
            dep = prepare(m, topo, rows[0], profile, [load], gpus or 0)
            with bar(len(load.requests()[0]), "simulating", disable=json_) as advance:
                res = run(dep, load, advance)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    summary = res.summary(ttft_slo_ms, tpot_slo_ms)
    slo = " and ".join(f"{n} <= {v:g} ms" for n, v in (("TTFT", ttft_slo_ms),
                                                      ("TPOT", tpot_slo_ms)) if v)
    pools = ((prefill_workers, rows[0]), (decode_workers, rows[1])) if pooled else None
    d = {**simulate_dict(m, topo, profile, rows[0], load, res, summary, pools),
         "slo": slo or None, "warmups": warmups}
    if plot is not None:
        _write_file(plot, simulate_svg(d), "--plot", _inputs(model, topology, trace_path))
    _print(json_, no_color, d, render_simulate)


def _inputs(model=None, topology=None, *files) -> tuple:
    """The files a command reads: its model and topology (a shipped name: its file) and the
    ``files`` given (None: not given)."""
    from .specs import resolve
    out = []
    for kind, name in (("models", model), ("topologies", topology)):
        if name:
            try:
                out.append(str(resolve(kind, name)))
            except LtsError:          # not a file: the command says so where it reads it
                pass
    return tuple(out) + tuple(str(f) for f in files if f)


def _check_output(path, flag: str, inputs=()) -> None:
    """Refuse, before any work, an output lts must not write (one line, exit 2): an empty
    name, a path that exists but is neither a regular file nor a character device (a folder, a
    pipe, a socket: writing would fail or block until a reader came; /dev/null and /dev/stdout
    are written, and a file named beside one is the device itself: ``_beside``), a missing
    folder, or one of the command's ``inputs`` (the same file under another name or a hard link
    included: ``os.path.samefile``). None: no output asked for."""
    import os
    import stat
    if path is None:
        return
    if not str(path).strip():
        raise click.UsageError(f"{flag}: an empty file name")
    p = Path(path)
    try:
        mode = p.stat().st_mode if p.exists() else None
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            raise click.UsageError(f"{flag} {path}: is not a file lts can write (a folder, a "
                                   "pipe or a socket); give a file or a device such as "
                                   "/dev/null")
        if not p.resolve().parent.is_dir():
            raise click.UsageError(f"{flag} {path}: its folder does not exist")
        for ref in filter(None, inputs):
            if mode is not None and stat.S_ISREG(mode) and Path(ref).exists() \
                    and os.path.samefile(p, ref):
                raise click.UsageError(f"{flag} {path}: is {ref}, an input of this command")
    except OSError as e:
        raise click.UsageError(f"{flag} {path}: {e.strerror or e}") from None


def _write_file(path: str, text: str, flag: str, inputs=()) -> None:
    """Write an output file named by ``flag`` (``_check_output`` first); one line naming it if
    it cannot be written."""
    _check_output(path, flag, inputs)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise click.ClickException(f"{flag} {path}: {e.strerror or e}") from None


@cli.command()
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", default=None, metavar="FILE.jsonl",
              help="Where the JSON lines go (default: GRID's name with .jsonl); problems "
                   "already in it are skipped, so a stopped sweep goes on where it stopped.")
@click.option("--jobs", type=Count(1, MAX_JOBS), default=1, show_default=True,
              help="Processes solving problems at once (each search runs on one core; each "
                   f"holds up to ~0.64 GB, so at most {MAX_JOBS}: docs/limits.md).")
@click.option("--shard", default=None, metavar="I/N",
              help="Solve only every N-th problem from the I-th (one machine's share; "
                   "docs/sweep.md).")
@output_options
def sweep(grid, output, jobs, shard, json_, no_color):
    """Solve a grid of search problems (models x topologies x workloads x engines x GPU budgets,
    from GRID.toml: docs/sweep.md): one `lts search --json` answer per line of the output, then
    the best per model, topology and workload, with tokens per dollar where the grid gives
    prices. Exit status 1 if no problem has an answer.

    \b
    Example:
      lts sweep scripts/sweep_example.toml --jobs 2
    """
    import time
    from . import sweep as sw
    try:
        problems, prices = sw.read_grid(grid)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    if shard is not None:
        try:
            problems = sw.shard(problems, shard)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="'--shard'") from None
    output = str(Path(grid).with_suffix(".jsonl")) if output is None else output
    if output.strip() and Path(output).resolve() == Path(grid).resolve():
        raise click.UsageError("-o: the same file as the grid")
    # the grid and every model and topology file it names are inputs, never written
    named = {(p.model, p.topology) for p in problems}
    _check_output(output, "-o", (grid,) + tuple(f for m, t in named for f in _inputs(m, t)))
    if Path(output).exists() and not Path(output).is_file():
        raise click.UsageError(f"-o {output}: is not a regular file (a sweep reads its output "
                               "back to resume)")
    try:
        before = sw.read_lines(output)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    done = sw.done_keys(before)
    todo = [p for p in problems if p.key not in done]
    again = sum(1 for p in todo if p.key in before)   # a line without a whole answer: again
    t0 = time.perf_counter()
    try:
        with open(output, "a", encoding="utf-8") as out, \
                progress(len(todo), "sweep", disable=json_) as advance:
            if out.tell() and sw.ends_mid_line(output):   # a line cut short by a stop
                out.write("\n")
            if jobs == 1 or len(todo) < 2:
                answers = map(sw.solve, todo)
                pool = None
            else:
                import multiprocessing
                # a fresh worker every 16 problems: memory stays one search's
                pool = multiprocessing.get_context().Pool(min(jobs, len(todo)),
                                                          maxtasksperchild=16)
                answers = pool.imap_unordered(sw.solve, todo)
            try:
                for problem, code, result, error in answers:
                    out.write(sw.line(problem, code, result, error))
                    out.flush()
                    advance(1)
            finally:
                if pool is not None:
                    pool.terminate()
        lines = sw.read_lines(output)
    except OSError as e:
        raise click.ClickException(f"-o {output}: {e.strerror or e}") from None
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    d = {**sw.summary(lines, problems, prices), "file": output, "ran": len(todo),
         "resolved": again, "skipped": len(problems) - len(todo), "jobs": jobs,
         "wall_s": time.perf_counter() - t0}
    from .report.sweep import render_sweep
    _print(json_, no_color, d, render_sweep)
    if problems and not d["answered"]:
        sys.exit(1)


@cli.command("import")
@click.argument("results", nargs=-1, required=True, metavar="RESULT.json...")
@click.option("--model", "model", required=True,
              help="The model the benchmark ran: a shipped name, a model file or a config "
                   "folder (files are written as absolute paths).")
@click.option("--topology", "topology", required=True,
              help="The cluster it ran on: a shipped name or a topology file.")
@click.option("--strategy", "strategy_text", default=None,
              help='The parallel layout as lts writes it, e.g. "tp=8" or "tp=2,ep=4,ffn1=experts,'
                   'ffn2=experts" (else --tp/--ep/--pp).')
@click.option("--tp", type=Count(1, MAX_DEGREE), default=1, show_default=True,
              help="Tensor-parallel degree (without --strategy).")
@click.option("--ep", type=Count(1, MAX_DEGREE), default=1, show_default=True,
              help="Expert / attention-data-parallel groups, lts's ep (without --strategy).")
@click.option("--pp", type=Count(1, MAX_DEGREE), default=1, show_default=True,
              help="Pipeline stages (without --strategy).")
@click.option("--engine", type=click.Choice(ENGINE_NAMES), default=None,
              help="The engine that served it (its profile in lts validate).")
@click.option("--engine-version", default="", metavar="VERSION",
              help="The engine's release (else the one the result names, if any).")
@click.option("--precision", type=PRECISION, default=None,
              help="The weight format the run served, where not the model file's.")
@click.option("--format", "fmt", type=click.Choice(("auto",) + IMPORT_FORMATS), default="auto",
              show_default=True, help="The tool that wrote the results (auto: from their keys).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, writable=True),
              default=None, metavar="OUT.csv",
              help="Write the rows here (default: print them).")
def import_(results, model, topology, strategy_text, tp, ep, pp, engine, engine_version,
            precision, fmt, output):
    """Turn benchmark results into measurement rows lts validate reads: vllm bench serve
    --save-result JSON, SGLang bench_serving JSONL, aiperf's profile_export_aiperf.json or
    genai-perf's *_genai_perf.json. One row per run and metric (TTFT, TPOT, output tokens/s);
    what the files do not say (model, cluster, layout, engine) comes from the flags
    (docs/validation.md "Your own measurements").

    \b
    Example:
      lts import result.json --model llama3.1-8b --topology h100_dgx --tp 1 --engine vllm -o m.csv
      lts validate m.csv
    """
    import csv
    import io
    from .serving import imports
    from .specs.strategy import EP, PP, TP, instance_gpus, make_row, parse_strategy
    _check_output(output, "-o", _inputs(model, topology, *results))
    if engine_version and not plan.engine_release_text(engine_version):
        raise click.BadParameter(f"{cut_quoted(engine_version)} is not a version (a digit "
                                 "first, numbers lts can order, at most 40 characters; e.g. "
                                 "0.12.0)", param_hint="'--engine-version'")
    m, topo = _load(model, topology, None, "auto")
    if strategy_text is not None:
        for flag in ("tp", "ep", "pp"):
            if _flag_given(flag):
                raise click.UsageError(f"--{flag}: not with --strategy (it names the degrees)")
        try:
            row = parse_strategy(strategy_text, m.is_moe)
        except StrategyError as e:
            raise click.BadParameter(str(e).split(": ", 1)[1], param_hint="'--strategy'") from None
    else:
        row = make_row(tp=tp, ep=ep, pp=pp)
    # the measurement file's columns: the instance's GPUs and its tp, ep, pp
    gpus, tp, ep, pp = int(instance_gpus(row)), int(row[TP]), int(row[EP]), int(row[PP])
    cell = lambda v, kind: v if v in shipped_names(kind) else str(Path(v).resolve())  # noqa: E731
    out = []
    try:
        for path, stem in zip(results, imports.stems(results)):
            runs = imports.read(path, fmt)
            out += imports.rows(path, runs, cell(model, "models"), cell(topology, "topologies"),
                                gpus, tp, ep, pp, strategy_text or "", engine or "",
                                engine_version, precision or "", stem)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=imports.HEADER, lineterminator="\n")
    w.writeheader()
    w.writerows(out)
    if output is None:
        click.echo(buf.getvalue(), nl=False)
        return
    _write_file(output, buf.getvalue(), "-o", _inputs(model, topology, *results))
    click.echo(f"{output}: {len(out)} rows from {len(out) // len(imports.METRICS)} runs")


@cli.command()
@click.argument("measurements", metavar="MEASUREMENTS.csv")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              metavar="FITTED.toml",
              help="The fitted topology file to write (the rows' topology with its fitted "
                   "rates, each commented).")
@click.option("--overlay", "overlay", type=click.Path(dir_okay=False), default=None,
              metavar="OVERLAY.toml",
              help="Also write the engine profile overlay (its fitted time per step and per "
                   "request) for --engine-profile; default: FITTED's name with -engine.toml.")
@click.option("--train", type=Finite(0.05, 1.0), default=0.5, show_default=True,
              help="--holdout fraction: the share of the measured points fitted on (spread "
                   "evenly in id order); the rest are held out and reported.")
@click.option("--holdout", type=click.Choice(("fraction", "isl", "concurrency")),
              default="fraction", show_default=True,
              help="What the held-out rows test: fraction (a share of the points, --train), isl "
                   "(request shapes never fitted: every other (isl, osl) pair) or concurrency "
                   "(loads never fitted: the concurrencies above the median).")
@output_options
def calibrate(measurements, output, overlay, train, holdout, json_, no_color):
    """Fit the constants your own measurements identify (one cluster, one engine): the HBM and
    compute rates of the topology (one scale each over every format's), the engine's time per
    step and per request. Least squares of log2(predicted/measured) on a share of the points,
    the rest held out; a constant the rows do not identify is kept and reported. Writes a
    topology file (--topology FITTED.toml) and an engine overlay (--engine-profile).

    \b
    Example:
      lts calibrate mine.csv -o mycluster.toml
      lts search llama3.1-8b mycluster.toml --phase serve --engine vllm --engine-profile mycluster-engine.toml
    """
    from .serving import calibrate as cal
    from .serving.validate import read_measurements
    from .specs import resolve
    _check_output(output, "-o", (measurements,))
    overlay_flag = "--overlay" if overlay is not None else "--overlay (-o's name with -engine.toml)"
    overlay = _beside(output, "-engine", ".toml") if overlay is None else overlay
    device = Path(output).exists() and not Path(output).is_file()      # /dev/null: both there
    if overlay.strip() and Path(overlay).resolve() == Path(output).resolve() and not device:
        raise click.UsageError("--overlay: the same file as -o (the topology)")
    _check_output(overlay, overlay_flag, (measurements,))
    try:
        meas = read_measurements(measurements)[0]
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    here = Path(measurements).resolve().parent

    def named(kind, name):      # a row's model or topology file: shipped, or beside the CSV
        return resolve(kind, name) if name in shipped_names(kind) else here / name
    base_path = named("topologies", meas[0].topology) if meas else None
    # the topology and the model files the rows name are read again, never written: refused
    # before the fit
    read = tuple(str(f) for f in {named("models", r.model) for r in meas} | {base_path} if f)
    _check_output(output, "-o", read)
    _check_output(overlay, overlay_flag, read)
    try:
        with progress(None, "fitting", disable=json_) as advance:
            fit = cal.calibrate(measurements, train, progress=advance, holdout=holdout)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    note = (f"FITTED by lts calibrate on {Path(measurements).name} ({fit.train_points} points; "
            f"held out {fit.held_points}: median |log2| "
            f"{_f(fit.before['held_out']['median_abs_log2_ratio'])} -> "
            f"{_f(fit.after['held_out']['median_abs_log2_ratio'])})")
    try:            # a topology that would not read back: refused, neither file written
        topology = cal.topology_text(base_path, fit, note)
    except LtsError as e:
        raise click.ClickException(str(e)) from None
    _write_file(output, topology, "-o")
    _write_file(overlay, cal.overlay_text(fit, note, cal.collective_of(fit, base_path)),
                overlay_flag)
    d = {"knobs": fit.knobs, "base": fit.base, "identified": fit.identified,
         "engine": fit.engine, "release": fit.release, "train_points": fit.train_points,
         "held_points": fit.held_points, "asked_points": fit.asked_points,
         "evaluations": fit.evaluations, "allowed": fit.allowed, "bounded": fit.bounded,
         "before": _strip(fit.before), "after": _strip(fit.after),
         "skipped": fit.skipped, "topology_file": output, "overlay_file": overlay}
    _print(json_, no_color, d, render_calibrate)


def _f(x):
    return "-" if x is None else f"{x:.3f}"


def _strip(summaries: dict) -> dict:
    """Summaries without their Spearman groups (JSON of lts calibrate)."""
    def one(s):
        return {k: s[k] for k in ("count", "median_abs_log2_ratio", "within_2x")}
    return {k: ({m: one(x) for m, x in v.items()} if k.endswith("by_metric") else one(v))
            for k, v in summaries.items()}


def main():
    from .streams import run
    run(lambda: cli(prog_name="lts"))


if __name__ == "__main__":
    main()
