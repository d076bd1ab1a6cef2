"""The vectorized evaluator equals the scalar reference (tests/reference.py), row by row.

The reference walks every layer of every stage of ONE strategy with plain floats. It implements
docs/design.md; where lts.cost.model knowingly deviates from it, ``reference.COMPAT`` names the
deviation and the comparisons below ask the reference to reproduce it (so everything else is
still compared). The deviations found so far have been fixed; each keeps a minimal reproducer
below as a regression test.
"""
from collections import defaultdict

import numpy as np
import pytest

import reference as ref
from generators import (synthetic_block_sparse, synthetic_chunked, synthetic_compressed,
                        synthetic_dense, synthetic_head_gate, synthetic_kda, synthetic_latent_moe,
                        synthetic_linear, synthetic_mamba, synthetic_mla, synthetic_moe,
                        synthetic_moe_eplb, synthetic_moe_uniform, synthetic_nas,
                        synthetic_nemotron_h, synthetic_partly_quantized, synthetic_shapes,
                        synthetic_window)
from lts.cost.layouts import PACK_ROWS
from lts.cost.model import breakdown, evaluate
from lts.cost.tables import REASONS
from lts.specs.workload import Workload
from lts.specs import load_model, load_topology, shipped_names
from lts.specs.strategy import (WIDTH, Space, coarse_of, format_strategy, make_row,
                                parse_strategy)

# deviations of lts.cost.model from docs/design.md that the comparisons ask the reference to reproduce
KNOWN = ()

TOPOLOGIES = ("h100_dgx", "gb200_nvl72")
WORKLOADS = {"decode": Workload("decode", context=16384),
             "prefill": Workload("prefill", context=2048, ttft_slo_ms=2000.0),
             # a continuous-batching step (lts.serving.serve): decodes plus a prefill chunk in one pass
             "mixed": Workload("mixed", context=3000, tpot_slo_ms=1e9, isl=2048, osl=512,
                               step_tokens=8192, cohort_base=3.0, cohort_share=0.07),
             "prefill-first": Workload("mixed", context=3000, tpot_slo_ms=1e9, isl=3000, osl=64,
                                       step_tokens=4096, mixed=False),
             # SGLang's DP ranks share the budget: 4096 / ep each, less than a prompt at ep > 1
             # (a rank's step holds a chunk of it, not the whole prompt: issue 33)
             "prefill-first-shared": Workload("mixed", context=3000, tpot_slo_ms=1e9, isl=3000,
                                              osl=64, step_tokens=4096, mixed=False,
                                              budget_per_rank=False),
             # a prompt longer than the budget a step leaves beside its decodes
             "mixed-long": Workload("mixed", context=13000, tpot_slo_ms=1e9, isl=12000,
                                    osl=512, step_tokens=8192, cohort_base=3.0,
                                    cohort_share=0.07),
             # a prefill after a cached prefix of 1,500 of 2,048 tokens (prefix caching)
             "prefill-cached": Workload("prefill", context=2048, ttft_slo_ms=2000.0,
                                        cached=1500),
             # speculative decoding's verification step: 4 query tokens per sequence
             "decode-spec": Workload("decode", context=16384, query_tokens=4),
             # prefix caching (1,200 of 2,048 prompt tokens cached) with speculative decoding
             # (3 query tokens per decoder, 2.2 tokens a step): the chunks attend to the prefix
             "mixed-cached-spec": Workload("mixed", context=3000, tpot_slo_ms=1e9, isl=2048,
                                           osl=512, step_tokens=8192, cohort_base=3.0,
                                           cohort_share=0.07, cached=1200, query_tokens=3,
                                           tokens_per_step=2.2)}
PREFERRED = ("llama3.1-8b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b")   # dense GQA, MoE
# GQA, MLA MoE, and a checkpoint whose groups differ in format (MXFP4 experts, bf16 attention)
N_RANDOM = 80       # random strategies per synthetic model, topology and workload (18 runs of
                    # each model, mixed steps a third: 900 rows; 300 took 112 s of the suite's
                    # ~9 minutes, 120 about 63 s, 80 about 35 s with the reference's link rates
                    # computed once a strategy)
