"""`lts search --emit vllm|sglang|trtllm` and lts/launch/emit.py: the engine command lines for a
strategy, single- and multi-node, the faithfulness check and the nearest runnable strategy.
Emitters are called directly with hand-made strategy rows; the CLI with small budgets."""
import json
import shlex
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lts.launch import emit, trtllm
from lts.engines import ENGINES, REAL_ENGINES
from lts.engines.space import runnable_mask
from lts.cli import cli
from lts.cost.model import evaluate
from lts.specs.workload import Workload
from lts.report.launch import render_emit, wrap_command
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import (COARSE, DP_ATTENTION, EXPERTS, MEGATRON, N_COARSE, OP_COL,
                                coarse_of, make_row, parse_strategy)
from rich.console import Console

MIXTRAL = ("mixtral-8x7b", "h100_dgx", "--gpus", "8")
RESULT_KEYS = {"tp", "ep", "pp", "batch", "ops", "valid", "reasons", "tokens_per_s_per_gpu",
               "tokens_per_s", "tpot_ms", "ttft_ms", "memory_gib_per_gpu", "gpus"}
ENGINES_DOC = Path(__file__).resolve().parent.parent / "docs" / "engines.md"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def unwrap(text: str) -> str:
    return text.replace(" \\\n    ", " ")


_PROBLEMS = {}


def problem(model="mixtral-8x7b", gpus=8, topo="h100_dgx", precision=None, **work):
    key = (model, gpus, topo, precision, tuple(sorted(work.items())))
    if key not in _PROBLEMS:
        _PROBLEMS[key] = Problem(load_model(model, precision), load_topology(topo),
                                 Workload(gpus=gpus, **work))
    return _PROBLEMS[key]


def launch(engine, strategy, model="mixtral-8x7b", gpus=8, precision=None, **work):
    p = problem(model, gpus, precision=precision, **work)
    return emit.launch(engine, p, parse_strategy(strategy, p.model.is_moe), model, precision)


def only_command(lau):
    cmds = [c for role, c in lau.commands if not role.startswith("config")]
    assert len(cmds) == 1, lau.commands
    return cmds[0]


# ----------------------------------------------------------------------------------------------
# the CLI (the done-when)

def test_search_emit_vllm_prints_a_vllm_serve_command_after_the_table():
    r = run("search", *MIXTRAL, "--budget", "200", "--emit", "vllm")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "vllm serve mistralai/Mixtral-8x7B-v0.1" in out
    assert "--tensor-parallel-size" in out and "--max-num-seqs" in out
    assert "--max-model-len 16384" in unwrap(out)
    assert out.index("best strategies") < out.index("Megatron best") < out.index("vllm serve")
    assert f"vLLM {ENGINES['vllm'].flags_version}" in out
    assert max(len(line) for line in out[out.index("Launch with"):].splitlines()) <= 80


def test_search_emit_sglang_prints_tp():
    r = run("search", *MIXTRAL, "--budget", "200", "--emit", "sglang")
    assert r.exit_code == 0, r.output
    cmd = unwrap(r.stdout)
    assert "python -m sglang.launch_server --model-path mistralai/Mixtral-8x7B-v0.1" in cmd
    assert re.search(r" --tp-size \d+", cmd) and "--max-running-requests" in cmd
    assert "--context-length 16384" in cmd


