"""Vectorized alpha-beta costs of collectives over a hierarchy of links.

A group of ``p`` ranks whose members are ``stride`` GPUs apart (tp innermost: stride 1; ep:
stride tp; pp: stride tp*ep) spans the link tiers of a topology, innermost first. Tier i with span
S_i holds ``m_i = min(p, max(1, S_i // stride))`` members of the group in one of its domains
(the outermost tier holds all p). The collective runs hierarchically, one level per tier, with
``q_i = m_i / m_{i-1}`` ranks per level (m_{-1} = 1):

- all-gather of S bytes (each rank ends with S): level i moves (q_i-1)/m_i * S bytes per rank
  with (q_i-1) latency steps (outer levels first, so the slow link carries the least);
  one tier: (p-1)/p*S/B + (p-1)*alpha, the ring formula (Thakur et al. 2005, §4).
- reduce-scatter of S bytes: the same cost in reverse order.
- all-reduce = reduce-scatter + all-gather: 2(p-1)/p*S/B + 2(p-1)*alpha on one tier (ring).
- all-to-all with S bytes per rank (S/p to each peer): the (m_i - m_{i-1}) peers reached first
  through tier i get their share over tier i: sum_i (m_i-m_{i-1})/p * S/B_i + (m_i-m_{i-1})*alpha_i
  (docs/design.md §3: the cross-node share of the bytes goes over the slower link).
- send (point to point) of S bytes over the outermost tier the group needs: S/B + alpha.
- MoE dispatch and combine (``dispatch``): the all-to-all's bytes per tier, every peer at once
  (at most the log-depth steps below per level) at the link's own efficiency (issue 36).

Latency beyond 8 ranks per level: a ring pays q-1 steps, but NCCL runs wide groups with
algorithms whose latency grows with log2 q (tree for all-reduce across nodes, NVLS inside an
NVSwitch domain such as GB200 NVL72, PAT for all-gather/reduce-scatter), so a level of q > 8 ranks
pays 7 * log2(q) / 3 steps for all-gather and reduce-scatter (hence all-reduce): the ring's 7 at
q = 8, where the per-step alpha was fitted on 8-GPU NCCL rows (topology files), growing like a
tree beyond (72 ranks: 14.4 steps per half, not 71). All-to-all and send keep their steps;
a MoE dispatch takes the smaller of its peers and these steps (``dispatch``).

One-shot all-reduce (issue 23: collectives by message size). The engines (vLLM, SGLang,
TensorRT-LLM) reduce small messages with their own one-step kernel, not NCCL's ring: each rank
reads all p - 1 peers' buffers through its NVLink port at once, alpha_1 + (p-1) S / (B e_1).
Fitted to shared/data/microbenchmarks.csv (h100_dgx.toml): 3.1 us and 0.71, where NCCL's ring
pays 14 alpha (~20 us) at 8 GPUs. It runs where the group lies inside the innermost (switch)
domain, the message is at most the engine's limit (``EngineProfile.custom_allreduce_bytes``,
vLLM's 8 MiB) and it is faster than the ring: below ~1 MiB at 8 GPUs, up to the limit at 2.
Large messages keep the ring at the link's efficiency times the topology's
``collective_efficiency``: calibration.csv still fits 0.40-0.45 for it with the one-shot kernel
in place (scripts/calibrate.py), so that residual stays, and NCCL's NVLS is not modelled apart
(microbenchmarks.csv's 64 MiB all-reduce reaches 0.59-0.80 of the link, the ring's range).

B_i is the per-GPU one-direction bandwidth times the link's efficiency. A group of one costs 0.
Every function broadcasts over NumPy arrays of bytes, group sizes and strides.

Link shapes (``LinkSpec.shape``, docs/gpus.md): the formulas above are for a **switch** (NVSwitch,
an InfiniBand fabric: a GPU's one port of B reaches any peer) and for **pcie** (GPUs on a PCIe host
fabric: the same formulas with B the GPU's x16 rate, capped when the topology gives the capacity
the GPUs of one domain share, see ``specs.topology_from_dict``). A **mesh** (AMD Infinity Fabric
on MI300X/MI325X/MI355X: each GPU has its own link of b to each of the other span-1 GPUs) gives a
level of q ranks q-1 links at once, none shared with a sibling group:

- all-gather / reduce-scatter: RCCL splits the collective over several channels, each a ring on
  different links; a fully connected 8-GPU graph holds 7 edge-disjoint directed rings (one per
  peer link), so the level's (q-1)/m * S bytes arrive over q-1 links: (q-1)/m * S / ((q-1) b)
  = S / (m b), with the ring's q-1 latency steps. Measured: 8 MI300X all-reduce 319 GB/s bus
  bandwidth = 0.71 of 7 x 64 = 448 and 2 MI300X 47.7 = 0.745 of one 64 GB/s link (shared/data/
  hardware.md §5.3 [A4][N10]): the same efficiency on 1 and 7 links, which a single ring (64 GB/s
  at most whatever q) cannot reach. rocm.blogs.amd.com "mi300x-rccl-xgmi" [A4] describes it.
- all-to-all: each of the dm peers reached through the level gets its S/p over its own link at
  the same time: S / (p b), with dm latency steps as on a switch.
- send: one link, S/b + alpha.
"""
from __future__ import annotations