N_SHIPPED = 40      # per shipped model: a few rows check its shapes; the synthetic ones cover
                    # the same kinds (dense GQA, MoE, MLA) at full count
RTOL = 1e-9


def _shipped_models():
    names = shipped_names("models")
    chosen = [n for n in PREFERRED if n in names]
    return chosen or names[:3]


SYNTHETIC = {"moe-small": synthetic_moe, "mla-small": synthetic_mla, "dense-small": synthetic_dense,
             # two layer kinds: the reference walks each layer's own window
             "window-small": synthetic_window,
             # linear attention (Gated DeltaNet) and full attention layers
             "linear-small": synthetic_linear,
             # Mamba-2 and full attention layers
             "mamba-small": synthetic_mamba,
             # layers without an FFN (Nemotron-H's single-op blocks), non-gated MoE
             "nemotron-h-small": synthetic_nemotron_h,
             # a latent MoE (Nemotron 3 Super's moe_latent_size)
             "latent-moe-small": synthetic_latent_moe,
             # chunked local attention (Llama 4) and full attention layers
             "chunked-small": synthetic_chunked,
             # layer kinds with their own attention shapes (heads, KV heads, widths, k_eq_v)
             "shapes-small": synthetic_shapes,
             # a head-wise output gate (Step-3.7) with per-kind heads and dense layers
             "head-gate-small": synthetic_head_gate,
             # compressed attention (DeepSeek-V4: window, CSA, HCA) and hyper-connections
             "compressed-small": synthetic_compressed,
             # Kimi Delta Attention beside gated MLA, attention residuals, a latent MoE
             "kda-small": synthetic_kda,
             # layers without attention, FFNs of their own widths (Llama-Nemotron NAS)
             "nas-small": synthetic_nas,
             # the Mamba-2 mixers quantized in half their layers (Nemotron-3-Nano-NVFP4)
             "partly-quantized-small": synthetic_partly_quantized,
             # block-sparse attention (MiniMax-M3) beside full attention layers
             "block-sparse-small": synthetic_block_sparse,

             # EPLB with 8 redundant experts (24 slots), and uniform routing
             "moe-eplb-small": synthetic_moe_eplb, "moe-uniform-small": synthetic_moe_uniform}
MODEL_NAMES = _shipped_models() + list(SYNTHETIC)


def get_model(name):
    return SYNTHETIC[name]() if name in SYNTHETIC else load_model(name)


def close(a, b):
    return bool(np.isclose(a, b, rtol=RTOL, atol=0.0, equal_nan=True))


FIELDS = ("tokens_per_s_per_gpu", "tokens_per_s", "tpot_s", "ttft_s", "step_s", "memory_bytes",
          "gpus")


def compare(model, topo, work, rows, compat=KNOWN):
    """Mismatches [(row index, [(field, reference, vectorized)])] between the two evaluators."""
    res = evaluate(model, topo, work, rows)
    bad = []
    for i, row in enumerate(rows):
        want = ref.evaluate(model, topo, work, row, compat)
        # an unmatched `experts` pair is no strategy at all, nor are stages holding different
        # layer kinds: only the verdict is compared
        fields = () if "experts" in want["reasons"] or want["uneven_kinds"] else FIELDS
        diffs = [(f, want[f], float(getattr(res, f)[i])) for f in fields
                 if not close(want[f], getattr(res, f)[i])]
        got = res.reason_list(i)
        if want["uneven_kinds"]:   # refused as indivisible; the other reasons are the mean
            # layer's (lts) against the slowest stage's (the reference): not compared
            if bool(res.valid[i]) or "divisibility" not in got:
                diffs.append(("reasons", want["reasons"], got))
        elif want["valid"] != bool(res.valid[i]) or want["reasons"] != got:
            diffs.append(("reasons", want["reasons"], got))
        if diffs:
            bad.append((i, diffs))
    return bad