def test_search_emit_trtllm():
    r = run("search", *MIXTRAL, "--budget", "200", "--emit", "trtllm")
    assert r.exit_code == 0, r.output
    cmd = unwrap(r.stdout)
    assert "trtllm-serve mistralai/Mixtral-8x7B-v0.1 --tp_size" in cmd
    assert "--max_batch_size" in cmd and "--max_seq_len 16384" in cmd


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_search_emit_json_matches_the_text(engine):
    args = ("search", *MIXTRAL, "--method", "random", "--budget", "200", "--emit", engine)
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    e = d["emit"]
    assert {"engine", "version_checked", "faithful", "commands", "notes"} <= set(e)
    assert e["engine"] == engine and e["version_checked"] == ENGINES[engine].flags_version
    assert isinstance(e["faithful"], bool) and e["commands"]
    for c in e["commands"]:      # a program's argument list, or the file a command writes
        assert set(c) in ({"role", "command", "env", "argv"}, {"role", "command", "file"}), c
        if "argv" in c:
            assert shlex.split(c["command"]) == [f"{k}={v}" for k, v in c["env"].items()] + \
                c["argv"]
    assert all(isinstance(n, str) for n in e["notes"])
    if e["faithful"]:
        assert "nearest" not in e and e["strategy"] == {k: d["best"][k] for k in
                                                        (*COARSE, "ops")}
    else:
        assert RESULT_KEYS <= set(e["nearest"]) and e["reasons"]
        assert e["strategy"] == {k: e["nearest"][k]
                                 for k in (*COARSE, "ops")}
    text = unwrap(run(*args).stdout)
    for c in e["commands"]:
        assert c["command"] in text
    assert ("NOT FAITHFUL" in text) == (not e["faithful"])


def test_search_emit_bad_engine_is_a_bad_flag():
    r = run("search", *MIXTRAL, "--budget", "50", "--emit", "tgi")
    assert r.exit_code == 2 and "--emit" in r.output


def test_search_without_emit_prints_no_command():
    r = run("search", *MIXTRAL, "--budget", "100")
    assert r.exit_code == 0 and "Launch with" not in r.stdout
    d = json.loads(run("search", *MIXTRAL, "--budget", "100", "--json").stdout)
    assert "emit" not in d


# ----------------------------------------------------------------------------------------------
# single node, faithful

def test_vllm_megatron_tp8():
    lau = launch("vllm", "tp=8,batch=256")
    assert lau.faithful and lau.chosen == "best" and not lau.reasons
    assert lau.commands == [("single node (8 GPUs)",
                             "vllm serve mistralai/Mixtral-8x7B-v0.1 --tensor-parallel-size 8 "
                             "--max-num-seqs 256 --max-model-len 16384")]


def test_vllm_experts_in_the_tp_group_is_enable_expert_parallel():
    cmd = only_command(launch("vllm", "tp=8,batch=256,ffn1=experts,ffn2=experts"))
    assert "--tensor-parallel-size 8 --enable-expert-parallel" in cmd
    assert "--data-parallel-size" not in cmd


def test_vllm_ep_is_data_parallel_attention_with_expert_parallel():
    lau = launch("vllm", "tp=2,ep=4,batch=256,ffn1=experts,ffn2=experts")
    assert lau.faithful
    cmd = only_command(lau)
    for flag in ("--tensor-parallel-size 2", "--data-parallel-size 4", "--enable-expert-parallel",
                 "--max-num-seqs 64"):          # --max-num-seqs is per DP rank: 256 / 4
        assert flag in cmd


def test_tp1_choices_are_moot_and_cost_the_same():
    row = "tp=1,ep=8,batch=64,qkv=none,scores=1,ffn1=0,ffn2=1,final_norm=0"
    for engine in REAL_ENGINES:
        assert launch(engine, row).faithful
    p = problem()
    rows = np.array([parse_strategy(row), parse_strategy("tp=1,ep=8,batch=64")])
    res = evaluate(p.model, p.topo, p.work, rows)
    assert res.tokens_per_s_per_gpu[0] == res.tokens_per_s_per_gpu[1]
    assert res.memory_bytes[0] == res.memory_bytes[1]


def test_sglang_mapping():
    # lts Megatron with ep: experts over ep, each sharded over tp -> --ep-size ep under DP attention
    cmd = only_command(launch("sglang", "tp=2,ep=4,batch=128"))
    assert "--tp-size 8 --attn-dp-size 4 --enable-dp-lm-head --ep-size 4 " in cmd
    assert "--dp-size" not in cmd and "--enable-dp-attention" not in cmd     # deprecated in 0.5.23
    assert "--max-running-requests 128" in cmd
    # whole experts over all tp*ep GPUs
    cmd = only_command(launch("sglang", "tp=2,ep=4,batch=128,ffn1=experts,ffn2=experts"))
    assert "--ep-size 8" in cmd
    # plain Megatron TP: no DP attention, MoE tensor-parallel
    cmd = only_command(launch("sglang", "tp=8,batch=256"))
    assert "--tp-size 8 " in cmd and "dp-size" not in cmd and "--ep-size" not in cmd