import numpy as np

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send")


def levels(links, p, stride):
    """Per tier: (q_i - 1, m_i - m_{i-1}, m_i, latency steps of an all-gather level) as float
    arrays broadcast over p and stride. Every collective of a group derives from these; a caller
    costing many collectives of one group passes them in (``levels=``) to compute them once."""
    p = np.asarray(p, dtype=np.float64)
    stride = np.asarray(stride, dtype=np.float64)
    prev = np.ones(np.broadcast(p, stride).shape)
    out = []
    for i, link in enumerate(links):
        if i == len(links) - 1:
            m = np.broadcast_to(p, prev.shape).astype(np.float64)
        else:
            m = np.minimum(p, np.maximum(1.0, np.floor(link.span_gpus / stride)))
            m = np.maximum(m, prev)
        q1 = m / prev - 1.0
        out.append((q1, m - prev, m, latency_steps(q1)))
        prev = m
    return out


RING_RANKS = 8       # ranks per level up to which the ring's q-1 latency steps hold (see above)


def latency_steps(q1):
    """Latency steps of one all-gather/reduce-scatter level of q = q1 + 1 ranks."""
    q1 = np.asarray(q1, dtype=np.float64)
    if not (q1 > RING_RANKS - 1).any():                       # the common case: rings only
        return q1
    q = q1 + 1.0
    wide = (RING_RANKS - 1) * np.log2(np.maximum(q, 1.0)) / np.log2(RING_RANKS)
    return np.where(q <= RING_RANKS, q1, wide)


def all_gather(links, nbytes, p, stride, levels_=None):
    """Seconds for an all-gather whose result is ``nbytes`` on every rank."""
    t = 0.0
    for link, (q1, _, m, steps) in zip(links, levels_ or levels(links, p, stride)):
        t = t + steps * link.latency_s \
            + _share(link, q1) / m * nbytes / (link.bandwidth_bytes_s * link.efficiency)
    return t


def _share(link, peers):
    """The fraction of a level's bytes one link carries: all of it on a switch or PCIe (the
    ``peers`` as given: the formulas above), one peer's on a mesh (``peers`` links at once, so
    ``peers / peers``, 0 for a level of one rank)."""
    if link.shape != "mesh":
        return peers
    return np.minimum(peers, 1.0)


reduce_scatter = all_gather   # the same hierarchy walked in reverse; identical alpha-beta cost


def all_reduce(links, nbytes, p, stride, levels_=None):
    """Seconds for an all-reduce of ``nbytes``: reduce-scatter then all-gather (the ring), or
    the engine's one-shot custom all-reduce where it is faster (below)."""
    levels_ = levels_ or levels(links, p, stride)
    t = reduce_scatter(links, nbytes, p, stride, levels_) + \
        all_gather(links, nbytes, p, stride, levels_)
    inner = links[0]
    if not (inner.oneshot_max_bytes and inner.oneshot_latency_s):
        return t
    return np.where(_oneshot_runs(inner, nbytes, p, levels_[0][2]),
                    np.minimum(t, oneshot(inner, nbytes, p)), t)


