"""Layers of different kinds (issue 22, item 1): sliding-window attention on every layer or on
some, read from a model TOML file and from a HuggingFace config.json; bytes and FLOPs per layer
in closed form below and above the window; a window never costs more than full attention; a
pipeline split that gives stages different kinds is refused; the exact solver equals brute
force on a model with two kinds. (The scalar reference walks each layer's own kind:
tests/test_costmodel_reference.py, model ``window-small``.)"""
import dataclasses
import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import model_specs, strategy_rows, synthetic_window, topologies
from lts.cli import cli
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import SpecError, load_model, load_topology, model_from_dict
from lts.specs.strategy import Space, coarse_of, make_row
from lts.specs.workload import Workload

H100 = load_topology("h100_dgx")
DATA = "tests/data/hf"


def dense(window=None, layer_types=None, layers=4):
    """synthetic_dense's shapes (16 heads of 64, 4 KV heads) with a window."""
    att = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64)
    if window is not None:
        att["sliding_window"] = window
    if layer_types is not None:
        att["layer_types"] = layer_types
    return model_from_dict(dict(name="w", source="test", layers=layers, hidden=1024, vocab=32000,
                                attention=att,
                                ffn=dict(kind="dense", gated=True, intermediate=4096)), "w.toml")


# ----------------------------------------------------------------------------------------------
# the representation

def test_layer_kinds_from_a_model_file():
    assert dense().kind_groups == ((None, 4),) and dense().layer_types == ()
    # every layer windowed: one kind, no per-layer list
    m = dense(window=1024)
    assert m.attention.window == 1024 and m.kind_groups == ((1024, 4),) and m.layer_types == ()
    # a pattern repeats over the layers; HF's one-entry-a-layer list is the same model
    m = dense(window=128, layer_types=["sliding_attention", "full_attention"])
    assert m.layer_windows == (128, None, 128, None)
    assert m.kind_groups == ((128, 2), (None, 2))
    assert m == dense(window=128, layer_types=["sliding_attention", "full_attention"] * 2)
    # every layer full: the window is never used
    assert dense(window=128, layer_types=["full_attention"]).kind_groups == ((None, 4),)


@pytest.mark.parametrize("att, key, message", [
    (dict(sliding_window=0), "attention.sliding_window", "0 must be > 0"),
    (dict(sliding_window="4k"), "attention.sliding_window", "'4k' is not an integer"),
    (dict(sliding_window=64, layer_types=["sliding_attention"] * 3), "attention.layer_types",
     "3 entries do not divide layers = 4 (expected one entry a layer, or a pattern that "
     "repeats)"),
    (dict(sliding_window=64, layer_types=["dilated_attention"]), "attention.layer_types",
     "'dilated_attention' is not one of 'full_attention', 'sliding_attention', "
     "'linear_attention', 'chunked_attention', 'mamba', 'no_attention', "
     "'block_sparse_attention' (lts cannot cost other attention kinds yet)"),
    (dict(layer_types=["chunked_attention", "full_attention"]), "attention.layer_types",
     "has chunked_attention layers but attention.chunk_size is not set"),
    (dict(chunk_size=64, layer_types=["sliding_attention", "full_attention"], sliding_window=8),
     "attention.chunk_size", "is set but attention.layer_types has no chunked_attention layers"),
    (dict(chunk_size=64), "attention.chunk_size",
     "is set but attention.layer_types has no chunked_attention layers"),
    (dict(chunk_size=0, layer_types=["chunked_attention"]), "attention.chunk_size",
     "0 must be > 0"),
    (dict(layer_types=["sliding_attention", "full_attention"]), "attention.layer_types",
     "has sliding_attention layers but attention.sliding_window is not set"),
    (dict(sliding_window=64, layer_types=[]), "attention.layer_types",
     "[] is not a list of strings (expected entries of 'full_attention', 'sliding_attention', "
     "'linear_attention', 'chunked_attention', 'mamba', 'no_attention', "
     "'block_sparse_attention')"),
])
def test_bad_layer_kinds_are_refused(att, key, message):
    data = dict(name="w", source="test", layers=4, hidden=1024, vocab=32000,
                attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, **att),
                ffn=dict(kind="dense", gated=True, intermediate=4096))
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "w.toml")
    assert str(e.value) == f"w.toml: {key}: {message}"