def test_trtllm_attention_dp():
    lau = launch("trtllm", "tp=1,ep=8,batch=64")
    assert lau.faithful
    (role, cfg), (_, cmd) = lau.commands
    assert role.startswith("config") and "enable_attention_dp: true" in cfg
    for flag in ("--tp_size 8", "--ep_size 8", "--max_batch_size 8", "--max_seq_len 16384",
                 f"--extra_llm_api_options {trtllm.INSTANCE_YAML}"):
        assert flag in cmd
    cmd = only_command(launch("trtllm", "tp=8,batch=256,ffn1=experts,ffn2=experts"))
    assert "--tp_size 8 --ep_size 8" in cmd and "enable_attention_dp" not in cmd


def test_dense_model_has_no_expert_flags():
    for engine in REAL_ENGINES:
        cmd = only_command(launch(engine, "tp=4,batch=32", model="llama3.1-8b"))
        assert "meta-llama/Llama-3.1-8B" in cmd
        assert "expert" not in cmd and "ep_size" not in cmd and "ep-size" not in cmd


def test_precision_override():
    """--precision picks the checkpoint stored in that format where one is published
    (lts/launch/checkpoints.py), else the engine's quantization on load, else a note."""
    lau = launch("vllm", "tp=8,batch=64", model="llama3.1-70b", precision="fp8")
    cmd = only_command(lau)
    assert cmd.startswith("vllm serve nvidia/Llama-3.1-70B-Instruct-FP8 ")
    assert "--quantization" not in cmd and "--kv-cache-dtype fp8" in cmd
    assert any("holds Llama-3.1-70B-Instruct's weights" in n for n in lau.notes)
    # TensorRT-LLM does not quantize on load: it now loads the fp8 checkpoint, no note needed
    lau = launch("trtllm", "tp=8,batch=64", model="llama3.1-70b", precision="fp8")
    assert only_command(lau).startswith("trtllm-serve nvidia/Llama-3.1-70B-Instruct-FP8 ")
    assert not any("no fp8 checkpoint" in n for n in lau.notes)
    # DeepSeek-V3 is stored in block fp8: no quantization on load, and the note says lts costed
    # per-tensor fp8
    lau = launch("sglang", "tp=8,batch=64", model="deepseek-v3", precision="fp8")
    cmd = only_command(lau)
    assert "--model-path deepseek-ai/DeepSeek-V3 " in cmd and "--quantization" not in cmd
    assert "--kv-cache-dtype fp8_e4m3" in cmd
    assert any("serves the fp8_block checkpoint" in n for n in lau.notes)
    # no fp8 checkpoint of GLM-5 in per-tensor fp8: vLLM quantizes the bf16 one on load, and
    # TensorRT-LLM says it serves another format
    cmd = only_command(launch("vllm", "tp=8,batch=64", model="glm-5", precision="fp8", gpus=16))
    assert cmd.startswith("vllm serve zai-org/GLM-5 ") and "--quantization fp8" in cmd
    lau = launch("trtllm", "tp=8,batch=64", model="glm-5", precision="fp8", gpus=16)
    assert any("does not quantize to it on load" in n for n in lau.notes)
    # nvfp4: NVIDIA's ModelOpt checkpoint
    assert only_command(launch("trtllm", "tp=8,batch=64", model="deepseek-v3",
                               precision="nvfp4")).startswith(
        "trtllm-serve nvidia/DeepSeek-V3-0324-FP4 ")


@pytest.mark.parametrize("engine, flag", [("vllm", "--kv-cache-dtype fp8"),
                                          ("sglang", "--kv-cache-dtype fp8_e4m3"), ("trtllm", None)])
def test_an_fp8_kv_cache_lts_costed_is_in_the_command(engine, flag):
    """--kv-cache-dtype fp8 with bf16 weights: the engine's own flag, once; TensorRT-LLM has no
    such flag and the note says the command does not set it."""
    r = CliRunner().invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8",
                                 "--kv-cache-dtype", "fp8", "--emit", engine, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)["emit"]
    text = " ".join(c["command"] for c in d["commands"])
    if flag:
        assert text.count("--kv-cache-dtype") == 1 and flag in text and "--quantization" not in text
    else:
        assert "--kv-cache-dtype" not in text
        assert any("lts costed an fp8 KV cache: the command does not set it" in n
                   for n in d["notes"])


