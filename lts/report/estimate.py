"""``lts estimate``: one strategy's per-op costs and figures (``estimate_dict``), and with
``--phase serve`` the closed loop's (``serve_dict``); the tables render from those dicts (the
per-op table from their ``ops``) and the specs they name.
"""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..cost.model import Result
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import CONCURRENCY, DEGREES, coarse_settings, strategy_dict
from ..specs.units import GIB
from .format import SHORT, fmt_bytes, fmt_ms, fmt_params, num
from .results import deploy_fields, model_dict, ops_us, result_dict


def estimate_dict(m: ModelSpec, res: Result, ops: list, budget: int) -> dict:
    """JSON of ``lts estimate`` (decode or prefill): the result (``result_dict``), the
    deployment fields on ``budget`` GPUs, the model and ``ops`` in display units."""
    d = result_dict(res, 0)
    d.update(deploy_fields(m, res, 0, budget))
    d["model"] = model_dict(m)
    d["ops"] = ops_us(ops)
    return d


def serve_dict(m: ModelSpec, res, ops: list, isl: int, osl: int, engine=None,
               budget: int | None = None) -> dict:
    """JSON of ``lts estimate --phase serve``: the strategy, the closed loop's figures (docs/json.md) and ``ops``, the per-op cost of ``step``: one decode step of the running
    batch at the mean context isl + osl/2."""
    d = strategy_dict(res.strategies[0])
    n = int(res.running[0])
    conc = int(res.strategies[0][CONCURRENCY])
    d.update(phase="serve", isl=int(isl), osl=int(osl), concurrency=conc,
             valid=bool(res.valid[0]), reasons=res.reason_list(0),
             output_tokens_per_s=num(res.output_tokens_per_s[0]),
             output_tokens_per_s_per_gpu=num(res.output_tokens_per_s_per_gpu[0]),
             tokens_per_s_per_user=num(res.tokens_per_s_per_user[0]),
             ttft_ms=num(res.ttft_s[0] * 1e3), tpot_ms=num(res.tpot_s[0] * 1e3),
             request_latency_ms=num(res.latency_s[0] * 1e3),
             running=n, queued=max(conc - n, 0),
             kv_capacity=int(res.kv_capacity[0]),
             decode_step_ms=num(res.decode_step_s[0] * 1e3),
             mixed_step_ms=num(res.mixed_step_s[0] * 1e3),
             memory_gib_per_gpu=num(res.memory_bytes[0] / GIB), gpus=int(res.gpus[0]),
             engine=engine.name if engine is not None else None,
             model=model_dict(m),
             step={"kind": "decode", "requests": n, "context": int(isl) + int(osl) // 2},
             ops=ops_us(ops))
    if budget is not None:
        d.update(deploy_fields(m, res, 0, budget))
    return d


def _ops_table(console: Console, title: str, ops: list) -> None:
    """The per-op table of ``ops`` (``ops_us``: display units)."""
    table = Table(title=title,
                  caption="count: instances per step; collectives: kind group bytes µs (×count)",
                  box=box.SIMPLE_HEAD)
    table.add_column("op", no_wrap=True)
    table.add_column("choice", no_wrap=True)
    table.add_column("count", justify="right")
    table.add_column("comp µs", justify="right")
    table.add_column("mem µs", justify="right")
    table.add_column("collectives")
    names = {0: "0", 1: "1", 2: "none", 3: "experts", -1: ""}
    for op in ops:
        colls = "\n".join(f"{SHORT[c['kind']]} {c['group']} {fmt_bytes(c['bytes'])} "
                          f"{c['time_us']:.1f}" + (f" ×{c['count']}" if c["count"] != op["count"]
                                                   else "")
                          for c in op["collectives"])
        table.add_row(op["name"], names[op["choice"]] + (f" {op['layout_in']}→{op['layout_out']}"
                                                         if op["layout_in"] else ""),
                      str(op["count"]), f"{op['compute_us']:.1f}", f"{op['memory_us']:.1f}",
                      colls or "-")
    console.print(table)
    load = max((op["expert_load"] for op in ops if "expert_load" in op), default=1.0)
    if load > 1.0:
        console.print(f"MoE: the busiest expert-parallel rank gets {load:.2f}x its share of the "
                      "routed tokens (skewed routing; --eplb and --redundant-experts even it out)",
                      markup=False, highlight=False)


def _model_line(d: dict) -> str:
    """The model, its size and the strategy's degrees and GPUs, of an estimate's dict."""
    m = d["model"]
    return (f"[bold]{escape(m['name'])}[/] ({fmt_params(m['params_total'])} params, "
            f"{fmt_params(m['params_active'])} active)  {coarse_settings(d)}  on {d['gpus']} GPUs")


def _status(d: dict) -> str:
    return "[green]valid[/]" if d["valid"] else \
        f"[red]invalid: {escape(', '.join(d['reasons']))}[/]"


def render_estimate(console: Console, d: dict, topo: TopologySpec, phase: str) -> None:
    """``lts estimate`` (decode or prefill) from its ``estimate_dict``: the per-op table, then
    the figures against ``topo``'s usable memory."""
    _ops_table(console, f"{escape(d['model']['name'])} on {escape(topo.name)}: cost per op "
                        "instance", d["ops"])
    lat = f"TPOT {fmt_ms(d['tpot_ms'])} ms" if phase == "decode" else \
        f"TTFT {fmt_ms(d['ttft_ms'])} ms"
    console.print(
        _model_line(d) + "\n"
        f"{d['tokens_per_s_per_gpu']:.1f} tokens/s/GPU, {d['tokens_per_s']:.0f} tokens/s, "
        f"{lat}, {d['memory_gib_per_gpu']:.1f} GiB per GPU "
        f"(of {(topo.hbm_bytes - topo.hbm_reserve_bytes) / GIB:.1f} usable): " + _status(d))


def _rate(x: float) -> str:
    """A rate in 3 significant figures, thousands separated beyond."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 10_000 else f"{ms / 1e3:,.1f} s"


def render_serve(console: Console, d: dict, topo: TopologySpec, engine) -> None:
    """``lts estimate --phase serve`` from its JSON (``serve_dict`` and ``concurrency_chosen``:
    the concurrency was picked, the highest output tokens/s, not given): the per-op table of
    one decode step of the running batch, then the closed loop's figures (one set: everything
    below is the same run) on ``engine`` (its profile) and ``topo``."""
    step, isl, osl = d["step"], d["isl"], d["osl"]
    head = _model_line(d)
    if d["kv_capacity"] < 1:            # not one request fits: no loop to describe
        console.print(head + f"\n[red]invalid: {escape(', '.join(d['reasons']))}[/]: not one "
                      f"request of {isl + osl} tokens fits the KV cache on {escape(engine.title)} "
                      f"(weights and buffers take {d['memory_gib_per_gpu']:.1f} GiB per GPU with "
                      f"one request, of {topo.hbm_bytes / GIB:.1f} GiB)")
        return
    plural = "s" if step["requests"] != 1 else ""
    _ops_table(console, f"{escape(d['model']['name'])} on {escape(topo.name)}: one decode step "
                        f"of the running batch ({step['requests']} request{plural} at context "
                        f"{step['context']}, {d['decode_step_ms']:.2f} ms), cost per op instance",
               d["ops"])
    kv = f"the KV cache holds {d['kv_capacity']}"
    if d["queued"]:
        capped = engine.holds(d["kv_capacity"]) < d["kv_capacity"]
        running = (f"{d['running']} running, {d['queued']} waiting: "
                   + (f"the engine runs at most {engine.max_running}; " if capped else "") + kv)
    else:
        running = f"{d['running']} running; {kv}"
    how = " (the highest output tokens/s)" if d["concurrency_chosen"] else ""
    tpot = (f"TPOT {d['tpot_ms']:.2f} ms, {d['tokens_per_s_per_user']:.1f} tokens/s per user"
            if d["tpot_ms"] is not None else "no TPOT (one output token)")
    console.print(
        head + "\n"
        f"[bold]serve[/] on {escape(engine.title)}: {isl} in / {osl} out tokens per request, "
        f"concurrency {d['concurrency']}{how} ({running}): {_status(d)}\n"
        f"{_rate(d['output_tokens_per_s'])} output tokens/s, "
        f"{_rate(d['output_tokens_per_s_per_gpu'])} per GPU; TTFT {_ms(d['ttft_ms'])}, {tpot}, "
        f"request latency {d['request_latency_ms'] / 1e3:,.2f} s\n"
        f"steps: decode {d['decode_step_ms']:.2f} ms, with a prefill chunk "
        f"{d['mixed_step_ms']:.2f} ms; {d['memory_gib_per_gpu']:.1f} GiB per GPU with "
        f"{d['running']} request{'s' if d['running'] != 1 else ''} of {isl + osl} tokens"
        + _spec_line(d.get("speculation")) + _prefix_line(d.get("prefix_cache"))
        + _kernels_line(d.get("kernels")))


def _kernels_line(k: dict | None) -> str:
    """Which costing a serve estimate used: the measured kernels read (GPU, each class's
    release) or the roofline alone (docs/kernels.md). The per-op table above gives the
    roofline's compute and memory times; the step times read the tables."""
    if not k:
        return "\ncosted by the roofline (no measured kernels: docs/kernels.md)"
    parts = ", ".join(f"{t['op']} {t['release']}" for t in k["tables"])
    return (f"\nmeasured kernels of {escape(k['gpu'])} ({escape(k['engine'])} tables: "
            f"{escape(parts)}); the roofline for the ops they do not hold (the per-op "
            "columns above are the roofline's)")


