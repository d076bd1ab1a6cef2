"""The per-request state a layer keeps: bytes of KV cache per token, per request, and the tokens
held at a context. The one place that says how much memory a request's cache takes (issue 21):
the op tables (``tables``: the cache each attention op reads and holds, hence every strategy's
memory and the serve loop's KV capacity), the disaggregated pools' KV transfer (``disagg``) and
the exact solver's proof (``exact._Exact``) all take it from here.

**Every layer keeps the same bytes.** A ``ModelSpec`` has one ``AttentionSpec`` for all its
layers, and every layer attends to (and so holds) the whole context. The cost model rests on
that: the tables cost one layer's attention and a stage holds lp of them, and the exact solver
factors a stage's memory as lp * (attention weights + KV) + the rest. ``layer_token_bytes`` is
per layer so that a layer kind that keeps other bytes (a sliding window holds min(context,
window) tokens; linear attention a fixed state) lands here; ``uniform`` then turns false and
``token_bytes`` (what the tables cost) and ``require_uniform`` (the exact solver's check) refuse
the model instead of costing every layer as the first.
"""
from __future__ import annotations

from ..specs import ModelSpec


def layer_token_bytes(model: ModelSpec) -> list:
    """Bytes of one token's keys and values in each layer's cache, [(K, V)] over the layers:
    GQA kv_heads x head_dim each; MLA one latent (kv_lora_rank + qk_rope_head_dim) that the
    values are read from (V: its kv_lora_rank part, the same bytes)."""
    a, kvb = model.attention, model.precision.kv_bytes
    if a.kind == "mla":
        one = (a.kv_lora_rank + a.qk_rope_head_dim) * kvb, a.kv_lora_rank * kvb
    else:
        k = a.kv_heads * a.head_dim * kvb
        one = k, k
    return [one] * model.layers


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


def latent(model: ModelSpec) -> bool:
    """Whether keys and values are read from one stored latent (MLA), kept once, rather than
    two caches (GQA)."""
    return model.attention.kind == "mla"


def held_tokens(model: ModelSpec, context):
    """Tokens of a sequence's context that each layer's cache holds and a step reads: all of
    them (every layer attends to the whole context). One rule for every layer: a window on
    some layers only makes it per layer, and ``uniform`` must then compare it too."""
    return context


def request_bytes(model: ModelSpec, tokens) -> float:
    """KV cache of a request at ``tokens`` tokens of context over all layers, stored once (MLA:
    the latent only)."""
    k, v = token_bytes(model)
    return held_tokens(model, tokens) * model.layers * (k if latent(model) else k + v)