# ----------------------------------------------------------------------------------------------
# multi-node

def test_vllm_multi_node_tp_pp():
    lau = launch("vllm", "tp=8,pp=2,batch=64", model="llama3.1-70b", gpus=16)
    (head_role, head), (worker_role, worker) = lau.commands
    assert "head" in head_role and "NODE_RANK" in worker_role
    assert head.endswith("--nnodes 2 --node-rank 0 --master-addr $HEAD_IP")
    assert worker.endswith("--nnodes 2 --node-rank $NODE_RANK --master-addr $HEAD_IP --headless")
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in head
    assert any("HEAD_IP" in n and "NODE_RANK" in n for n in lau.notes)
    assert any("ray start" in n for n in lau.notes)       # the older-vLLM route, spelled out


def test_vllm_multi_node_data_parallel():
    lau = launch("vllm", "tp=1,ep=16,batch=256", model="deepseek-v3", gpus=16)
    (_, head), (_, worker) = lau.commands
    for cmd in (head, worker):
        assert "--data-parallel-size 16 --data-parallel-size-local 8" in cmd
        assert "--data-parallel-address $HEAD_IP" in cmd and "--max-num-seqs 16" in cmd
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert "--data-parallel-start-rank $(($NODE_RANK*8)) --headless" in worker


def test_vllm_dp_rank_spanning_nodes_uses_ray():
    lau = launch("vllm", "tp=16,ep=2,batch=64,ffn1=experts,ffn2=experts", gpus=32)
    roles = [r for r, _ in lau.commands]
    assert "start Ray" in roles[0] and "join Ray" in roles[1]
    assert lau.commands[2][1].startswith("VLLM_RAY_DP_PACK_STRATEGY=span vllm serve")
    assert "--data-parallel-backend ray" in lau.commands[2][1]


def test_sglang_multi_node():
    lau = launch("sglang", "tp=2,ep=8,batch=256", model="deepseek-v3", gpus=16)
    (_, head), (role, worker) = lau.commands
    assert "--tp-size 16 --attn-dp-size 8 --enable-dp-lm-head" in head
    assert head.endswith("--nnodes 2 --dist-init-addr $HEAD_IP:50000 --node-rank 0")
    assert worker.endswith("--node-rank $NODE_RANK") and role == "the worker node (NODE_RANK=1)"


def test_trtllm_multi_node_is_one_mpi_launch():
    lau = launch("trtllm", "tp=1,ep=16,batch=256", model="deepseek-v3", gpus=16)
    roles = [r for r, _ in lau.commands]
    assert roles[0].startswith("config") and "all 2 nodes" in roles[1]
    cmd = lau.commands[1][1]
    assert cmd.startswith("srun -N 2 --ntasks 16 --ntasks-per-node 8 --mpi=pmix --gres=gpu:8 "
                          "trtllm-llmapi-launch trtllm-serve deepseek-ai/DeepSeek-V3")
    assert "--tp_size 16 --ep_size 16" in cmd and "--max_batch_size 16" in cmd


# ----------------------------------------------------------------------------------------------
# not faithful: say so, then the nearest runnable strategy

def test_not_faithful_names_the_op_and_launches_the_same_degrees():
    lau = launch("vllm", "tp=8,batch=256,ffn2=1")
    assert not lau.faithful
    assert any(r.startswith("vLLM cannot run ffn2=1 (down projection sharded on hidden")
               for r in lau.reasons)
    same = lau.same_degrees
    assert same is not None and np.array_equal(coarse_of(same.strategies[0]),
                                                 coarse_of(make_row(tp=8, batch=256)))
    assert tuple(same.strategies[0][N_COARSE:]) in emit.engine_variants(
        "vllm", problem().model, 8, 1)
    if lau.chosen == "same_degrees":
        assert lau.result is same
    else:
        assert lau.chosen == "best_runnable"
        assert lau.result.tokens_per_s_per_gpu[0] > same.tokens_per_s_per_gpu[0]
    # the commands run the strategy reported, estimated by the cost model itself
    p = problem()
    again = evaluate(p.model, p.topo, p.work, lau.strategy[None])
    assert again.tokens_per_s_per_gpu[0] == lau.result.tokens_per_s_per_gpu[0]
    assert f"--tensor-parallel-size {lau.strategy[0]}" in only_command(lau)


