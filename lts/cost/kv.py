"""The per-request state a layer keeps: bytes of KV cache per token, per request, and the tokens
held at a context. The one place that says how much memory a request's cache takes (issue 21):
the op tables (``tables``: the cache each attention op reads and holds, hence every strategy's
memory and the serve loop's KV capacity), the disaggregated pools' KV transfer (``disagg``) and
the exact solver's proof (``exact._Exact``) all take it from here.

**Layer kinds.** A layer attends to the whole context (full attention) or to a sliding window of
the last ``window`` tokens (``ModelSpec.layer_windows``; ``kind_groups`` groups identical
layers). A windowed layer holds and reads min(context, window) tokens when decoding; a prefill
writes and reads every token of its prompt, each query attending to min(position, window) keys
(``mean_keys``). The tables cost one layer of each kind and weight it by its share of the
layers, which is what a pipeline stage holds when the kinds split evenly over the stages
(``even_split``; an uneven split is refused as indivisible). **A kind may have its own
attention shape** (``AttentionSpec.kinds``: Gemma 4's full layers 512-wide heads with fewer KV
heads, MiMo-V2-Flash's sliding layers more KV heads): ``kind_token_bytes`` gives each kind's
bytes per token, ``layer_token_bytes`` each layer's, and the tables cost each kind's cache at its
own bytes (so does ``request_bytes``); ``uniform`` says whether every layer keeps the same bytes,
and ``token_bytes`` (the one size of a uniform model) refuses a model whose layers differ.

**Chunked local attention** (Llama 4's chunked_attention layers; a ``specs.model.Chunk`` of C
tokens in ``layer_windows``): the context is cut into chunks of C tokens and a query attends
only to the keys of its own chunk, from the chunk's start to itself. The cost model works at a
context (a decode step of sequences at ``context`` tokens, as for a window), so a decode token
at context c (the c-th token) holds and reads the tokens of its current chunk, ((c - 1) mod C)
+ 1 of them, C at any multiple of C, at most min(c, C) (vLLM's ChunkedLocalAttentionSpec frees
the blocks before the current chunk); a prefill writes and reads its whole prompt, query i
attending to ((i - 1) mod C) + 1 keys (``mean_keys``: with L = qC + r, (q C(C+1)/2 + r(r+1)/2)/L);
a mixed step's prefill chunk reads at most its own tokens and the C before it, costed as a
window of C (``chunk_reads``: an upper bound, exact when the prefill chunks are C long).

**Sparse attention** (DeepSeek Sparse Attention, DeepSeek-V3.2-Exp and GLM-5; ``AttentionSpec
.sparse``): a lightning indexer of index_heads heads of index_head_dim scores every earlier
token for each query (2 index_heads index_head_dim FLOPs per query per key, fp8), and MLA
attends to the index_topk best only. A layer holds the MLA latent of every token plus the
indexer's key of every token (``index_token_bytes``); a decode step reads the indexer keys of
the whole context and the latents of min(context, index_topk) selected keys
(``selected_tokens``); a prefill query i attends to min(i, index_topk) keys (``mean_keys`` with
index_topk for the window) and the step reads its whole prompt's latents, as a window does.
A layer whose ``indexer_types`` entry is "shared" (GLM-5.2) runs no indexer and holds no indexer
keys: it attends over the top-k an earlier full layer picked, at the same MLA cost; such layers
are a kind of their own (``ModelSpec.attention_kinds``), and a pipeline split must give every
stage the same number of indexer layers (``even_split``).

**Linear attention** (``LINEAR`` layers, Gated DeltaNet: ``specs.LinearAttentionSpec``) keeps no
KV cache: each request holds a fixed state per layer (``state_bytes``: value_heads x key_head_dim
x value_head_dim in the state dtype, plus the causal conv1d's last conv_kernel - 1 inputs of its
conv_channels), the same at any context. It is a layer kind of its own (the tables cost its own
ops and weight them by its share of the layers; ``layer_token_bytes`` lists the attention layers
only); ``request_bytes`` adds its state to the attention layers' KV.

**Compressed attention** (DeepSeek-V4, attention kind "compressed"; a ``specs.model.Compressed``
marker of ratio r in ``layer_windows``, or the plain window on a layer of ratio 0): every layer
keeps the last ``window`` tokens' entries and, at ratio r, one compressed entry per r tokens
(a pooled, normalized 512-wide vector that serves as key and value, like MLA's latent): a
request at context L holds min(L, w) + floor(L / r) entries (``held_tokens``). A query attends
to the window and to the compressed entries, all of them (HCA, ratio 128) or the ``topk`` its
indexer picks among them (CSA, ratio 4; ``read_tokens``); the indexer scores every compressed
entry with its own key cache (``index_token_bytes`` each, ``index_keys``). A prefill query i
attends to min(i, w) + floor(i / r) keys (capped at topk under CSA): ``mean_keys`` in closed
form (``floor_sum``). Each compressed layer also holds its compressor's decode state whatever
the context (``compressor_state_bytes``). An entry is ``kind_token_bytes``: bf16, or vLLM's
fp8_ds_mla layout under an fp8 cache (448 fp8 + 64 bf16 rotary + 8 scale bytes at head_dim 512).

**Block-sparse attention** (MiniMax-M3's MSA, the ``block_sparse_attention`` layers of a gqa
model; a ``specs.model.BlockSparse`` marker of blocks of B tokens and top-k blocks in
``layer_windows``): the layer holds every token's keys and values, as full attention does, and
an indexer key (index_head_dim in the model dtype, 256 bytes at 128 in bf16, whatever the KV
type: ``index_token_bytes``). For each query its indexer (index_heads heads of index_head_dim)
scores every cached token (2 index_heads index_head_dim FLOPs a key), a block's score is its
best token's, and each KV head attends to the keys of its k best blocks, its current block one
of them (sgl-project/sglang commit 0129e6e3 minimax_sparse_ops/minimax_sparse.py; MiniMax-AI/MSA
``exact_forced_tail_reference``: k - 1 ranked earlier blocks and the last one;
sparse_init_block 0, no sink block): the query at position i (its context, itself included)
attends to i keys while i <= kB, else (k - 1) B + ((i - 1) mod B) + 1 (``block_keys``: the
earlier blocks are whole, its own holds its tokens so far), at most kB. A decode step reads
those keys' K and V per KV head (``read_tokens``) and every indexer key; a prefill query i
attends to ``block_keys(i)`` (``mean_keys``, closed form) while the step reads its whole
prompt's K and V (each key is some query's choice) and its indexer scores i keys (full
attention's ``mean_keys``); a mixed step's chunk reads its prompt so far (the union of its
queries' choices: an upper bound, ``chunk_reads``).

**Mamba-2** (``mamba`` layers, ``specs.Mamba2Spec``) is the same shape of kind (the same
``LINEAR`` marker in ``layer_windows``, one recurrent kind a model): its state is heads x
head_dim x state_size in the state dtype (fp32) plus the conv1d's last conv_kernel - 1 inputs of
x, B and C (intermediate + 2 groups state_size channels) in the KV cache type.
"""
from __future__ import annotations

