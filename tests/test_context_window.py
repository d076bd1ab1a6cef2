"""The model's context window (issue 37 item 3; ``ModelSpec.context_window``): read from a model
file's ``context_window`` and from a config.json as vLLM 0.33.0 derives max_model_len, and every
workload longer than it refused with one line naming the window and what was set."""
import json
from pathlib import Path

import pytest

from lts.specs import load_model
from test_hard_inputs import error, run

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "data" / "hf"
LLAMA = "Llama-3.1-70B, 131,072 tokens"


# ----------------------------------------------------------------------------------------------
# reading it

def test_model_file_key():
    assert load_model("llama3.1-70b").context_window == 131072
    assert load_model("deepseek-v3").context_window == 163840
    assert load_model("moe1.6t").context_window == 0        # synthetic: no window, no check


def test_model_file_key_checked(tmp_path):
    text = (ROOT / "models" / "llama3.1-8b.toml").read_text()
    p = tmp_path / "m.toml"
    p.write_text(text.replace("context_window = 131072", "context_window = 0"))
    r = run("models", "--show", str(p))
    assert r.exit_code == 1
    assert error(r) == f"Error: {p}: context_window: 0 must be > 0"


def config(tmp_path, **keys):
    """DeepSeek-V3's config.json with ``keys`` set (None: removed)."""
    data = json.loads((HF / "deepseek-v3.json").read_text())
    for k, v in keys.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(data))
    return load_model(str(p))


def test_yarn_is_already_scaled(tmp_path):
    # "max_position_embeddings": 163840 with YaRN factor 40 over 4096: vLLM 0.33.0 takes it as is
    assert config(tmp_path).context_window == 163840
    assert load_model(str(HF / "gpt-oss-120b.json")).context_window == 131072    # yarn, 32x
    assert load_model(str(HF / "llama3.1-70b.json")).context_window == 131072    # llama3 rope


def test_linear_rope_multiplies(tmp_path):
    # a rope type vLLM does not count as scaled (linear, dynamic): max_position_embeddings x
    # factor (vllm/config/model.py _get_and_verify_max_len)
    got = config(tmp_path, rope_scaling={"type": "linear", "factor": 4.0},
                 max_position_embeddings=4096)
    assert got.context_window == 16384


def test_least_key_and_none(tmp_path):
    assert config(tmp_path, rope_scaling=None, seq_length=8192).context_window == 8192
    assert config(tmp_path, rope_scaling=None, max_position_embeddings=None).context_window == 0


def test_rope_by_layer_type_and_text_config():
    # Gemma 4: rope_parameters one per layer type, no factor; Llama 4: text_config's
    assert load_model(str(HF / "gemma-4-26b-a4b.json")).context_window == 262144
    assert load_model(str(HF / "llama4-maverick.json")).context_window == 1048576


def test_shipped_files_match_their_configs():
    for name, fixture in (("deepseek-v3", "deepseek-v3.json"), ("kimi-k3", "kimi-k3.json"),
                          ("llama4-scout", "llama4-scout.json"),
                          ("qwen3-235b-a22b", "qwen3-235b-a22b.json"),
                          ("mixtral-8x7b", "mixtral-8x7b.json")):
        assert load_model(name).context_window == load_model(str(HF / fixture)).context_window


# ----------------------------------------------------------------------------------------------
# refusing what does not fit