def report(rows, bad):
    i, diffs = bad[0]
    return (f"{len(bad)}/{len(rows)} strategies differ ({100 * len(bad) / len(rows):.1f}%); "
            f"first: {format_strategy(rows[i])}: " +
            "; ".join(f"{f}: reference {a!r} vs evaluate {b!r}" for f, a, b in diffs))


def test_reference_reasons_are_the_evaluators():
    assert ref.REASONS == REASONS


# ----------------------------------------------------------------------------------------------
# the Megatron row over coarse settings

COARSE = [(1, 1, 1, 1), (2, 1, 1, 8), (8, 1, 1, 64), (8, 2, 2, 256), (4, 8, 4, 512),
          (16, 1, 2, 32), (64, 1, 1, 4096), (8, 16, 4, 64), (1, 64, 1, 1024), (32, 4, 8, 128)]


@pytest.mark.parametrize("phase", WORKLOADS)
@pytest.mark.parametrize("topo_name", TOPOLOGIES)
@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_megatron_rows_match_reference(model_name, topo_name, phase):
    model, topo, work = get_model(model_name), load_topology(topo_name), WORKLOADS[phase]
    space = Space.for_model(model, topo.gpus)
    rows = []
    for tp, ep, pp, batch in COARSE:
        ep = ep if ep in space.ep else max(space.ep)
        pp = pp if pp in space.pp else max(v for v in space.pp if v <= max(pp, 1))
        rows.append(make_row(tp=tp, ep=ep, pp=pp, batch=batch))
    rows = np.stack(rows)
    bad = compare(model, topo, work, rows)
    assert not bad, report(rows, bad)


# ----------------------------------------------------------------------------------------------
# random strategies of the whole space

@pytest.mark.parametrize("phase", WORKLOADS)
@pytest.mark.parametrize("topo_name", TOPOLOGIES)
@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_random_strategies_match_reference(model_name, topo_name, phase):
    model, topo, work = get_model(model_name), load_topology(topo_name), WORKLOADS[phase]
    space = Space.for_model(model, topo.gpus)
    seed = sum(map(ord, model_name + topo_name + phase))      # stable across runs
    n = N_RANDOM if model_name in SYNTHETIC else N_SHIPPED
    n = n if work.phase != "mixed" else n // 3                  # mixed: lean, same walk
    rows = space.decode(space.sample(np.random.default_rng(seed), n))
    bad = compare(model, topo, work, rows)
    assert not bad, report(rows, bad)


def test_large_batches_are_evaluated_in_chunks_identically():
    """evaluate() walks more than cost.model.CHUNK rows in chunks: same numbers as small calls."""
    from lts.cost.model import CHUNK
    model, topo, work = synthetic_mla(), load_topology("h100_dgx"), WORKLOADS["decode"]
    space = Space.for_model(model, topo.gpus)
    rows = space.decode(space.sample(np.random.default_rng(1), CHUNK + 1000))
    whole = evaluate(model, topo, work, rows)
    parts = [evaluate(model, topo, work, rows[i:i + 4096]) for i in range(0, len(rows), 4096)]
    for f in FIELDS + ("valid", "reasons"):
        assert np.array_equal(getattr(whole, f), np.concatenate([getattr(r, f) for r in parts]),
                              equal_nan=True), f


