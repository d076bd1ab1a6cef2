"""Prefix caching (issue 24): prompt tokens already in the KV cache are not prefilled.

Chat and agent traffic repeat what earlier requests sent: a system prompt, tools, the turns of a
conversation. Engines keep the KV cache of those tokens (vLLM's automatic prefix caching, on by
default since V1; SGLang's RadixAttention) and prefill only the rest of a prompt. The loop
(``lts.serving.serve``) costs it so:

- **Work.** A prompt of isl tokens with ``hit`` of them cached prefills c = hit x isl tokens fewer
  (at most isl - 1: an engine recomputes the last prompt token to get its logits, vLLM
  ``KVCacheManager.get_computed_blocks`` "num_computed_tokens ... prompt_len - 1"); the new tokens
  attend to the cached ones too, and each chunk reads them (``Workload.cached``).
- **Memory.** The cached prefix is shared: ``prefixes`` distinct prefixes are held once each on
  every attention-DP rank (a system prompt: 1; one per conversation: as many as there are
  conversations), each request holding only its own isl - c + osl tokens.
- **Decode** reads each request's whole context, prefix included (paged attention reads the
  shared blocks once per request).
- **A host tier** (``offload_bytes`` per GPU, ``--kv-offload``): the prefixes the GPU does not
  hold live in host memory and are copied back before their request's prefill
  (``serving.offload``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefixCache:
    """``hit``: the fraction of each prompt's tokens found in the cache; ``prefixes``: distinct
    cached prefixes, their KV held once each; ``offload_bytes``: host memory per GPU that holds
    the prefixes the GPU does not (0: none, every prefix on the GPU; ``serving.offload``)."""
    hit: float
    prefixes: int = 1
    offload_bytes: float = 0.0

    def __post_init__(self):
        if not 0.0 <= self.hit <= 1.0:
            raise ValueError(f"prefix hit {self.hit:g}: expected 0 to 1")
        if self.prefixes < 1:
            raise ValueError(f"prefixes {self.prefixes}: expected at least 1")
        if not self.offload_bytes >= 0.0:
            raise ValueError(f"offload bytes {self.offload_bytes:g}: expected at least 0")

    def cached(self, isl: int) -> int:
        """Tokens of a prompt of ``isl`` served from the cache: hit x isl, at most isl - 1."""
        return int(min(round(self.hit * isl), isl - 1))
