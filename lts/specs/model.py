"""The model's dataclasses and their checked construction from one parsed table, shared by the
two model formats: a model TOML file (``specs``) and a HuggingFace config.json (``hf``, which maps
its keys onto the same table so that every check below applies to it too).

Also the checked reading both formats and ``specs``' topology reader use: ``_Table`` (typed,
range-checked keys, unknown keys refused) and ``read_text`` (regular files of bounded size only).
Every bad input raises ``SpecError`` naming the file, the key, the value and what was expected.
Callers import these names from ``specs``, which re-exports them; this module exists so that
``hf`` can build a ModelSpec without importing ``specs`` (which dispatches config.json to ``hf``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import SpecError, cut_quoted, has_hidden, hidden_problem
from .units import DTYPE_BYTES, FORMAT_ALIASES, WEIGHT_FORMATS, weight_format


# ----------------------------------------------------------------------------------------------
# dataclasses

@dataclass(frozen=True)
class AttentionSpec:
    kind: str                 # "gqa" (MHA/GQA/MQA) or "mla"
    heads: int
    kv_heads: int
    head_dim: int             # per-head width of Q and K (mla: qk_nope + qk_rope)
    q_lora_rank: int = 0      # mla only (0: no low-rank query)
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0       # value head width (mla; gqa: 0 means head_dim, else its own width:
                              # MiMo-V2-Flash's 128 against q/k 192)
    window: int | None = None     # sliding window (tokens a query attends to, itself included)
                                  # of the layers that have one (ModelSpec.layer_types); None: none
    chunk: int | None = None      # chunked local attention (Llama 4 attention_chunk_size): a
                                  # chunked_attention layer's query attends only to the keys of
                                  # its own chunk of ``chunk`` tokens; None: no such layers
    bias: bool = False            # q, k, v and output projections with biases (gpt-oss)
    sinks: bool = False           # one learned sink logit per head (gpt-oss): counted in the
                                  # parameters; its softmax term (one per head and query) not costed
    output_gate: bool = False     # a sigmoid gate on the attention output from a second query-
                                  # wide projection (Qwen3-Next / Qwen3.5 attn_output_gate): q_proj
                                  # twice as wide (counted and costed); the gate's multiply not;
                                  # mla: g_proj [hidden, heads v_head_dim] (Kimi-K3's
                                  # mla_use_output_gate), split by heads
    head_gate: bool = False       # a sigmoid gate per query head on the attention output, from
                                  # its own projection g_proj [hidden, heads] (Step-3.7's
                                  # use_head_wise_attn_gate): q_proj's output one column wider
                                  # per head (counted and costed); the gate's multiply not
    # DeepSeek Sparse Attention (mla only; DeepSeek-V3.2, GLM-5): a lightning indexer of
    # index_heads heads of index_head_dim scores every earlier token, and each query attends to
    # the index_topk best (cost.kv module docstring); 0: dense attention
    index_topk: int = 0
    index_heads: int = 0
    index_head_dim: int = 0
    # which layers run their own indexer (sparse only): one entry a layer, "full" (its own
    # indexer) or "shared" (no indexer: it attends over the top-k an earlier full layer picked;
    # GLM-5.2's indexer_types); () every layer full
    indexer_types: tuple = ()
    # gqa: V made by k_proj (no v_proj weights); the cache still holds K and V apart (Gemma 4's
    # full-attention layers: attention_k_eq_v)
    k_eq_v: bool = False
    # DeepSeek-V4's compressed attention (kind "compressed"; cost.kv module docstring): one KV
    # head of head_dim (its last qk_rope_head_dim rotary), keys and values one vector; the query
    # through q_lora_rank; the output through o_groups low-rank projections of o_lora_rank (one
    # a group of heads), then [o_groups o_lora_rank, hidden]; each layer's compress ratio
    # (compress_ratios: 0 the sliding window alone; r the window and one compressed entry per r
    # tokens; the layers of index_ratio run the indexer and attend to its index_topk entries,
    # the others to all of them)
    o_lora_rank: int = 0
    o_groups: int = 0
    compress_ratios: tuple = ()
    index_ratio: int = 0
    # MiniMax-M3's block-sparse attention (MSA; gqa only; the layers of layer_types
    # "block_sparse_attention", a ``BlockSparse`` marker; cost.kv module docstring): each KV head
    # attends to the keys of sparse_topk_blocks blocks of sparse_block_size tokens, its current
    # block one of them, all keys while the context has no more blocks. The blocks are picked by
    # an indexer of index_heads query heads of index_head_dim over one key of index_head_dim a
    # token (the DSA fields above, which gqa reads for this indexer only; index_topk stays MLA's:
    # MSA picks blocks, not keys), kv_heads dividing index_heads (each KV head picks with its own
    # index heads). 0: no block-sparse layers
    sparse_block_size: int = 0
    sparse_topk_blocks: int = 0
    # gqa: the shapes of the layers of one kind where they differ from this one's
    # ((layer type, AttentionSpec), ...), from [attention.sliding] / [attention.full]
    # (docs/design.md §1, "Attention shapes by layer kind"); () every layer this shape
    kinds: tuple = ()

    @property
    def compressed(self) -> bool:
        """DeepSeek-V4's compressed attention (kind "compressed")."""
        return self.kind == "compressed"

    @property
    def block_sparse(self) -> bool:
        """MiniMax-M3's block-sparse attention on the block_sparse_attention layers."""
        return self.sparse_block_size > 0

    def of_type(self, layer_type: str) -> "AttentionSpec":
        """The attention shape of the layers of ``layer_type`` (FULL, SLIDING, CHUNKED)."""
        return dict(self.kinds).get(layer_type, self)

    @property
    def sparse(self) -> bool:
        """DeepSeek Sparse Attention: an indexer picks the index_topk keys each query attends to."""
        return self.index_topk > 0

    @property
    def q_out(self) -> int:
        """Columns of the query projection, split by heads under tp: the queries, Qwen3.5's
        query-wide output gate (``output_gate``) and Step-3.7's one gate a head (``head_gate``)
        (gqa)."""
        return self.heads * (self.head_dim * (2 if self.output_gate else 1) + self.head_gate)

    @property
    def v_dim(self) -> int:   # width of one value head
        return self.v_head_dim if self.kind == "mla" else (self.v_head_dim or self.head_dim)


@dataclass(frozen=True)
class FFNSpec:
    kind: str                 # "dense" or "moe"
    gated: bool               # SwiGLU: 3 matrices, else 2
    intermediate: int = 0     # width of dense layers (dense model, or the first dense_layers of a MoE)
    experts: int = 1
    top_k: int = 1
    expert_intermediate: int = 0
    shared_experts: int = 0
    shared_intermediate: int = 0   # total width of the shared expert(s)
    dense_layers: int = 0
    # MoE on every moe_every-th layer only (Llama 4's interleave_moe_layer_step: layer i is MoE
    # when i mod moe_every == moe_every - 1), the others dense FFNs of ``intermediate``; 1: every
    # layer from dense_layers on
    moe_every: int = 1
    # latent MoE (Nemotron 3 Super / Ultra, moe_latent_size): the routed experts run in a
    # ``latent``-wide space, their matrices [latent, expert_intermediate]; a shared
    # fc1_latent_proj [hidden -> latent] before dispatch and fc2_latent_proj [latent -> hidden]
    # after combine; the router and the shared expert stay at hidden width (transformers
    # modeling_nemotron_h.py NemotronHMoE / NemotronHExperts). 0: experts at hidden width
    latent: int = 0
    # a dense model whose layers have their own FFN widths (Llama-Nemotron NAS's ffn_mult): one
    # a layer (``intermediate`` their largest); () every layer ``intermediate``
    widths: tuple = ()

    # how it is deployed, not its shape (no model-file key: the --redundant-experts, --eplb and
    # --expert-load flags set them, ``specs.with_expert_placement``; docs/design.md §3 "Expert
    # load"): extra expert copies over the expert-parallel group (EPLB's redundant experts: vLLM
    # --eplb-config num_redundant_experts, SGLang --ep-num-redundant-experts, TensorRT-LLM
    # moe_config.load_balancer.num_slots = experts + this), the engine's expert-parallel load
    # balancer on or off, and the routed load the costs assume ("power_law": the kernel tables'
    # collector's skew, ``cost.expert_load``; "uniform": every expert alike)
    redundant_experts: int = 0
    eplb: bool = False
    expert_load: str = "power_law"

    @property
    def width_groups(self) -> tuple:
        """((width, layers), ...) of a dense model's FFNs in order of first appearance: one
        group of ``intermediate`` unless ``widths`` gives each layer its own."""
        if not self.widths:
            return ((self.intermediate, None),)
        counts = {}
        for w in self.widths:
            counts[w] = counts.get(w, 0) + 1
        return tuple(counts.items())

    @property
    def n_mats(self) -> int:
        return 3 if self.gated else 2

    @property
    def slots(self) -> int:
        """Expert copies over the expert-parallel group: the experts and the redundant ones."""
        return self.experts + self.redundant_experts

    def expert_width(self, hidden: int) -> int:
        """The width the routed experts read and write: ``latent``, else ``hidden``."""
        return self.latent or hidden