@pytest.mark.parametrize("phase", ["decode", "prefill", "mixed"])
def test_fused_walk_is_bit_identical_to_the_op_walk(phase):
    """evaluate()'s fused lookups (lts.cost.walk.fuse) give the very floats of the per-op walk that
    breakdown records, over more than CHUNK rows: coarse rows grouped without a sort, and the
    batch walked in coarse-row order."""
    from lts.cost.model import CHUNK, FusedRows, group_coarse, tables_for
    model, topo, work = synthetic_moe(), load_topology("h100_dgx"), WORKLOADS[phase]
    space = Space.for_model(model, topo.gpus)
    rows = space.decode(space.sample(np.random.default_rng(5), CHUNK + 3000))
    tables, g = tables_for(model, topo, work, rows)
    cache = FusedRows.of(tables)
    assert not cache.worth(tables, g[:100])       # a few strategies: walked op by op
    cache.rows(tables, model, g)                  # every row fused: the fused walk
    fused = evaluate(model, topo, work, rows, tables=tables, coarse_index=g)
    walked = evaluate(model, topo, work, rows, return_walk=True)[0]
    for f in FIELDS + ("valid", "reasons"):
        assert np.array_equal(getattr(fused, f), getattr(walked, f), equal_nan=True), f
    # the same rows given in coarse-row order (walked as given, no sort): the same figures
    order = np.argsort(g, kind="stable")
    grouped = evaluate(model, topo, work, rows[order], tables=tables, coarse_index=g[order])
    for f in FIELDS + ("valid", "reasons"):
        assert np.array_equal(getattr(grouped, f), getattr(fused, f)[order], equal_nan=True), f
    coarse, index = group_coarse(rows)
    _, first, inverse = np.unique(coarse_of(rows), axis=0, return_index=True,
                                  return_inverse=True)
    assert np.array_equal(coarse, coarse_of(rows)[first]) and np.array_equal(index, inverse.ravel())


@pytest.mark.parametrize("op, code", [("attn_norm", 3), ("qkv", 3), ("out_proj", 4),
                                      ("embedding", -1), ("ffn2", 4)])
@pytest.mark.parametrize("n", [1, 40, PACK_ROWS + 5])
def test_choice_codes_an_op_does_not_take_are_refused(op, code, n):
    """The fused walk reads two bits per op: a code beyond an op's range is refused, whatever
    the path (a few rows walk op by op, many take the fused tables) and wherever the row is
    (``pack`` checks its rows a chunk at a time: here in the second chunk)."""
    from lts.specs.strategy import OP_COL
    model, topo = synthetic_moe(), load_topology("h100_dgx")
    rows = np.repeat(make_row(tp=2, batch=8)[None], n, axis=0)
    rows[-1, OP_COL[op]] = code
    with pytest.raises(ValueError, match=f"strategy row {n - 1}: choice {code} for {op}"):
        evaluate(model, topo, WORKLOADS["decode"], rows)


def test_no_strategies_give_an_empty_result():
    model, topo = synthetic_moe(), load_topology("h100_dgx")
    res = evaluate(model, topo, WORKLOADS["decode"], np.zeros((0, WIDTH), dtype=np.int64))
    assert len(res) == 0 and res.tokens_per_s_per_gpu.shape == (0,) and res.valid.dtype == bool


# ----------------------------------------------------------------------------------------------
# the collectives the reference inserts == those `lts estimate` reports (breakdown)

def _by_op(colls_ref, ops, with_bytes):
    want, got = defaultdict(float), defaultdict(float)
    for c in colls_ref:
        if c["kind"] != "send":
            key = (c["op"], c["kind"], c["group"]) + ((round(c["bytes"]),) if with_bytes else ())
            want[key] += c["time_s"] * c["count"]
    for op in ops:
        for c in op["collectives"]:
            if c["kind"] != "send":
                key = (op["name"], c["kind"], c["group"]) + ((round(c["bytes"]),) if with_bytes else ())
                got[key] += c["time_s"] * c["count"]
    return ({k: v for k, v in want.items() if v > 0}, {k: v for k, v in got.items() if v > 0})


@pytest.mark.parametrize("model_name", ["moe-small", "mla-small", "dense-small"])
def test_breakdown_collective_times_match_reference(model_name):
    model, topo, work = get_model(model_name), load_topology("h100_dgx"), WORKLOADS["decode"]
    space = Space.for_model(model, topo.gpus)
    rows = space.decode(space.sample(np.random.default_rng(7), 60))
    for row in rows:
        want, got = _by_op(ref.evaluate(model, topo, work, row, KNOWN)["collectives"],
                           breakdown(model, topo, work, row)[1], with_bytes=False)
        assert want.keys() == got.keys(), format_strategy(row)
        for k in want:
            assert close(want[k], got[k]), (format_strategy(row), k, want[k], got[k])


