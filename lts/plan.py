"""The search as a library call: ``plan(model, topology, ...)`` loads the model and topology,
sets up the engine's profile, builds the search problem (speculative decoding, prefix caching,
two pools on two topologies), runs the search and, with ``emit``, the launch of its best
strategy: everything ``lts search`` does between reading its flags and printing. ``lts search``
reads its flags and calls it; ``lts sweep``'s workers call it directly (``sweep.solve``).

A refusal is an ``LtsError``: ``FlagError`` and ``UsageError`` (exit status 2) where ``lts
search`` refuses a flag, else exit status 1; ``refusal`` gives the exit status and the one line
``lts search`` prints for it. Nothing here imports click (docs/modules.md); the costly modules
(the search, the reports) are imported at the first call, so ``import lts.cli`` stays fast.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

from .engines import ENGINE_NAMES, ENGINES, GENERIC, chunked
from .search.names import BUDGET_SECONDS, MAX_BUDGET
from .specs import load_model, load_topology, weight_bytes, with_expert_placement
from .specs.errors import FlagError, LtsError, UsageError, cut, cut_quoted, hidden_problem
from .specs.limits import MAX_SERVE_TOP
from .specs.units import GIB
from .specs.workload import PHASES, Workload

TPOT_SLO_MS = Workload.tpot_slo_ms     # a step's TPOT limit when none is given (ms: 50)


def refusal(e: LtsError) -> tuple:
    """(exit status, the line after "Error: ") of a refusal, as ``lts search`` ends on it."""
    return (2 if isinstance(e, (FlagError, UsageError)) else 1), str(e)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# the engine: --engine NAME@VERSION, its profile

def engine_release_text(version: str) -> bool:
    """Whether ``version`` of --engine NAME@VERSION reads as a release: an ASCII digit first, at
    most 40 characters, and numbers lts can order (``Engine.release_for``)."""
    from .specs.versions import DIGITS, numbers
    return 0 < len(version) <= 40 and version[0] in DIGITS and bool(numbers(version))


def parse_engine(text: str) -> tuple:
    """(name, version or None) of --engine NAME or NAME@VERSION; FlagError where it is not one
    (the reason alone is ``FlagError.reason``)."""
    name, _, version = str(text).partition("@")

    def fail(why):
        return FlagError("'--engine'", why)
    if "@" in version:
        raise fail(f"{cut_quoted(text)}: one @VERSION at most (e.g. vllm@0.12)")
    if name not in ENGINE_NAMES:
        raise fail(f"{cut_quoted(text)} is not one of {', '.join(ENGINE_NAMES)} (optionally "
                   "@VERSION, e.g. vllm@0.12)")
    if "@" not in str(text):
        return name, None
    releases = [r for r in ENGINES[name].profiles if r]
    if not releases:
        raise fail(f"{cut_quoted(text)}: {name} has no releases to pick from")
    if hidden_problem(version):
        raise fail(f"{name}@{hidden_problem(version)}")
    if not engine_release_text(version):
        shown = cut(version, keep=20, limit=40)
        raise fail(f"{cut_quoted(name + '@' + shown)}: {cut_quoted(shown)} is not a version "
                   f"(releases lts models: {', '.join(releases)})")
    return name, version


def release_of(name: str, version: str) -> tuple:
    """(the profile release lts uses for NAME@VERSION, a note when it has none of that
    release, else "")."""
    engine = ENGINES[name]
    release = engine.release_for(version)
    if engine.same_release(release, version):
        return release, ""
    releases = [r for r in engine.profiles if r]
    return release, (f"Note: {name}@{version}: lts has no profile of that release; it uses "
                     f"{release}'s (of {', '.join(releases)}: the newest not newer than it, "
                     "else the oldest)")


def fits(profile, overlay: dict) -> bool:
    """Whether an overlay applies to a profile: its engine, and its release where it names one
    (the profile's title names the release)."""
    if profile.name != overlay["name"]:
        return False
    return not overlay["release"] or any(
        p is profile or p.title == profile.title
        for r, p in ENGINES[profile.name].profiles.items() if r == overlay["release"])


def overlaid(profile, overlay: dict):
    """A profile with an overlay's fitted constants (``serving.calibrate.load_overlay``)."""
    fields = {k: overlay[k] for k in ("step_overhead_s", "collective_efficiency") if k in overlay}
    profile = replace(profile, **fields)
    return profile.with_request_time(overlay["request_overhead_s"]) \
        if "request_overhead_s" in overlay else profile


def with_kernels(profile, kernel_dir: str | None = None, no_kernels: bool = False):
    """The profile as --kernels DIR / --no-kernels say (unchanged without them)."""
    if no_kernels:
        return profile.with_kernels(on=False)
    if kernel_dir:
        return profile.with_kernels(data_dir=kernel_dir)
    return profile


def profile(topo, engine: str | None, emit: str | None = None, version: str | None = None,
            overlay: dict | None = None, kernel_dir: str | None = None,
            no_kernels: bool = False, note=_stderr):
    """The engine profile of ``engine`` (its ``version``'s release, else the newest), else of
    the ``emit`` engine, else generic, as the engine sets itself up on the topology's GPU
    (``EngineProfile.for_gpu``), with an --engine-profile overlay's constants; ``note(text)``
    says what the user may not expect (a release lts has no profile of, kernel tables the
    topology names that are not there)."""
    from .cost.kernels import gpu_path
    from .engines.profiles import MEASURED_ENGINES
    e = ENGINES[engine or emit or GENERIC]
    release = None
    if engine and version:
        release, said = release_of(engine, version)
        if said:
            note(said)
    got = (e.profiles[release] if release else e.profile).for_gpu(topo)
    if engine and version:
        got = got.with_kernels(version)
    if topo.kernel_gpu and got.name in MEASURED_ENGINES and not no_kernels \
            and gpu_path(topo.kernel_gpu, kernel_dir) is None:
        note(f"Note: {topo.name} names kernel tables {cut_quoted(topo.kernel_gpu)}, which "
             f"{kernel_dir or 'lts'} does not hold: every op is costed by the roofline")
    if overlay is not None:
        if overlay["name"] != e.name:
            raise UsageError(f"--engine-profile: the overlay is for {overlay['name']}, not "
                             f"{e.name} (name it with --engine {overlay['name']})")
        if overlay["release"] and overlay["release"] != (release or e.version):
            raise UsageError(f"--engine-profile: the overlay is for {e.name} "
                             f"{overlay['release']}'s profile, not {release or e.version}'s "
                             f"(name it with --engine {e.name}@{overlay['release']})")
        got = overlaid(got, overlay)
    return with_kernels(got, kernel_dir, no_kernels)


# ----------------------------------------------------------------------------------------------
# the model and topology, the workload's checks

def check_window(m, params: dict) -> None:
    """Refuse a workload whose requests do not fit the model's context window
    (``ModelSpec.context_window``) as a bad flag: the serve phase's --isl + --osl (and lts
    simulate's, the longest request; a trace's are checked when it is read), a decode or
    prefill step's --context. ``params``: the flags' values by name."""
    phase = params.get("phase")
    defaulted = params.get("defaulted", set())      # (the flags not given: said so)
    if phase in PHASES and params.get("context") is not None:
        n = params["context"]
        what = f"{n:,} tokens" + (" (the default)" if "context" in defaulted else "")
        why, flag = m.window_excess(n, what), "'--context'"
    elif (phase == "serve" or phase is None and not params.get("trace_path")) \
            and params.get("isl") is not None and params.get("osl") is not None:
        isl, osl = params["isl"], params["osl"]
        unset = [f"--{k}" for k in ("isl", "osl") if k in defaulted]
        what = f"{isl:,} input + {osl:,} output tokens" + (
            f" ({' and '.join(unset)} the default{'s' if len(unset) > 1 else ''})"
            if unset else "")
        why = m.window_excess(isl + osl, what)
        flag = "'--isl' / '--osl'"
    else:
        return
    if why:
        raise FlagError(flag, why)


def load(model: str, topology: str, precision=None, kv_cache_dtype=None,
         experts: dict | None = None, params: dict | None = None) -> tuple:
    """(model, topology) with the expert placement ``experts`` names (--redundant-experts,
    --eplb, --expert-load) and the checks of the flags ``params`` holds (the context window,
    --gpus within the topology, an --engine or --emit engine that runs on its GPUs)."""
    params = params or {}
    m, topo = load_model(model, precision, kv_cache_dtype), load_topology(topology)
    if experts:
        loaded = experts.get("expert_load")
        try:
            m = with_expert_placement(m, experts.get("redundant_experts"),
                                      bool(experts.get("eplb")),
                                      loaded.replace("-", "_") if loaded else None)
        except LtsError as e:
            flag, _, why = str(e).partition(": ")
            raise FlagError(f"'{flag}'", why) from None
    check_window(m, params)
    gpus = params.get("gpus")
    if gpus is not None and gpus > topo.gpus:
        nodes = f"{topo.nodes:,} node{'s' if topo.nodes != 1 else ''}"
        raise FlagError("'--gpus'", f"{cut(f'{gpus:,}')} is more than the {topo.gpus:,} GPUs of "
                                    f"{topology} ({nodes} of {topo.gpus_per_node})")
    for flag in ("engine", "emit"):          # an engine that does not run on this GPU's vendor
        e = ENGINES.get(params.get(flag) or GENERIC)
        if e.vendor_problem(topo, topology):
            raise LtsError(f"--{flag} {e.name}: {e.vendor_problem(topo, topology)}")
    return m, topo


def check_budget(budget: int, methods, phase: str, flag: str = "--budget",
                 method_flag: str = "--method") -> None:
    """A budget above a method's maximum in the phase (search.names.MAX_BUDGET) is a bad flag."""
    for method in methods:
        top = MAX_BUDGET.get(method, {}).get(phase)
        if top is not None and budget > top:
            raise FlagError(f"'{flag}'", f"{budget:,} is above the maximum of {top:,} evaluator "
                                         f"calls for {method_flag} {method} --phase {phase} (the "
                                         f"largest run finishes within {BUDGET_SECONDS} s on a "
                                         "2-core machine)")


def speculation(m, phase, spec_text, spec_tokens=None, acceptance=None, accepted_length=None):
    """The Speculation --spec names (None without it)."""
    from .serving.spec import speculation as make
    if spec_text is None:
        return None
    if phase != "serve":
        raise UsageError("--spec: only with --phase serve")
    method, _, name = spec_text.partition(":")
    if (method == "draft") != bool(name):
        raise FlagError("'--spec'", f"{cut_quoted(spec_text)} is not one of mtp, eagle, "
                                    "draft:MODEL")
    try:
        draft = load_model(name) if name else None
    except LtsError as e:
        raise FlagError("'--spec'", f"draft:{name}: {str(e).split(': ', 1)[-1]}") from None
    try:
        return make(m, method, spec_tokens, acceptance, accepted_length, draft, name)
    except ValueError as e:
        raise FlagError("'--spec'", str(e)) from None


def prefix_cache(phase, prefix_hit, prefixes=1, kv_offload=None, isl: int = 1):
    """The PrefixCache --prefix-hit names (None without it)."""
    from .serving.prefix import PrefixCache
    if prefix_hit is None:
        return None
    if phase != "serve":
        raise UsageError("--prefix-hit: only with --phase serve")
    cache = PrefixCache(float(prefix_hit), int(prefixes), float(kv_offload or 0.0) * GIB)
    if kv_offload is not None and cache.cached(isl) < 1:
        raise UsageError(f"--kv-offload: --prefix-hit {prefix_hit:g} caches no token of a "
                         f"{isl:,}-token prompt: nothing to offload")
    return cache


def offload_checks(prefix, prof, topo) -> None:
    """--kv-offload needs an engine that ships a host tier and the topology's host link."""
    if prefix is None or not prefix.offload_bytes:
        return
    e = ENGINES[prof.name]
    if not e.kv_offload:
        raise UsageError(f"--kv-offload: the {e.label} engine has no KV-cache offload to host "
                         "memory; name one that ships it (--engine vllm, sglang or trtllm)")
    if topo.host_bandwidth_bytes_s <= 0:
        raise UsageError(f"--kv-offload: topology {topo.name} gives no gpu.host_bandwidth_gb_s "
                         "(each GPU's link to host memory)")


def problem(m, topo, phase, context, tpot_slo_ms, ttft_slo_ms, gpus, isl, osl, engine,
            spec=None, prefix=None, max_cp=1, max_etp=1):
    """The search problem: the serve phase's closed loop (its SLOs only where given: None is
    none; ``spec``: speculative decoding), else one decode or prefill step (no TPOT given:
    ``TPOT_SLO_MS``). A named engine (``engine`` is its profile) restricts the space to what it
    runs (``Problem.engine_space``); ``prefix``: prefix caching."""
    from .search.problems import Problem, ServeProblem
    if phase == "serve":
        return ServeProblem(m, topo, isl, osl, tpot_slo_ms, ttft_slo_ms, gpus or 0,
                            engine=engine, engine_space=engine.name, spec=spec, prefix=prefix,
                            max_cp=max_cp, max_etp=max_etp)
    work = Workload(phase=phase, context=context,
                    tpot_slo_ms=TPOT_SLO_MS if tpot_slo_ms is None else tpot_slo_ms,
                    ttft_slo_ms=ttft_slo_ms or 0.0, gpus=gpus or 0, max_cp=max_cp,
                    max_etp=max_etp)
    return Problem(m, topo, chunked(work, engine) if phase == "prefill" else work,
                   engine_space=engine.name)


def infeasible(prob, what: str) -> LtsError:
    """The one line of a search that found nothing feasible (``what``: how it knows), with the
    weights' bound on the GPUs where it binds."""
    from .report.results import slo_text, workload_dict
    m, topo = prob.model, prob.topo
    gpus = prob.work.budget(topo)
    # the weights alone against the budget's memory: a bound no sharding beats (each GPU holds
    # at least its share of them)
    usable = topo.hbm_bytes - topo.hbm_reserve_bytes
    weights = weight_bytes(m)["total"]
    fit = ""
    if weights > gpus * usable:
        fit = (f"; its weights alone, {weights / GIB:,.0f} GiB, exceed the "
               f"{gpus * usable / GIB:,.0f} GiB usable on {gpus} GPU{'s' if gpus != 1 else ''}: "
               f"at least {math.ceil(weights / usable)} {topo.gpu_name} are needed")
    return LtsError(
        f"no feasible strategy found ({m.name} on {topo.name} with {gpus} GPU"
        f"{'s' if gpus != 1 else ''}, {prob.phase}, {slo_text(workload_dict(prob))}"
        + (f", what {prob.engine_space} runs" if prob.in_engine_space else "")
        + f"; {what}{fit})")


# ----------------------------------------------------------------------------------------------
# the search

def _no_bar(total, label):
    """No progress bar (``report.format.progress``, off)."""
    from .report.format import progress
    return progress(total, label, disable=True)


@dataclass
class Plan:
    """A search's answer: its problem, its run (``search.methods.SearchRun``) and, with
    ``emit``, the launch of the best strategy (and of two pools where the search sized them)."""
    problem: object
    run: object
    launch: object = None
    disagg_launch: object = None

    def dict(self) -> dict:
        """What ``lts search --json`` prints (docs/json.md), before ``json_safe``."""
        from .report.launch import emit_disagg_dict
        from .report.search import search_dict
        d = search_dict(self.run, self.launch)
        if self.disagg_launch is not None:
            d["emit_disagg"] = emit_disagg_dict(self.disagg_launch)
        return d


def plan(model: str, topology: str, *, method: str = "exact", budget: int = 4000,
         seed: int = 0, top: int = 10, phase: str = "decode", context: int = 16384,
         isl: int = 1024, osl: int = 1024, tpot_slo_ms: float | None = None,
         ttft_slo_ms: float | None = None, gpus: int | None = None, precision=None,
         kv_cache_dtype: str = "auto", engine: str | None = None,
         engine_version: str | None = None, emit: str | None = None,
         request_rate: float | None = None, max_cp: int = 1, max_etp: int = 1,
         decode_topology: str | None = None, slo_percentile: str | None = None,
         spec: str | None = None, spec_tokens=None, acceptance=None, accepted_length=None,
         prefix_hit: float | None = None, prefixes: int = 1, kv_offload: float | None = None,
         overlay: dict | None = None, kernel_dir: str | None = None, no_kernels: bool = False,
         experts: dict | None = None, model_arg: str | None = None, bar=_no_bar,
         note=_stderr, defaulted: frozenset = frozenset()) -> Plan:
    """Search ``model`` on ``topology`` as ``lts search`` does with the flags of the same names
    (values as the flags take them; an SLO None: not given; ``engine``: a name, its release
    ``engine_version``; ``overlay``: ``serving.calibrate.load_overlay``'s; ``experts``: the
    expert-placement flags by name). ``bar(total, label)``: a context giving an advance
    callable (progress); ``note(text)``: what the search says on stderr; ``defaulted``: the
    flags' names the user did not give (a refusal of their value says it was the default).
    LtsError on a refusal (``refusal``), and when nothing is feasible."""
    from .search.methods import run as run_search
    from .search.names import METHODS
    if method not in METHODS:
        raise FlagError("'--method'", f"{cut_quoted(method)} is not one of {', '.join(METHODS)}")
    check_budget(budget, [method], phase)
    if slo_percentile is not None:
        if phase != "serve":
            raise UsageError("--slo-percentile: only with --phase serve")
        if ttft_slo_ms is None and tpot_slo_ms is None:
            raise UsageError("--slo-percentile: give the limits it applies to (--ttft-slo-ms, "
                             "--tpot-slo-ms)")
        if spec is not None or prefix_hit is not None:
            raise UsageError("--slo-percentile: the simulator does not run speculative "
                             "decoding or prefix caching yet")
    if phase == "serve" and method == "exact" and top > MAX_SERVE_TOP:
        raise FlagError("'--top'", f"{top:,} is above the {MAX_SERVE_TOP} rows an exact serve "
                                   f"search lists (it proves each; the largest run finishes "
                                   f"within {BUDGET_SECONDS} s on a 2-core machine)")
    said = set()

    def once(text):
        if text not in said:
            said.add(text)
            note(text)
    params = {"phase": phase, "context": context, "isl": isl, "osl": osl, "gpus": gpus,
              "engine": engine, "emit": emit, "defaulted": defaulted}
    m, topo = load(model, topology, precision, kv_cache_dtype, experts, params)
    if max_etp > 1 and not m.is_moe:
        raise UsageError(f"--moe-tp: {m.name} is dense (expert tensor parallelism splits a MoE "
                         "model's experts)")
    drafts = speculation(m, phase, spec, spec_tokens, acceptance, accepted_length)
    prefix = prefix_cache(phase, prefix_hit, prefixes, kv_offload, isl)
    if kv_offload is not None:
        if method in ("ppo", "ppo-paper"):
            raise UsageError(f"--kv-offload: not with --method {method} (its bounds hold every "
                             "prefix on the GPU); use exact, megatron or a baseline")
        if decode_topology is not None:
            raise UsageError("--kv-offload: not with --decode-topology (the two-pool loop "
                             "holds every prefix on the GPU)")

    def engine_profile(t):
        return profile(t, engine, emit, engine_version, overlay, kernel_dir, no_kernels, once)
    prof = engine_profile(topo)
    offload_checks(prefix, prof, topo)
    prob = problem(m, topo, phase, context, tpot_slo_ms, ttft_slo_ms, gpus, isl, osl, prof,
                   drafts, prefix, max_cp, max_etp)
    if decode_topology is not None:
        if phase != "serve":
            raise UsageError("--decode-topology: only with --phase serve")
        topo2 = load(model, decode_topology, precision, kv_cache_dtype, experts, params)[1]
        if topo2.name != topo.name:     # the same cluster: one topology, as without the flag
            prob.decode_problem = problem(m, topo2, phase, context, tpot_slo_ms, ttft_slo_ms,
                                          gpus, isl, osl, engine_profile(topo2), drafts,
                                          prefix)
    with bar(None if method == "exact" else budget, method) as advance:
        run = run_search(prob, method, budget, seed, top, progress=advance,
                         request_rate=request_rate)
    if slo_percentile is not None and run.found:
        from .search.percentile import CHECKED, check
        with bar(None, f"checking the top at p{slo_percentile}") as advance:
            run.percentile = check(prob, run.top.strategies[:CHECKED],
                                   prob.score(run.top)[:CHECKED], int(slo_percentile), advance)
    if not run.found:
        from .report.search_serve import disagg_dict, disagg_text
        dg = run.disagg
        proved = run.result.stats.get("ended") == "on the proof that nothing is feasible"
        raise infeasible(prob, ("the exact optimum: none exists" if method == "exact"
                         else f"{method}: its bounds prove none exists" if proved
                         else f"{method}, {run.result.evaluations} evaluations" +
                         "; --method exact tells whether any exists")
                         + ("" if dg is None else
                            "; two pools would serve it: " + disagg_text(disagg_dict(dg))))
    out = Plan(prob, run)
    if emit:
        from .launch.emit import launch
        from .launch.emit_disagg import launch_disagg
        out.launch = launch(emit, prob, run.best.strategies[0], model_arg or model, precision,
                            best_result=run.best)
        if run.disagg is not None and decode_topology is None:
            out.disagg_launch = launch_disagg(emit, prob, run.disagg, model_arg or model,
                                              precision)
    return out