def _prefix_line(pc: dict | None) -> str:
    """How a serve estimate's prompts meet a prefix cache (empty without --prefix-hit)."""
    if not pc:
        return ""
    line = (f"\n[bold]prefix caching[/] {pc['cached_tokens']} tokens of each prompt cached, "
            f"not prefilled; {pc['prefixes']} distinct prefix"
            f"{'es' if pc['prefixes'] != 1 else ''} held once")
    if pc.get("on_gpu") is None:
        return line
    copy = f", copied in {pc['copy_ms']:.2f} ms" if pc.get("copy_ms") is not None else ""
    return (line + f"; host tier {pc['kv_offload_gib']:g} GiB per GPU: a request finds its "
            f"prefix on the GPU {pc['on_gpu']:.1%}, on the host {pc['on_host']:.1%}{copy}, "
            f"nowhere {pc['recomputed']:.1%} (recomputed: {pc['effective_hit']:.1%} of the "
            "prompt tokens hit)")


def _spec_line(sp: dict | None) -> str:
    """How a serve estimate decodes speculatively (empty without --spec)."""
    if not sp:
        return ""
    given = (f"acceptance {sp['acceptance']:g} per drafted token"
             if sp["acceptance"] is not None else "a measured mean")
    return (f"\n[bold]speculative decoding[/] {sp['method']} ({escape(sp['draft'])}): each step "
            f"runs {sp['tokens']} draft pass{'es' if sp['tokens'] != 1 else ''} and verifies "
            f"{sp['tokens'] + 1} tokens per request ({given}: {sp['accepted_length']:.2f} "
            "tokens per step)")


