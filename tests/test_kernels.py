"""Measured kernels (issue 34): the tables lts ships are read as measured at their grid points,
interpolated between them on log scales and extended past them in proportion; the release rule;
the cost model takes a table's time where one holds the op, the roofline elsewhere; a user's own
tables in the collector's layout (CSV) read the same way; lts kernels' output and errors."""
import csv
import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from lts.cli import cli
from lts.cost import kernels as K
from lts.cost.layouts import MODE_DIM0, MODE_DIM1, SLOT
from lts.cost.tables import build_tables
from lts.engines import ENGINES
from lts.specs import load_model, load_topology
from lts.specs.errors import SpecError
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload

H100 = load_topology("h100_dgx")


def vllm_h100(version="0.24.0"):
    return K.for_engine("h100_sxm", "vllm", version)


def test_a_grid_point_reads_as_measured():
    ks = vllm_h100()
    d = ks.data
    p = ks.gemm_source("bf16")
    m, n, k = (d[f"{p}|{a}"] for a in "mnk")
    lat = d[p + "|lat"].astype(np.float64)
    for i, j, l in ((0, 0, 0), (5, 7, 3), (len(m) - 1, len(n) - 1, len(k) - 1), (20, 12, 15)):
        if np.isfinite(lat[i, j, l]):
            got = ks.gemm("bf16", float(m[i]), float(n[j]), float(k[l]))
            assert np.log2(got * 1e3) == pytest.approx(lat[i, j, l], abs=1e-9)


@given(st.floats(1, 60000), st.floats(1.01, 4))
def test_gemm_time_never_falls_as_m_grows(m, factor):
    ks = vllm_h100()
    a = ks.gemm("bf16", m, 5000.0, 3000.0)
    b = ks.gemm("bf16", m * factor, 5000.0, 3000.0)
    assert b >= a * (1 - 1e-12)


def test_past_the_grid_time_grows_in_proportion():
    ks = vllm_h100()
    top = float(ks.data[ks.gemm_source("bf16") + "|m"][-1])
    a, b = ks.gemm("bf16", top, 4096.0, 4096.0), ks.gemm("bf16", 4 * top, 4096.0, 4096.0)
    assert b / a == pytest.approx(4.0, rel=1e-9)


@pytest.mark.parametrize("want, version, note", [
    ("0.19.0", "0.19.0", ""), ("0.19.0", "0.20.1", "nearest older (0.19.0 for 0.20.1)"),
    ("0.14.0", "0.12", "oldest, newer than 0.12 (0.14.0)"), ("0.24.0", "", "newest (0.24.0)"),
    ("0.24.0", "nightly", "newest (0.24.0)")])
def test_the_release_is_the_newest_not_newer(want, version, note):
    assert K.pick_release(["0.24.0", "0.14.0", "0.19.0"], version) == (want, note)


def test_release_candidates_come_before_their_release():
    order = sorted(["1.3.0", "1.3.0rc20", "1.2.0rc5", "1.3.0rc10"], key=K._version)
    assert order == ["1.2.0rc5", "1.3.0rc10", "1.3.0rc20", "1.3.0"]
    assert K.pick_release(["1.3.0rc10", "1.3.0rc20"], "1.3.0rc15")[0] == "1.3.0rc10"


def test_a_format_the_engine_table_lacks_reads_another_engine_of_the_gpu():
    """vLLM 0.24.0's fp8_block GEMM table is host-bound (scripts/kernel_tables.py leaves it
    out): the block-scaled GEMMs of a vLLM run on H100 read SGLang's table of that GPU."""
    ks = vllm_h100()
    assert ks.gemm_source("fp8_block").startswith("gemm|sglang|")
    assert ks.gemm_source("bf16").startswith("gemm|vllm|0.24.0")
    assert ks.gemm_source("mxfp4") is None and ks.gemm("mxfp4", 1, 1, 1) is None