import numpy as np

from ..specs import ModelSpec
from ..specs.model import NOT_ATTENTION, BlockSparse, Chunk, Compressed, Mamba2Spec
from ..specs.units import DTYPE_BYTES


def layer_token_bytes(model: ModelSpec) -> list:
    """Bytes of one token's keys and values in each attention layer's cache, [(K, V)] over the
    layers that have one (linear-attention layers keep a fixed state instead: ``state_bytes``):
    GQA kv_heads x head_dim each (V: kv_heads x v_dim), in the shape of the layer's kind
    (``ModelSpec.kind_attention``); MLA one latent (kv_lora_rank + qk_rope_head_dim) that the
    values are read from (V: its kv_lora_rank part, the same bytes)."""
    if not model.attention.kinds:
        return [kind_token_bytes(model, None)] * model.attention_layers
    return [kind_token_bytes(model, w) for w in model.layer_windows if w not in NOT_ATTENTION]


def kind_token_bytes(model: ModelSpec, window) -> tuple:
    """(K, V) bytes of one token in one layer of the kind with ``layer_windows`` entry
    ``window``. Gemma 4's k_eq_v layers still cache V apart from K (transformers
    modeling_gemma4.py: V = v_norm(k_proj(x)), K is also k_norm'ed and rotated; both go to
    past_key_values.update)."""
    a, kvb = model.kind_attention(window), model.precision.kv_bytes
    if a.compressed:       # one entry, key and value (``latent``)
        e = compressed_entry_bytes(a, kvb)
        return e, e
    if a.kind == "mla":
        return (a.kv_lora_rank + a.qk_rope_head_dim) * kvb, a.kv_lora_rank * kvb
    k = a.kv_heads * a.head_dim * kvb
    return k, (a.kv_heads * a.v_dim * kvb if a.v_head_dim else k)