@dataclass(frozen=True)
class LinearAttentionSpec:
    """A Gated DeltaNet layer (Yang et al., arXiv 2412.06464; Qwen3-Next / Qwen3.5 ``linear_attn``):
    in_proj_qkvz [hidden, 2 key_dim + 2 value_dim] and in_proj_ba [hidden, 2 value_heads] (q, k,
    v, the output gate z, the write strength beta and the decay a), a depthwise causal conv1d of
    ``conv_kernel`` taps over the q, k, v channels, the delta rule over a value_heads x key_head_dim
    x value_head_dim state per request, a gated RMSNorm, out_proj [value_dim, hidden]. Key heads
    are shared by value_heads / key_heads value heads (like GQA)."""
    key_heads: int            # linear_num_key_heads
    value_heads: int          # linear_num_value_heads
    key_head_dim: int         # linear_key_head_dim
    value_head_dim: int       # linear_value_head_dim
    conv_kernel: int          # linear_conv_kernel_dim
    # Kimi Delta Attention (Kimi-K3's kda layers; sgl-project/sglang python/sglang/srt/models/
    # kimi_k3.py KimiK3DeltaAttention at 0000e9b4): q, k, v and the output gate g each from its
    # own projection (g full rank, [hidden -> value_dim], or through gate_rank), beta a head
    # (b_proj), and a decay per key channel through a low-rank f_a [hidden -> decay_rank], f_b
    # [decay_rank -> key_dim] in place of Gated DeltaNet's decay a head; the same recurrence
    # shape (delta rule over dk x dv a head, a causal conv over q, k, v) and state
    kda: bool = False
    decay_rank: int = 0
    gate_rank: int = 0        # KDA's output gate: 0 full rank, else g_a / g_b through this rank
    # The recurrent state's dtype: fp32. vLLM's MambaStateDtypeCalculator.
    # gated_delta_net_state_dtype keeps it in the model dtype unless mamba_ssm_cache_dtype says
    # otherwise, and vLLM's Qwen3.5 config hook sets it from the checkpoint's mamba_ssm_dtype
    # (float32 in Qwen3.5's config); the fla kernels accumulate the state in fp32 either way. The
    # conv state stays in the KV cache type. (vllm/model_executor/layers/mamba/mamba_utils.py)
    state_dtype: str = "fp32"

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv1d: q, k and v (2 key_dim + value_dim)."""
        return 2 * self.key_dim + self.value_dim

    def in_proj(self, hidden: int) -> dict:
        """The input projections as {"key": (weights, output width) split by key heads under
        tp, "value": (...) split by value heads, "repl": (...) replicated on every rank}: Gated
        DeltaNet's in_proj_qkvz and in_proj_ba (q, k by key heads; v, z, b, a by value heads:
        vLLM qwen3_next.py ColumnParallelLinear); KDA's q, k and the decay's f_b [decay_rank ->
        key_dim] by key heads, v, g (g_b through gate_rank) and b by value heads, f_a [hidden ->
        decay_rank] and g_a replicated (SGLang kimi_k3.py: fused_qkvg_proj column-parallel,
        f_a_proj replicated)."""
        kd, vd, vh, h = self.key_dim, self.value_dim, self.value_heads, hidden
        if not self.kda:
            return {"key": (h * 2 * kd, 2 * kd), "value": (h * (2 * vd + 2 * vh), 2 * vd + 2 * vh),
                    "repl": (0, 0)}
        dr, gr = self.decay_rank, self.gate_rank
        gate = h * vd if not gr else gr * vd
        return {"key": (h * 2 * kd + dr * kd, 3 * kd),
                "value": (h * vd + gate + h * vh, 2 * vd + vh),
                "repl": (h * dr + h * gr, dr + gr)}


@dataclass(frozen=True)
class Mamba2Spec:
    """A Mamba-2 layer (Dao and Gu, "Transformers are SSMs", arXiv 2405.21060; HF
    Mamba2Mixer / NemotronHMamba2Mixer, vLLM's MambaMixer2): in_proj [hidden, 2 intermediate +
    2 groups state_size + heads] (the gate z, the input x, B and C of n_groups groups, dt per
    head), a depthwise causal conv1d of ``conv_kernel`` taps over x, B and C, the selective state
    space model over a heads x head_dim x state_size state per request, a gated RMSNorm,
    out_proj [intermediate, hidden]; intermediate = heads x head_dim."""
    heads: int                # mamba_num_heads
    head_dim: int             # mamba_head_dim
    state_size: int           # ssm_state_size
    groups: int               # n_groups (B and C shared by heads / groups heads, like GQA)
    conv_kernel: int          # conv_kernel
    chunk_size: int = 256     # the SSD prefill's chunk (HF Mamba2Config.chunk_size default 256)
    # The SSM state's dtype: fp32. vLLM's MambaStateDtypeCalculator.mamba2_state_dtype
    # (_mamba_state_dtype) keeps the conv state in the KV cache dtype and the temporal state in
    # mamba_ssm_cache_dtype, "auto" (its default) meaning the conv's, the model dtype
    # (vllm/model_executor/layers/mamba/mamba_utils.py); SGLang's mamba2_state_dtype takes
    # SGLANG_MAMBA_SSM_DTYPE, else the config's mamba_ssm_dtype, else float32
    # (python/sglang/srt/configs/mamba_utils.py). lts costs fp32, SGLang's default and the
    # larger: under vLLM without --mamba-ssm-cache-dtype float32 the state is half of it.
    state_dtype: str = "fp32"

    @property
    def intermediate(self) -> int:
        return self.heads * self.head_dim

    @property
    def group_dim(self) -> int:
        """B and C together: 2 groups x state_size."""
        return 2 * self.groups * self.state_size

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv1d: x, B and C (intermediate + 2 groups state_size)."""
        return self.intermediate + self.group_dim

    @property
    def in_proj_out(self) -> int:
        return 2 * self.intermediate + self.group_dim + self.heads


# the op groups a checkpoint can leave unquantized (``PrecisionSpec.unquantized``); the op tables
# cost each group's weights in its own format
# ("ssm": the Mamba-2 layers' mixers, apart from the softmax attention layers': a checkpoint
# quantizes them on their own, NVIDIA-Nemotron-3.5-Lightning's Mamba in_proj/out_proj FP8 beside
# unquantized attention; Gated DeltaNet layers stay in "attention")
WEIGHT_GROUPS = ("embedding", "attention", "ssm", "router", "experts", "shared_experts",
                 "dense_ffn", "lm_head", "norm")


