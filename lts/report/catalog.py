"""``lts models`` and ``lts topologies``: the shipped specs as rows (the JSON) and tables of
those rows; ``models --show`` also prints the parsed shape of one model.
"""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..cost import kv
from ..specs import ModelSpec, param_counts, weight_bytes, weight_params
from ..specs.model import FULL, WEIGHT_GROUPS
from ..specs.units import GB, GIB, TFLOPS, US
from .format import fmt_params


def models_rows(specs: list) -> list:
    """The JSON of ``lts models``: a row per (name, spec), its shape, counts and weight size."""
    rows = []
    for name, m in specs:
        c = param_counts(m)
        wb = weight_bytes(m)
        # the format most of the bytes are in (DeepSeek-V4's MXFP4 experts, not its fp8 blocks)
        main = max((g for g in wb if g != "total"), key=lambda g: wb[g])
        rows.append({"name": name, "display_name": m.name, "kind": m.ffn.kind,
                     "attention": m.attention.kind, "layers": m.layers, "hidden": m.hidden,
                     "params_total": c["params_total"], "params_active": c["params_active"],
                     "params_published": m.params_published or None,
                     "weights": m.precision.weights,
                     "weights_mostly": m.precision.format_of(main),
                     # each op group in its format, scales included (specs.weight_bytes)
                     "weight_gib": wb["total"] / GIB})
    return rows


def render_models(console: Console, rows: list) -> None:
    """The table of ``lts models`` from ``models_rows``."""
    table = Table(title="Shipped models", box=box.SIMPLE_HEAD)
    for col, just in (("name", "left"), ("kind", "left"), ("layers", "right"),
                      ("params", "right"), ("active", "right"), ("weights", "right")):
        # names fold onto lines where the terminal is narrow; numbers never elide
        table.add_column(col, justify=just, no_wrap=col not in ("name", "kind"),
                         overflow="fold")
    for r in rows:
        kind = f"{r['kind']}/{r['attention']}"
        table.add_row(escape(r["name"]), kind, str(r["layers"]), fmt_params(r["params_total"]),
                      fmt_params(r["params_active"]),
                      f"{r['weights_mostly']} {r['weight_gib']:.0f} GiB")
    console.print(table)


def model_show_dict(name: str, m: ModelSpec, contexts) -> dict:
    """The JSON of ``lts models --show``: the model's ``models_rows`` row plus its layer kinds
    (HF's names, counted), the weight format of each op group it has weights in, the KV-cache dtype and the KV (or
    state) bytes one decoding request holds at each of ``contexts`` (``cost.kv.request_bytes``:
    the bytes the op tables, memory and two pools cost)."""
    params = weight_params(m)
    kinds = {}
    # (compressed attention: each ratio's kind, by its marker's name: "compressed 4 top-1024")
    for t in (tuple(map(str, m.layer_windows)) if m.attention.compressed else
              m.layer_types or (FULL,) * m.layers):
        t = {"None": FULL}.get(t, t) if m.attention.compressed else t
        if m.attention.compressed and t.isdigit():
            t = f"window {t}"
        kinds[t] = kinds.get(t, 0) + 1
    return {**models_rows([(name, m)])[0],
            "layer_kinds": kinds,
            # the groups the model has weights in (no `ssm` without Mamba-2 layers, ...)
            "formats": {g: m.precision.format_of(g) for g in WEIGHT_GROUPS if params[g] > 0},
            # the groups quantized in some of their layers only: the share quantized
            "quantized_share": dict(m.precision.quantized_share),
            "kv_cache": m.precision.kv_cache,
            "kv_per_request": [{"context": int(c), "bytes": float(kv.request_bytes(m, c))}
                               for c in contexts]}


