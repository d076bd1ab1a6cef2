"""Alpha-beta collectives (lts/collectives.py): ring closed forms on one tier, groups of one,
all-reduce = reduce-scatter + all-gather, monotonicity, and hierarchical cases by hand."""
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference as ref
from lts.cost import collectives as coll
from lts.specs import LinkSpec, load_topology

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send")

NVLINK = LinkSpec("nvlink", 8, 450e9, 1.4e-6, 0.75)
IB = LinkSpec("ib", 24576, 50e9, 4.5e-6, 0.92)
H100 = (NVLINK, IB)                       # 8 GPUs per node, as h100_dgx
ONE_TIER = (LinkSpec("flat", 1 << 20, 200e9, 2e-6, 0.8),)
THREE_TIERS = (LinkSpec("board", 4, 900e9, 0.5e-6, 0.9), LinkSpec("rack", 32, 200e9, 2e-6, 0.8),
               LinkSpec("fabric", 4096, 25e9, 8e-6, 0.9))


def bw(link):
    return link.bandwidth_bytes_s * link.efficiency


# ----------------------------------------------------------------------------------------------
# closed forms on one tier: the ring formulas (Thakur et al. 2005)

@pytest.mark.parametrize("p", [2, 3, 4, 7, 8, 64, 1000])
@pytest.mark.parametrize("nbytes", [1.0, 4096.0, 1e9])
def test_one_tier_ring_closed_forms(p, nbytes):
    (link,) = ONE_TIER
    a, b = link.latency_s, bw(link)
    # up to 8 ranks the ring's p-1 latency steps; beyond, NCCL's log-depth algorithms
    steps = p - 1 if p <= 8 else 7 * math.log2(p) / 3
    ag = (p - 1) / p * nbytes / b + steps * a
    assert coll.all_gather(ONE_TIER, nbytes, p, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.reduce_scatter(ONE_TIER, nbytes, p, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.all_reduce(ONE_TIER, nbytes, p, 1) == pytest.approx(
        2 * (p - 1) / p * nbytes / b + 2 * steps * a, rel=1e-12)
    assert coll.all_to_all(ONE_TIER, nbytes, p, 1) == pytest.approx(
        (p - 1) / p * nbytes / b + (p - 1) * a, rel=1e-12)
    assert coll.send(ONE_TIER, nbytes, p, 1) == pytest.approx(nbytes / b + a, rel=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("links", [ONE_TIER, H100, THREE_TIERS], ids=["1tier", "h100", "3tiers"])
@pytest.mark.parametrize("stride", [1, 2, 8, 64, 1000])
def test_group_of_one_costs_exactly_zero(kind, links, stride):
    for nbytes in (0.0, 1.0, 1e12):
        assert coll.COST[kind](links, nbytes, 1, stride) == 0.0
    t = coll.COST[kind](links, np.array([1.0, 1e9]), np.array([1, 1]), np.array([stride, 1]))
    assert np.all(np.asarray(t) == 0.0)


@pytest.mark.parametrize("links", [ONE_TIER, H100, THREE_TIERS], ids=["1tier", "h100", "3tiers"])
def test_all_reduce_is_reduce_scatter_plus_all_gather_exactly(links):
    nbytes = np.array([1.0, 3e3, 7.7e6, 1e9, 5e11])[:, None, None]
    p = np.array([1, 2, 3, 8, 16, 48, 64, 1024])[None, :, None]
    stride = np.array([1, 2, 4, 8, 16, 72])[None, None, :]
    ar = coll.all_reduce(links, nbytes, p, stride)
    assert np.array_equal(ar, coll.reduce_scatter(links, nbytes, p, stride)
                          + coll.all_gather(links, nbytes, p, stride))


# ----------------------------------------------------------------------------------------------
# hierarchical cases by hand (h100_dgx-like: 8 GPUs per node on NVLink, IB across nodes)

def test_tp16_on_8_gpu_nodes():
    """p=16, stride 1: 8 ranks per node (q=8 on NVLink), then 2 nodes (q=2 on IB)."""
    S = 64e6
    a0, b0, a1, b1 = NVLINK.latency_s, bw(NVLINK), IB.latency_s, bw(IB)
    ag = 7 * a0 + 7 / 8 * S / b0 + 1 * a1 + 1 / 16 * S / b1
    assert coll.all_gather(H100, S, 16, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.reduce_scatter(H100, S, 16, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.all_reduce(H100, S, 16, 1) == pytest.approx(2 * ag, rel=1e-12)
    # all-to-all: 7 peers inside the node get 7/16 of S over NVLink, 8 outside get 8/16 over IB
    a2a = 7 * a0 + 7 / 16 * S / b0 + 8 * a1 + 8 / 16 * S / b1
    assert coll.all_to_all(H100, S, 16, 1) == pytest.approx(a2a, rel=1e-12)
    assert coll.send(H100, S, 16, 1) == pytest.approx(S / b1 + a1, rel=1e-12)
    # with numbers: 7*1.4 + 7/8*64e6/337.5e9 s ... in microseconds
    assert coll.all_gather(H100, S, 16, 1) * 1e6 == pytest.approx(
        9.8 + 165.925925925926 + 4.5 + 86.956521739130, rel=1e-9)


def test_tp64_on_8_gpu_nodes():
    S = 1e6
    ag = 7 * 1.4e-6 + 7 / 8 * S / bw(NVLINK) + 7 * 4.5e-6 + 7 / 64 * S / bw(IB)
    assert coll.all_gather(H100, S, 64, 1) == pytest.approx(ag, rel=1e-12)
    a2a = 7 * 1.4e-6 + 7 / 64 * S / bw(NVLINK) + 56 * 4.5e-6 + 56 / 64 * S / bw(IB)
    assert coll.all_to_all(H100, S, 64, 1) == pytest.approx(a2a, rel=1e-12)


def test_strided_groups():
    S = 1e8
    # ep group of 4 with stride tp=2: 4 of them fit in a node -> NVLink only
    assert coll.all_gather(H100, S, 4, 2) == pytest.approx(3 * 1.4e-6 + 3 / 4 * S / bw(NVLINK))
    # stride 8 (tp = 8): every member on its own node -> IB only
    assert coll.all_gather(H100, S, 4, 8) == pytest.approx(3 * 4.5e-6 + 3 / 4 * S / bw(IB))
    assert coll.all_to_all(H100, S, 4, 8) == pytest.approx(3 * 4.5e-6 + 3 / 4 * S / bw(IB))
    # stride 4, p=8: 2 per node (q=2 NVLink), 4 nodes (q=4 IB)
    assert coll.all_gather(H100, S, 8, 4) == pytest.approx(
        1.4e-6 + 1 / 2 * S / bw(NVLINK) + 3 * 4.5e-6 + 3 / 8 * S / bw(IB))
    # send: neighbours 2 apart stay inside a node, 8 apart cross it
    assert coll.send(H100, S, 2, 2) == pytest.approx(S / bw(NVLINK) + 1.4e-6)
    assert coll.send(H100, S, 2, 8) == pytest.approx(S / bw(IB) + 4.5e-6)
    assert coll.send(H100, S, 8, 2) == pytest.approx(S / bw(IB) + 4.5e-6)   # 16 GPUs: 2 nodes


def test_three_tiers_by_hand():
    """p=64, stride 2 over spans 4 / 32 / 4096: m = 2, 16, 64, so q = 2, 8, 4."""
    S = 3e7
    b, r, f = THREE_TIERS
    ag = (1 * b.latency_s + 1 / 2 * S / bw(b) + 7 * r.latency_s + 7 / 16 * S / bw(r)
          + 3 * f.latency_s + 3 / 64 * S / bw(f))
    assert coll.all_gather(THREE_TIERS, S, 64, 2) == pytest.approx(ag, rel=1e-12)
    a2a = (1 * b.latency_s + 1 / 64 * S / bw(b) + 14 * r.latency_s + 14 / 64 * S / bw(r)
           + 48 * f.latency_s + 48 / 64 * S / bw(f))
    assert coll.all_to_all(THREE_TIERS, S, 64, 2) == pytest.approx(a2a, rel=1e-12)


def test_shipped_topologies_tp_inside_the_node_use_only_the_inner_link():
    for name in ("h100_dgx", "gb200_nvl72"):
        topo = load_topology(name)
        inner = topo.links[0]
        for p in (2, 4, 8):
            S = 1e7
            assert coll.all_gather(topo.links, S, p, 1) == pytest.approx(
                (p - 1) / p * S / bw(inner) + (p - 1) * inner.latency_s, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# vectorized == the scalar reference (tests/reference.py re-derives them from the docstring)

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("links", [ONE_TIER, H100, THREE_TIERS], ids=["1tier", "h100", "3tiers"])
def test_vectorized_equals_scalar_reference(kind, links):
    ps = np.array([1, 2, 3, 4, 8, 12, 16, 32, 64, 128, 512])
    strides = np.array([1, 2, 4, 8, 16, 64])
    S = 12345678.0
    grid = coll.COST[kind](links, S, ps[:, None], strides[None, :])
    for i, p in enumerate(ps):
        for j, s in enumerate(strides):
            want = ref.COLLECTIVE[kind](links, S, int(p), int(s))
            assert grid[i, j] == pytest.approx(want, rel=1e-12, abs=0.0), (p, s)


# ----------------------------------------------------------------------------------------------
# monotone in bytes and in bandwidth

sizes = st.floats(0.0, 1e12, allow_nan=False, allow_infinity=False)


@given(kind=st.sampled_from(KINDS), s1=sizes, s2=sizes, p=st.integers(1, 4096),
       stride=st.sampled_from([1, 2, 4, 8, 16, 64]),
       links=st.sampled_from([ONE_TIER, H100, THREE_TIERS]))
def test_monotone_in_bytes(kind, s1, s2, p, stride, links):
    lo, hi = sorted((s1, s2))
    assert coll.COST[kind](links, lo, p, stride) <= coll.COST[kind](links, hi, p, stride)


@given(kind=st.sampled_from(KINDS), nbytes=sizes, p=st.integers(1, 4096),
       stride=st.sampled_from([1, 2, 4, 8, 16, 64]),
       links=st.sampled_from([ONE_TIER, H100, THREE_TIERS]),
       tier=st.integers(0, 2), factor=st.floats(1.0, 100.0))
def test_monotone_in_bandwidth(kind, nbytes, p, stride, links, tier, factor):
    import dataclasses
    tier = min(tier, len(links) - 1)
    faster = list(links)
    faster[tier] = dataclasses.replace(links[tier],
                                       bandwidth_bytes_s=links[tier].bandwidth_bytes_s * factor)
    before = coll.COST[kind](links, nbytes, p, stride)
    after = coll.COST[kind](tuple(faster), nbytes, p, stride)
    assert after <= before * (1 + 1e-12)
    assert math.isfinite(after) and after >= 0.0


def test_wide_nvlink_domain_pays_log_depth_latency_not_a_ring():
    """GB200 NVL72: 64 ranks in one NVLink domain. NCCL's NVLS/tree latency grows with log2 p,
    so a tiny all-reduce costs 2 x 7 log2(64) / 3 = 28 steps of alpha, not the ring's 126."""
    links = load_topology("gb200_nvl72").links
    alpha = links[0].latency_s
    t = coll.all_reduce(links, 8.0, 64, 1)
    assert t == pytest.approx(28 * alpha, rel=1e-3)
    assert coll.all_reduce(links, 8.0, 8, 1) == pytest.approx(14 * alpha, rel=1e-3)   # ring
    assert coll.all_to_all(links, 8.0, 64, 1) == pytest.approx(63 * alpha, rel=1e-3)


# ----------------------------------------------------------------------------------------------
# link shapes: a full mesh (AMD Infinity Fabric) and PCIe (docs/gpus.md)

XGMI = LinkSpec("xgmi", 8, 64e9, 0.93e-6, 0.65, "mesh")     # mi300x_x8: 64 GB/s per peer link
MESH = (XGMI, LinkSpec("ib", 24576, 50e9, 4.5e-6, 0.92))


def switch_like(link, bandwidth):
    import dataclasses
    return dataclasses.replace(link, shape="switch", bandwidth_bytes_s=bandwidth)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("nbytes", [1.0, 4096.0, 1e9])
def test_mesh_closed_forms_inside_the_mesh(p, nbytes):
    """q ranks of a full mesh use their q-1 links at once: all-gather (q-1)/q*S over q-1 links
    = S/(q b) with the ring's q-1 steps; all-to-all S/q to each peer over its own link = S/(q b)
    with q-1 steps; send one link."""
    a, b = XGMI.latency_s, bw(XGMI)
    ag = nbytes / (p * b) + (p - 1) * a
    assert coll.all_gather(MESH, nbytes, p, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.reduce_scatter(MESH, nbytes, p, 1) == pytest.approx(ag, rel=1e-12)
    assert coll.all_reduce(MESH, nbytes, p, 1) == pytest.approx(2 * ag, rel=1e-12)
    assert coll.all_to_all(MESH, nbytes, p, 1) == pytest.approx(
        nbytes / (p * b) + (p - 1) * a, rel=1e-12)
    assert coll.send(MESH, nbytes, p, 1) == pytest.approx(nbytes / b + a, rel=1e-12)


@pytest.mark.parametrize("kind", KINDS[:4])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_mesh_equals_a_switch_of_its_group_links(kind, p):
    """A group of q inside the mesh costs what a switch of (q-1) x the per-peer link would: one
    link for 2 GPUs, all 7 (448 GB/s on MI300X) for 8."""
    S = 3e8
    as_switch = (switch_like(XGMI, (p - 1) * XGMI.bandwidth_bytes_s), MESH[1])
    assert coll.COST[kind](MESH, S, p, 1) == pytest.approx(coll.COST[kind](as_switch, S, p, 1),
                                                           rel=1e-12)


def test_mesh_bus_bandwidth_of_8_and_2_gpus():
    """nccl-tests' all-reduce bus bandwidth 2(p-1)/p*S/t at large S: 7 links x 64 x 0.65 = 291.2
    GB/s on 8 MI300X (RCCL measured 319 on all-reduce, 0.71 of 448, hardware.md §5.3), one link
    64 x 0.65 = 41.6 on 2 (measured 47.7); a single ring would give 41.6 on 8 as well."""
    S = 1e12
    for p, want in ((8, 7 * 64e9 * 0.65), (2, 64e9 * 0.65)):
        t = coll.all_reduce(MESH, S, p, 1) - 2 * (p - 1) * XGMI.latency_s   # the beta term
        assert 2 * (p - 1) / p * S / t == pytest.approx(want, rel=1e-9)


def test_mesh_then_ib_by_hand():
    """p=16 over 8-GPU meshes: 8 ranks on xGMI (7 links), 2 nodes on IB; strided groups."""
    S = 64e6
    a0, b0, a1, b1 = XGMI.latency_s, bw(XGMI), 4.5e-6, bw(MESH[1])
    assert coll.all_gather(MESH, S, 16, 1) == pytest.approx(
        7 * a0 + S / (8 * b0) + a1 + 1 / 16 * S / b1, rel=1e-12)
    # all-to-all: 7 peers in the node get S/16 each over their own links, 8 outside over IB
    assert coll.all_to_all(MESH, S, 16, 1) == pytest.approx(
        7 * a0 + 1 / 16 * S / b0 + 8 * a1 + 8 / 16 * S / b1, rel=1e-12)
    # ep 4 at stride 2 inside a node: 3 direct links
    assert coll.all_gather(MESH, S, 4, 2) == pytest.approx(3 * a0 + S / (4 * b0), rel=1e-12)
    # stride 8: one rank per node, IB only
    assert coll.all_gather(MESH, S, 4, 8) == pytest.approx(3 * a1 + 3 / 4 * S / b1, rel=1e-12)
    assert coll.send(MESH, S, 2, 2) == pytest.approx(S / b0 + a0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stride", [1, 2, 8, 64])
def test_mesh_group_of_one_costs_exactly_zero(kind, stride):
    for nbytes in (0.0, 1.0, 1e12):
        assert coll.COST[kind](MESH, nbytes, 1, stride) == 0.0


@given(kind=st.sampled_from(KINDS), nbytes=sizes, p=st.integers(1, 4096),
       stride=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_mesh_between_one_link_and_all_links(kind, nbytes, p, stride):
    """A mesh never costs more than a switch with one peer link's bandwidth (a single ring) nor
    less than a switch with all span-1 links' bandwidth."""
    t = coll.COST[kind](MESH, nbytes, p, stride)
    one = (switch_like(XGMI, XGMI.bandwidth_bytes_s), MESH[1])
    every = (switch_like(XGMI, 7 * XGMI.bandwidth_bytes_s), MESH[1])
    assert coll.COST[kind](every, nbytes, p, stride) * (1 - 1e-12) <= t
    assert t <= coll.COST[kind](one, nbytes, p, stride) * (1 + 1e-12)


@given(kind=st.sampled_from(KINDS), s1=sizes, s2=sizes, p=st.integers(1, 4096),
       stride=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_mesh_monotone_in_bytes(kind, s1, s2, p, stride):
    lo, hi = sorted((s1, s2))
    assert coll.COST[kind](MESH, lo, p, stride) <= coll.COST[kind](MESH, hi, p, stride)


def test_shipped_mesh_and_pcie_topologies():
    """mi300x_x8's xGMI is a mesh of 64 GB/s links, l40s_pcie's PCIe a switch-like x16 per GPU."""
    mi = load_topology("mi300x_x8").links
    assert mi[0].shape == "mesh" and mi[0].bandwidth_bytes_s == 64e9
    S = 1e9
    assert coll.all_gather(mi, S, 8, 1) == pytest.approx(S / (8 * bw(mi[0])) + 7 * mi[0].latency_s)
    pcie = load_topology("l40s_pcie").links
    assert pcie[0].shape == "pcie" and pcie[0].bandwidth_bytes_s == 32e9
    assert coll.all_gather(pcie, S, 8, 1) == pytest.approx(
        7 / 8 * S / bw(pcie[0]) + 7 * pcie[0].latency_s)


# ----------------------------------------------------------------------------------------------
# the engines' one-shot custom all-reduce (small messages inside one switch domain)

ONESHOT = LinkSpec("nvlink", 8, 450e9, 1.4e-6, 0.75, "switch", 3.1e-6, 0.71, 8 * 2**20)
ENGINE_H100 = (ONESHOT, IB)
H100_FILE = Path(__file__).resolve().parents[1] / "topologies" / "h100_dgx.toml"


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("nbytes", [8192.0, 131072.0, 1048576.0])
def test_oneshot_closed_form_fits_the_microbenchmarks(p, nbytes):
    want = 3.1e-6 + (p - 1) * nbytes / (450e9 * 0.71)
    assert coll.oneshot(ONESHOT, nbytes, p) == pytest.approx(want, rel=1e-12)
    # microbenchmarks.csv custom_allreduce (TensorRT-LLM 1.3.0rc20, H100): within 0.35 us
    measured = {(2, 8192.0): 2.8, (2, 1048576.0): 6.1, (4, 8192.0): 3.14, (4, 1048576.0): 12.91,
                (8, 8192.0): 3.54, (8, 131072.0): 6.2, (8, 1048576.0): 25.96}
    if (p, nbytes) in measured:
        assert abs(want * 1e6 - measured[(p, nbytes)]) < 0.35


@given(st.floats(1.0, 1e9), st.sampled_from([2, 3, 4, 8, 16, 64]))
def test_all_reduce_with_oneshot_is_the_faster_where_it_runs(nbytes, p):
    ring = coll.all_reduce(H100, nbytes, p, 1.0)
    got = coll.all_reduce(ENGINE_H100, nbytes, p, 1.0)
    runs = p <= 8 and nbytes <= 8 * 2**20           # inside the node, under the engine's limit
    want = min(ring, coll.oneshot(ONESHOT, nbytes, p)) if runs else ring
    assert got == pytest.approx(want, rel=1e-12)
    assert got <= ring * (1 + 1e-12)


def test_oneshot_replaces_the_ring_for_decode_sized_messages_only():
    small, large = 131072.0, 48 * 2**20           # a decode step's and a prefill chunk's
    assert coll.all_reduce(ENGINE_H100, small, 8, 1.0) * 1e6 == pytest.approx(5.97, abs=0.01)
    assert coll.all_reduce(H100, small, 8, 1.0) * 1e6 > 20          # 14 ring steps of 1.4 us
    assert coll.all_reduce(ENGINE_H100, large, 8, 1.0) == coll.all_reduce(H100, large, 8, 1.0)


def test_engine_links_carry_the_engine_limit():
    from lts.engines import get
    topo = load_topology("h100_dgx")
    assert topo.engine_links[0].oneshot_max_bytes == 0.0          # no engine: NCCL only
    for engine in ("vllm", "sglang", "trtllm"):
        links = get(engine).profile.topology(topo).engine_links
        assert links[0].oneshot_max_bytes == 8 * 2**20
        assert links[0].oneshot_latency_s == 3.1e-6 and links[0].oneshot_efficiency == 0.71
    assert get("generic").profile.topology(topo).engine_links[0].oneshot_max_bytes == 0.0


@pytest.mark.parametrize("extra, message", [
    ("oneshot_latency_us = 3.0\n", "link[0].oneshot_efficiency: missing: oneshot_latency_us "
                                   "and oneshot_efficiency come together"),
    ("oneshot_latency_us = 3.0\noneshot_efficiency = 0.7\nshape = \"mesh\"\n",
     "link[0].oneshot_latency_us: only with shape = \"switch\" (this link's shape is 'mesh')"),
])
def test_oneshot_keys_are_checked(tmp_path, extra, message):
    lines = [line for line in H100_FILE.read_text().splitlines(keepends=True)
             if not line.startswith("oneshot_")]
    text = "".join(lines).replace("[[link]]\n", "[[link]]\n" + extra, 1)
    p = tmp_path / "t.toml"
    p.write_text(text)
    with pytest.raises(Exception) as e:
        load_topology(str(p))
    assert message in str(e.value)
