"""KV-cache offload to host memory (lts.serving.offload, issue 37): the topologies' host links,
the GPU/host split by hand, the loop with and without a host tier (nothing changes where every
prefix fits; more prefixes than fit: more requests, the hit rate kept, the copy on TTFT checked
by hand; a small tier: misses), the engines' launch flags and the flags' refusals."""
import json
from dataclasses import replace

import numpy as np
import pytest

from lts.engines import ENGINES, REAL_ENGINES
from lts.launch import emit
from lts.search.problems import ServeProblem
from lts.serving import serve
from lts.serving.offload import HostTier
from lts.serving.prefix import PrefixCache
from lts.specs import SpecError, load_model, load_topology, shipped_names
from lts.specs.strategy import parse_strategy
from test_engine_flags import _check
from test_validate import run

LLAMA, H200 = load_model("llama3.1-70b"), load_topology("h200_dgx")
VLLM = ENGINES["vllm"].profile.for_gpu(H200)
ROW = np.array([parse_strategy("tp=8,batch=64")])
ISL, OSL, HIT = 2500, 500, 0.8            # 2000 cached tokens a prompt
GIB = 2**30
# Llama-3.1-70B's KV cache per token on one GPU of tp 8: 80 layers x 1 KV head x 128 x (K, V)
# x 2 bytes (bf16)
KV_TOKEN_GPU = 80 * 1 * 128 * 2 * 2


def loop(prefixes, host_gib=0.0, topo=H200, best=False, row=ROW):
    return serve.serve(LLAMA, topo, row, ISL, OSL, engine=VLLM, best_batch=best,
                       tpot_slo_ms=50 if best else None,
                       prefix=PrefixCache(HIT, prefixes, host_gib * GIB))


def test_every_shipped_topology_gives_its_host_link():
    for name in shipped_names("topologies"):
        assert load_topology(name).host_bandwidth_bytes_s > 0, name
    assert H200.host_bandwidth_bytes_s == 52e9       # nvbandwidth Host to Device, hardware.md
    assert load_topology("l40s_pcie").host_bandwidth_bytes_s == 32e9     # PCIe Gen4 x16


def test_a_bad_host_link_is_refused(tmp_path):
    text = open(H200.path).read().replace("host_bandwidth_gb_s = 52", "host_bandwidth_gb_s = 0.01")
    p = tmp_path / "t.toml"
    p.write_text(text)
    with pytest.raises(SpecError, match="gpu.host_bandwidth_gb_s: 0.01 must be >= 0.1"):
        load_topology(str(p))


@pytest.mark.parametrize("inclusive, want", [(True, (0.25, 0.0, 0.75)),
                                             (False, (0.25, 0.25, 0.5))])
def test_the_split_by_hand(inclusive, want):
    """20 prefixes of 10 bytes on the GPU (8 of KV), a pool of 100, 1 byte a request's own
    tokens, 40 bytes of host: at 50 requests the GPU keeps (100 - 50) / 10 = 5 prefixes, the
    host 40 / 8 = 5: with the GPU's included 5 reachable, beside them 10."""
    tier = HostTier(np.array([True]), np.array([100.0]), np.array([1.0]), np.array([10.0]),
                    np.array([8.0]), 20, 40.0, 4.0, inclusive)
    assert tuple(float(v[0]) for v in tier.split(50)) == want
    assert tier.copy_s()[0] == 2.0                                  # 8 bytes at 4 bytes/s