def test_not_faithful_prefers_the_best_runnable_when_faster():
    lau = launch("vllm", "tp=2,batch=8,ffn2=1")       # small batch: far from the best vLLM runs
    assert not lau.faithful and lau.chosen == "best_runnable"
    assert lau.result is lau.best_runnable and lau.best_runnable.valid[0]
    assert lau.best_runnable.tokens_per_s_per_gpu[0] > lau.same_degrees.tokens_per_s_per_gpu[0]
    text = " ".join(render(lau).split())
    assert "NOT FAITHFUL" in text and "Same degrees" in text and "Best vLLM can run" in text
    assert "run the best strategy vLLM can run, not the best strategy found" in text


def test_trtllm_cannot_run_tp_inside_attention_dp():
    """TensorRT-LLM's attention is TP over every GPU or DP with one GPU per rank: tp=2, ep=4
    with Megatron's attention is not runnable; the same degrees run with data-parallel attention
    (every GPU its own attention rank, experts in 4 groups of 2-way TP)."""
    lau = launch("trtllm", "tp=2,ep=4,batch=128")
    assert not lau.faithful
    assert any("qkv=1" in r for r in lau.reasons)
    same = lau.same_degrees.strategies[0]
    assert tuple(same[N_COARSE:]) == DP_ATTENTION and tuple(same[:2]) == (2, 4)
    s = lau.strategy
    assert not emit.check("trtllm", load_model("mixtral-8x7b"), s)
    if lau.chosen == "same_degrees":
        cmd = " ".join(c for _, c in lau.commands)
        assert "--tp_size 8" in cmd and "--ep_size 4" in cmd and "enable_attention_dp" in cmd


def test_vllm_ep_without_experts_is_not_faithful():
    lau = launch("vllm", "tp=2,ep=4,batch=128")          # Megatron FFN over ep groups
    assert not lau.faithful
    assert any("--enable-expert-parallel" in r for r in lau.reasons)
    assert lau.same_degrees.strategies[0][OP_COL["ffn1"]] == EXPERTS


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_best_runnable_is_the_best_runnable(engine):
    """Brute force over every coarse row and the engine's variants at it."""
    p = problem()
    rows = [[*c, *v] for c in p.grid
            for v in emit.engine_variants(engine, p.model, int(c[0]), int(c[1]))]
    res = evaluate(p.model, p.topo, p.work, np.array(rows, dtype=np.int64))
    expect = np.max(np.where(res.valid, res.tokens_per_s_per_gpu, -np.inf))
    got = emit.best_runnable(engine, p)
    assert got is not None and got.valid[0]
    assert got.tokens_per_s_per_gpu[0] == pytest.approx(expect, rel=1e-12)
    assert not emit.check(engine, p.model, got.strategies[0])


# what each engine runs at tp > 1 of a MoE, with ep = 1 and ep > 1 (docs/engines.md):
# (Megatron, experts split, data-parallel attention)
RUNS = {"vllm": {False: (True, True, True), True: (False, True, False)},
        "sglang": {False: (True, True, True), True: (True, True, True)},
        "trtllm": {False: (True, True, True), True: (False, False, True)}}


def test_runnable_mask_is_the_engines_table():
    from lts.specs.strategy import EXPERT_CHOICES
    p = problem()
    for engine in REAL_ENGINES:
        for k, v in enumerate((MEGATRON, EXPERT_CHOICES, DP_ATTENTION)):
            mask = runnable_mask(engine, p.model, p.grid, v)
            want = [c[0] == 1 or RUNS[engine][bool(c[1] > 1)][k] for c in p.grid]
            assert mask.tolist() == want, (engine, k)
            for c in p.grid[p.grid[:, 0] > 1]:
                assert (tuple(v) in emit.engine_variants(engine, p.model, int(c[0]),
                                                         int(c[1]))) == \
                    RUNS[engine][bool(c[1] > 1)][k]