# vLLM's fp8_ds_mla cache entry for DeepSeek-V4 (vllm/v1/kv_cache_interface.py, "DeepseekV4:
# 448B NoPE + 128B RoPE + 8B fp8 scale = 584B/token"; vllm-project/vllm commit 0484480b
# vllm/models/deepseek_v4/attention.py row_width=584): the non-rotary part fp8 with one ue8m0
# scale per 64 values (7) and a pad byte, the rotary part bf16
FP8_ENTRY_SCALE_BLOCK = 64


def compressed_entry_bytes(a, kvb: float) -> float:
    """Bytes of one cache entry (a window token or a compressed entry) of compressed
    attention: head_dim in the KV type (bf16: 1024 at 512), or under an fp8 cache the
    non-rotary dims in fp8 with their scales and a pad byte, the rotary dims in bf16 (584)."""
    if kvb >= 2:
        return a.head_dim * kvb
    nope = a.head_dim - a.qk_rope_head_dim
    return nope * kvb + a.qk_rope_head_dim * 2.0 + -(-nope // FP8_ENTRY_SCALE_BLOCK) + 1


def compressor_state_bytes(model: ModelSpec, ratio: int) -> float:
    """Bytes of a compressed layer's compressor decode state per request, at any context: the
    fp32 kv_state and score_state of its window, 2 (c r) (c head_dim) x 4 bytes, c = 2 on the
    layers that run the indexer (overlapping windows), plus the indexer compressor's own at
    index_head_dim (vllm-project/vllm commit 01cc1d3e vllm/models/deepseek_v4/compressor.py
    CompressorStateCache, state_dim 2 coff head_dim; deepseek-ai/DeepSeek-V4-Flash
    inference/model.py Compressor.kv_state / score_state). 0 at ratio 0."""
    a = model.attention
    if not ratio:
        return 0.0
    indexed = a.sparse and ratio == a.index_ratio
    c = 2 if indexed else 1
    out = 2.0 * (c * ratio) * (c * a.head_dim) * 4.0
    if indexed:
        out += 2.0 * (2 * ratio) * (2 * a.index_head_dim) * 4.0
    return out


def floor_sum(length, r):
    """sum_{i=1..length} floor(i / r), elementwise: r q (q - 1) / 2 + q (length - q r + 1)
    with q = floor(length / r)."""
    length = np.asarray(length, dtype=np.float64)
    q = np.floor(length / r)
    return r * q * (q - 1.0) / 2.0 + q * (length - q * r + 1.0)


def read_tokens(window, context):
    """Entries a decoding query of a compressed layer attends to (and a step reads) at
    ``context``: the window's and the compressed entries, all (HCA) or at most topk (CSA); the
    keys a block-sparse layer's KV head attends to (``block_keys``); a layer of any other kind:
    ``held_tokens``."""
    if isinstance(window, BlockSparse):
        return block_keys(window, context)
    if not isinstance(window, Compressed):
        return held_tokens(window, context)
    comp = np.floor(np.asarray(context, dtype=np.float64) / window.ratio)
    if window.topk:
        comp = np.minimum(comp, float(window.topk))
    return np.minimum(context, float(window.window)) + comp


def block_keys(window, position):
    """Keys one KV head of a block-sparse layer (a ``BlockSparse`` marker) attends to for the
    query at ``position`` (1-based: the context it sees, itself included; module docstring):
    all of them while they fill at most topk blocks, else topk - 1 whole earlier blocks and its
    own block's tokens so far, (topk - 1) block + ((position - 1) mod block) + 1."""
    p = np.asarray(position, dtype=np.float64)
    b, k = float(window.block), float(window.topk)
    return np.where(p <= k * b, p, (k - 1.0) * b + _in_block(p, b))


def _in_block(position, size):
    """Tokens of its own block of ``size`` the query at ``position`` sees: ((position - 1) mod
    size) + 1 (chunked attention's chunk, block-sparse attention's current block)."""
    return np.mod(np.maximum(position, 1.0) - 1.0, float(size)) + 1.0


def _in_block_sum(n, size):
    """sum_{j=1..n} _in_block(j, size): q size (size + 1)/2 + r (r + 1)/2 with n = q size + r."""
    q, r = np.floor_divide(n, size), np.mod(n, size)
    return q * size * (size + 1) / 2 + r * (r + 1) / 2


def index_keys(window, context, decode: bool = True):
    """Compressed entries a CSA layer's indexer scores per query: every one, floor(context /
    r) when decoding, a prefill's mean over its queries (``floor_sum``); 0 on other layers."""
    if not isinstance(window, Compressed) or not window.topk:
        return 0.0
    if decode:
        return np.floor(np.asarray(context, dtype=np.float64) / window.ratio)
    length = np.asarray(context, dtype=np.float64)
    return floor_sum(length, window.ratio) / np.maximum(length, 1.0)


def index_keys_after(window, start, length):
    """``index_keys`` of a prefill's queries at positions start + 1 .. start + length (after a
    cached prefix, or a mixed step's chunk): their mean, by differences of ``floor_sum``."""
    if not isinstance(window, Compressed) or not window.topk:
        return 0.0
    start, length = np.asarray(start, dtype=np.float64), np.asarray(length, dtype=np.float64)
    r = window.ratio
    return (floor_sum(start + length, r) - floor_sum(start, r)) / np.maximum(length, 1.0)


def state_bytes(model: ModelSpec) -> tuple:
    """(recurrent, conv) bytes one request holds in one linear-attention layer, whatever its
    context: the delta rule's state, value_heads x key_head_dim x value_head_dim in the state
    dtype (``LinearAttentionSpec.state_dtype``), and the causal conv1d's state, the last
    conv_kernel - 1 inputs of its conv_channels in the KV cache type; (0, 0) without linear
    layers."""
    g = model.linear
    if g is None:
        return 0.0, 0.0
    if isinstance(g, Mamba2Spec):   # Mamba-2: heads x head_dim x state_size, conv over x, B, C
        rec = g.heads * g.head_dim * g.state_size * DTYPE_BYTES[g.state_dtype]
        return float(rec), float((g.conv_kernel - 1) * g.conv_channels * model.precision.kv_bytes)
    rec = g.value_heads * g.key_head_dim * g.value_head_dim * DTYPE_BYTES[g.state_dtype]
    return float(rec), float((g.conv_kernel - 1) * g.conv_channels * model.precision.kv_bytes)


def uniform(model: ModelSpec) -> bool:
    """Whether every layer keeps the same bytes per token and holds the same tokens (module
    docstring; ``held_tokens`` is one rule for all layers, so the bytes decide)."""
    return len(set(layer_token_bytes(model))) == 1


def require_uniform(model: ModelSpec, who: str) -> None:
    """Refuse (ValueError) a model whose layers keep different bytes: ``who`` costs one layer
    for all of them."""
    if not uniform(model):
        raise ValueError(f"{who} assumes every layer of a model keeps the same KV bytes per "
                         f"token; {model.name}'s layers do not")


def token_bytes(model: ModelSpec) -> tuple:
    """(K, V) bytes of one token in one layer's cache, the same in every layer (refused
    otherwise: ``require_uniform``)."""
    require_uniform(model, "the op tables")
    return layer_token_bytes(model)[0]


# The indexer's key cache: index_head_dim fp8 values and one fp32 scale per 128 of them, per
# token, whatever the KV dtype (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py, class Indexer:
# k_cache float8_e4m3fn [.., head_dim], k_scale_cache float32 [.., head_dim // block_size],
# block_size 128): 132 bytes a token at index_head_dim 128
INDEX_KEY_BYTES, INDEX_SCALE_BYTES, INDEX_SCALE_BLOCK = 1.0, 4.0, 128


# MiniMax-M3's indexer key: index_head_dim values in the model dtype whatever the KV type
# (SGLang v0.5.16 mem_cache/kv_cache_configurator.py, "index_dtype=model_dtype", as
# ai-dynamo/aiconfigurator 095f58a5 collector/sglang/collect_msa_module.py quotes it): 256 bytes
# a token at 128 in bf16


def index_token_bytes(model: ModelSpec) -> float:
    """Bytes of one token's indexer key in one layer (0 without sparse attention): DSA's fp8
    key and scales, a block-sparse layer's key in the activation type."""
    a = model.attention
    if a.block_sparse:
        return a.index_head_dim * model.precision.act_bytes
    if not a.sparse:
        return 0.0
    return a.index_head_dim * INDEX_KEY_BYTES \
        + -(-a.index_head_dim // INDEX_SCALE_BLOCK) * INDEX_SCALE_BYTES


def selected_tokens(model: ModelSpec, held, decode: bool = True):
    """Tokens whose MLA latent a step reads of the ``held`` ones: min(held, index_topk) when
    decoding with sparse attention (each query's top-k), all of them otherwise (a prefill reads
    its whole prompt: every key is some query's choice)."""
    a = model.attention
    return held if not a.sparse else held_tokens(a.index_topk, held, decode)


def latent(model: ModelSpec) -> bool:
    """Whether keys and values are read from one stored latent (MLA; compressed attention's
    entries), kept once, rather than two caches (GQA)."""
    return model.attention.kind in ("mla", "compressed")


def held_tokens(window, context, decode: bool = True):
    """Tokens of a sequence's context that a layer with sliding ``window`` (None: full
    attention) holds in its cache and reads in a step: min(context, window) when decoding; a
    prefill step writes and reads its whole prompt (every key is some query's neighbour)."""
    if isinstance(window, Compressed):     # the window and the compressed entries
        return np.minimum(context, float(window.window)) \
            + np.floor(np.asarray(context, dtype=np.float64) / window.ratio)
    if window is None or not decode or isinstance(window, BlockSparse):   # (every key held)
        return context
    if isinstance(window, Chunk):      # the current chunk (module docstring)
        return _in_block(context, window.size)
    return np.minimum(context, float(window))


def mean_keys(window, length):
    """Mean keys a query of a causal prompt of ``length`` tokens attends to: (length + 1)/2 under
    full attention; with a window w, query i attends to min(i, w) keys, a mean of
    (w(w+1)/2 + (length - w) w) / length once length > w."""
    full = (length + 1) / 2
    if window is None:
        return full
    if isinstance(window, Compressed):     # min(i, w) + floor(i / r), capped at topk (CSA)
        length = np.asarray(length, dtype=np.float64)
        r = window.ratio
        comp = floor_sum(length, r)
        if window.topk:                    # floor(i / r) >= topk from i = r topk on
            edge = r * window.topk - 1.0
            comp = np.where(length <= edge, comp, floor_sum(edge, r)
                            + (length - edge) * window.topk)
        return mean_keys(window.window, length) + comp / np.maximum(length, 1.0)
    if isinstance(window, Chunk):      # query i: ((i - 1) mod C) + 1 keys
        return _in_block_sum(length, float(window.size)) / np.maximum(length, 1.0)
    if isinstance(window, BlockSparse):    # query i: block_keys(i); i keys up to kB, then
        length = np.asarray(length, dtype=np.float64)   # (k - 1) B + its block's so far
        b, k = float(window.block), float(window.topk)
        first = np.minimum(length, k * b)
        past = length - first                           # the queries past the first kB
        return (first * (first + 1) / 2 + past * (k - 1.0) * b + _in_block_sum(past, b)) \
            / np.maximum(length, 1.0)
    w = float(window)
    return np.where(length <= w, full,
                    (w * (w + 1) / 2 + (length - w) * w) / np.maximum(length, 1.0))


def mean_keys_after(window, start, length):
    """Mean keys a query attends to over the queries at positions start + 1 .. start + length
    of a causal prompt: the tokens prefilled after a cached prefix of ``start`` (prefix caching;
    ``mean_keys`` at start 0), from ``mean_keys`` by differences of the sums."""
    start, length = np.asarray(start, dtype=np.float64), np.asarray(length, dtype=np.float64)
    total = (start + length) * mean_keys(window, start + length) \
        - start * mean_keys(window, start)
    return total / np.maximum(length, 1.0)


def chunk_reads(window, chunks, isl, cached=0.0):
    """Cache a prompt's prefill chunk reads, in chunks of its own size, averaged over the
    ``chunks`` chunks of the ``isl`` tokens a prompt prefills after ``cached`` tokens already in
    the cache (prefix caching): chunk j reads the prompt so far, the cached prefix and j chunks
    (a mean of cached / chunk + (chunks + 1)/2); with a window w no more than its own chunk and
    the w tokens before it, min(j + cached / chunk, 1 + w / chunk) with chunk = isl / chunks."""
    off = float(cached) * chunks / float(isl)           # the cached prefix in chunks
    full = (chunks + 1) / 2 + off
    if window is None or isinstance(window, BlockSparse):   # (block-sparse: the union of its
        return full                                       # queries' blocks, at most this)
    if isinstance(window, Compressed):
        # a chunk reads the window before it and its prompt's compressed entries so far (a
        # CSA chunk's queries' top-k choices together: all of them, an upper bound), in
        # chunks of its size: 1 + w / chunk + (the prompt so far) / r
        size = float(isl) / chunks
        return 1.0 + float(window.window) / size + full / window.ratio
    if isinstance(window, Chunk):      # at most a window of C (module docstring)
        window = window.size
    cap = 1.0 + float(window) * chunks / float(isl)      # 1 + w / (isl / chunks)
    m = np.clip(np.floor(cap - off), 0.0, chunks)       # chunks j with j + off <= cap
    return np.where(cap - off >= chunks, full,
                    (m * (m + 1) / 2 + m * off + (chunks - m) * cap) / chunks)


def even_split(model: ModelSpec, pp) -> np.ndarray:
    """Whether each of ``pp`` pipeline stages (contiguous blocks of layers / pp layers) holds
    every layer kind (and, with ffn.moe_every, MoE layers; layers without an FFN, none of them a
    stage's last) in the same number, [len(pp)] bools
    (True where every layer is alike; pp not dividing the layers is refused elsewhere)."""
    pp = np.atleast_1d(np.asarray(pp, dtype=np.int64))
    windows = model.layer_windows
    # MoE on every n-th layer (ffn.moe_every): the stages must hold the same number of MoE
    # layers too (the leading dense_layers are costed stage by stage: ``cost.model``)
    moe = model.layer_moe if model.ffn.moe_every > 1 else (False,) * model.layers
    # and the layers that run a sparse-attention indexer (attention.indexer_types)
    indexed = model.layer_indexed
    # layers without an FFN (model.no_ffn): the same number in every stage, and never a stage's
    # last layer (its output would leave the stage without the FFN boundary ``stage_max`` costs)
    has = model.layer_has_ffn
    # and the FFN widths of a dense model whose layers have their own (ffn.widths)
    widths = model.ffn.widths or (0,) * model.layers
    if len(set(windows)) == 1 and len(set(moe)) == 1 and len(set(indexed)) == 1 \
            and not model.no_ffn and len(set(widths)) == 1:
        return np.ones(len(pp), dtype=bool)
    out = np.zeros(len(pp), dtype=bool)
    for p in np.unique(pp):
        if model.layers % p:
            continue
        lp = model.layers // p
        stages = {(tuple(sorted(windows[i * lp:(i + 1) * lp], key=str)),
                   sum(moe[i * lp:(i + 1) * lp]), sum(indexed[i * lp:(i + 1) * lp]),
                   sum(has[i * lp:(i + 1) * lp]), has[(i + 1) * lp - 1],
                   tuple(sorted(widths[i * lp:(i + 1) * lp]))) for i in range(p)}
        out[pp == p] = len(stages) == 1 and next(iter(stages))[4]
    return out


def request_bytes(model: ModelSpec, tokens) -> float:
    """KV cache of a decoding request at ``tokens`` tokens of context over all layers, stored
    once (MLA: the latent only), each layer holding its kind's tokens (``held_tokens``), plus
    the sparse-attention indexer's key of every token (``index_token_bytes``; the layers that
    run one: DSA's, the block-sparse ones) and the
    linear-attention layers' fixed state (``state_bytes``)."""
    # the indexer's keys in the layers that run one (attention.indexer_types)
    indexed = sum(count * held_tokens(w, tokens) for (w, ix), count in model.attention_kinds
                  if ix)
    if model.attention.compressed:     # the indexer keys of the CSA layers' compressed entries
        indexed = sum(count * np.floor(tokens / w.ratio) for (w, ix), count
                      in model.attention_kinds if ix)
    rest = indexed * index_token_bytes(model) + model.linear_layers * sum(state_bytes(model)) \
        + sum(compressor_state_bytes(model, r) for r in model.attention.compress_ratios)
    if not uniform(model):     # each kind's tokens at its own bytes (AttentionSpec.kinds)
        return sum(count * held_tokens(w, tokens) * sum(kind_token_bytes(model, w))
                   for w, count in model.kind_groups if w not in NOT_ATTENTION) + rest
    k, v = token_bytes(model)
    held = sum(count * held_tokens(w, tokens) for w, count in model.kind_groups
               if w not in NOT_ATTENTION)
    return held * (k if latent(model) else k + v) + rest