def render_model_show(console: Console, r: dict, m: ModelSpec) -> None:
    """``lts models --show``: the model's row (``models_rows``: name, size, counts) and, from the
    spec, what the row does not carry (source, vocab, attention and FFN shapes, precisions)."""
    a, f = m.attention, m.ffn
    total, published = r["params_total"], r["params_published"]
    table = Table(title=escape(r["display_name"]), box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    rows = [("source", m.source), ("layers", r["layers"]), ("hidden", r["hidden"]),
            ("vocab", m.vocab),
            ("attention", f"{a.kind}: {a.heads} heads, {a.kv_heads} kv heads, head_dim {a.head_dim}"
             + (f", kv_lora {a.kv_lora_rank}, q_lora {a.q_lora_rank}, rope {a.qk_rope_head_dim},"
                f" v_head {a.v_head_dim}" if a.kind == "mla" else "")
             + (", output gate" if a.kind == "mla" and a.output_gate else "")
             + (f"; attention residuals over blocks of {m.attn_res_block} layers"
                if m.attn_res_block else "")
             + (f", q_lora {a.q_lora_rank}, rope {a.qk_rope_head_dim}, output {a.o_groups} groups"
                f" of rank {a.o_lora_rank}, window {a.window}, sinks" if a.compressed else "")
             + (f"; sparse (DSA): an indexer of {a.index_heads} heads of {a.index_head_dim} picks "
                f"{a.index_topk} keys a query" if a.sparse and not a.compressed else "")
             + (f"; ratio-{a.index_ratio} layers (CSA): an indexer of {a.index_heads} heads of "
                f"{a.index_head_dim} picks {a.index_topk} compressed entries a query"
                if a.sparse and a.compressed else "")
             + (f"; {m.hc_mult} residual copies (hyper-connections)" if m.hc_mult > 1 else "")
             + (f" (indexer on {sum(m.layer_indexed)} of {m.layers} layers, the others reusing "
                "the top-k of the last one before them)" if a.indexer_types else "")
             + (f"; block_sparse_attention layers (MSA): an indexer of {a.index_heads} heads of "
                f"{a.index_head_dim} picks {a.sparse_topk_blocks} blocks of "
                f"{a.sparse_block_size} tokens a KV head (the current one among them), "
                f"{a.sparse_topk_blocks * a.sparse_block_size} keys at most"
                if a.block_sparse else "")
             + _gqa_widths(a)
             + "".join(f"; {t} layers: {k.heads} heads, {k.kv_heads} kv heads, head_dim "
                       f"{k.head_dim}{_gqa_widths(k)}" for t, k in a.kinds)
             + (f"; chunked_attention layers attend within chunks of {a.chunk} tokens"
                if a.chunk else ""))]
    if f.kind == "moe":
        rows.append(("ffn", f"moe: {f.experts} experts top-{f.top_k}, expert width "
                            f"{f.expert_intermediate}, shared width {f.shared_intermediate}, "
                            f"{m.dense_ffn_layers} dense layers of width {f.intermediate}"
                            + (f" (MoE every {f.moe_every} layers)" if f.moe_every > 1 else "")
                            + (f", experts in a latent of {f.latent} (fc1/fc2_latent_proj)"
                               if f.latent else "")
                            + ", "
                            f"{'gated' if f.gated else 'not gated'}"))
    else:
        width = f"width {f.intermediate}" if not f.widths else "widths " + ", ".join(
            f"{w} ({n} layers)" for w, n in f.width_groups)
        rows.append(("ffn", f"dense: {width}, {'gated' if f.gated else 'not gated'}"))
    if m.no_ffn:        # Nemotron-H's mixer blocks followed by a mixer block
        rows[-1] = ("ffn", rows[-1][1] + f"; {len(m.no_ffn)} of the {m.layers} layers without an "
                                         "FFN (a token mixer alone)")
    formats = {}
    for group, fmt in r["formats"].items():
        q = m.precision.share_of(group)     # quantized in some of its layers only
        formats.setdefault(fmt, []).append(
            group if q == 1.0 else f"{group} (in {q:.0%} of its layers, the others "
                                   f"{m.precision.activations})")
    if m.linear is not None and hasattr(m.linear, "state_size"):
        mb = m.linear
        rows.append(("mamba", f"Mamba-2: {mb.heads} heads of {mb.head_dim}, state {mb.state_size},"
                              f" {mb.groups} groups, conv {mb.conv_kernel}, chunk {mb.chunk_size}"))
    elif m.linear is not None:
        la = m.linear
        kind = "Kimi Delta Attention" if la.kda else "Gated DeltaNet"
        rows.append(("linear attention", f"{kind}: {la.key_heads} key heads, "
                                         f"{la.value_heads} value heads, dk {la.key_head_dim}, "
                                         f"dv {la.value_head_dim}, conv {la.conv_kernel}"
                     + (f", decay through rank {la.decay_rank}, "
                        + ("a full-rank output gate" if not la.gate_rank else
                           f"an output gate through rank {la.gate_rank}") if la.kda else "")))
    rows += [("layer kinds", ", ".join(f"{n} {k}" for k, n in r["layer_kinds"].items())),
             ("weights", "; ".join(f"{fmt}: {', '.join(gs)}" for fmt, gs in formats.items())),
             ("precision", f"weights {r['weights']}, kv {r['kv_cache']}, "
                           f"activations {m.precision.activations}"),
             ("KV+state/request", "; ".join(
                 f"{e['bytes'] / GIB:,.3f} GiB at {e['context']:,} tokens "
                 f"({e['bytes'] / e['context'] / 1024:,.1f} KiB/token)"
                 for e in r["kv_per_request"])),
             ("tie_embeddings", m.tie_embeddings),
             ("params total", f"{total:.4g}" + (
                 f" (published {published:.4g}, {100 * (total / published - 1):+.1f}%)"
                 if published else "")),
             ("params active", f"{r['params_active']:.4g}")]
    if m.mtp_layers:    # in the checkpoint, outside the totals, not run (specs.param_counts)
        mtp = param_counts(m)["params_mtp"]
        rows.append(("MTP layers", f"{m.mtp_layers}: {mtp:.4g} parameters, counted apart (total "
                                   f"with them {total + mtp:.4g}), not loaded or run"))
    for k, v in rows:
        table.add_row(k, escape(str(v)))
    console.print(table)


def topologies_rows(specs: list) -> list:
    """The JSON of ``lts topologies``: a row per (name, spec), its GPUs, memory and links."""
    return [{"name": name, "gpu": t.gpu_name, "gpus": t.gpus, "gpus_per_node": t.gpus_per_node,
             "nodes": t.nodes, "hbm_gib": t.hbm_bytes / GIB,
             "bf16_tflops": t.peak_flops["bf16"] / TFLOPS,
             "vendor": t.vendor,
             "links": [{"name": l.name, "shape": l.shape, "span_gpus": l.span_gpus,
                        "bandwidth_gb_s": l.bandwidth_bytes_s / GB,
                        "latency_us": l.latency_s / US, "efficiency": l.efficiency}
                       for l in t.links]}
            for name, t in specs]


def render_topologies(console: Console, rows: list) -> None:
    """The table of ``lts topologies`` from ``topologies_rows``."""
    table = Table(title="Shipped topologies", box=box.SIMPLE_HEAD)
    for col, just in (("name", "left"), ("gpu", "left"), ("gpus", "right"), ("HBM", "right"),
                      ("links (span, GB/s per GPU; mesh: per peer)", "left")):
        table.add_column(col, justify=just)
    for r in rows:
        links = ", ".join(f"{l['name']} {l['span_gpus']} {l['bandwidth_gb_s']:g}"
                          + ("" if l["shape"] == "switch" else f" {l['shape']}")
                          for l in r["links"])
        table.add_row(escape(r["name"]), escape(r["gpu"]),
                      f"{r['gpus']} ({r['nodes']}×{r['gpus_per_node']})",
                      f"{r['hbm_gib']:.0f} GiB", escape(links))
    console.print(table)


def _gqa_widths(a) -> str:
    """A gqa shape's V width where it is its own, its k_eq_v ("V from k_proj") and output
    gates."""
    if a.kind != "gqa":
        return ""
    return (f", v_head {a.v_dim}" if a.v_head_dim else "") \
        + (", V from k_proj" if a.k_eq_v else "") + (", output gate" if a.output_gate else "") \
        + (", a gate per head" if a.head_gate else "")