@dataclass(frozen=True)
class PrecisionSpec:
    weights: str = "bf16"          # a WEIGHT_FORMATS name (aliases resolved by the readers)
    kv_cache: str = "bf16"
    activations: str = "bf16"
    unquantized: tuple = ()        # WEIGHT_GROUPS kept in the activation type (the checkpoint's
    #                                exclude list: attention, router, lm_head, ...)
    formats: tuple = ()            # (group, format) pairs: groups quantized to another format
    #                                than ``weights`` (a ModelOpt MIXED_PRECISION checkpoint)
    quantized_share: tuple = ()    # (group, share) pairs: groups quantized (to format_of) in
    #                                that share of their layers only, the others left in the
    #                                activation type (NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4's
    #                                exclude list: its Mamba mixers in 6 of 23 blocks)

    def share_of(self, group: str) -> float:
        """The share of ``group``'s layers quantized to ``format_of(group)`` (1: all of them;
        the rest in the activation type)."""
        return dict(self.quantized_share).get(group, 1.0)

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight of the quantized groups, scales included (``WEIGHT_FORMATS``)."""
        return WEIGHT_FORMATS[self.weights][0]

    def format_of(self, group: str) -> str:
        """The format of one op group's weights: the activation type if the checkpoint left it
        unquantized, else its own format (``formats``) or ``weights``."""
        if group in self.unquantized:
            return self.activations
        return dict(self.formats).get(group, self.weights)

    def bytes_of(self, group: str) -> float:
        """Bytes per weight of ``group``, scales included: its format's, or a partly quantized
        group's mean over its layers (``quantized_share``)."""
        q = self.share_of(group)
        return q * WEIGHT_FORMATS[self.format_of(group)][0] \
            + (1.0 - q) * WEIGHT_FORMATS[self.activations][0]

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv_cache]

    @property
    def act_bytes(self) -> float:
        return DTYPE_BYTES[self.activations]

    @property
    def attention_dtype(self) -> str:
        """The type attention's math (scores, context, recurrent scans) runs in: the
        activations', not the weights' (an fp8 or NVFP4 checkpoint attends in bf16), or fp8 over
        an fp8 KV cache (TensorRT-LLM's fp8 context FMHA)."""
        return "fp8" if self.kv_cache == "fp8" else self.activations


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str
    layers: int
    hidden: int
    vocab: int
    attention: AttentionSpec
    ffn: FFNSpec
    precision: PrecisionSpec
    tie_embeddings: bool = False
    params_published: float = 0.0
    active_params_published: float = 0.0
    path: str = ""
    # the attention kind of each layer (LAYER_TYPES, HF's names) where the layers differ; () when
    # every layer is alike: sliding_attention if attention.window is set, else full_attention
    layer_types: tuple = ()
    # multi-token-prediction layers (DeepSeek's num_nextn_predict_layers): in the checkpoint,
    # counted apart (specs.param_counts' params_mtp), loaded and run only as the draft of
    # speculative decoding (serving.spec, --spec mtp)
    mtp_layers: int = 0
    # the linear_attention layers' shapes, or the mamba layers' (Mamba2Spec)
    linear: LinearAttentionSpec | Mamba2Spec | None = None
    # the MTP layers use the model's embedding and LM head (MiMo) instead of holding copies
    # (DeepSeek-V3); Qwen3-Next / Qwen3.5 share theirs too (specs.mtp_params)
    mtp_shared_embeddings: bool = False
    # the layers that have no FFN (ffn.no_ffn_layers, ascending indices): a token mixer alone,
    # its output all-reduced straight into the next layer's attn_norm (Nemotron-H's mixer blocks
    # not followed by an MLP or MoE block: docs/design.md §1); () when every layer has one
    no_ffn: tuple = ()
    # hyper-connections (DeepSeek-V4's mHC, hc_mult): the residual stream is hc_mult copies of
    # the hidden state, mixed into each block's input and out of its output (cost.tables
    # ``_fill_norm``); 1: a plain residual
    hc_mult: int = 1
    # attention residuals (Kimi-K3's attn_res_block_size: sgl-project/sglang
    # python/sglang/srt/layers/attn_residual.py AttnResidual at 01fd2332): a snapshot of the
    # residual stream a block of this many layers; each norm point mixes the snapshots so far and
    # the running stream by a softmax of their scores (cost.tables ``_fill_norm``); 0: none
    attn_res_block: int = 0
    # the context window: the most tokens (prompt and output together) one request may hold
    # (model file ``context_window``; a config.json's max_position_embeddings as vLLM derives
    # max_model_len from it, ``hf._context_window``); 0: not known, no request is refused
    context_window: int = 0

    def window_excess(self, tokens: int, what: str) -> str:
        """Why a request of ``tokens`` tokens (``what`` says which: "1,000,000 input + 1,024
        output tokens") does not fit the context window, "" when it does or none is known."""
        if not self.context_window or tokens <= self.context_window:
            return ""
        return (f"{what} is more than the context window of {self.name}, "
                f"{self.context_window:,} token{'s' if self.context_window != 1 else ''}")

    @property
    def is_moe(self) -> bool:
        return self.ffn.kind == "moe"

    def res_rows(self, final: bool = False) -> float:
        """Rows an attention-residual point mixes (``attn_res_block`` B): at a layer l's two
        points the floor(l / B) block snapshots and the running stream, their mean over the
        layers (the mean layer the tables cost); at the output point every block's, L // B + 1;
        0 without attention residuals."""
        b = self.attn_res_block
        if not b:
            return 0.0
        if final:
            return float(self.layers // b + 1)
        return sum(i // b + 1 for i in range(self.layers)) / self.layers

    @property
    def layer_windows(self) -> tuple:
        """Each layer's sliding window (None: full attention; LINEAR: a linear-attention layer,
        no KV cache; a ``Chunk``: chunked local attention; a ``BlockSparse``: block-sparse
        attention; a ``Compressed``: compressed attention), over the layers."""
        a = self.attention
        if a.compressed:
            return tuple(Compressed(r, a.window, a.index_topk if r == a.index_ratio else 0)
                         if r else a.window for r in a.compress_ratios)
        if not self.layer_types:
            return (self.attention.window,) * self.layers
        chunk = Chunk(self.attention.chunk) if self.attention.chunk else None
        blocks = BlockSparse(a.sparse_block_size, a.sparse_topk_blocks) if a.block_sparse \
            else None
        return tuple(self.attention.window if t == SLIDING else LINEAR if t in RECURRENT else
                     NO_ATTENTION if t == NO_ATTENTION else
                     chunk if t == CHUNKED else blocks if t == BLOCK_SPARSE else None
                     for t in self.layer_types)

    def kind_attention(self, window) -> AttentionSpec:
        """The attention shape of the layers of one kind, by its ``layer_windows`` entry (None:
        full attention, a ``Chunk``: chunked, a window: sliding): ``attention`` itself unless
        the model gives that kind its own (``AttentionSpec.kinds``)."""
        a = self.attention
        if not a.kinds:
            return a
        return a.of_type(FULL if window is None else CHUNKED if isinstance(window, Chunk)
                         else SLIDING)

    @property
    def bare_layers(self) -> int:
        """Layers without a token mixer (``NO_ATTENTION``): an FFN alone."""
        return sum(t == NO_ATTENTION for t in self.layer_types)

    @property
    def attention_layers(self) -> int:
        """Layers of softmax attention: neither linear attention nor Mamba-2 nor mixer-less."""
        return self.layers - self.linear_layers - self.bare_layers

    @property
    def linear_layers(self) -> int:
        """Layers of linear attention or Mamba-2 (``linear``: one of the two kinds a model); the
        others softmax attention."""
        return sum(t in RECURRENT for t in self.layer_types)

    @property
    def kind_groups(self) -> tuple:
        """The layers grouped by kind: ((window, count), ...) in order of first appearance
        (window None: full attention). One group when every layer is alike."""
        counts = {}
        for w in self.layer_windows:
            counts[w] = counts.get(w, 0) + 1
        return tuple(counts.items())

    @property
    def layer_indexed(self) -> tuple:
        """Whether each layer runs a sparse-attention indexer, over the layers: every layer of a
        sparse model but those whose attention.indexer_types entry is "shared"; the
        block_sparse_attention layers; none without sparse attention."""
        a = self.attention
        if a.block_sparse:
            return tuple(t == BLOCK_SPARSE for t in self.layer_types)
        if not a.sparse:
            return (False,) * self.layers
        if a.compressed:
            return tuple(r == a.index_ratio for r in a.compress_ratios)
        return tuple(t == "full" for t in a.indexer_types) or (True,) * self.layers

    @property
    def attention_kinds(self) -> tuple:
        """The softmax-attention layers grouped by (window, runs an indexer): (((window,
        indexed), count), ...) in order of first appearance; ``kind_groups`` split by
        ``layer_indexed`` (one group a window without shared-index layers)."""
        counts = {}
        for w, ix in zip(self.layer_windows, self.layer_indexed):
            if w not in NOT_ATTENTION:
                counts[(w, ix)] = counts.get((w, ix), 0) + 1
        return tuple(counts.items())

    @property
    def layer_has_ffn(self) -> tuple:
        """Whether each layer has an FFN (``no_ffn``: those that do not), over the layers."""
        none = set(self.no_ffn)
        return tuple(i not in none for i in range(self.layers))

    @property
    def layer_moe(self) -> tuple:
        """Whether each layer's FFN is the MoE (else a dense FFN of ffn.intermediate, or none:
        ``no_ffn``), over the layers: none of a dense model's, a MoE's from dense_layers on,
        every moe_every-th, never a layer without an FFN."""
        f, has = self.ffn, self.layer_has_ffn
        return tuple(self.is_moe and has[i] and i >= f.dense_layers
                     and i % f.moe_every == f.moe_every - 1 for i in range(self.layers))

    @property
    def moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        if self.no_ffn:     # (not with dense_layers or moe_every: model_from_dict refuses it)
            return self.layers - len(self.no_ffn)
        return (self.layers - self.ffn.dense_layers) // self.ffn.moe_every

    @property
    def dense_ffn_layers(self) -> int:
        """Layers with a dense FFN (a dense model's layers, a MoE's non-MoE ones), not counting
        the layers without an FFN."""
        return self.layers - self.moe_layers - len(self.no_ffn)

    @property
    def ffn_layers(self) -> int:
        """Layers with an FFN, dense or MoE."""
        return self.layers - len(self.no_ffn)


FULL, SLIDING, LINEAR = "full_attention", "sliding_attention", "linear_attention"
CHUNKED = "chunked_attention"
# a layer without a token mixer: its FFN alone (Llama-Nemotron NAS's attention.no_op: DeciLM
# runs neither input_layernorm nor self_attn there); lts's own name, and its own marker in
# layer_windows
NO_ATTENTION = "no_attention"
# attention.layer_types values (HF config.json's spelling; chunked_attention: transformers'
# Llama4TextConfig.layer_types, the layers no_rope_layers marks as RoPE layers)
# mamba: a Mamba-2 layer (Mamba2Spec); lts's own name (Nemotron-H's hybrid_override_pattern "M")
MAMBA = "mamba"
# block_sparse_attention: a layer of MiniMax-M3's block-sparse attention (``BlockSparse``); lts's
# own name (MiniMax-M3's config marks them in sparse_attention_config.sparse_attention_freq)
BLOCK_SPARSE = "block_sparse_attention"
LAYER_TYPES = (FULL, SLIDING, LINEAR, CHUNKED, MAMBA, NO_ATTENTION, BLOCK_SPARSE)
# the kinds with a fixed state per request and no KV cache: the LINEAR marker of layer_windows
RECURRENT = (LINEAR, MAMBA)
# the layer_windows markers of layers without softmax attention (no KV cache)
NOT_ATTENTION = (LINEAR, NO_ATTENTION)


@dataclass(frozen=True)
class Chunk:
    """The layer-kind marker (``ModelSpec.layer_windows``) of chunked local attention: the
    context is cut into chunks of ``size`` tokens and a query attends only to the keys of its own
    chunk (Llama 4; cost.kv module docstring). Not an int, so that code which knows windows only
    fails rather than costing it as one."""
    size: int

    def __str__(self) -> str:
        return f"chunk {self.size}"


@dataclass(frozen=True)
class Compressed:
    """The layer-kind marker (``ModelSpec.layer_windows``) of a layer of DeepSeek-V4's compressed
    attention with a compress ratio: it holds the last ``window`` tokens' entries and one
    compressed entry per ``ratio`` tokens, and a query attends to the window and to the
    compressed entries, all of them (``topk`` 0: heavily compressed attention, HCA) or the
    ``topk`` its indexer picks (compressed sparse attention, CSA) (cost.kv module docstring)."""
    ratio: int
    window: int
    topk: int = 0

    def __str__(self) -> str:
        return f"compressed {self.ratio}" + (f" top-{self.topk}" if self.topk else "")


@dataclass(frozen=True)
class BlockSparse:
    """The layer-kind marker (``ModelSpec.layer_windows``) of a layer of MiniMax-M3's block-sparse
    attention: it holds every token's keys and values (and its indexer's key), and each KV head
    attends to the keys of the ``topk`` blocks of ``block`` tokens its indexer picks, the current
    block one of them (cost.kv module docstring)."""
    block: int
    topk: int

    def __str__(self) -> str:
        return f"block-sparse top-{self.topk} of {self.block}"


# ----------------------------------------------------------------------------------------------
# a checked view of one TOML table

# One range per kind of value, so that absurd files are refused rather than costed:
MAX_COUNT = 65_536            # layers, heads, experts, GPUs per node, ... (the largest real: ~256)
MAX_WIDTH = 16_777_216        # hidden, vocab, intermediate and head widths, ranks (2^24)
MAX_NODES = 1_048_576         # node.count
MAX_NUMBER = 1e6              # every float key (TFLOP/s, GiB, GB/s, TB/s, us, efficiencies <= 1)
MIN_NUMBER = 1e-6             # every float key that must be positive (rates, sizes, efficiencies)
MAX_PARAMS = 1e15             # params_published
# context_window: 2^30 tokens (the largest shipped, 1,048,576; Llama-4-Scout-Instruct's
# max_position_embeddings 10,485,760 is under it)
MAX_WINDOW = 2**30

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class _Table:
    """Reads keys of one TOML table with type and range checks; reports unknown keys."""

    def __init__(self, data, file, prefix=""):
        self.data, self.file, self.prefix, self.used = data, file, prefix, set()

    def _key(self, key):
        return f"{self.prefix}{key}"

    def has(self, key):
        return key in self.data

    def get(self, key, typ, default=None, *, required=True, minimum=None, maximum=None,
            choices=None, positive=False):
        self.used.add(key)
        if key not in self.data:
            if required and default is None:
                raise SpecError(self.file, self._key(key), f"missing (expected {_TYPE_NAMES[typ]})")
            return default
        value = self.data[key]
        ok = (isinstance(value, typ) and not (typ is int and isinstance(value, bool))) or \
             (typ is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise SpecError(self.file, self._key(key),
                            f"{cut_quoted(value)} is not {_TYPE_NAMES[typ]}")
        if typ is float:
            value = float(value)
            if not math.isfinite(value):
                raise SpecError(self.file, self._key(key),
                                f"{cut_quoted(value)} is not a finite number")
            maximum = MAX_NUMBER if maximum is None else maximum
        if typ is int:
            maximum = MAX_COUNT if maximum is None else maximum
        if typ is str and has_hidden(value):
            raise SpecError(self.file, self._key(key), hidden_problem(value))
        if choices is not None and value not in choices:
            raise SpecError(self.file, self._key(key),
                            f"{cut_quoted(value)} is not one of {', '.join(map(repr, choices))}")
        if positive and value <= 0:
            raise SpecError(self.file, self._key(key), f"{cut_quoted(value)} must be > 0")
        if positive and typ is float and value < MIN_NUMBER:
            raise SpecError(self.file, self._key(key),
                            f"{cut_quoted(value)} must be >= {MIN_NUMBER:g}")
        if minimum is not None and value < minimum:
            raise SpecError(self.file, self._key(key), f"{cut_quoted(value)} must be >= {minimum}")
        if maximum is not None and value > maximum:
            big = float(maximum).is_integer() and (isinstance(maximum, int) or maximum >= 1000)
            limit = f"{int(maximum):,}" if big else repr(maximum)
            raise SpecError(self.file, self._key(key), f"{cut_quoted(value)} must be <= {limit}")
        return value

    def table(self, key, required=True):
        self.used.add(key)
        if key not in self.data:
            if required:
                raise SpecError(self.file, self._key(key), "missing table")
            return _Table({}, self.file, f"{self._key(key)}.")
        value = self.data[key]
        if not isinstance(value, dict):
            raise SpecError(self.file, self._key(key), f"{cut_quoted(value)} is not a table")
        return _Table(value, self.file, f"{self._key(key)}.")

    def array_of_tables(self, key):
        self.used.add(key)
        value = self.data.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise SpecError(self.file, self._key(key),
                            "missing (expected one or more [[%s]] tables)" % self._key(key))
        return [_Table(v, self.file, f"{self._key(key)}[{i}].") for i, v in enumerate(value)]

    def finish(self):
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise SpecError(self.file, self._key(unknown[0]), "unknown key")


MAX_FILE_BYTES = 64 * 2**20    # a model, topology or config.json file (the largest shipped: 8 KB)


def read_text(path: Path, expected: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's UTF-8 text, or one SpecError line saying why it cannot be read: only regular
    files (a FIFO would block, /dev/zero never ends) of at most ``max_bytes``."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise SpecError(path, "", "no such file") from None
    except OSError as e:
        raise SpecError(path, "", f"cannot read ({e.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError(path, "", f"is a folder, expected {expected}")
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(path, "", f"is not a regular file, expected {expected}")
    if info.st_size > max_bytes:
        raise SpecError(path, "", f"is {info.st_size:,} bytes, more than the {max_bytes:,} "
                                  f"expected of {expected}")
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise SpecError(path, "", f"cannot read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(path, "", "not a UTF-8 text file") from None
    return text[1:] if text.startswith("\ufeff") else text   # a byte-order mark (Windows editors)


TOO_DEEP = "nested too deeply (hundreds of levels of tables or arrays; a model or topology needs 2)"
# objects and arrays one JSON text may hold: parsed, each costs Python 64-250 bytes (64 MiB of
# '{"":{}},' took 2.2 GiB), where a config.json holds tens and a vLLM result with per-request
# latencies one list a request (1,000,000 at most: MAX_SIM_REQUESTS) and a few more
MAX_JSON_CONTAINERS = 2_000_000
# a JSON string (its brackets are none), or an opening bracket: the group
_STRING_OR_OPEN = re.compile(r'"(?:[^"\\]|\\.)*"|([\[{])')


def check_json_containers(path, where: str, text: str) -> None:
    """SpecError (``path``, ``where``) unless JSON ``text`` holds at most MAX_JSON_CONTAINERS
    objects and arrays, counted before parsing it, in C (where the brackets are more, its
    strings left out: 64 MiB of '{"":{}},' in 3 s and 0.3 GB here): every JSON reader's bound on
    memory (config.json, benchmark results, traces)."""
    count = text.count("{") + text.count("[")
    if count > MAX_JSON_CONTAINERS:      # each match's group: "" (a string) or "{" / "["
        found = _STRING_OR_OPEN.findall(text)
        count = len(found) - found.count("")
    if count > MAX_JSON_CONTAINERS:
        raise SpecError(path, where, f"holds {count:,} JSON objects and arrays, more than the "
                                     f"{MAX_JSON_CONTAINERS:,} lts reads (parsed, they would "
                                     "take gigabytes)")


class KeyTwiceError(ValueError):
    """A JSON object giving one key twice (``keys_once``): its ``args[0]``."""


def keys_once(pairs):
    """A JSON object's pairs -> dict (json.loads's ``object_pairs_hook``); KeyTwiceError for a
    key given twice (json alone keeps the last)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        raise KeyTwiceError(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return d


def parse_json(path, where: str, text: str, needs: str):
    """json.loads with every JSON reader's guards, each one SpecError line: a key given twice
    in one object, nesting past Python's stack (``needs``: how deep the file needs, e.g. "a
    trace line needs 1") and integers of thousands of digits. JSONDecodeError passes through:
    each reader words it."""
    try:
        return json.loads(text, object_pairs_hook=keys_once)
    except KeyTwiceError as e:
        raise SpecError(path, where, f"key {cut_quoted(e.args[0])} given twice in one object "
                                     "(which one is meant?)") from None
    except RecursionError:
        raise SpecError(path, where, f"nested too deeply (hundreds of levels of objects or "
                                     f"arrays; {needs})") from None
    except json.JSONDecodeError:
        raise
    except ValueError:            # Python refuses integers of more than 4300 digits
        raise SpecError(path, where, "invalid JSON (a number of thousands of digits)") from None


# ----------------------------------------------------------------------------------------------
# models

DTYPES = tuple(DTYPE_BYTES)
# the formats and their other names (units.FORMAT_ALIASES); a reader takes any case, "-" for "_"
FORMATS = tuple(WEIGHT_FORMATS) + tuple(FORMAT_ALIASES)


def _weight_format(p: _Table, key: str, text) -> str:
    """A format as a model file spells it (``units.weight_format``) -> its WEIGHT_FORMATS name;
    SpecError naming the key, listing what is accepted."""
    try:
        return weight_format(text)
    except ValueError as e:
        raise SpecError(p.file, p._key(key), str(e)) from None


def _unquantized(p: _Table) -> tuple:
    """precision.unquantized: a list of WEIGHT_GROUPS, each at most once (kept in order)."""
    p.used.add("unquantized")
    groups = p.data.get("unquantized", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise SpecError(p.file, p._key("unquantized"),
                        f"{cut_quoted(groups)} is not a list of strings (expected some of "
                        f"{', '.join(map(repr, WEIGHT_GROUPS))})")
    for g in groups:
        if g not in WEIGHT_GROUPS:
            raise SpecError(p.file, p._key("unquantized"),
                            f"{cut_quoted(g)} is not one of {', '.join(map(repr, WEIGHT_GROUPS))}")
    return tuple(g for g in WEIGHT_GROUPS if g in groups)


def _group_table(p: _Table, name: str, expected: str):
    """(group, value, its key) of each entry of the [precision] table ``name`` ({group = value}
    of WEIGHT_GROUPS; ``expected`` says what a value is, for the error)."""
    p.used.add(name)
    table = p.data.get(name, {})
    if not isinstance(table, dict):
        raise SpecError(p.file, p._key(name), f"{cut_quoted(table)} is not a table (expected "
                                              f"{{group = "
                                              f"{expected}, ...}})")
    for g, value in table.items():
        if g not in WEIGHT_GROUPS:
            raise SpecError(p.file, p._key(f"{name}.{g}"),
                            f"is not one of {', '.join(map(repr, WEIGHT_GROUPS))}")
        yield g, value, p._key(f"{name}.{g}")


def _quantized_share(p: _Table, unquantized: tuple) -> tuple:
    """precision.quantized_share: a table {group = share} of WEIGHT_GROUPS quantized in that
    share (0 < share < 1) of their layers only (a checkpoint whose exclude list names some of a
    group's layers), as (group, share) pairs in WEIGHT_GROUPS order."""
    out = {}
    for g, q, key in _group_table(p, "quantized_share", "share"):
        if g in unquantized:
            raise SpecError(p.file, key, "is set for a group precision.unquantized keeps whole")
        if g == "experts":
            raise SpecError(p.file, key, "is not supported for the routed experts (their grouped "
                                         "GEMM runs one format)")
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            raise SpecError(p.file, key, f"{cut_quoted(q)} is not a share between 0 and 1 "
                                         "(exclusive)")
        out[g] = float(q)
    return tuple((g, out[g]) for g in WEIGHT_GROUPS if g in out)


def _group_formats(p: _Table) -> tuple:
    """precision.formats: a table {group = format} of WEIGHT_GROUPS quantized to another format
    than precision.weights (a mixed-precision checkpoint), as (group, format) pairs in
    WEIGHT_GROUPS order."""
    out = {g: _weight_format(p, f"formats.{g}", fmt)
           for g, fmt, _ in _group_table(p, "formats", "format")}
    return tuple((g, out[g]) for g in WEIGHT_GROUPS if g in out)


def model_from_dict(data: dict, path) -> ModelSpec:
    t = _Table(data, path)
    name = t.get("name", str)
    source = t.get("source", str)
    layers = t.get("layers", int, positive=True)
    hidden = t.get("hidden", int, positive=True, maximum=MAX_WIDTH)
    vocab = t.get("vocab", int, positive=True, maximum=MAX_WIDTH)
    tie = t.get("tie_embeddings", bool, False)
    params_pub = t.get("params_published", float, 0.0, minimum=0, maximum=MAX_PARAMS)
    active_pub = t.get("active_params_published", float, 0.0, minimum=0, maximum=MAX_PARAMS)

    a = t.table("attention")
    kind = a.get("kind", str, choices=("gqa", "mla", "compressed"))
    heads = a.get("heads", int, positive=True)
    kv_heads = a.get("kv_heads", int, positive=True)
    head_dim = a.get("head_dim", int, positive=True, maximum=MAX_WIDTH)
    mla = {}
    if kind == "mla":
        w = dict(positive=True, maximum=MAX_WIDTH)
        mla = dict(q_lora_rank=a.get("q_lora_rank", int, 0, minimum=0, maximum=MAX_WIDTH),
                   kv_lora_rank=a.get("kv_lora_rank", int, **w),
                   qk_nope_head_dim=a.get("qk_nope_head_dim", int, **w),
                   qk_rope_head_dim=a.get("qk_rope_head_dim", int, **w),
                   v_head_dim=a.get("v_head_dim", int, **w))
        if mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"] != head_dim:
            raise SpecError(path, "attention.head_dim",
                            f"{head_dim} must equal qk_nope_head_dim + qk_rope_head_dim "
                            f"({mla['qk_nope_head_dim'] + mla['qk_rope_head_dim']})")
    if heads % kv_heads:
        raise SpecError(path, "attention.kv_heads",
                        f"{kv_heads} does not divide attention.heads = {heads}")
    if kind == "compressed":
        mla = _compressed(a, path, layers, heads, kv_heads, head_dim)
    window = a.get("sliding_window", int, 0, required=False, positive=a.has("sliding_window"),
                   maximum=MAX_WIDTH) or None
    chunk = a.get("chunk_size", int, 0, required=False, positive=a.has("chunk_size"),
                  maximum=MAX_WIDTH) or None
    layer_types = _layer_types(a, path, layers, window, chunk)
    if window is not None and not layer_types and SLIDING not in a.data.get("layer_types", [SLIDING]):
        window = None               # every layer full: the window is never used
    bias = a.get("bias", bool, False)
    sinks = a.get("sinks", bool, False)
    gate = a.get("output_gate", bool, False)
    head_gate = a.get("head_gate", bool, False)
    if kind == "mla" and head_gate:
        raise SpecError(path, "attention.head_gate", "true is not supported with mla attention "
                                                     "(gqa only)")
    if kind == "mla" and (bias or sinks):
        raise SpecError(path, "attention.bias" if bias else "attention.sinks",
                        "true is not supported with mla attention (gqa only)")
    if kind == "compressed" and (gate or head_gate or bias or chunk or layer_types):
        key = next(k for k, v in (("output_gate", gate), ("head_gate", head_gate),
                                  ("bias", bias), ("chunk_size", chunk),
                                  ("layer_types", layer_types)) if v)
        raise SpecError(path, f"attention.{key}", "is not supported with compressed attention "
                                                  "(its layers are set by compress_ratios)")
    if kind == "compressed" and window is None:
        raise SpecError(path, "attention.sliding_window", "missing (expected an integer: "
                                                          "compressed attention keeps a sliding "
                                                          "window on every layer)")
    blocks = _block_sparse(a, path, kind, layer_types, kv_heads)
    if kind != "compressed":
        mla.update(_index(a, path, kind, window, layer_types, layers, bool(blocks)))
    if kind == "gqa":
        mla.update(_gqa_shape(a, path, head_dim))
    mla.update(blocks)
    base = AttentionSpec(kind, heads, kv_heads, head_dim, **mla, window=window, bias=bias,
                         sinks=sinks, output_gate=gate, head_gate=head_gate, chunk=chunk)
    kinds = _kind_shapes(a, path, base, layer_types, layers)
    if blocks and (kinds or base.v_head_dim or base.k_eq_v):
        tables = {ltype: name for name, ltype in KIND_TABLES.items()}
        key = tables[kinds[0][0]] if kinds else "v_head_dim" if base.v_head_dim else "k_eq_v"
        raise SpecError(path, f"attention.{key}", "is not supported with block_sparse_attention "
                                                  "layers (lts costs block-sparse attention in "
                                                  "the model's one attention shape)")
    a.finish()
    attention = dataclasses.replace(base, kinds=kinds) if kinds else base
    linear = _linear(t, path, layer_types, kind)

    f = t.table("ffn")
    fkind = f.get("kind", str, choices=("dense", "moe"))
    gated = f.get("gated", bool)
    if fkind == "dense":
        widths = _widths(f, path, layers)
        ffn = FFNSpec("dense", gated, intermediate=max(widths) if widths else
                      f.get("intermediate", int, positive=True, maximum=MAX_WIDTH),
                      widths=widths if len(set(widths)) > 1 else ())
    else:
        experts = f.get("experts", int, positive=True)
        top_k = f.get("top_k", int, positive=True, maximum=experts)
        expert_inter = f.get("expert_intermediate", int, positive=True, maximum=MAX_WIDTH)
        shared = f.get("shared_experts", int, 0, minimum=0)
        shared_inter = f.get("shared_intermediate", int, shared * expert_inter, minimum=0,
                             maximum=MAX_WIDTH)
        if shared_inter and not shared:     # a width with no expert to have it: say which
            raise SpecError(path, "ffn.shared_intermediate",
                            f"{shared_inter} with ffn.shared_experts = 0 (no shared expert has "
                            "that width: set shared_experts, or drop the width)")
        dense_layers = f.get("dense_layers", int, 0, minimum=0, maximum=layers - 1)
        every = f.get("moe_every", int, 1, positive=True, maximum=layers)
        need = dense_layers > 0 or every > 1
        inter = f.get("intermediate", int, 0, required=need, positive=need, maximum=MAX_WIDTH)
        if dense_layers > 0 and not inter:
            raise SpecError(path, "ffn.intermediate", "missing (needed when ffn.dense_layers > 0)")
        if every > 1 and dense_layers:
            raise SpecError(path, "ffn.moe_every", "with ffn.dense_layers is not supported (lts "
                                                   "costs one of the two patterns)")
        if layers % every:
            raise SpecError(path, "ffn.moe_every", f"{every} does not divide layers = {layers}")
        if every > 1 and not inter:
            raise SpecError(path, "ffn.intermediate", "missing (needed when ffn.moe_every > 1: "
                                                      "the width of the dense layers)")
        latent = f.get("latent", int, 0, minimum=0)
        if latent > hidden:
            raise SpecError(path, "ffn.latent", f"{latent} is wider than hidden = {hidden} (the "
                                                "experts' latent width, at most hidden)")
        ffn = FFNSpec("moe", gated, inter, experts, top_k, expert_inter, shared, shared_inter,
                      dense_layers, every, latent)
    no_ffn = _no_ffn(f, path, layers, ffn)
    if no_ffn and NO_ATTENTION in layer_types:
        raise SpecError(path, "ffn.no_ffn_layers", "with no_attention layers is not supported "
                                                   "(lts costs a layer with a mixer, an FFN or "
                                                   "both, one of the two patterns a model)")
    f.finish()

    p = t.table("precision", required=False)
    precision = PrecisionSpec(_weight_format(p, "weights", p.get("weights", str, "bf16")),
                              p.get("kv_cache", str, "bf16", choices=DTYPES),
                              p.get("activations", str, "bf16", choices=("bf16", "fp16", "fp32")),
                              _unquantized(p), _group_formats(p))
    precision = dataclasses.replace(precision,
                                    quantized_share=_quantized_share(p, precision.unquantized))
    p.finish()
    mtp = t.get("mtp_layers", int, 0, minimum=0)
    mtp_shared = t.get("mtp_shared_embeddings", bool, False)
    hc = t.get("hc_mult", int, 1, positive=True, maximum=64)
    res = t.get("attn_res_block", int, 0, minimum=0, maximum=layers)
    window_tokens = t.get("context_window", int, 0, positive=t.has("context_window"),
                          maximum=MAX_WINDOW)
    t.finish()
    return ModelSpec(name, source, layers, hidden, vocab, attention, ffn, precision, tie,
                     params_pub, active_pub, str(path), layer_types, mtp, linear, mtp_shared,
                     no_ffn, hc, res, window_tokens)


def _widths(f: _Table, path, layers: int) -> tuple:
    """ffn.intermediate_by_layer: a dense model's FFN width of each layer (positive integers,
    one a layer; then ffn.intermediate is not given: it is their largest); () when absent."""
    if not f.has("intermediate_by_layer"):
        return ()
    f.used.add("intermediate_by_layer")
    key = "ffn.intermediate_by_layer"
    if f.has("intermediate"):
        raise SpecError(path, "ffn.intermediate", "is set with ffn.intermediate_by_layer (give "
                                                  "one of the two)")
    ws = f.data["intermediate_by_layer"]
    if not isinstance(ws, list) or not all(isinstance(w, int) and not isinstance(w, bool)
                                           and 0 < w <= MAX_WIDTH for w in ws):
        raise SpecError(path, key, f"{cut_quoted(ws)} is not a list of widths from 1 to 16,777,216")
    if len(ws) != layers:
        raise SpecError(path, key, f"has {len(ws)} entries (expected one a layer: {layers})")
    return tuple(ws)


def _no_ffn(f: _Table, path, layers: int, ffn: FFNSpec) -> tuple:
    """ffn.no_ffn_layers: ascending indices of the layers that have no FFN (a token mixer
    alone); never the last layer (the final norm takes an FFN's output), not with dense_layers
    or moe_every (lts costs one FFN pattern a model)."""
    if not f.has("no_ffn_layers"):
        return ()
    f.used.add("no_ffn_layers")
    key = "ffn.no_ffn_layers"
    idx = f.data["no_ffn_layers"]
    if not isinstance(idx, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in idx):
        raise SpecError(path, key, f"{cut_quoted(idx)} is not a list of integers (expected layer "
                                   "indices "
                                   f"0 to {layers - 1})")
    if idx != sorted(set(idx)):
        raise SpecError(path, key, f"{cut_quoted(idx)} is not in ascending order without repeats")
    if idx and (idx[0] < 0 or idx[-1] >= layers):
        raise SpecError(path, key, f"{idx[0] if idx[0] < 0 else idx[-1]} is not a layer index "
                                   f"(expected 0 to {layers - 1})")
    if idx and idx[-1] == layers - 1:
        raise SpecError(path, key, f"{layers - 1} is the last layer (lts needs an FFN on the "
                                   "last layer: the final norm takes its output)")
    if ffn.dense_layers or ffn.moe_every > 1:
        raise SpecError(path, key, "with ffn.dense_layers or ffn.moe_every is not supported "
                                   "(lts costs one FFN pattern a model)")
    return tuple(idx)


def _linear(t: _Table, path, layer_types: tuple, kind: str):
    """[linear_attention]: the Gated DeltaNet shapes (``LinearAttentionSpec``) of the
    linear_attention layers, required exactly when attention.layer_types has some."""
    if MAMBA in layer_types or t.has("mamba"):
        return _mamba(t, path, layer_types, kind)
    has = LINEAR in layer_types
    if not has:
        if t.has("linear_attention"):
            raise SpecError(path, "linear_attention", "is set but attention.layer_types has no "
                                                      "linear_attention layers")
        return None
    if not t.has("linear_attention"):
        raise SpecError(path, "linear_attention", "missing table (attention.layer_types has "
                                                  "linear_attention layers)")
    g = t.table("linear_attention")
    w = dict(positive=True, maximum=MAX_WIDTH)
    kda = g.get("kind", str, "gated_deltanet", choices=("gated_deltanet", "kda")) == "kda"
    spec = LinearAttentionSpec(g.get("key_heads", int, positive=True),
                               g.get("value_heads", int, positive=True),
                               g.get("key_head_dim", int, **w), g.get("value_head_dim", int, **w),
                               g.get("conv_kernel", int, positive=True, maximum=64), kda=kda,
                               decay_rank=g.get("decay_rank", int, None if kda else 0,
                                                positive=kda, maximum=MAX_WIDTH),
                               gate_rank=g.get("gate_rank", int, 0, minimum=0,
                                               maximum=MAX_WIDTH))
    if not kda and (g.has("decay_rank") or g.has("gate_rank")):
        raise SpecError(path, "linear_attention." + ("decay_rank" if g.has("decay_rank")
                                                     else "gate_rank"),
                        "is only supported with kind = \"kda\" (Kimi Delta Attention)")
    g.finish()
    if spec.value_heads % spec.key_heads:
        raise SpecError(path, "linear_attention.key_heads",
                        f"{spec.key_heads} does not divide linear_attention.value_heads = "
                        f"{spec.value_heads}")
    return spec


def _mamba(t: _Table, path, layer_types: tuple, kind: str):
    """[mamba]: the Mamba-2 shapes (``Mamba2Spec``) of the mamba layers, required exactly when
    attention.layer_types has some."""
    if MAMBA not in layer_types:
        raise SpecError(path, "mamba", "is set but attention.layer_types has no mamba layers")
    if kind == "mla":
        raise SpecError(path, "attention.layer_types", "mamba layers with mla attention are not "
                                                       "supported (gqa only)")
    if not t.has("mamba"):
        raise SpecError(path, "mamba", "missing table (attention.layer_types has mamba layers)")
    g = t.table("mamba")
    w = dict(positive=True, maximum=MAX_WIDTH)
    spec = Mamba2Spec(g.get("heads", int, positive=True), g.get("head_dim", int, **w),
                      g.get("state_size", int, **w), g.get("groups", int, positive=True),
                      g.get("conv_kernel", int, positive=True, maximum=64),
                      g.get("chunk_size", int, 256, positive=True, maximum=MAX_WIDTH))
    g.finish()
    if spec.heads % spec.groups:
        raise SpecError(path, "mamba.groups", f"{spec.groups} does not divide mamba.heads = "
                                              f"{spec.heads}")
    return spec


INDEX_KEYS = ("index_topk", "index_heads", "index_head_dim")
# the block_sparse_attention layers' keys (MiniMax-M3: AttentionSpec.sparse_block_size)
BLOCK_SPARSE_KEYS = ("sparse_block_size", "sparse_topk_blocks", "index_heads", "index_head_dim")


def _block_sparse(a: _Table, path, kind: str, layer_types: tuple, kv_heads: int) -> dict:
    """[attention] sparse_block_size, sparse_topk_blocks, index_heads and index_head_dim of the
    block_sparse_attention layers (MiniMax-M3's MSA): all four when attention.layer_types has
    such layers, gqa only, kv_heads dividing index_heads; the first two never without them."""
    if BLOCK_SPARSE not in layer_types:
        extra = [k for k in BLOCK_SPARSE_KEYS[:2] if a.has(k)]
        if extra:
            raise SpecError(path, f"attention.{extra[0]}", "is set but attention.layer_types has "
                                                           "no block_sparse_attention layers")
        return {}
    if kind != "gqa":
        raise SpecError(path, "attention.layer_types", f"block_sparse_attention layers with "
                                                       f"{kind} attention are not supported "
                                                       "(gqa only)")
    missing = [k for k in BLOCK_SPARSE_KEYS if not a.has(k)]
    if missing:
        raise SpecError(path, f"attention.{missing[0]}",
                        "missing (expected an integer: attention.layer_types has "
                        "block_sparse_attention layers, which need sparse_block_size, "
                        "sparse_topk_blocks, index_heads and index_head_dim)")
    out = {k: a.get(k, int, positive=True, maximum=MAX_WIDTH) for k in BLOCK_SPARSE_KEYS}
    if out["index_heads"] % kv_heads:
        raise SpecError(path, "attention.index_heads",
                        f"{out['index_heads']} is not a multiple of attention.kv_heads = "
                        f"{kv_heads} (each KV head picks its blocks with its own index heads)")
    return out


def _compressed(a: _Table, path, layers: int, heads: int, kv_heads: int, head_dim: int) -> dict:
    """[attention] of kind "compressed" (DeepSeek-V4): one KV head; q_lora_rank,
    qk_rope_head_dim, o_lora_rank, o_groups (dividing heads), compress_ratios (one a layer, 0 or
    a ratio), and the indexer of the layers of index_ratio (index_topk, index_heads,
    index_head_dim; all four or none)."""
    if kv_heads != 1:
        raise SpecError(path, "attention.kv_heads", f"{kv_heads} is not supported with "
                                                    "compressed attention (expected 1: one KV "
                                                    "head that all query heads share)")
    w = dict(positive=True, maximum=MAX_WIDTH)
    out = dict(q_lora_rank=a.get("q_lora_rank", int, **w),
               qk_rope_head_dim=a.get("qk_rope_head_dim", int, 0, minimum=0,
                                      maximum=head_dim),
               o_lora_rank=a.get("o_lora_rank", int, **w),
               o_groups=a.get("o_groups", int, positive=True))
    if heads % out["o_groups"]:
        raise SpecError(path, "attention.o_groups", f"{out['o_groups']} does not divide "
                                                    f"attention.heads = {heads}")
    a.used.add("compress_ratios")
    ratios, key = a.data.get("compress_ratios"), "attention.compress_ratios"
    if not isinstance(ratios, list) or not all(isinstance(r, int) and not isinstance(r, bool)
                                               and 0 <= r <= MAX_WIDTH for r in ratios):
        raise SpecError(path, key, f"{cut_quoted(ratios)} is not a list of integers from 0 (a "
                                   "sliding "
                                   "window alone) to 16,777,216 (expected one a layer)")
    if len(ratios) != layers:
        raise SpecError(path, key, f"has {len(ratios)} entries (expected one a layer: {layers})")
    out["compress_ratios"] = tuple(ratios)
    given = [k for k in INDEX_KEYS + ("index_ratio",) if a.has(k)]
    if given:
        missing = [k for k in INDEX_KEYS + ("index_ratio",) if k not in given]
        if missing:
            raise SpecError(path, f"attention.{missing[0]}",
                            f"missing (expected an integer: attention.{given[0]} is set, and the "
                            "indexer needs index_topk, index_heads, index_head_dim and "
                            "index_ratio)")
        out.update({k: a.get(k, int, **w) for k in INDEX_KEYS})
        out["index_ratio"] = a.get("index_ratio", int, **w)
        if out["index_ratio"] not in ratios:
            raise SpecError(path, "attention.index_ratio", f"{out['index_ratio']} is not a ratio "
                                                           "of compress_ratios (no layer would "
                                                           "run the indexer)")
    return out


INDEXER_TYPES = ("full", "shared")


def _index(a: _Table, path, kind: str, window, layer_types, layers: int,
           block_sparse: bool = False) -> dict:
    """[attention] index_topk / index_heads / index_head_dim (DeepSeek Sparse Attention): all
    three or none, mla only, on every layer (no sliding window or layer pattern with it);
    indexer_types (one "full" or "shared" a layer, the first full) says which layers run their
    own indexer. With ``block_sparse`` layers index_heads and index_head_dim are theirs
    (``_block_sparse``), and index_topk is refused as without mla."""
    given = [k for k in (INDEX_KEYS[:1] if block_sparse else INDEX_KEYS) if a.has(k)]
    if not given:
        if a.has("indexer_types"):
            raise SpecError(path, "attention.indexer_types", "is only supported with sparse "
                                                             "attention (attention.index_topk)")
        return {}
    if kind != "mla":
        raise SpecError(path, f"attention.{given[0]}",
                        "is only supported with mla attention (DeepSeek Sparse Attention)")
    missing = [k for k in INDEX_KEYS if k not in given]
    if missing:
        raise SpecError(path, f"attention.{missing[0]}",
                        f"missing (expected an integer: attention.{given[0]} is set, and sparse "
                        "attention needs index_topk, index_heads and index_head_dim)")
    if window is not None or layer_types:
        raise SpecError(path, "attention.index_topk",
                        "sparse attention with a sliding window or layer_types is not supported "
                        "(lts costs DeepSeek Sparse Attention on every layer)")
    out = {k: a.get(k, int, positive=True, maximum=MAX_WIDTH) for k in INDEX_KEYS}
    if a.has("indexer_types"):
        a.used.add("indexer_types")
        kinds, key = a.data["indexer_types"], "attention.indexer_types"
        if not isinstance(kinds, list) or any(k not in INDEXER_TYPES for k in kinds):
            raise SpecError(path, key, f"{cut_quoted(kinds)} is not a list of \"full\" and "
                                       "\"shared\"")
        if len(kinds) != layers:
            raise SpecError(path, key, f"has {len(kinds)} entries (expected one a layer: "
                                       f"{layers})")
        if kinds[0] != "full":
            raise SpecError(path, key, "starts with a shared layer (expected \"full\" first: a "
                                       "shared layer reuses an earlier layer's top-k)")
        if "shared" in kinds:
            out["indexer_types"] = tuple(kinds)
    return out


def _gqa_shape(a: _Table, path, head_dim: int, base: AttentionSpec | None = None) -> dict:
    """A gqa [attention] table's (or a per-kind table's) v_head_dim (0: head_dim) and k_eq_v,
    each defaulting to ``base``'s (a per-kind table's model shape)."""
    v = a.get("v_head_dim", int, base.v_head_dim if base else 0, minimum=0, maximum=MAX_WIDTH)
    k_eq_v = a.get("k_eq_v", bool, base.k_eq_v if base else False)
    if k_eq_v and v not in (0, head_dim):
        raise SpecError(path, a._key("k_eq_v"), f"true needs v_head_dim = head_dim ({head_dim}): "
                                                "V is made by k_proj")
    return dict(v_head_dim=0 if v == head_dim else v, k_eq_v=k_eq_v)


# the layer kinds that may have their own attention shape ([attention.sliding], [attention.full])
# and the keys such a table may set (the others are the model's: bias, output_gate, windows)
KIND_TABLES = {"sliding": SLIDING, "full": FULL}
KIND_KEYS = ("heads", "kv_heads", "head_dim", "v_head_dim", "k_eq_v", "sinks")


def _kind_shapes(a: _Table, path, base: AttentionSpec, layer_types: tuple, layers: int) -> tuple:
    """[attention.sliding] / [attention.full]: the shape of the layers of one kind where it
    differs from [attention]'s (heads, kv_heads, head_dim, v_head_dim, k_eq_v, sinks; each
    defaults to [attention]'s), gqa only, for a kind the model has. ((layer type, spec), ...)."""
    types = set(layer_types) or {SLIDING if base.window is not None else FULL}
    out = []
    for name, ltype in KIND_TABLES.items():
        if not a.has(name):
            continue
        key = f"attention.{name}"
        if base.kind != "gqa":
            raise SpecError(path, key, "is only supported with gqa attention")
        if ltype not in types:
            raise SpecError(path, key, f"is set but the model has no {ltype} layers")
        k = a.table(name)
        heads = k.get("heads", int, base.heads, positive=True)
        kv_heads = k.get("kv_heads", int, base.kv_heads, positive=True)
        head_dim = k.get("head_dim", int, base.head_dim, positive=True, maximum=MAX_WIDTH)
        if heads % kv_heads:
            raise SpecError(path, f"{key}.kv_heads",
                            f"{kv_heads} does not divide {key}.heads = {heads}")
        shape = _gqa_shape(k, path, head_dim, base)
        sinks = k.get("sinks", bool, base.sinks)
        k.finish()
        out.append((ltype, dataclasses.replace(base, heads=heads, kv_heads=kv_heads,
                                               head_dim=head_dim, sinks=sinks, **shape)))
    return tuple(out)


def _layer_types(a: _Table, path, layers: int, window, chunk=None) -> tuple:
    """attention.layer_types: a list of LAYER_TYPES repeated over the layers (its length divides
    ``layers``: a pattern, or one entry a layer); () when absent or every layer alike."""
    if not a.has("layer_types"):
        if chunk is not None:
            raise SpecError(path, "attention.chunk_size", "is set but attention.layer_types has "
                                                          "no chunked_attention layers")
        return ()
    a.used.add("layer_types")
    kinds = a.data["layer_types"]
    key = "attention.layer_types"
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds):
        raise SpecError(path, key, f"{cut_quoted(kinds)} is not a list of strings (expected "
                                   "entries of "
                                   f"{', '.join(map(repr, LAYER_TYPES))})")
    bad = [k for k in kinds if k not in LAYER_TYPES]
    if bad:
        raise SpecError(path, key, f"{cut_quoted(bad[0])} is not one of "
                                   f"{', '.join(map(repr, LAYER_TYPES))}"
                                   " (lts cannot cost other attention kinds yet)")
    if layers % len(kinds):
        raise SpecError(path, key, f"{len(kinds)} entries do not divide layers = {layers} "
                                   "(expected one entry a layer, or a pattern that repeats)")
    if SLIDING in kinds and window is None:
        raise SpecError(path, key, "has sliding_attention layers but attention.sliding_window "
                                   "is not set")
    if CHUNKED in kinds and chunk is None:
        raise SpecError(path, key, "has chunked_attention layers but attention.chunk_size is "
                                   "not set")
    if chunk is not None and CHUNKED not in kinds:
        raise SpecError(path, "attention.chunk_size", "is set but attention.layer_types has no "
                                                      "chunked_attention layers")
    if set(kinds) <= set(RECURRENT) | {NO_ATTENTION}:
        raise SpecError(path, key, f"every layer is {kinds[0]} (lts needs at least one "
                                   "full_attention or sliding_attention layer)")
    if LINEAR in kinds and MAMBA in kinds:
        raise SpecError(path, key, "has both linear_attention and mamba layers (lts costs one "
                                   "recurrent kind a model)")
    if len(set(kinds)) == 1 and CHUNKED not in kinds and BLOCK_SPARSE not in kinds:
        return ()                  # every layer alike: attention.window says which
    return tuple(kinds) * (layers // len(kinds))