def hf(tmp_path, base, **changes):
    cfg = json.loads(open(f"{DATA}/{base}.json").read())
    cfg.update(changes)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return load_model(p)


def test_hf_sliding_window(tmp_path):
    # Mistral-7B-v0.1 config.json: "sliding_window": 4096 (huggingface.co/mistralai/
    # Mistral-7B-v0.1/blob/main/config.json); MistralConfig's default when the key is absent
    m = hf(tmp_path, "llama3.1-70b", model_type="mistral", sliding_window=4096)
    assert m.kind_groups == ((4096, 80),)
    m = hf(tmp_path, "llama3.1-70b", model_type="mistral")
    assert m.kind_groups == ((4096, 80),)
    assert hf(tmp_path, "llama3.1-70b", model_type="mistral",
              sliding_window=None).kind_groups == ((None, 80),)
    # Mixtral: null in its config, None by default
    assert load_model(f"{DATA}/mixtral-8x7b.json").kind_groups == ((None, 32),)
    # Qwen2/3 write a window they do not use (use_sliding_window false)
    assert load_model(f"{DATA}/qwen2-57b-a14b.json").kind_groups == ((None, 28),)
    # ... and when they do, the layers from max_window_layers on slide (Qwen2Config)
    m = hf(tmp_path, "qwen2-57b-a14b", use_sliding_window=True, sliding_window=4096,
           max_window_layers=20)
    assert m.layer_windows == (None,) * 20 + (4096,) * 8
    # a config's layer_types decides
    m = hf(tmp_path, "llama3.1-70b", model_type="mistral", sliding_window=512,
           layer_types=["sliding_attention", "full_attention"] * 40)
    assert m.kind_groups == ((512, 40), (None, 40))


def test_hf_bad_window_names_the_config_key(tmp_path):
    runner = CliRunner()
    for changes, want in [
        (dict(model_type="mistral", sliding_window=-1), "sliding_window: -1 must be > 0"),
        (dict(model_type="mistral", sliding_window=None, layer_types=["sliding_attention"] * 80),
         "sliding_window: null, but layer_types has sliding_attention layers (expected the "
         "window's size)"),
        (dict(model_type="qwen2", use_sliding_window=True, sliding_window=None),
         "sliding_window: missing (expected an integer: use_sliding_window is true)"),
        (dict(model_type="mistral", sliding_window=64, layer_types=["chunked_attention"] * 80),
         "layer_types: chunked_attention is not supported in a mistral config (lts reads "
         "chunked attention from llama4 only)"),
    ]:
        cfg = json.loads(open(f"{DATA}/llama3.1-70b.json").read())
        cfg.update(changes)
        p = tmp_path / "config.json"
        p.write_text(json.dumps(cfg))
        res = runner.invoke(cli, ["estimate", str(p), "h100_dgx", "--strategy", "tp=8"])
        assert res.exit_code == 1 and res.output == f"Error: {p}: {want}\n", res.output


# ----------------------------------------------------------------------------------------------
# closed forms: bytes and FLOPs of one layer's attention, below and above the window

W = 1024
HEADS, HEAD_DIM, KV_BYTES = 16, 64, 4 * 64 * 2       # one token's K (or V) in one layer, bf16


def scores(model, work):
    """(FLOPs, HBM bytes, resident KV of one layer) of one sequence on one GPU."""
    tab = build_tables(model, H100, work, coarse_of(make_row())[None])
    peak = H100.peak_for("bf16") * H100.compute_efficiency_for("bf16")
    hbm = H100.hbm_bandwidth_bytes_s * H100.memory_efficiency
    sl = SLOT["scores"]
    return (tab.compute_s[0, sl, MODE_NONE] * peak, tab.memory_s[0, sl, MODE_NONE] * hbm,
            tab.kv_layer_bytes[0, MODE_NONE, MODE_NONE])


@pytest.mark.parametrize("context", [512, W, 4096, 131072])
def test_decode_reads_and_holds_min_context_window(context):
    held = min(context, W)
    fl, by, cache = scores(dense(W), Workload("decode", context))
    assert fl == pytest.approx(2 * HEADS * HEAD_DIM * held, rel=1e-12)
    # K of the held tokens, the query in and the scores out
    assert by == pytest.approx(held * KV_BYTES + HEADS * HEAD_DIM * 2 * 2, rel=1e-12)
    assert cache == pytest.approx(held * 2 * KV_BYTES, rel=1e-12)
    assert kv.request_bytes(dense(W), context) == held * 4 * 2 * KV_BYTES


