"""The JSON objects several commands share: a strategy's result, the model, the per-op costs in
display units, the deployment fields (engines, replicas, per GPU of the budget) and the
workload with its SLOs (as an object and in words).

JSON key names are a contract (docs/design.md §5, docs/json.md): add fields, never rename.
"""
from __future__ import annotations

import math

from ..cost.model import Result
from ..engines.space import runnable_on
from ..search.problems import fill
from ..specs import ModelSpec, param_counts
from ..specs.strategy import CHOICE_CODES, COARSE, OPS, format_strategy, strategy_dict
from ..specs.units import GIB
from .format import num


def result_dict(res: Result, i: int) -> dict:
    """The JSON *result* object of strategy i (docs/design.md §5)."""
    d = strategy_dict(res.strategies[i])
    d.update(valid=bool(res.valid[i]), reasons=res.reason_list(i),
             tokens_per_s_per_gpu=num(res.tokens_per_s_per_gpu[i]),
             tokens_per_s=num(res.tokens_per_s[i]),
             tpot_ms=num(res.tpot_s[i] * 1e3), ttft_ms=num(res.ttft_s[i] * 1e3),
             memory_gib_per_gpu=num(res.memory_bytes[i] / GIB), gpus=int(res.gpus[i]))
    return d


def strategy_row(d: dict) -> list:
    """The strategy row of a JSON strategy object (``strategy_dict``'s inverse)."""
    return [d[n] for n in COARSE] + [CHOICE_CODES[d["ops"][op]] for op in OPS]


def strategy_text(d: dict) -> str:
    """A JSON strategy object as ``lts estimate --strategy`` takes it, the ops that differ
    from Megatron's only, a space after each comma (so that a narrow terminal wraps it
    between settings, never inside one; the parser takes it as it is)."""
    return format_strategy(strategy_row(d), only_changed=True, sep=", ")


def model_dict(m: ModelSpec) -> dict:
    """The ``model`` object: its name and parameter counts."""
    counts = param_counts(m)
    return {"name": m.name, "params_total": counts["params_total"],
            "params_active": counts["params_active"]}


def ops_us(ops: list) -> list:
    """``cost.model.breakdown``'s ops (seconds) in display units: each ``*_s`` key becomes
    ``*_us`` (microseconds), in place in the key order."""
    def conv(d):
        return {(k[:-2] + "_us" if k.endswith("_s") else k):
                (v * 1e6 if k.endswith("_s") else v) for k, v in d.items()}
    return [{**conv(op), "collectives": [conv(c) for c in op["collectives"]]} for op in ops]