# ----------------------------------------------------------------------------------------------
# model names, rendering, docs/engines.md

def test_model_reference(tmp_path):
    assert emit.model_reference("qwen3-235b-a22b") == ("Qwen/Qwen3-235B-A22B", None)
    assert emit.model_reference("models/mixtral-8x7b.toml")[0] == "mistralai/Mixtral-8x7B-v0.1"
    # every shipped model with weights has its repository (issue 35: 10 of 17 had lts's name)
    assert emit.model_reference("gpt-oss-120b")[0] == "openai/gpt-oss-120b"
    assert emit.model_reference("kimi-k2.5")[0] == "moonshotai/Kimi-K2.5"
    ref, note = emit.model_reference("moe1.6t")
    assert ref == emit.PLACEHOLDER == "$CHECKPOINT" and "no checkpoint" in note
    assert "set CHECKPOINT" in note
    ckpt = tmp_path / "my model"
    ckpt.mkdir()
    # a config folder without weights is no checkpoint: the user sets one
    ref, note = emit.model_reference(str(ckpt / "config.json"))
    assert ref == emit.PLACEHOLDER and "no weights" in note
    (ckpt / "model-00001-of-00002.safetensors").write_bytes(b"")
    assert emit.model_reference(str(ckpt / "config.json")) == (str(ckpt), None)
    # any .json config file stands for its folder: an engine loads a folder or a HuggingFace id
    ref, note = emit.model_reference(str(ckpt / "Qwen3-8B_config.json"))
    assert ref == str(ckpt) and "Qwen3-8B_config.json" in note
    ref, note = emit.model_reference(str(tmp_path / "custom.toml"))
    assert ref == emit.PLACEHOLDER and "shape only" in note
    # a path with a space is quoted for the shell
    cmd = only_command(emit.launch("vllm", problem(), parse_strategy("tp=8,batch=256"),
                                   str(ckpt / "config.json")))
    assert cmd.startswith(f"vllm serve '{ckpt}' ")
    lau = launch("sglang", "tp=8,batch=64", model="moe1.6t", gpus=64)
    assert '--model-path "$CHECKPOINT"' in only_command(lau)
    assert any("no checkpoint" in n for n in lau.notes)


def test_wrap_command():
    lau = launch("trtllm", "tp=1,ep=16,batch=256", model="deepseek-v3", gpus=16)
    for _, cmd in lau.commands:
        wrapped = wrap_command(cmd, 80)
        assert unwrap(wrapped) == cmd
        assert all(len(line) <= 80 for line in wrapped.splitlines())
    assert wrap_command("printf 'enable_attention_dp: true\\n' > x.yaml", 20).count("\n") == 0


def render(lau, phase="decode"):
    console = Console(width=80, no_color=True, highlight=False, record=True)
    with console.capture() as cap:
        render_emit(console, lau, phase)
    return cap.get()


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_render_fits_80_columns(engine):
    for lau in (launch(engine, "tp=2,ep=2,pp=2,batch=256,scores=1,context=1,out_proj=1,"
                               "ffn_norm=0,ffn1=0,final_norm=0"),
                launch(engine, "tp=1,ep=16,batch=256", model="deepseek-v3", gpus=16)):
        text = render(lau)
        assert max(len(line) for line in text.splitlines()) <= 80
        for _, cmd in lau.commands:
            assert cmd in unwrap(text)


def test_engines_doc_names_the_versions_checked():
    text = ENGINES_DOC.read_text()
    section = text[text.index("## Launch flags"):]
    for engine in REAL_ENGINES:
        assert f"{ENGINES[engine].label} {ENGINES[engine].flags_version}" in section


def test_dense_router_choice_means_nothing():
    lau = launch("vllm", "tp=4,batch=32,router=1", model="llama3.1-8b")
    assert lau.faithful
    lau = launch("vllm", "tp=4,batch=32,router=1,ffn2=1", model="llama3.1-8b")
    assert not lau.faithful and len(lau.reasons) == 1 and "ffn2=1" in lau.reasons[0]