def oneshot(link, nbytes, p):
    """Seconds for a one-shot all-reduce of ``nbytes`` over p ranks of one switch domain: each
    rank reads the p - 1 peers' whole buffers at once through its port and sums them, one
    step (vLLM csrc/custom_all_reduce.cuh cross_device_reduce_1stage; TensorRT-LLM's ONESHOT
    strategy): alpha + (p-1) S / (B e). Fitted to shared/data/microbenchmarks.csv's
    custom_allreduce rows (h100_dgx.toml)."""
    p = np.asarray(p, dtype=np.float64)
    return link.oneshot_latency_s + (p - 1.0) * nbytes / (link.bandwidth_bytes_s
                                                          * link.oneshot_efficiency)


def _oneshot_runs(link, nbytes, p, inner_members):
    """Where the engine runs its custom all-reduce: a group of > 1 rank wholly inside the
    innermost domain (its ``inner_members`` are all p) and a message up to the engine's limit."""
    p = np.asarray(p, dtype=np.float64)
    return (p > 1) & (inner_members >= p) & (np.asarray(nbytes) <= link.oneshot_max_bytes)


def all_to_all(links, nbytes, p, stride, levels_=None):
    """Seconds for an all-to-all where each rank holds ``nbytes`` split evenly over the p ranks."""
    p_arr = np.asarray(p, dtype=np.float64)
    t = 0.0
    for link, (_, dm, _, _) in zip(links, levels_ or levels(links, p, stride)):
        t = t + dm * link.latency_s \
            + _share(link, dm) / p_arr * nbytes / (link.bandwidth_bytes_s * link.efficiency)
    return t


def dispatch(links, nbytes, p, stride, levels_=None):
    """Seconds for a MoE dispatch or combine over an expert-parallel group, each rank holding
    ``nbytes`` for its peers (``all_to_all``'s bytes per tier): the engines' expert-parallel
    kernels (DeepEP, TensorRT-LLM's and vLLM's all-to-all backends) post every peer's copies at
    once, so a level of q ranks pays ``latency_steps(q - 1)`` steps at most (the all-gather's
    log-depth rule beyond 8 ranks, 7 log2(q) / 3), not one per peer, and moves its bytes at the
    links' own efficiency: pass ``TopologySpec.links``, not ``engine_links`` (whose
    collective_efficiency was fitted on serving all-reduces). Against the 24 DeepEP low-latency
    rows of shared/data/microbenchmarks.csv (H100, ep 8-64 over 1-8 nodes, 16-256 tokens a
    rank, dispatch and combine): median |log2| 0.144 (max 0.66), where ``all_to_all`` at the
    engine's efficiency is 1.41 (max 2.74): at ep 64, 16 tokens, 77 us against 60 measured and
    346 before (63 peers x alpha)."""
    p_arr = np.asarray(p, dtype=np.float64)
    t = 0.0
    for link, (q1, dm, _, steps) in zip(links, levels_ or levels(links, p, stride)):
        t = t + np.minimum(dm, steps) * link.latency_s \
            + _share(link, dm) / p_arr * nbytes / (link.bandwidth_bytes_s * link.efficiency)
    return t


def send(links, nbytes, p, stride, levels_=None):
    """Seconds for a point-to-point send between neighbours of the group (slowest tier used)."""
    p_arr = np.asarray(p, dtype=np.float64)
    t = np.zeros(np.broadcast(p_arr, np.asarray(stride), np.asarray(nbytes)).shape)
    for link, (_, dm, _, _) in zip(links, levels_ or levels(links, p, stride)):
        uses = dm > 0   # this tier connects some members of the group
        t = np.where(uses, nbytes / (link.bandwidth_bytes_s * link.efficiency) + link.latency_s, t)
    return np.where(p_arr > 1, t, 0.0)


COST = {"all-reduce": all_reduce, "all-gather": all_gather, "reduce-scatter": reduce_scatter,
        "all-to-all": all_to_all, "send": send}