def test_moe_shape_held_and_left_out():
    """A held shape reads its row; left out, the nearest other shape at the same tokens per
    expert, scaled; ep reads the ep = 1 row with fewer experts per rank."""
    ks = K.for_engine("b200_sxm", "vllm", "0.19.0")
    shape = (3072, 1536, 8, 256)
    held = ks.moe("fp8_block", *shape, 1, 1, np.array([16.0, 8192.0]))
    p, rows = ks.moe_rows("fp8_block", *shape)
    keys = ks.data[p + "keys"]
    r = [i for i in rows if keys[i, 6] == 1 and keys[i, 7] == 1][0]
    tok = list(ks.data[p + "tokens"])
    meas = 2.0 ** ks.data[p + "lat"][r].astype(np.float64)[[tok.index(16), tok.index(8192)]]
    assert held * 1e3 == pytest.approx(meas, rel=1e-9)
    out = ks.moe("fp8_block", *shape, 1, 1, np.array([16.0, 8192.0]), exclude=shape)
    assert np.all(np.isfinite(out)) and not np.allclose(out, held)
    ep4 = ks.moe("fp8_block", *shape, 1, 4, np.array([16.0, 8192.0]))
    assert ep4 == pytest.approx(held * 4.0 ** -K.MOE_SCALE_POWER)
    assert ks.moe("int8", *shape, 1, 1, 16.0) is None          # no MoE table of that format


def tables(model, kernels=True, phase="decode", tp=4):
    topo = ENGINES["vllm"].profile.for_gpu(H100).with_kernels("0.24.0", on=kernels).topology(H100)
    w = Workload(phase=phase, context=2048)
    return build_tables(model, topo, w, coarse_of(make_row(tp=tp, batch=8))[None]), topo


def test_the_cost_model_takes_the_table_time_of_a_gemm():
    """Llama-3.1-70B's qkv projection, column split over tp 4 (MODE_DIM1): its time in the
    tables is the GEMM table's at (8 tokens, its share of the columns, hidden)."""
    m = load_model("llama3.1-70b")
    t, topo = tables(m)
    a = m.attention
    n = (a.heads + 2 * a.kv_heads) * a.head_dim / 4
    want = topo.kernels.gemm("bf16", 8.0, n, float(m.hidden))
    assert t.time_s[0, SLOT["qkv"], MODE_DIM1] == pytest.approx(want, rel=1e-12)
    assert "qkv" in t.extra["measured"] and "attn_norm" not in t.extra["measured"]
    bare, _ = tables(m, kernels=False)
    assert bare.extra["measured"] == []
    assert bare.time_s[0, SLOT["qkv"], MODE_DIM1] != t.time_s[0, SLOT["qkv"], MODE_DIM1]
    # ops the tables do not hold keep the roofline
    assert t.time_s[0, SLOT["attn_norm"], MODE_DIM0] == bare.time_s[0, SLOT["attn_norm"],
                                                                    MODE_DIM0]


def test_the_generic_engine_reads_no_tables():
    """lts search's default engine is the roofline's: its answers do not move with the tables."""
    topo = ENGINES["generic"].profile.for_gpu(H100).topology(H100)
    assert topo.kernels is None