@pytest.mark.parametrize("context", [512, W, 4096])
def test_prefill_attends_min_position_window_keys(context):
    # query i attends to min(i, W) keys: (L+1)/2 on average below the window,
    # (W(W+1)/2 + (L-W)W)/L above; every key is written, read once and held in the step
    L = context
    mean = (L + 1) / 2 if L <= W else (W * (W + 1) / 2 + (L - W) * W) / L
    fl, by, cache = scores(dense(W), Workload("prefill", context))
    assert fl == pytest.approx(2 * HEADS * HEAD_DIM * L * mean, rel=1e-12)
    assert by == pytest.approx(L * KV_BYTES + L * HEADS * HEAD_DIM * 2 * 2, rel=1e-12)
    assert cache == pytest.approx(L * 2 * KV_BYTES, rel=1e-12)
    assert kv.mean_keys(W, float(L)) == pytest.approx(
        sum(min(i, W) for i in range(1, L + 1)) / L, rel=1e-12)


def test_mixed_chunks_read_their_window():
    # a prompt of 8192 tokens in 4 chunks of 2048: chunk j reads j chunks under full attention,
    # its own chunk and 1024 tokens before it (1.5 chunks) with the window
    assert kv.chunk_reads(None, np.array([4.0]), 8192) == pytest.approx(2.5)
    assert kv.chunk_reads(W, np.array([4.0]), 8192) == pytest.approx((1 + 1.5 * 3) / 4)
    assert kv.chunk_reads(8192, np.array([4.0]), 8192) == pytest.approx(2.5)


def test_two_kinds_cost_their_mean_layer():
    """Half the layers windowed: a layer's time, KV and FLOPs are the mean of the two kinds."""
    work = Workload("decode", 131072)
    half = scores(dense(W, ["sliding_attention", "full_attention"]), work)
    full, win = scores(dense(), work), scores(dense(W), work)
    for h, f, w in zip(half, full, win):
        assert h == pytest.approx((f + w) / 2, rel=1e-12)


def test_uneven_pipeline_split_is_refused():
    """8 layers alternating: pp 8 puts one kind on a stage, the other on the next."""
    model = synthetic_window()
    rows = np.array([make_row(pp=pp, batch=8) for pp in (1, 2, 4, 8)])
    res = evaluate(model, H100, Workload("decode", 4096), rows)
    assert res.reason_list(3) == ["divisibility"]
    assert all("divisibility" not in res.reason_list(i) for i in range(3))
    assert kv.even_split(model, np.array([1, 2, 4, 8])).tolist() == [True, True, True, False]


# ----------------------------------------------------------------------------------------------
# a window never costs more than full attention