@pytest.mark.parametrize("prefixes", [1, 100])
@pytest.mark.parametrize("best", [False, True])
def test_the_tier_changes_nothing_when_every_prefix_fits(prefixes, best):
    a, b = loop(prefixes, best=best), loop(prefixes, 100.0, best=best)
    for f in ("output_tokens_per_s", "ttft_s", "tpot_s", "latency_s", "running", "kv_capacity",
              "memory_bytes", "strategies"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert b.prefix_split[0].tolist() == [1.0, 0.0, 0.0] and b.copy_s[0] == 0.0


def test_more_prefixes_than_fit_run_more_requests_with_the_copy_on_ttft():
    """1,300 prefixes of 2,000 tokens: held on the GPU they leave room for 147 requests; with a
    host tier the running requests come first (912 fit), every hit is kept (80% of the prompt
    tokens) and a request whose prefix is on the host waits for its copy: 2,000 tokens x 40,960
    bytes per GPU / 52 GB/s = 1.575 ms, the only difference from a link of no time."""
    pinned, tier = loop(1300, best=True), loop(1300, 160.0, best=True)
    assert pinned.kv_capacity[0] == 147 and tier.kv_capacity[0] == 912
    assert tier.running[0] > pinned.running[0]
    assert tier.output_tokens_per_s[0] > 1.2 * pinned.output_tokens_per_s[0]
    on_gpu, on_host, miss = tier.prefix_split[0]
    assert miss == 0.0 and on_host > 0.0 and on_gpu + on_host == pytest.approx(1.0)
    copy = 2000 * KV_TOKEN_GPU / 52e9
    assert tier.copy_s[0] == pytest.approx(on_host * copy, rel=1e-12)
    fast = loop(1300, 160.0, topo=replace(H200, host_bandwidth_bytes_s=1e30),
                row=tier.strategies)
    assert tier.ttft_s[0] - fast.ttft_s[0] == pytest.approx(on_host * copy, rel=1e-9)
    assert tier.tpot_s[0] == fast.tpot_s[0]


def test_prefixes_beyond_the_gpu_and_the_host_are_recomputed():
    """3,000 prefixes do not fit the GPU at all (no request fits without a tier); a 20 GiB tier
    holds 262 of them (vLLM's host copy includes the GPU's, which holds more): more than half
    the requests prefill their whole prompt, between the loop that hits and the one that does
    not cache."""
    assert loop(3000).kv_capacity[0] == 0
    small, big = loop(3000, 20.0), loop(3000, 240.0)
    assert small.prefix_split[0, 2] > 0.5 and big.prefix_split[0, 2] == 0.0
    none = serve.serve(LLAMA, H200, ROW, ISL, OSL, engine=VLLM)
    assert big.ttft_s[0] < small.ttft_s[0] < none.ttft_s[0]


def test_a_tier_needs_an_engine_that_ships_one():
    with pytest.raises(ValueError, match="generic has no KV-cache offload to host memory"):
        serve.serve(LLAMA, H200, ROW, ISL, OSL, prefix=PrefixCache(HIT, 10, GIB))


LAUNCH = {"vllm": "--enable-prefix-caching --kv-offloading-size 1280 --kv-offloading-backend "
                  "native",
          "sglang": "--enable-hierarchical-cache --hicache-size 171",
          "trtllm": 'printf "kv_cache_config:\\n  host_cache_size: 171798691840\\n" > '
                    "lts-trtllm.yaml"}


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_launch_flags(engine):
    """160 GiB per GPU of tp 8: vLLM's size summed over the engine core's 8 GPUs (GiB), SGLang's
    whole decimal GB per rank, TensorRT-LLM's bytes per rank in its options YAML; each flag one
    the release accepts."""
    p = ServeProblem(LLAMA, H200, ISL, OSL, gpus=8, engine=ENGINES[engine].profile.for_gpu(H200),
                     engine_space=engine, prefix=PrefixCache(HIT, 2000, 160 * GIB))
    cmds, notes = emit.commands(engine, LLAMA, H200, p.work, ROW[0], "llama3.1-70b", serve=p)
    assert _check(cmds) == [], cmds
    assert LAUNCH[engine] in " ".join(c for _, c in cmds)
    assert any(n.startswith("KV offload: ") for n in notes)
    if engine == "trtllm":
        assert "--extra_llm_api_options lts-trtllm.yaml" in cmds[-1][1]


SERVE = ("estimate", "llama3.1-70b", "h200_dgx", "--strategy", "tp=8", "--phase", "serve",
         "--isl", "2500", "--osl", "500", "--gpus", "8")


def test_estimate_reports_the_tier():
    r = run(*SERVE, "--prefix-hit", "0.8", "--prefixes", "2000", "--kv-offload", "160",
            "--engine", "vllm", "--json")
    assert r.exit_code == 0, r.output
    pc = json.loads(r.output)["prefix_cache"]
    assert pc["kv_offload_gib"] == 160 and pc["recomputed"] == 0 and pc["effective_hit"] == 0.8
    assert pc["copy_ms"] == pytest.approx(2000 * KV_TOKEN_GPU / 52e9 * 1e3, rel=1e-12)
    assert pc["on_gpu"] + pc["on_host"] == pytest.approx(1.0)


@pytest.mark.parametrize("args, message", [
    (("--kv-offload", "10"), "Error: --kv-offload: only with --prefix-hit"),
    (("--prefix-hit", "0.8", "--kv-offload", "10"),
     "Error: --kv-offload: the generic engine has no KV-cache offload to host memory; name one "
     "that ships it (--engine vllm, sglang or trtllm)"),
    (("--prefix-hit", "0", "--kv-offload", "10", "--engine", "vllm"),
     "Error: --kv-offload: --prefix-hit 0 caches no token of a 2,500-token prompt: nothing to "
     "offload"),
    (("--prefix-hit", "0.8", "--kv-offload", "0", "--engine", "vllm"),
     "Error: Invalid value for '--kv-offload': 0.0 is not in the range 0<x<=65536."),
])
def test_estimate_refuses(args, message):
    r = run(*SERVE, *args)
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output


def test_two_pools_and_the_agent_refuse_a_tier(tmp_path):
    r = run("estimate", "llama3.1-70b", "h200_dgx", "--phase", "serve", "--prefill", "tp=4",
            "--decode", "tp=4", "--prefix-hit", "0.8", "--kv-offload", "10", "--engine", "vllm")
    assert r.exit_code == 2 and "Error: --kv-offload: one pool only (the two-pool loop holds " \
        "every prefix on the GPU)" in " ".join(r.output.split())
    r = run("search", "llama3.1-70b", "h200_dgx", "--phase", "serve", "--gpus", "8",
            "--prefix-hit", "0.8", "--kv-offload", "10", "--engine", "vllm", "--method", "ppo")
    assert r.exit_code == 2 and "Error: --kv-offload: not with --method ppo (its bounds hold " \
        "every prefix on the GPU); use exact, megatron or a baseline" in " ".join(r.output.split())
    text = "\n".join(l for l in open(H200.path).read().splitlines()
                     if not l.startswith("host_bandwidth_gb_s"))
    (tmp_path / "t.toml").write_text(text)
    r = run("estimate", "llama3.1-70b", str(tmp_path / "t.toml"), *SERVE[3:], "--prefix-hit",
            "0.8", "--kv-offload", "10", "--engine", "vllm")
    assert r.exit_code == 2 and "Error: --kv-offload: topology h200_dgx gives no " \
        "gpu.host_bandwidth_gb_s (each GPU's link to host memory)" in " ".join(r.output.split())


def test_a_search_finds_what_only_the_tier_fits():
    """3,000 prefixes of 2,000 tokens leave nothing feasible on 8 H200 with every prefix on the
    GPU; 240 GiB per GPU of host memory holds them all. Two pools and the whole per-op space's
    headroom hold every prefix on the GPU: neither is searched."""
    args = ("search", "llama3.1-70b", "h200_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "2500", "--osl", "500", "--tpot-slo-ms", "50", "--prefix-hit", "0.8", "--prefixes",
            "3000", "--engine", "vllm", "--json")
    assert run(*args).exit_code == 1
    r = run(*args, "--kv-offload", "240")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["best"]["tpot_ms"] <= 50 and d["disagg"] is None
    assert d["workload"]["prefix_cache"]["kv_offload_gib"] == 240
