"""Command line: exit codes, messages, JSON contract, and the Megatron collective pattern."""
import json

import pytest
from click.testing import CliRunner

from lts.cli import cli



def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_every_command_has_help():
    for name, command in cli.commands.items():
        assert command.help, f"{name} is missing its help"
        r = run(name, "--help")
        assert r.exit_code == 0 and "Usage:" in r.output


def test_estimate_megatron_moe16t_has_exactly_two_allreduces_per_layer():
    """Issue 2 'done when': a valid ~1.6e12-parameter strategy with exactly one all-reduce after
    attention and one after the FFN in each layer, and nothing else in the tp group."""
    r = run("estimate", "moe1.6t", "h100_dgx", "--strategy", "tp=8,ep=16,pp=4,batch=64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["valid"] and d["reasons"] == []
    assert abs(d["model"]["params_total"] / 1.6e12 - 1) < 0.02
    layers = 80
    per_layer_tp = {}
    for op in d["ops"]:
        for c in op["collectives"]:
            if c["group"] != "tp":
                continue
            if op["name"] in ("embedding", "final_norm", "lm_head") or c["count"] == 1:
                continue   # once per step, outside the layers (plus the last layer's FFN output)
            per_layer_tp.setdefault((op["name"], c["kind"]), 0)
            per_layer_tp[(op["name"], c["kind"])] += c["count"]
    # after attention: into ffn_norm, every layer; after the FFN: into the next attn_norm
    # (layers-1 times; the last layer's goes into final_norm)
    assert per_layer_tp == {("ffn_norm", "all-reduce"): layers, ("attn_norm", "all-reduce"): layers - 1}
    final = [c for op in d["ops"] if op["name"] == "final_norm" for c in op["collectives"]]
    assert [(c["kind"], c["group"]) for c in final] == [("all-reduce", "tp")]
    ep = [c for op in d["ops"] for c in op["collectives"] if c["group"] == "ep"]
    assert {c["kind"] for c in ep} == {"all-to-all"}


def test_estimate_json_contract_keys():
    r = run("estimate", "moe1.6t", "h100_dgx", "--strategy", "tp=8,ep=16,pp=4,batch=64", "--json")
    d = json.loads(r.output)
    for key in ("tp", "ep", "pp", "batch", "ops", "valid", "reasons", "tokens_per_s_per_gpu",
                "tokens_per_s", "tpot_ms", "ttft_ms", "memory_gib_per_gpu", "gpus", "model"):
        assert key in d
    assert set(d["model"]) >= {"name", "params_total", "params_active"}
    for op in d["ops"]:
        assert {"name", "compute_us", "memory_us", "collectives"} <= set(op)
        for c in op["collectives"]:
            assert c["kind"] in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send")
            assert {"group", "bytes", "time_us"} <= set(c)


def test_invalid_strategy_exits_1_with_reasons():
    r = run("estimate", "moe1.6t", "h100_dgx", "--strategy", "tp=1,batch=1", "--json")
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["valid"] is False and "memory" in d["reasons"]


@pytest.mark.parametrize("strategy,message", [
    ("tp=8,foo=1", "Invalid value for '--strategy': unknown key 'foo'"),
    ("tp=eight", "Invalid value for '--strategy': tp='eight' is not a positive integer"),
    ("tp=0", "Invalid value for '--strategy': tp='0' is not a positive integer"),
    ("qkv=2", "Invalid value for '--strategy': qkv='2' is not one of 0, 1, none, experts"),
    ("qkv=experts", "Invalid value for '--strategy': qkv=experts: only ffn1 and ffn2 can split experts"),
    ("tp8", "Invalid value for '--strategy': 'tp8' is not key=value"),
    ("tp=2,tp=4", "Invalid value for '--strategy': 'tp' given twice"),
])
def test_bad_strategy_flags_exit_2(strategy, message):
    r = CliRunner().invoke(cli, ["estimate", "moe1.6t", "h100_dgx", "--strategy", strategy])
    assert r.exit_code == 2
    assert message in r.output


def test_bad_flags_exit_2():
    r = CliRunner().invoke(cli, ["estimate", "x", "h100_dgx", "--strategy", "tp=1", "--phase", "train"])
    assert r.exit_code == 2 and "Invalid value for '--phase'" in r.output
    r = CliRunner().invoke(cli, ["estimate", "x", "h100_dgx", "--strategy", "tp=1", "--context", "-5"])
    assert r.exit_code == 2


def test_bad_files_exit_1_one_line(tmp_path):
    r = CliRunner().invoke(cli, ["estimate", str(tmp_path / "nope.toml"), "h100_dgx",
                                 "--strategy", "tp=1"])
    assert r.exit_code == 1
    assert r.output == f"Error: {tmp_path / 'nope.toml'}: no such file\n"
    bad = tmp_path / "t.toml"
    bad.write_text('name = "x"\n')
    r = CliRunner().invoke(cli, ["estimate", str(bad), "h100_dgx", "--strategy", "tp=1"])
    assert r.exit_code == 1 and r.output == f"Error: {bad}: source: missing (expected a string)\n"
    r = CliRunner().invoke(cli, ["estimate", str(bad), "no_such_topology", "--strategy", "tp=1"])
    assert r.exit_code == 1 and r.output.startswith("Error: ")
    assert "Traceback" not in r.output


def test_topologies_and_models_list():
    r = run("topologies", "--json")
    assert r.exit_code == 0
    names = {t["name"] for t in json.loads(r.output)}
    assert {"h100_dgx", "h200_dgx", "a100_dgx", "b200_dgx", "gb200_nvl72"} <= names
    r = run("models", "--json")
    assert r.exit_code == 0


# ----------------------------------------------------------------------------------------------
# estimate --phase serve

def test_estimate_serve_matches_the_serve_phase_and_picks_the_best_batch():
    import numpy as np
    from lts.serving import serve as sv
    from lts.specs import load_model, load_topology
    from lts.specs.strategy import BATCH, parse_strategy
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--isl", "500", "--osl", "2000", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    m, t = load_model("llama3.1-8b"), load_topology("h100_dgx")
    row = parse_strategy("tp=1")[None]
    cap = int(sv.serve(m, t, row, 500, 2000).kv_capacity[0])
    cands = np.arange(1, cap + 1)                   # every integer concurrency the cache holds
    rows = np.repeat(row, len(cands), axis=0)
    rows[:, BATCH] = cands
    every = sv.serve(m, t, rows, 500, 2000)
    best = int(np.argmax(np.where(every.valid, every.output_tokens_per_s, -1)))
    assert d["phase"] == "serve" and d["valid"] and (d["isl"], d["osl"]) == (500, 2000)
    assert d["concurrency"] == d["batch"] == cands[best] and d["engine"] == "generic"
    assert d["output_tokens_per_s"] == pytest.approx(every.output_tokens_per_s[best], rel=1e-12)
    assert d["tpot_ms"] == pytest.approx(every.tpot_s[best] * 1e3, rel=1e-12)
    assert d["ttft_ms"] == pytest.approx(every.ttft_s[best] * 1e3, rel=1e-12)
    assert d["output_tokens_per_s_per_gpu"] == pytest.approx(d["output_tokens_per_s"])
    assert d["tokens_per_s_per_user"] == pytest.approx(1e3 / d["tpot_ms"])
    assert d["request_latency_ms"] == pytest.approx(d["ttft_ms"] + 1999 * d["tpot_ms"])
    # the per-op table is one decode step of the running batch at the mean context
    assert d["step"] == {"kind": "decode", "requests": d["running"], "context": 1500}
    assert [op["name"] for op in d["ops"]][:2] == ["embedding", "attn_norm"]


def test_estimate_serve_concurrency_and_named_batch():
    a = json.loads(run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=2,batch=32",
                       "--phase", "serve", "--json").output)
    b = json.loads(run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=2",
                       "--phase", "serve", "--concurrency", "32", "--json").output)
    assert a["concurrency"] == b["concurrency"] == 32
    assert a["output_tokens_per_s"] == b["output_tokens_per_s"]
    assert a["gpus"] == 2 and a["output_tokens_per_s_per_gpu"] == pytest.approx(
        a["output_tokens_per_s"] / 2)