@st.composite
def windowed(draw):
    """(full-attention model, the same with a window on a pattern of its layers)."""
    model = draw(model_specs())
    window = draw(st.sampled_from([1, 16, 500, 4096, 100000]))
    pattern = draw(st.sampled_from([("sliding_attention",), ("sliding_attention", "full_attention"),
                                    ("full_attention", "sliding_attention")]))
    if model.layers % len(pattern):
        pattern = ("sliding_attention",)
    types = tuple(pattern) * (model.layers // len(pattern))
    att = dataclasses.replace(model.attention, window=window)
    alike = len(set(types)) == 1
    return model, dataclasses.replace(model, attention=att, layer_types=() if alike else types)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_window_never_costs_more_than_full_attention(data):
    never_costs_more(data, *data.draw(windowed()))


def never_costs_more(data, full, other, works=()):
    """``other`` (some layers of ``full`` made cheaper) takes no longer a step and holds no
    more memory than ``full`` on any strategy that splits its layer kinds evenly."""
    topo = data.draw(topologies())
    work = data.draw(st.sampled_from([
        Workload("decode", 300), Workload("decode", 65536), Workload("prefill", 4096),
        Workload("mixed", context=3000, tpot_slo_ms=1e9, isl=2048, osl=512, step_tokens=1024,
                 cohort_base=3.0, cohort_share=0.07), *works]))
    rows = np.stack(data.draw(st.lists(strategy_rows(full, topo), min_size=1, max_size=8)))
    a, b = evaluate(full, topo, work, rows), evaluate(other, topo, work, rows)
    even = kv.even_split(other, rows[:, 2])
    for f in ("step_s", "memory_bytes"):
        x, y = getattr(a, f)[even], getattr(b, f)[even]
        assert np.all(y <= x * (1 + 1e-12)), f


# ----------------------------------------------------------------------------------------------
# the exact solver on two layer kinds

def brute_force(problem):
    sp = problem.space
    best = -np.inf
    fine = np.array(list(itertools.product(*[range(n) for n in sp.choices])))
    for c in itertools.product(*[range(len(v)) for v in sp.values]):
        idx = np.concatenate([np.tile(c, (len(fine), 1)), fine], axis=1)
        best = max(best, float(problem.score(problem.evaluate(idx, count=False)).max()))
    return best


# the workloads each layer kind's exact solver is checked on against brute force
EXACT_WORKLOADS = [Workload("decode", context=8192, tpot_slo_ms=20),
                   Workload("prefill", context=2048, ttft_slo_ms=300)]


@pytest.mark.parametrize("work", EXACT_WORKLOADS)
def test_exact_equals_brute_force_on_two_kinds(work):
    exact_equals_brute_force(synthetic_window(), work, pp=(1, 2, 8))


# the two problems each layer kind's exact solver is checked on against brute force
EXACT_WORKS = [Workload("decode", context=8192, tpot_slo_ms=20),
               Workload("prefill", context=2048, ttft_slo_ms=300)]


def exact_equals_brute_force(model, work, pp):
    """The exact solver's best on a small space of ``model`` equals brute force's."""
    space = Space(tp=(1, 2, 4), ep=(1, 2), pp=pp, batch=(1, 64, 512),
                  choices=(2, 2, 2, 2, 2, 2, 3, 2, 3, 3, 2, 2), gpus=64)
    problem = Problem(model, H100, work, space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want)
    assert res.best_score == pytest.approx(want, rel=1e-12)
    check = evaluate(model, H100, work, res.best[None])
    assert check.valid[0] and check.tokens_per_s_per_gpu[0] == pytest.approx(want, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# gpt-oss-120b: alternating window and full attention, biases and sinks, MXFP4 experts

GPT_OSS = f"{DATA}/gpt-oss-120b.json"     # a copy of openai/gpt-oss-120b's config.json


def strip(m):
    return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                               active_params_published=0.0)


def test_gpt_oss_config_and_shipped_file_agree_with_the_published_counts():
    from lts.specs import attention_params, param_counts
    m = load_model("gpt-oss-120b")
    assert strip(m) == strip(load_model(GPT_OSS))
    assert m.kind_groups == ((128, 18), (None, 18))
    assert m.precision.weights == "mxfp4" and "experts" not in m.precision.unquantized
    # q, k, v, o biases and one sink logit per head, in every layer
    assert attention_params(m)["bias"] == (64 + 2 * 8) * 64 + 2880 + 64
    p = param_counts(m)
    # model card (huggingface.co/openai/gpt-oss-120b; arXiv 2508.10925 Table 1): 116.83B total,
    # 5.13B active per token without the embedding (lts counts the embedding as active)
    assert abs(p["params_total"] / 116.83e9 - 1) < 0.02
    assert abs((p["params_active"] - m.vocab * m.hidden) / 5.13e9 - 1) < 0.02


def test_gpt_oss_hf_defaults(tmp_path):
    """GptOssConfig's defaults: layer_types alternate from a sliding first layer, window 128,
    attention_bias true; no torch_dtype: bf16."""
    m = hf(tmp_path, "gpt-oss-120b", layer_types=None)
    assert m.layer_windows[:4] == (128, None, 128, None) and m.precision.activations == "bf16"
    cfg = json.loads(open(GPT_OSS).read())
    for k in ("layer_types", "sliding_window", "attention_bias"):
        del cfg[k]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert strip(load_model(p)) == strip(load_model(GPT_OSS))


def test_bias_and_sinks_are_gqa_only():
    data = dict(name="w", source="test", layers=4, hidden=1024, vocab=32000,
                attention=dict(kind="mla", heads=16, kv_heads=16, head_dim=96, kv_lora_rank=256,
                               qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64,
                               sinks=True),
                ffn=dict(kind="dense", gated=True, intermediate=4096))
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "w.toml")
    assert str(e.value) == "w.toml: attention.sinks: true is not supported with mla attention " \
                           "(gqa only)"