@pytest.mark.parametrize("args, message", [
    (["search", "llama3.1-70b", "h200_dgx", "--phase", "serve", "--isl", "1000000", "--osl",
      "1000"],
     f"Error: Invalid value for '--isl' / '--osl': 1,000,000 input + 1,000 output tokens is "
     f"more than the context window of {LLAMA}"),
    (["estimate", "llama3.1-70b", "h200_dgx", "--phase", "serve", "--strategy", "tp=8",
      "--isl", "131000", "--osl", "73"],
     f"Error: Invalid value for '--isl' / '--osl': 131,000 input + 73 output tokens is more "
     f"than the context window of {LLAMA}"),
    (["search", "llama3.1-70b", "h200_dgx", "--context", "131073", "--gpus", "8"],
     f"Error: Invalid value for '--context': 131,073 tokens is more than the context window "
     f"of {LLAMA}"),
    (["estimate", "llama3.1-70b", "h200_dgx", "--phase", "prefill", "--context", "200000",
      "--strategy", "tp=8"],
     f"Error: Invalid value for '--context': 200,000 tokens is more than the context window "
     f"of {LLAMA}"),
    (["simulate", "qwen3-32b", "h100_dgx", "--strategy", "tp=2", "--isl", "40000", "--osl",
      "1000", "--max-concurrency", "4"],
     "Error: Invalid value for '--isl' / '--osl': 40,000 input + 1,000 output tokens is more "
     "than the context window of Qwen3-32B, 40,960 tokens"),
    # a flag the user did not give is said to be the default (it named --context as if given)
    (["search", "qwen3-32b", "h100_dgx", "--phase", "serve", "--isl", "40000"],
     "Error: Invalid value for '--isl' / '--osl': 40,000 input + 1,024 output tokens (--osl the "
     "default) is more than the context window of Qwen3-32B, 40,960 tokens"),
])
def test_refused_as_a_bad_flag(args, message):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert error(r) == message


def test_a_default_context_is_said_to_be_one(tmp_path):
    """--context not given is 16,384 tokens: a model of a smaller window is refused naming the
    flag, and saying the value was its default (a third hostile pass)."""
    text = (ROOT / "models" / "llama3.1-8b.toml").read_text()
    assert "context_window = 131072" in text
    (tmp_path / "m.toml").write_text(text.replace("context_window = 131072",
                                                  "context_window = 1"))
    r = run("estimate", str(tmp_path / "m.toml"), "h100_dgx", "--strategy", "tp=1")
    assert r.exit_code == 2 and error(r) == (
        "Error: Invalid value for '--context': 16,384 tokens (the default) is more than the "
        "context window of Llama-3.1-8B, 1 token")


def test_at_the_window_is_accepted():
    r = run("estimate", "llama3.1-70b", "h200_dgx", "--phase", "prefill", "--context", "131072",
            "--strategy", "tp=8", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["ttft_ms"] > 0


def test_no_window_no_check():
    # moe1.2t has no context_window: a long context is costed (here it does not fit memory)
    r = run("estimate", "moe1.2t", "h100_dgx", "--phase", "prefill", "--context", "5000000",
            "--strategy", "tp=8,ep=16,pp=4,batch=1")
    assert r.exit_code in (0, 1), r.output
    assert "context window" not in r.output


def test_trace_longest_request(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,isl,osl\n0,1000,100\n0.5,40000,961\n1,2000,10\n")
    r = run("simulate", "qwen3-32b", "h100_dgx", "--strategy", "tp=2", "--trace", str(trace))
    assert r.exit_code == 1, r.output
    assert error(r) == (f"Error: {trace}: its longest request, 40,000 input + 961 output "
                        "tokens, is more than the context window of Qwen3-32B, 40,960 tokens")


def test_validate_skips_the_row(tmp_path):
    head = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"
    p = tmp_path / "m.csv"
    p.write_text(head + "\nok,qwen3-32b,h100_dgx,2,2,1,1,bf16,1024,128,16,ttft_ms,840,vllm\n"
                 "long,qwen3-32b,h100_dgx,2,2,1,1,bf16,40000,1000,16,ttft_ms,9000,vllm\n")
    r = run("validate", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [s["reason"] for s in d["skipped"]] == [
        "isl + osl = 40,000 + 1,000 tokens is more than the context window of Qwen3-32B, "
        "40,960 tokens"]
    assert [x["id"] for x in d["rows"]] == ["ok"]
