"""Engine registry helpers: which profile release stands for an engine version."""
from dataclasses import replace

from lts.engines import get


def test_release_for_picks_the_newest_profile_not_newer_than_the_version():
    vllm = get("vllm")
    base = vllm.profile
    eng = replace(vllm, profiles={"0.12": base, "0.15": base, "0.19": base}, version="0.19")
    assert eng.release_for("0.12.0") == "0.12"
    assert eng.release_for("0.15.1") == "0.15"
    assert eng.release_for("0.18.0") == "0.15"
    assert eng.release_for("0.19") == "0.19"
    assert eng.release_for("0.33.0") == "0.19"
    assert eng.release_for("1.2.0rc2.post2") == "0.19"
    assert eng.release_for("0.11.2") == "0.12"             # older than all: the oldest
    assert eng.release_for("v0.15.1") == "0.15"            # a leading v is read
    for v in ("nightly-5b8c30d62b754b57", "gpt-oss-dev", ""):   # no number: the served one
        assert eng.release_for(v) == "0.19"


def test_version_in_source():
    from lts.engines import version_in_source
    src = "aiconfigurator-core 0.12 systems/silicon_sample.csv: "
    assert version_in_source(src + "vllm 0.12.0", "vllm") == "0.12.0"
    assert version_in_source(src + "trtllm 1.2.0rc2.post2", "trtllm") == "1.2.0rc2.post2"
    assert version_in_source(src + "sglang 0.5.1.post1", "sglang") == "0.5.1.post1"
    assert version_in_source(src + "vllm nightly-5b8c30d62b754b57", "vllm") == ""
    assert version_in_source("vLLM v0.12.0", "vllm") == "0.12.0"
    assert version_in_source("vllm==0.12.0", "vllm") == "0.12.0"
    assert version_in_source(src + "trtllm ", "trtllm") == ""
    assert version_in_source("TensorRT-LLM v0.14 performance overview", "trtllm") == "0.14"


def test_engines_set_themselves_up_by_gpu():
    """vLLM's get_batch_defaults and SGLang's chunked_prefill_size / mem_fraction_static tiers
    (vllm 0.12.0 arg_utils.py, sglang 0.5.1 server_args.py), applied by EngineProfile.for_gpu."""
    from lts.engines.profiles import MIB, sglang_mem_fraction
    from lts.specs import load_topology
    vllm, sglang, trtllm = (get(n).profile for n in ("vllm", "sglang", "trtllm"))
    want_vllm = {"h100_dgx": (8192, 1024), "h20_hgx": (8192, 1024), "b200_dgx": (8192, 1024),
                 "a100_dgx": (2048, 256), "l40s_pcie": (2048, 256)}
    for topo, want in want_vllm.items():
        p = vllm.for_gpu(load_topology(topo))
        assert (p.step_tokens, p.max_running) == want, topo
    want_sglang = {"l40s_pcie": 8192, "h100_dgx": 8192, "h200_dgx": 8192, "b200_dgx": 16384,
                   "b300_dgx": 16384}                     # L40S: 45 GiB, in the 35-160 tier
    for topo, want in want_sglang.items():
        assert sglang.for_gpu(load_topology(topo)).step_tokens == want, topo
    h100 = load_topology("h100_dgx")
    assert trtllm.for_gpu(h100) is trtllm                     # no GPU rule: as it is
    # mem_fraction_static by the GPU's memory (MiB): 80 GiB 9.5 + p/2, 141 GiB 12 + p/2, 180: 32
    for mib, p, reserved in ((81559, 8, 13.5), (143771, 1, 12.5), (143771, 8, 16),
                             (183359, 8, 32), (24576, 2, 3.0)):
        assert sglang_mem_fraction(mib * MIB, p) == round((mib - reserved * 1024) / mib, 3)


def test_engine_at_version_picks_the_release():
    """--engine NAME@VERSION: the profile of the newest release not newer (vllm@0.12: 0.12's,
    no time per request; vllm: the newest, 0.15's 30 ms on every TTFT), and the measured
    kernels of that version (vllm@0.19.0 reads 0.19.0's all-reduce table, plain vllm its
    profile release's, 0.15 -> 0.14.0's: by the roofline alone the two agree); bad values
    exit 2."""
    import json
    from click.testing import CliRunner
    from lts.cli import cli
    args = ["estimate", "llama3.1-70b", "h100_dgx", "--strategy", "tp=4", "--phase", "serve",
            "--concurrency", "1", "--json", "--engine"]
    ttft, bare = {}, {}
    for e in ("vllm@0.12", "vllm@0.12.0", "vllm@0.19.0", "vllm"):
        r = CliRunner().invoke(cli, args + [e])
        assert r.exit_code == 0, r.output
        ttft[e] = json.loads(r.stdout)["ttft_ms"]        # (a Note on stderr for 0.19.0)
        r = CliRunner().invoke(cli, args + [e, "--no-kernels"])
        bare[e] = json.loads(r.stdout)["ttft_ms"]
    assert ttft["vllm@0.12"] == ttft["vllm@0.12.0"]
    assert bare["vllm@0.19.0"] == bare["vllm"]
    assert ttft["vllm@0.19.0"] != ttft["vllm"]          # 0.19.0's all-reduce, not 0.14.0's
    assert abs(ttft["vllm"] - ttft["vllm@0.12"] - 30.0) < 1e-6   # 0.15: 30 ms per request
    for bad, message in (("vllm@nightly", "'vllm@nightly': 'nightly' is not a version (releases "
                                          "lts models: 0.12, 0.15)"),
                         ("tgi", "'tgi' is not one of generic, vllm, sglang, trtllm (optionally "
                                 "@VERSION, e.g. vllm@0.12)"),
                         ("generic@1", "'generic@1': generic has no releases to pick from"),
                         ("vllm@0.12@1", "'vllm@0.12@1': one @VERSION at most (e.g. vllm@0.12)")):
        r = CliRunner().invoke(cli, args + [bad])
        assert r.exit_code == 2
        assert f"Invalid value for '--engine': {message}" in r.output