def test_gpt_oss_at_128k_holds_half_the_kv_of_full_attention():
    """The issue's figure: gpt-oss-120b at 131,072 tokens of context against the same model with
    every layer full attention: half the layers hold 128 tokens, so about half the KV bytes,
    and a decode step reads about half the cache."""
    m = load_model("gpt-oss-120b")
    full = dataclasses.replace(m, attention=dataclasses.replace(m.attention, window=None),
                               layer_types=())
    ctx = 131072
    per_token = 8 * 64 * 2 * 2                               # K and V, bf16, one layer
    assert kv.request_bytes(full, ctx) == 36 * ctx * per_token          # 9 GiB
    assert kv.request_bytes(m, ctx) == (18 * ctx + 18 * 128) * per_token
    assert kv.request_bytes(m, ctx) / kv.request_bytes(full, ctx) == pytest.approx(0.5, abs=1e-3)
    topo = load_topology("h200_dgx")
    row = make_row(tp=8, batch=64)[None]
    a, b = (evaluate(x, topo, Workload("decode", ctx), row) for x in (m, full))
    assert a.valid[0] and b.valid[0]
    assert a.memory_bytes[0] < b.memory_bytes[0] and a.tpot_s[0] < b.tpot_s[0]


# ----------------------------------------------------------------------------------------------
# chunked local attention (Llama 4): a query attends to the keys of its own chunk only

C = 512


def chunked(layer_types=("chunked_attention",), layers=4):
    """synthetic_dense's shapes with chunked attention of C tokens on a pattern of layers."""
    return model_from_dict(dict(
        name="c", source="test", layers=layers, hidden=1024, vocab=32000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, chunk_size=C,
                       layer_types=list(layer_types)),
        ffn=dict(kind="dense", gated=True, intermediate=4096)), "c.toml")


def test_chunked_layers_from_a_model_file():
    from lts.specs.model import Chunk
    m = chunked(["chunked_attention"] * 3 + ["full_attention"], layers=8)
    assert m.attention.chunk == C
    assert m.kind_groups == ((Chunk(C), 6), (None, 2))
    # every layer chunked stays a layer kind (not a sliding window of C)
    assert chunked().layer_windows == (Chunk(C),) * 4


@pytest.mark.parametrize("context, held", [(1, 1), (300, 300), (C, C), (C + 1, 1),
                                           (3 * C + 7, 7), (131072, C), (131071, C - 1)])
def test_chunked_decode_holds_and_reads_the_current_chunk(context, held):
    # the token at context c holds and reads ((c - 1) mod C) + 1 keys
    fl, by, cache = scores(chunked(), Workload("decode", context))
    assert fl == pytest.approx(2 * HEADS * HEAD_DIM * held, rel=1e-12)
    assert by == pytest.approx(held * KV_BYTES + HEADS * HEAD_DIM * 2 * 2, rel=1e-12)
    assert cache == pytest.approx(held * 2 * KV_BYTES, rel=1e-12)
    assert kv.request_bytes(chunked(), context) == held * 4 * 2 * KV_BYTES


@pytest.mark.parametrize("context", [100, C, C + 1, 1500, 4096])
def test_chunked_prefill_attends_its_chunk(context):
    # L = qC + r: (q C(C+1)/2 + r(r+1)/2) / L keys a query on average
    L = context
    q, r = divmod(L, C)
    mean = (q * C * (C + 1) / 2 + r * (r + 1) / 2) / L
    assert mean == pytest.approx(sum((i - 1) % C + 1 for i in range(1, L + 1)) / L, rel=1e-12)
    assert kv.mean_keys(kv.Chunk(C), float(L)) == pytest.approx(mean, rel=1e-12)
    fl, by, cache = scores(chunked(), Workload("prefill", context))
    assert fl == pytest.approx(2 * HEADS * HEAD_DIM * L * mean, rel=1e-12)
    assert cache == pytest.approx(L * 2 * KV_BYTES, rel=1e-12)


def test_chunked_mixed_reads_at_most_a_window_of_the_chunk():
    assert kv.chunk_reads(kv.Chunk(1024), np.array([4.0]), 8192) == \
        pytest.approx(kv.chunk_reads(1024, np.array([4.0]), 8192))