def write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def own_tables(tmp_path, scale=1.0):
    """A user's own GEMM table in the collector's layout, as CSV: a 2 x 2 x 2 grid whose
    latency is scale x m x n x k / 1e9 ms."""
    rows = [dict(framework="VLLM", version="0.24.0", op_name="gemm", kernel_source="mine",
                 gemm_dtype="bfloat16", m=m, n=n, k=k, latency=scale * m * n * k / 1e9)
            for m in (16, 256) for n in (1024, 4096) for k in (1024, 4096)]
    write_csv(tmp_path / "mygpu" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.csv", rows)
    return tmp_path


def test_own_tables_in_the_collectors_layout_read_as_shipped(tmp_path):
    d = own_tables(tmp_path)
    assert K.gpus(str(d)) == ["mygpu"]
    ks = K.for_engine("mygpu", "vllm", "0.24.0", str(d))
    assert ks.gemm("bf16", 256.0, 4096.0, 1024.0) == pytest.approx(256 * 4096 * 1024 / 1e12,
                                                                    rel=1e-3)
    # between grid points, log-linear in each size: m x n x k stays exact
    assert ks.gemm("bf16", 64.0, 2048.0, 2048.0) == pytest.approx(64 * 2048 * 2048 / 1e12,
                                                                   rel=2e-3)
    assert ks.moe("bf16", 1, 1, 1, 1, 1, 1, 1.0) is None


def test_lts_kernels_lists_a_folder_and_a_models_ops(tmp_path):
    d = own_tables(tmp_path)
    r = CliRunner().invoke(cli, ["kernels", "--kernels", str(d), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [(x["gpu"], x["op"], x["engine"], x["release"], x["formats"]) for x in out["tables"]] \
        == [("mygpu", "gemm", "vllm", "0.24.0", ["bf16"])]
    r = CliRunner().invoke(cli, ["kernels", "--model", "minimax-m2.5", "--topology", "b200_dgx",
                                 "--engine", "vllm@0.19.0", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["model"]
    ops = {x["op"]: x for x in out["ops"]}
    assert ops["ffn1"] == {"op": "ffn1", "decode": "table", "prefill": "table"}
    assert ops["attn_norm"]["decode"] == "roofline"
    # MiniMax-M2.5's block-fp8 experts under vLLM 0.19.0 on B200 read 0.24.0's rows (the kernel
    # that release runs: test_vllm_on_blackwell_reads_the_block_fp8_moe_kernel_it_runs)
    assert {x["op"]: x["release"] for x in out["tables"]}["moe"] == "0.24.0"
    assert (out["moe"]["release"], out["moe"]["shape"], out["moe"]["held"]) == \
        ("0.24.0", [3072, 1536, 8, 256], True)
    r = CliRunner().invoke(cli, ["kernels", "--model", "minimax-m2.5", "--topology", "b200_dgx",
                                 "--engine", "vllm", "--no-kernels", "--json"])
    assert json.loads(r.stdout)["model"]["tables"] == []


@pytest.mark.parametrize("args, code, message", [
    (["kernels", "nosuch"], 1, "Error: no kernel tables for GPU 'nosuch' (tables: a100_sxm, "),
    (["kernels", "--model", "qwen3-32b"], 2, "Error: --model and --topology come together"),
    (["kernels", "--kernels", "/nonexistent/dir"], 2, "Directory '/nonexistent/dir' does not "
                                                      "exist"),
])
def test_lts_kernels_bad_input(args, code, message):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == code and message in r.output, r.output


def test_a_folder_without_tables_is_refused(tmp_path):
    r = CliRunner().invoke(cli, ["estimate", "qwen3-32b", "h100_dgx", "--kernels",
                                 str(tmp_path)])
    assert r.exit_code == 2
    assert "no kernel tables in this folder (<gpu>.npz as scripts/kernel_tables.py writes " \
        "them, or the collector's <gpu>/<op>/<engine>/<release>/<table>.csv)" in " ".join(
            r.output.split())


@pytest.mark.parametrize("header, row, message", [
    ("gemm_dtype,m,n", "bfloat16,1,2", "gemm_perf.csv: no column k, latency (a gemm table has "
                                       "gemm_dtype, m, n, k, latency)"),
    ("gemm_dtype,m,n,k,latency", "bfloat16,1,2,3,abc", "gemm_perf.csv: row 1: latency: 'abc' "
                                                        "is not a positive number"),
    ("gemm_dtype,m,n,k,latency", "bfloat16,1,2,3,-1", "gemm_perf.csv: row 1: latency: '-1' is "
                                                       "not a positive number"),
    ("gemm_dtype,m,n,k,latency", "bfloat16," + "9" * 5000 + ",2,3,0.01",
     "gemm_perf.csv: row 1: m: '" + "9" * 40 + "'... (5,000 characters) is not a positive "
     "number"),
    ("gemm_dtype,m,n,k,latency", "bfloat16,1,2,3,0.0_1",       # (NumPy reads it as 0.01)
     "gemm_perf.csv: row 1: latency: '0.0_1' is not a positive number"),
    ("gemm_dtype,m,n,k,latency", "bfloat16,٢,2,3,0.01",
     "gemm_perf.csv: row 1: m: '٢' is not a positive number"),
    ("gemm_dtype,m,n,k,latency", "bfloat16,1.5,2,3,0.01",       # (a shape: was read as 1)
     "gemm_perf.csv: row 1: m: '1.5' is not a whole number"),
    ("gemm_dtype,m,n,k,latency", "bf\x1b[31m16,1,2,3,0.01",     # (shown in every listing)
     "gemm_perf.csv: row 1: gemm_dtype: 'bf\\x1b[31m16' contains control or bidirectional "
     "formatting characters (expected plain text)"),
    ("gemm_dtype,m,n,k,latency", "b" * 65 + ",1,2,3,0.01",
     "gemm_perf.csv: row 1: gemm_dtype: '" + "b" * 40 + "'... (65 characters) is longer than "
     "64 characters"),
    ("gemm_dtype,m,n,k,latency,latency", "bfloat16,1,2,3,0.01,0.02",
     "gemm_perf.csv: header: column 'latency' named twice"),
    # every table left out (a latency in us read as ms: 150 ms): why, not "no table"
    ("gemm_dtype,m,n,k,latency", "bfloat16,1,2,3,150",
     "no table lts reads: " + "{tmp}/g/gemm/vllm/0.24.0/gemm_perf.csv: 'bfloat16' left out: "
     "its fastest GEMM takes 150,000 us, over 30 us: the host's time per call, not a kernel's "
     "(latency is in ms)"),
])
def test_a_malformed_own_table_is_the_flags_error(tmp_path, header, row, message):
    f = tmp_path / "g" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.csv"
    f.parent.mkdir(parents=True)
    f.write_text(header + "\n" + row + "\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["kernels", "--kernels", str(tmp_path)])
    message = message.replace("{tmp}", str(tmp_path))
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output
    assert "Traceback" not in r.output and len(r.output) < 500


def test_kernels_that_is_not_a_folder_is_refused(tmp_path):
    import os
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                 # (click's file_okay=False lets it through; reading blocks)
    r = CliRunner().invoke(cli, ["kernels", "--kernels", str(fifo)])
    assert r.exit_code == 2 and f"{fifo}: not a folder" in r.output, r.output


def test_a_topology_naming_missing_tables_says_so(tmp_path):
    own_tables(tmp_path)
    r = CliRunner().invoke(cli, ["estimate", "qwen3-32b", "h100_dgx", "--phase", "serve",
                                 "--engine", "vllm", "--strategy", "tp=2", "--concurrency", "4",
                                 "--kernels", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    assert ("Note: h100_dgx names kernel tables 'h100_sxm', which " + str(tmp_path)
            + " does not hold: every op is costed by the roofline") in r.stderr


def test_a_bad_kernels_key_is_refused(tmp_path):
    text = (H100.path and open(H100.path).read()).replace('kernels = "h100_sxm"',
                                                          'kernels = "../etc"')
    p = tmp_path / "t.toml"
    p.write_text(text)
    with pytest.raises(SpecError, match=r"gpu.kernels: '../etc' is not a table name"):
        load_topology(str(p))


def test_same_command_same_answer():
    args = ["estimate", "minimax-m2.5", "b200_dgx", "--phase", "serve", "--engine",
            "vllm@0.19.0", "--strategy", "tp=4,ffn1=experts,ffn2=experts", "--concurrency",
            "16", "--json"]
    a, b = (CliRunner().invoke(cli, args) for _ in range(2))
    assert a.exit_code == 0 and a.stdout == b.stdout


def test_calibrated_topologies_cost_by_their_own_fit():
    """lts calibrate fits the roofline's rates to one cluster: its topology reads no tables."""
    from lts.serving.calibrate import tuned_topology
    t = tuned_topology(H100, {"memory_scale": 0.9, "compute_scale": 1.0})
    assert t.kernel_gpu == "" and t.kernels is None
    prof = ENGINES["vllm"].profile.for_gpu(t)
    assert prof.topology(t).kernels is None
    assert replace(H100).kernel_gpu == "h100_sxm"


def test_a_table_of_one_size_per_axis_reads_without_error(tmp_path):
    """A user's table timed at one m, n and k (every axis one point): that point's time
    everywhere below it, in proportion above it; nothing out of range."""
    write_csv(tmp_path / "one" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.csv",
              [dict(gemm_dtype="bfloat16", m=64, n=1024, k=1024, latency=0.01)])
    ks = K.for_engine("one", "vllm", "0.24.0", str(tmp_path))
    got = ks.gemm("bf16", np.array([1.0, 64.0, 128.0]), 1024.0, np.array([512.0, 1024, 1024]))
    assert got * 1e3 == pytest.approx([0.01, 0.01, 0.02], rel=1e-3)   # float16 log2 steps


def test_a_serve_estimate_says_which_costing_it_used():
    args = ["estimate", "qwen3-32b", "h100_dgx", "--phase", "serve", "--engine", "vllm",
            "--strategy", "tp=2", "--concurrency", "16", "--json"]
    k = json.loads(CliRunner().invoke(cli, args).stdout)["kernels"]
    assert k["gpu"] == "h100_sxm" and k["engine"] == "vllm" and k["version"] == "0.15"
    assert {t["op"]: t["release"] for t in k["tables"]}["gemm"] == "0.24.0"
    assert json.loads(CliRunner().invoke(cli, args + ["--no-kernels"]).stdout)["kernels"] is None


def test_vllm_on_blackwell_reads_the_block_fp8_moe_kernel_it_runs():
    """vLLM 0.19.0 runs block-fp8 experts on Blackwell by FlashInfer's TRT-LLM-gen kernels
    (cost.kernels.ENGINE_MOE_KERNEL); its own collector timed the Triton fused_moe, 0.24.0's
    the TRT-LLM-gen kernels: 0.19.0 reads 0.24.0's rows, 0.17.0 (before the rule) and bf16 (Triton
    is what 0.19.0 runs) keep 0.19.0's own."""
    shape, tokens = (3072, 1536, 8, 256), np.array([128.0])
    ks = K.for_engine("b200_sxm", "vllm", "0.19.0")
    assert ks.moe_kernel_run("fp8_block")[0] == "FlashInfer TRT-LLM-gen"
    assert ks.moe_tables("fp8_block")[0] == "moe|vllm|0.24.0|"
    assert "flashinfer_trtllm" in ks.moe_kernels("moe|vllm|0.24.0|", "fp8_block")
    assert ks.moe_kernels("moe|vllm|0.19.0|", "fp8_block") == "vllm_fused_moe"
    new = K.for_engine("b200_sxm", "vllm", "0.24.0").moe("fp8_block", *shape, 1, 1, tokens)
    old = K.for_engine("b200_sxm", "vllm", "0.17.0").moe("fp8_block", *shape, 1, 1, tokens)
    got = ks.moe("fp8_block", *shape, 1, 1, tokens)
    assert got == pytest.approx(new, rel=1e-12) and old > 1.5 * got    # 1.03 ms against 0.54
    assert K.for_engine("b200_sxm", "vllm", "0.17.0").moe_kernel_run("fp8_block") is None
    assert ks.moe_tables("bf16")[0] == "moe|vllm|0.19.0|"


def test_a_kernel_no_table_times_is_read_from_the_others_and_named():
    """vLLM 0.16.0 on Hopper ran block-fp8 experts by FlashInfer's CUTLASS kernels, which no
    table times at ep 1: the Triton rows are read, and lts kernels --model says they are not
    the engine's kernel. 0.18.0 runs Triton: nothing to say."""
    ks = K.for_engine("h200_sxm", "vllm", "0.16.0")
    assert ks.moe_kernel_run("fp8_block")[0] == "FlashInfer CUTLASS"
    assert ks.moe_tables("fp8_block") == K.for_engine("h200_sxm", "vllm", "0.18.0") \
        .moe_tables("fp8_block")
    r = CliRunner().invoke(cli, ["kernels", "--model", "minimax-m2.5", "--topology", "h200_dgx",
                                 "--engine", "vllm@0.16.0", "--json"])
    assert r.exit_code == 0, r.output
    moe = json.loads(r.stdout)["model"]["moe"]
    assert (moe["format"], moe["release"], moe["kernels"]) == \
        ("fp8_block", "0.19.0", ["vllm_fused_moe"])
    assert moe["note"].startswith("not the kernel vllm 0.16.0 runs here (FlashInfer CUTLASS)")
    r = CliRunner().invoke(cli, ["kernels", "--model", "minimax-m2.5", "--topology", "h200_dgx",
                                 "--engine", "vllm@0.18.0", "--json"])
    assert json.loads(r.stdout)["model"]["moe"]["note"] == \
        "the kernel vllm 0.18.0 runs here (Triton)"


def test_tables_without_kernel_names_are_read_as_before():
    """A table written before the kernel names were kept (or a user's without the
    kernel_source column) names none: every table holding the format stays a candidate."""
    ks = K.for_engine("b200_sxm", "vllm", "0.19.0")
    bare = replace(ks, data={k: v for k, v in ks.data.items() if not k.endswith("|kernels")},
                   memo={})
    assert bare.moe_kernels("moe|vllm|0.24.0|", "fp8_block") == ""
    assert bare.moe_tables("fp8_block")[0] == "moe|vllm|0.19.0|"


@pytest.mark.parametrize("model, topology, engine, release, held, note", [
    # a shape no table holds: the nearest held one, said
    ("moe1.6t", "h100_dgx", "sglang", "0.5.10", False, "the nearest held shape"),
    # another engine's table, the first holding the shape: said
    ("gpt-oss-120b", "b200_dgx", "vllm@0.19.0", "0.5.14", True,
     "sglang's table, the first that holds this shape in w4a8_mxfp4_mxfp8"),
    # no rule for this engine and format: said, not silent
    ("llama4-scout", "h200_dgx", "vllm@0.19.0", "0.24.0", True,
     "lts has no rule for which kernel vllm 0.19.0 runs here: read as timed"),
    # a format no table holds: the roofline, said
    ("kimi-k2.5", "h200_dgx", "vllm", None, None, "the roofline: no table holds this format"),
    # a latent MoE (its experts work at a smaller width): no table holds that kind
    ("nemotron-3-super-120b-a12b", "b200_dgx", "vllm", None, None,
     "the tables hold no MoE layer of this kind")])
def test_lts_kernels_names_what_the_routed_experts_read(model, topology, engine, release, held,
                                                        note):
    r = CliRunner().invoke(cli, ["kernels", "--model", model, "--topology", topology,
                                 "--engine", engine, "--json"])
    assert r.exit_code == 0, r.output
    moe = json.loads(r.stdout)["model"]["moe"]
    assert (moe["release"], moe["held"]) == (release, held)
    assert note in moe["note"]
    text = CliRunner().invoke(cli, ["kernels", "--model", model, "--topology", topology,
                                    "--engine", engine, "--no-color"]).output
    assert "routed experts (" in text


def test_a_table_without_kernel_names_is_not_called_the_wrong_kernel():
    """Tables that do not name their kernels (a user's without the kernel_source column): the
    note says the rule's kernel and that the table does not say, not that it is another."""
    from lts.cost.coverage import moe_read
    ks = K.for_engine("b200_sxm", "vllm", "0.19.0")
    bare = replace(ks, data={k: v for k, v in ks.data.items() if not k.endswith("|kernels")},
                   memo={})
    read = bare.moe_source("fp8_block", 3072, 1536, 8, 256)
    assert read["kernels"] == [] and read["runs_timed"] is None
    assert moe_read(bare, "fp8_block", read)["note"] == \
        "the table does not name its kernels; vllm 0.19.0 runs FlashInfer TRT-LLM-gen here"


def test_tables_read_as_timed_when_the_engine_rule_is_off():
    """scripts/kernel_error.py measures each table on its own rows: with the engine-kernel
    rule off, vLLM 0.19.0's B200 block-fp8 shapes read its own (Triton) table again."""
    ks = replace(K.for_engine("b200_sxm", "vllm", "0.19.0"), memo={}, engine_kernels=False)
    assert ks.moe_kernel_run("fp8_block") is None
    assert ks.moe_tables("fp8_block")[0] == "moe|vllm|0.19.0|"