def two_pool_dict(m: ModelSpec, res, prefill_row, decode_row, workers: tuple, isl: int,
                  osl: int, concurrency: int, engine=None) -> dict:
    """JSON of ``lts estimate --phase serve --prefill ... --decode ...``: both pools (strategy,
    instances) and the two-pool closed loop's figures (``serving.two_pool``; docs/json.md)."""
    i = 0
    return {
        "phase": "serve", "mode": "disagg", "isl": int(isl), "osl": int(osl),
        "concurrency": int(concurrency), "valid": bool(res.valid[i]),
        "reasons": res.reason_list(i), "engine": engine.name if engine is not None else None,
        "model": model_dict(m),
        "prefill": {**strategy_dict(prefill_row), "instances": int(workers[0])},
        "decode": {**strategy_dict(decode_row), "instances": int(workers[1])},
        "gpus": int(res.gpus[i]),
        "output_tokens_per_s": num(res.output_tokens_per_s[i]),
        "output_tokens_per_s_per_gpu": num(res.output_tokens_per_s_per_gpu[i]),
        "tokens_per_s_per_user": num(1.0 / res.tpot_s[i]) if osl > 1 else None,
        "requests_per_s": num(res.requests_per_s[i]),
        "ttft_ms": num(res.ttft_s[i] * 1e3),
        "tpot_ms": num(res.tpot_s[i] * 1e3) if osl > 1 else None,
        "request_latency_ms": num(res.latency_s[i] * 1e3),
        "prefill_pass_ms": num(res.pass_s[i] * 1e3),
        "transfer_ms": num(res.transfer_s[i] * 1e3),
        "decode_step_ms": num(res.decode_step_s[i] * 1e3),
        "prefill_wait_ms": num(res.prefill_wait_s[i] * 1e3),
        "decode_wait_ms": num(res.decode_wait_s[i] * 1e3),
        "running": num(res.running[i]), "decode_slots": int(res.decode_slots[i]),
        "handoff_ms": num(engine.handoff_s * 1e3) if engine is not None else 0.0,
        "request_overhead_ms": num(engine.request_overhead_s * 1e3) if engine is not None
        else 0.0}