@st.composite
def chunked_pairs(draw):
    """(full-attention model, the same with chunked attention on a pattern of its layers)."""
    model = draw(model_specs(attention=("gqa",)))
    size = draw(st.sampled_from([1, 16, 500, 4096, 8192]))
    pattern = draw(st.sampled_from([("chunked_attention",),
                                    ("chunked_attention",) * 3 + ("full_attention",),
                                    ("full_attention", "chunked_attention")]))
    if model.layers % len(pattern):
        pattern = ("chunked_attention",)
    types = tuple(pattern) * (model.layers // len(pattern))
    att = dataclasses.replace(model.attention, chunk=size)
    return model, dataclasses.replace(model, attention=att, layer_types=types)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_chunked_attention_never_costs_more_than_full_attention(data):
    full, chk = data.draw(chunked_pairs())
    never_costs_more(data, full, chk, works=(Workload("decode", 70001),))
    for c in (1, 4095, 4096, 131072):
        assert kv.request_bytes(chk, c) <= kv.request_bytes(full, c)


# ----------------------------------------------------------------------------------------------
# MoE on every n-th layer (Llama 4 Maverick's interleave_moe_layer_step 2), dense FFNs between

def interleaved(every=2, layers=8, **ffn):
    ffn = dict(kind="moe", gated=True, experts=8, top_k=1, expert_intermediate=512,
               shared_experts=1, moe_every=every, intermediate=2048, **ffn)
    return model_from_dict(dict(name="i", source="test", layers=layers, hidden=1024,
                                vocab=32000, attention=dict(kind="gqa", heads=16, kv_heads=4,
                                                            head_dim=64), ffn=ffn), "i.toml")


def test_moe_every_nth_layer_counts():
    from lts.specs import param_counts
    m = interleaved(2)
    # layer i is MoE when i mod 2 == 1 (Llama4TextConfig's moe_layers)
    assert m.layer_moe == (False, True) * 4 and m.moe_layers == 4 and m.dense_ffn_layers == 4
    h = 1024
    attn = h * (16 * 64) * 2 + h * (4 * 64) * 2
    moe_total = 8 * 3 * h * 512 + 3 * h * 512 + h * 8
    moe_active = 1 * 3 * h * 512 + 3 * h * 512 + h * 8
    dense = 3 * h * 2048
    embed = 2 * 32000 * h + h
    c = param_counts(m)
    assert c["params_total"] == 8 * (attn + 2 * h) + 4 * (dense + moe_total) + embed
    assert c["params_active"] == 8 * (attn + 2 * h) + 4 * (dense + moe_active) + embed
    assert interleaved(1).moe_layers == 8 and interleaved(4).layer_moe == (False,) * 3 + (True,) \
        + (False,) * 3 + (True,)


@pytest.mark.parametrize("changes, key, message", [
    (dict(every=3), "ffn.moe_every", "3 does not divide layers = 8"),
    (dict(dense_layers=1), "ffn.moe_every",
     "with ffn.dense_layers is not supported (lts costs one of the two patterns)"),
    (dict(every=0), "ffn.moe_every", "0 must be > 0"),
])
def test_bad_moe_every_is_refused(changes, key, message):
    with pytest.raises(SpecError) as e:
        interleaved(**changes)
    assert str(e.value) == f"i.toml: {key}: {message}"


def test_moe_every_costs_the_dense_and_moe_layers():
    """Alternating dense and MoE: a pp whose stages would hold different numbers of MoE layers
    (pp 8: one layer a stage) is refused as indivisible, the others costed (each stage's dense
    and MoE layers: cost.model.dense_in_stage; the reference walks each layer's own FFN)."""
    work = Workload("decode", 4096)
    rows = np.array([make_row(pp=pp, batch=8) for pp in (1, 2, 4, 8)])
    res = evaluate(interleaved(2), H100, work, rows)
    assert res.reason_list(3) == ["divisibility"]
    assert all(res.valid[:3])
    assert kv.even_split(interleaved(2), np.array([1, 2, 4, 8])).tolist() == [True] * 3 + [False]
    assert kv.even_split(interleaved(4), np.array([1, 2, 4])).tolist() == [True, True, False]


def test_exact_equals_brute_force_on_llama4_kinds():
    """Chunked and full attention, MoE on every other layer (synthetic_chunked)."""
    from generators import synthetic_chunked
    exact_equals_brute_force(synthetic_chunked(), Workload("decode", context=8000,
                                                            tpot_slo_ms=20), pp=(1, 2, 8))