# regression (fixed): lts.cost.model.breakdown reports the bytes of the sampled-id all-gather after
# an LM head on T as 4*batch, while its time is costed for 4*lm_rows = 4*ceil(ceil(batch/pp)/ep)
# bytes
def test_breakdown_sampling_gather_bytes():
    model, topo, work = synthetic_moe(), load_topology("h100_dgx"), WORKLOADS["decode"]
    row = parse_strategy("tp=4,ep=4,pp=1,batch=256,lm_head=none,final_norm=0")
    want, got = _by_op(ref.evaluate(model, topo, work, row, KNOWN)["collectives"],
                       breakdown(model, topo, work, row)[1], with_bytes=True)
    assert ("lm_head", "all-gather", "tp", 256) in want      # 64 ids of 4 bytes per tp group
    assert want.keys() == got.keys()


# ----------------------------------------------------------------------------------------------
# known deviations from docs/design.md: each pinned by a minimal reproducer

def test_known_deviations_are_reference_switches():
    assert set(KNOWN) <= set(ref.COMPAT)


# regression (fixed): KV cache per GPU counts one micro-batch (ceil(batch/pp) sequences) per stage:
# cost.model._fill_attention kv = seqs*ctx*bytes with seqs per micro-batch, but a stage holds the KV
# cache of all pp micro-batches (docs/design.md §3 'batch share x context x layers per stage'), so
# memory is under-counted ~pp-fold and pp>1 strategies pass the memory check wrongly
def test_kv_cache_counts_every_microbatch():
    model, topo, work = synthetic_dense(), load_topology("h100_dgx"), WORKLOADS["decode"]
    rows = np.stack([make_row(batch=64), make_row(pp=2, batch=64)])
    res = evaluate(model, topo, work, rows)
    # pp=2 holds half the layers of all 64 sequences: its KV cache is half of pp=1's, not a quarter
    kv = [ref.evaluate(model, topo, work, r)["memory_bytes"] for r in rows]
    assert close(res.memory_bytes[0], kv[0])        # pp=1: both agree
    assert close(res.memory_bytes[1], kv[1])        # pp=2: lts counts one micro-batch only


# regression (fixed): cost.model.walk uses the MoE layer's FFN-output layout (lay['ffn_out'] = x)
# for the boundary after every layer, also after the dense_layers of a MoE model, whose `none` FFN2
# picks R or T from a differently sized intermediate (point inter_dense): here the dense layers end
# in T and their T->R all-gather into the next attn_norm is never charged
def test_dense_layers_of_a_moe_use_their_own_ffn_output_layout():
    model, topo = synthetic_moe(), load_topology("h100_dgx")
    work = Workload("decode", context=4096)
    rows = parse_strategy("tp=16,ep=1,pp=1,batch=1024,ffn2=none")[None]
    bad = compare(model, topo, work, rows, compat=set(KNOWN) - {"moe_layout_everywhere"})
    assert not bad, report(rows, bad)


# regression (fixed): cost.model._fill_ffn costs FFN1/FFN2 under `none` on T with rows/tp tokens per
# rank (pairs / s.p), while every other op on T (and the shared expert of the same op) uses whole
# sequences, ceil(seqs/tp) * tokens per sequence: with 2 sequences on tp=8 the busiest rank holds a
# whole sequence, not 2/8 of one, so prefill FFNs on T are under-costed 4x
def test_ffn_on_t_costs_whole_sequences():
    model, topo = synthetic_dense(), load_topology("h100_dgx")
    work = Workload("prefill", context=2048)
    rows = parse_strategy("tp=8,ep=1,pp=1,batch=2,ffn_norm=0,ffn1=none,ffn2=none", False)[None]
    bad = compare(model, topo, work, rows, compat=set(KNOWN) - {"ffn_fractional_t_rows"})
    assert not bad, report(rows, bad)