def render_two_pool(console: Console, d: dict, topo: TopologySpec, engine) -> None:
    """``lts estimate`` of a two-pool deployment from its ``two_pool_dict``."""
    m = d["model"]
    pools = "\n".join(
        f"  {name} pool"
        + (f" on {escape(d['decode_topology'])}" if name == "decode" and d.get("decode_topology")
           else "")
        + f": {d[name]['instances']} instance{'s' if d[name]['instances'] != 1 else ''}"
        f" of {coarse_settings(d[name], DEGREES)}"
        + (f" ({d[name]['batch']} prompt{'s' if d[name]['batch'] != 1 else ''} a pass)"
           if name == "prefill" else "")
        for name in ("prefill", "decode"))
    tpot = (f"TPOT {d['tpot_ms']:.2f} ms, {d['tokens_per_s_per_user']:.1f} tokens/s per user"
            if d["tpot_ms"] is not None else "no TPOT (one output token)")
    console.print(
        f"[bold]{escape(m['name'])}[/] ({fmt_params(m['params_total'])} params, "
        f"{fmt_params(m['params_active'])} active) on {escape(topo.name)}, two pools, "
        f"{d['gpus']} GPUs:\n{pools}\n"
        f"[bold]serve[/] on {escape(engine.title)}: {d['isl']} in / {d['osl']} out tokens per "
        f"request, concurrency {d['concurrency']:,} ({d['running']:,.0f} decoding of "
        f"{d['decode_slots']:,} slots): {_status(d)}\n"
        f"{_rate(d['output_tokens_per_s'])} output tokens/s, "
        f"{_rate(d['output_tokens_per_s_per_gpu'])} per GPU, "
        f"{d['requests_per_s']:,.3g} requests/s; TTFT {_ms(d['ttft_ms'])}, {tpot}, "
        f"request latency {d['request_latency_ms'] / 1e3:,.2f} s\n"
        f"TTFT = prefill queue {_ms(d['prefill_wait_ms'])} + pass {_ms(d['prefill_pass_ms'])} + "
        f"KV transfer {d['transfer_ms']:.3f} ms + handoff {engine.handoff_s * 1e3:.0f} ms"
        + (f" + time per request {engine.request_overhead_s * 1e3:.0f} ms"
           if engine.request_overhead_s else "")
        + (f" + wait for a decode slot {_ms(d['decode_wait_ms'])}" if d["decode_wait_ms"] > 0.05
           else "")
        + f"; decode step {d['decode_step_ms']:.2f} ms" + _spec_line(d.get("speculation"))
        + _prefix_line(d.get("prefix_cache")), overflow="fold")