def test_estimate_serve_invalid_and_misused_flags():
    r = run("estimate", "llama3.1-70b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--concurrency", "512")
    assert r.exit_code == 1 and "memory" in r.output
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--isl", "5", "--osl", "9")
    assert r.exit_code == 2
    assert "Error: --isl, --osl: only with --phase serve" in r.output
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--engine", "vllm")
    assert r.exit_code == 2 and "Error: --engine: only with --phase serve" in r.output


def test_estimate_serve_bad_engine_is_a_usage_error():
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--engine", "tgi")
    assert r.exit_code == 2
    assert ("Error: Invalid value for '--engine': 'tgi' is not one of generic, vllm, sglang, "
            "trtllm (optionally @VERSION, e.g. vllm@0.12)") in r.output


def test_estimate_serve_engines_differ_and_print_one_set_of_figures():
    out = {}
    for engine in ("generic", "vllm", "sglang", "trtllm"):
        r = run("estimate", "qwen3-32b", "h100_dgx", "--strategy", "tp=2", "--phase", "serve",
                "--isl", "1024", "--osl", "128", "--concurrency", "64", "--engine", engine,
                "--json")
        assert r.exit_code == 0, r.output
        out[engine] = json.loads(r.output)
        assert out[engine]["engine"] == engine
    assert len({d["ttft_ms"] for d in out.values()}) == 4
    text = run("estimate", "qwen3-32b", "h100_dgx", "--strategy", "tp=2", "--phase", "serve",
               "--isl", "1024", "--osl", "128", "--concurrency", "64", "--engine", "vllm",
               "--no-color").output
    text = " ".join(text.split())                 # rich wraps long lines at the terminal width
    d = out["vllm"]
    # one tokens/s per GPU and one GiB figure, those of the JSON, and the step the table shows
    assert text.count("per GPU") == 2 and f"{d['output_tokens_per_s_per_gpu']:,.0f} per GPU" in text
    assert f"{d['memory_gib_per_gpu']:.1f} GiB per GPU" in text and text.count("GiB per GPU") == 1
    assert "one decode step of the running batch (64 requests at context 1088" in text


def test_estimate_serve_context_flag_and_memory_message():
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--context", "4096")
    assert r.exit_code == 2
    assert "Error: --context: not with --phase serve (its contexts come from --isl and --osl)" \
        in r.output
    r = run("estimate", "llama3.1-405b", "h100_dgx", "--strategy", "tp=2", "--phase", "serve",
            "--concurrency", "8", "--no-color")
    assert r.exit_code == 1
    assert "invalid: memory: not one request of 2048 tokens fits the KV cache" in \
        " ".join(r.output.split())