def deploy_fields(m: ModelSpec, res, i: int, budget: int) -> dict:
    """``runnable_on`` (the engines that run result i as written), ``replicas`` (copies of its
    instance the budget holds) and ``tokens_per_s_per_cluster_gpu`` (their tokens/s over every
    GPU of the budget) of result i (a ``Result`` or a ``serve.ServeResult``)."""
    rate = (res.output_tokens_per_s_per_gpu if hasattr(res, "output_tokens_per_s_per_gpu")
            else res.tokens_per_s_per_gpu)[i]
    return {"runnable_on": list(runnable_on(m, res.strategies[i:i + 1])[0]),
            "replicas": int(budget // res.gpus[i]),
            "tokens_per_s_per_cluster_gpu": num(rate * fill(budget, res.gpus[i]))}


def search_deploy_fields(run, res, i) -> dict:
    """``deploy_fields`` of result i of a search (per GPU of the budget: the objective, as
    ``Problem.per_cluster_gpu``)."""
    p = run.problem
    return deploy_fields(p.model, res, i, p.work.budget(p.topo))


def search_result_dict(run, res) -> dict:
    """A search's one-row result with ``replicas``, ``tokens_per_s_per_cluster_gpu`` and
    ``runnable_on``, as ``best`` and ``top`` have them."""
    d = result_dict(res, 0)
    d.update(search_deploy_fields(run, res, 0))
    return d


def limit_ms(ms):
    """An SLO in ms for JSON: null when not given or inf (no limit)."""
    return ms if ms and math.isfinite(ms) else None


def slo(name: str, ms) -> str:
    """``"TPOT ≤ 50 ms"``; empty when ``ms`` is no limit (``limit_ms``)."""
    return f"{name} ≤ {ms:g} ms" if limit_ms(ms) else ""


def slo_text(w: dict) -> str:
    """The workload in words (context or request shape, and the SLOs) of a ``workload_dict``."""
    if w["phase"] == "serve":
        slos = [slo("TPOT", w["tpot_slo_ms"]), slo("TTFT", w["ttft_slo_ms"])]
        sp, pc = w.get("speculation"), w.get("prefix_cache")
        spec = "" if not sp else (f", speculative {sp['method']} {sp['tokens']} token"
                                  f"{'s' if sp['tokens'] != 1 else ''} "
                                  f"({sp['accepted_length']:.2f} a step)")
        if pc:
            spec += (f", {pc['cached_tokens']} prompt tokens cached ({pc['prefixes']} prefix"
                     f"{'es' if pc['prefixes'] != 1 else ''}"
                     + (f", {pc['kv_offload_gib']:g} GiB per GPU of host memory for them"
                        if pc.get("kv_offload_gib") else "") + ")")
        return f"{w['isl']} in / {w['osl']} out tokens per request{spec}, " + \
            (", ".join(x for x in slos if x) or "no SLO")
    if w["phase"] == "decode":
        return f"context {w['context']}, " + (slo("TPOT", w["tpot_slo_ms"]) or "no TPOT SLO")
    return f"prompt {w['context']}, " + (slo("TTFT", w["ttft_slo_ms"]) or "no TTFT SLO")


def workload_dict(problem) -> dict:
    """The ``workload`` object of ``lts search --json`` (a Problem or ServeProblem)."""
    w, topo = problem.work, problem.topo
    if problem.phase == "serve":
        return {"phase": "serve", "isl": problem.isl, "osl": problem.osl,
                "tpot_slo_ms": limit_ms(problem.tpot_slo_ms),
                "ttft_slo_ms": limit_ms(problem.ttft_slo_ms),
                "gpus": w.budget(topo), "engine": problem.engine.name,
                "speculation": spec_dict(getattr(problem, "spec", None)),
                "prefix_cache": prefix_dict(getattr(problem, "prefix", None), problem.isl)}
    return {"phase": w.phase, "context": w.context, "tpot_slo_ms": limit_ms(w.tpot_slo_ms),
            "ttft_slo_ms": limit_ms(w.ttft_slo_ms), "gpus": w.budget(topo)}


def spec_dict(spec) -> dict | None:
    """The ``speculation`` object of a serve estimate or search (null without --spec)."""
    if spec is None:
        return None
    return {"method": spec.method, "draft": spec.draft_name, "tokens": spec.tokens,
            "acceptance": spec.acceptance, "accepted_length": num(spec.accepted_length)}


def prefix_dict(prefix, isl: int, res=None) -> dict | None:
    """The ``prefix_cache`` object of a serve estimate or search (null without --prefix-hit);
    with a host tier (--kv-offload) its size and, of a serve result ``res``'s first row, where
    the requests found their prefix and the copy a host hit waits for (``serving.offload``)."""
    if prefix is None:
        return None
    d = {"hit": prefix.hit, "prefixes": prefix.prefixes, "cached_tokens": prefix.cached(isl)}
    if prefix.offload_bytes:
        d["kv_offload_gib"] = num(prefix.offload_bytes / GIB)
    if res is not None and getattr(res, "prefix_split", None) is not None:
        gpu, host, miss = (float(v) for v in res.prefix_split[0])
        d.update(on_gpu=num(gpu), on_host=num(host), recomputed=num(miss),
                 effective_hit=num(prefix.hit * (1.0 - miss)),
                 copy_ms=num(float(res.copy_s[0]) / host * 1e3) if host > 0 else None)
    return d
