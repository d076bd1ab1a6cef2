"""KV-cache offload to host memory (issue 37): a host tier for the cached prefixes.

With prefix caching (``serving.prefix``) lts holds every distinct prefix's KV cache on the GPU,
on every attention-DP rank, which takes memory from the running requests. The engines ship a
second tier in host memory (vLLM ``--kv-offloading-size``, SGLang
``--enable-hierarchical-cache``, TensorRT-LLM ``kv_cache_config.host_cache_size``: the
``kv_offload`` of ``engines``): a prefix hit found there is copied back to the GPU before the
request's prefill, instead of being recomputed. The loop (``serve.serve``) costs it so, S bytes
of host memory per GPU (``PrefixCache.offload_bytes``), P prefixes, each of B bytes on one GPU of
its rank, a request's own tokens r bytes per GPU:

- **The GPU/host split.** The engine's pool first holds the running requests (they take blocks
  from the cached ones: vLLM's free-block queue and SGLang's radix cache evict LRU cached
  blocks for a new request). Two capacities: every prefix held on the GPU (the loop without a
  host tier: pool - P*B over r), or none held apart, each running request holding its prefix
  with its own tokens (pool over r + B/ep, the prefix's share of a request). The larger wins.
  Where it is the first, nothing changes: every prefix fits beside the running requests, and no
  request copies. Otherwise, at n running requests the GPU keeps G = min(P, (pool - n*r)/B)
  prefixes (what fits after the running requests' own tokens; their own prefixes among them)
  and the host S/K more, K a prefix's KV cache alone per GPU (TensorRT-LLM copies a block to
  host when the GPU evicts it), or S/K with the GPU's included (vLLM stores every computed
  block to host, SGLang writes through): reachable = min(P, G + S/K) or min(P, max(G, S/K)).
- **Which request finds what.** Every prefix is as likely as any other, so a request's prefix
  is on the GPU with probability G/P, on the host with (reachable - G)/P, nowhere with
  1 - reachable/P (a miss: the whole prompt is prefilled, the hit rate falls).
- **The copy.** A host hit copies its prefix's K bytes per GPU over each GPU's own host link
  (``TopologySpec.host_bandwidth_bytes_s``, all the instance's GPUs at once): K / bandwidth is
  added to its TTFT and latency. The engines load before the request is scheduled and the
  running requests' steps go on meanwhile (vLLM: ``load_async``, the request waits in
  WAITING_FOR_REMOTE_KVS; SGLang's ``load_back`` on its own stream), so no step is slowed; the
  request holds its blocks while it waits, so the copy counts in its latency (Little's law).
- **Misses.** A cohort's mix of hits and misses is costed as the mean of the loop with every
  prompt hitting and with none (its prefill work is affine in the tokens a prompt computes),
  weighted by the miss fraction.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..specs.strategy import EP


@dataclass
class HostTier:
    """The host tier of N strategy rows; arrays are [N], bytes per GPU."""
    offload: np.ndarray      # the prefixes leave the GPU (else every prefix stays there)
    pool: np.ndarray         # the KV pool with no prefix held apart
    own: np.ndarray          # a request's own tokens' KV (isl - cached + osl)
    prefix: np.ndarray       # one prefix's bytes on one GPU of its rank (B, as the GPU's
                             # memory holds it: serve.shared_prefix_bytes)
    kv: np.ndarray           # its KV cache alone: what the host holds and the copy moves
    prefixes: int            # P
    host_bytes: float        # S
    bandwidth: float         # bytes/s of each GPU's host link
    inclusive: bool          # the host copy includes what the GPU holds

    def take(self, idx) -> "HostTier":
        """The tier of rows ``idx``."""
        return HostTier(*(getattr(self, f.name)[idx] if isinstance(getattr(self, f.name),
                                                                      np.ndarray)
                          else getattr(self, f.name) for f in fields(HostTier)))

    def split(self, n) -> tuple:
        """(on the GPU, on the host, nowhere): the fractions of requests whose prefix is there
        at n running requests [N] each (module docstring)."""
        p = float(self.prefixes)
        b = np.where(self.prefix > 0, self.prefix, 1.0)
        free = np.floor(np.maximum(self.pool - np.asarray(n) * self.own, 0.0) / b)
        gpu = np.where(self.offload & (self.prefix > 0), np.minimum(p, free), p)
        host = np.floor(self.host_bytes / np.where(self.kv > 0, self.kv, 1.0))
        reach = np.minimum(p, np.maximum(gpu, host) if self.inclusive else gpu + host)
        return gpu / p, (reach - gpu) / p, 1.0 - reach / p

    def copy_s(self) -> np.ndarray:
        """The host-to-device copy of one prefix [N]: its KV bytes per GPU over the GPU's
        link."""
        return self.kv / self.bandwidth


def host_tier(prefix, pool_of, rows, cap, fixed, per_request, shared, kv, bandwidth: float,
              inclusive: bool) -> tuple:
    """(HostTier, capacity, fixed bytes, bytes per request) [N] of strategy ``rows`` whose
    capacity with every prefix on the GPU is ``cap`` (``serve.capacity``: ``fixed`` includes
    ``shared``, the P prefixes' bytes per GPU; ``per_request`` a request's own tokens; ``kv``
    one prefix's KV cache alone per GPU); ``pool_of(fixed)``: the engine's KV pool once
    ``fixed`` bytes are held. Where holding no prefix apart fits more requests, the rows
    offload: their capacity, fixed bytes and bytes per request are that split's (module
    docstring)."""
    rows = np.atleast_2d(rows)
    b = shared / prefix.prefixes                              # one prefix, one GPU of its rank
    share = b / rows[:, EP]                                   # its part of a request's bytes
    fixed0 = fixed - shared
    pool0 = pool_of(fixed0)
    cap_off = np.floor(np.maximum(pool0, 0.0) / (per_request + share))
    off = cap_off > cap
    tier = HostTier(off, pool0, per_request, b, np.asarray(kv, dtype=np.float64),
                    int(prefix.prefixes),
                    float(prefix.offload_bytes), float(bandwidth), bool(inclusive))
    return (tier, np.where(off, cap_off, cap), np.where(off, fixed0, fixed),
            np.where(off, per_request + share, per_request))
