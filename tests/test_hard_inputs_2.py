"""Hard inputs, round two (issue 26): each class that once crashed or was silently accepted,
with its exact exit status and message."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]

HEADER = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), **kw)


def error(r):
    lines = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert len(lines) == 1, r.output
    return lines[0]


def test_names_no_file_can_have():
    """A model or topology name longer than a file name may be, or a path longer than a path:
    one line (it was OSError: File name too long), in arguments and in measurement cells."""
    r = run("search", "a" * 300, "h100_dgx")
    assert r.exit_code == 1 and error(r) == (
        f"Error: {'a' * 40}... (300 characters): is not a file name: a part of it is 300 bytes, "
        "over the 255 a file name may have (nor a shipped model)")
    r = run("search", "llama3.1-8b", "ab/" * 2000)
    assert r.exit_code == 1 and "is not a path: 6,000 bytes, over the 4,095 a path may have " \
        "(nor a shipped topology)" in error(r)


def test_a_measurement_cell_no_file_can_have(tmp_path):
    (tmp_path / "m.csv").write_text(
        HEADER + "\na," + "9" * 3000 + ",h100_dgx,2,2,1,1,fp8,1024,128,16,ttft_ms,100,x\n"
        "b,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,16,ttft_ms,100,x\n")
    d = json.loads(run("validate", str(tmp_path / "m.csv"), "--json").stdout)
    assert d["skipped"][0]["reason"] == (
        f"model '{'9' * 40}'... (3,000 characters): is not a file name: a part of it is 3,000 "
        "bytes, over the 255 a file name may have")


# ----------------------------------------------------------------------------------------------
# one rule per kind of value

@pytest.mark.parametrize("value", ["nan", "-nan", "NaN", "inf", "-inf"])
def test_float_flags_refuse_nan_and_infinities(value):
    """Every bounded float flag (click.FloatRange lets nan through every bound) — it raised
    ValueError: cannot convert float NaN to integer."""
    r = run("search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--request-rate", value)
    assert r.exit_code == 2
    assert error(r) == f"Error: Invalid value for '--request-rate': {value!r} is not a finite " \
                       "number"


@pytest.mark.parametrize("command, phase, flag, why", [
    ("search", "decode", "--ttft-slo-ms", "a decode step has no TTFT"),
    ("search", "prefill", "--tpot-slo-ms", "a prefill pass has no TPOT"),
    ("estimate", "decode", "--ttft-slo-ms", "a decode step has no TTFT"),
    ("estimate", "prefill", "--tpot-slo-ms", "a prefill pass has no TPOT"),
    ("compare", "decode", "--ttft-slo-ms", "a decode step has no TTFT"),
    ("compare", "prefill", "--tpot-slo-ms", "a prefill pass has no TPOT"),
])
def test_an_slo_the_phase_has_not_is_refused(command, phase, flag, why):
    """It was accepted and ignored."""
    extra = ["--strategy", "tp=1"] if command == "estimate" else []
    r = run(command, "llama3.1-8b", "h100_dgx", "--phase", phase, flag, "100", *extra)
    assert r.exit_code == 2
    assert error(r) == f"Error: {flag}: not with --phase {phase} ({why}; --phase serve bounds " \
                       "both)"


def test_a_batch_written_with_spaces_is_the_concurrency():
    """'tp=8, batch = 5' names the batch as 'tp=8,batch=5' does (the concurrency was chosen
    anyway: 2,314)."""
    a = json.loads(run("estimate", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--strategy",
                       "tp=8, batch = 5", "--json").stdout)
    b = json.loads(run("estimate", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--strategy",
                       "tp=8,batch=5", "--json").stdout)
    assert a["concurrency_chosen"] is False and a == b


def test_a_shared_width_without_a_shared_expert(tmp_path):
    text = (ROOT / "models" / "deepseek-v3.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^shared_experts = .*$", "shared_experts = 0\nshared_intermediate = 2048",
                  text)
    (tmp_path / "m.toml").write_text(text)
    r = run("estimate", str(tmp_path / "m.toml"), "h100_dgx", "--strategy", "tp=8")
    assert r.exit_code == 1 and error(r) == (
        f"Error: {tmp_path / 'm.toml'}: ffn.shared_intermediate: 2048 with ffn.shared_experts "
        "= 0 (no shared expert has that width: set shared_experts, or drop the width)")


def test_measurement_rows_a_metric_or_cell_cannot_hold(tmp_path):
    """tpot_ms at osl 1 (it was counted with a null prediction); a quoted line break in a cell
    (it was joined into the id); a header cell over the csv module's limit (a traceback)."""
    (tmp_path / "a.csv").write_text(
        HEADER + "\na,llama3.1-8b,h100_dgx,1,1,1,1,,1024,1,8,tpot_ms,10,x\n"
        "b,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,tpot_ms,10,x\n")
    d = json.loads(run("validate", str(tmp_path / "a.csv"), "--json").stdout)
    assert [r["id"] for r in d["rows"]] == ["b"] and d["skipped"][0]["reason"] == \
        "tpot_ms at osl 1: a request of one output token has no time per output token"
    (tmp_path / "b.csv").write_text(
        HEADER + '\n"a\nb",llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,tpot_ms,10,x\n')
    r = run("validate", str(tmp_path / "b.csv"))
    assert r.exit_code == 1 and error(r) == (
        f"Error: no row of {tmp_path / 'b.csv'} could be predicted (1 skipped; row 1: id: "
        "'a\\nb' contains control or bidirectional formatting characters (expected plain text))")
    d = json.loads(run("validate", str(tmp_path / "b.csv"), "--json").stdout)
    assert d["skipped"][0]["id"] == "'a\\nb'"       # as the reason shows it: no raw line break
    (tmp_path / "c.csv").write_text("id," + "x" * 200000 + ",model\n")
    r = run("validate", str(tmp_path / "c.csv"))
    assert r.exit_code == 1 and error(r) == (
        f"Error: {tmp_path / 'c.csv'}: header: not CSV (field larger than field limit (131072))")


def test_a_topology_of_absurd_rates(tmp_path):
    """A figure below any accelerator that serves a model is a unit slip (it was costed)."""
    text = (ROOT / "topologies" / "h100_dgx.toml").read_text(encoding="utf-8")
    (tmp_path / "t.toml").write_text(re.sub(r"(?m)^bf16_tflops = \S+", "bf16_tflops = 0.000001",
                                            text))
    r = run("search", "llama3.1-8b", str(tmp_path / "t.toml"))
    assert r.exit_code == 1 and error(r) == \
        f"Error: {tmp_path / 't.toml'}: gpu.bf16_tflops: 1e-06 must be >= 1.0"


# ----------------------------------------------------------------------------------------------
# the process's streams (lts.streams), as a user's shell leaves them: a real process each

def lts(*args, **kw):
    return subprocess.run([sys.executable, str(ROOT / "lts.py"), *args], capture_output=True,
                          text=True, timeout=120, **kw)


def test_a_closed_pipe_is_not_an_error():
    """``lts models | true``: the reader stopped reading; exit 0, nothing on stderr (it exited
    1)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, str(ROOT / "lts.py"), "models"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0 and p.stderr == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_is_one_line():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, str(ROOT / "lts.py"), "models"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr == "Error: cannot write the output: No space left on device\n"


def test_closed_stdout_is_one_line():
    p = subprocess.run([sys.executable, str(ROOT / "lts.py"), "models"], stdout=None,
                       stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert p.returncode == 1
    assert p.stderr == "Error: standard output is closed: lts has nowhere to write its answer\n"


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"},
                                 {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0",
                                  "PYTHONIOENCODING": ""}])
def test_any_output_encoding(env):
    """Symbols as ASCII (µ, ×, → raised UnicodeEncodeError)."""
    p = lts("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1",
            env={**os.environ, **env})
    assert p.returncode == 0, p.stderr
    assert "comp us" in p.stdout and "R->F" in p.stdout and p.stdout.isascii()


def test_a_narrow_terminal_keeps_the_numbers():
    """COLUMNS=20: rich laid the table out in 20 columns, eliding every number."""
    p = lts("search", "llama3.1-8b", "h100_dgx", env={**os.environ, "COLUMNS": "20"})
    assert p.returncode == 0 and "…" not in p.stdout and "1,100.2" in p.stdout


def test_a_long_exact_serve_list_is_bounded():
    r = run("search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--top", "101")
    assert r.exit_code == 2 and error(r) == (
        "Error: Invalid value for '--top': 101 is above the 100 rows an exact serve search lists "
        "(it proves each; the largest run finishes within 60 s on a 2-core machine)")


def test_a_strategys_batch_and_concurrency_that_disagree_are_refused():
    """Both set the requests in flight (issue 38 item 6): the same value is one setting."""
    args = ("estimate", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve")
    r = run(*args, "--strategy", "tp=1,batch=16", "--concurrency", "64")
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == ("Error: --strategy batch=16 and --concurrency 64 "
                                         "disagree (both set the requests in flight): give one")
    assert run(*args, "--strategy", "tp=1,batch=64", "--concurrency", "64").exit_code == 0


def test_a_strategys_batch_and_max_concurrency_that_disagree_are_refused():
    """simulate of one pool runs --max-concurrency requests at once; a batch= of another number
    was dropped silently (the same sentence as estimate's, the same function)."""
    args = ("simulate", "llama3.1-8b", "h100_dgx", "--isl", "128", "--osl", "16",
            "--num-prompts", "32")
    r = run(*args, "--strategy", "tp=1,batch=16", "--max-concurrency", "32")
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == ("Error: --strategy batch=16 and --max-concurrency 32 "
                                         "disagree (both set the requests in flight): give one")
    for same in (("--strategy", "tp=1,batch=32", "--max-concurrency", "32"),
                 ("--strategy", "tp=1,batch=16", "--request-rate", "5", "--max-concurrency",
                  "16"),
                 ("--strategy", "tp=1", "--request-rate", "5")):
        assert run(*args, *same).exit_code == 0, same
    # an open loop without --max-concurrency: the batch= would be dropped silently
    r = run(*args, "--strategy", "tp=1,batch=16", "--request-rate", "5")
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == (
        "Error: --strategy batch=: without --max-concurrency the load (--request-rate, --trace) "
        "sets the requests in flight; give --max-concurrency to cap them, or leave batch= out")


def test_a_gpu_of_unbounded_memory_never_answers_more_than_max_concurrency(tmp_path):
    """1,000,000 GiB a GPU and 3-token requests: the KV cache holds billions, which once
    overflowed the exact serve search's int32 counts into 1.2 billion clients with a 3-hour
    TPOT; an engine runs at most MAX_CONCURRENCY requests (EngineProfile.holds)."""
    from lts.specs.limits import MAX_CONCURRENCY
    text = (ROOT / "topologies" / "h100_dgx.toml").read_text()
    text = re.sub(r"^hbm_gib = [0-9.]+", "hbm_gib = 1000000", text, flags=re.M)
    (tmp_path / "big.toml").write_text(text)
    r = run("search", "llama3.1-8b", str(tmp_path / "big.toml"), "--gpus", "8", "--phase",
            "serve", "--isl", "1", "--osl", "2", "--engine", "sglang", "--json")
    assert r.exit_code == 0, r.output[-500:]
    d = json.loads(r.stdout)
    batches = [row["batch"] for row in d["top"]]
    assert max(batches) <= MAX_CONCURRENCY and min(batches) >= 1, batches


def test_json_of_more_objects_and_arrays_than_lts_reads(tmp_path, monkeypatch):
    """Every JSON reader counts objects and arrays before parsing (issue 38 item 5): 64 MiB of
    '{"":{}},' parsed to 2.2 GiB in each (a result, a config.json, a trace line); now one line
    at MAX_JSON_CONTAINERS (2,000,000; 50 here), brackets inside strings not counted."""
    import lts.specs.model as spec_model
    monkeypatch.setattr(spec_model, "MAX_JSON_CONTAINERS", 50)
    many = '{"a": [' + ", ".join(['{"": {}}'] * 30) + "]}"           # 62 of them
    said = "holds 62 JSON objects and arrays, more than the 50 lts reads (parsed, they would " \
           "take gigabytes)"
    result = tmp_path / "r.json"
    result.write_text(many)
    r = run("import", str(result), "--model", "llama3.1-8b", "--topology", "h100_dgx")
    assert r.exit_code == 1 and error(r) == f"Error: {result}: {said}"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(many)
    r = run("estimate", str(tmp_path / "cfg"), "h100_dgx", "--strategy", "tp=1")
    assert r.exit_code == 1 and error(r) == f"Error: {tmp_path / 'cfg' / 'config.json'}: {said}"
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 8}\n' + many + "\n")
    r = run("simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--trace", str(trace))
    assert r.exit_code == 1 and error(r) == f"Error: {trace}: line 2: {said}"
    # a result whose strings hold the brackets: read (a JSONL of two runs, as one file)
    vllm = json.loads((ROOT / "tests" / "data" / "imports" / "vllm-bench-serve.json").read_text())
    vllm["generated_texts"] = ['{"[\\"{' * 20] * 5
    result.write_text(json.dumps(vllm) + "\n" + json.dumps(vllm) + "\n")
    r = run("import", str(result), "--model", "llama3.1-8b", "--topology", "h100_dgx")
    assert r.exit_code == 0 and r.output.count("\n") == 7, r.output


def test_a_long_value_that_is_no_number_is_called_that(tmp_path):
    """A degree or a cell of 60 letters is not a number, not a number above the maximum; it is
    shown cut, its length said (specs.errors.cut_quoted)."""
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1,ep=" + "x" * 3000)
    assert r.exit_code == 2 and error(r) == (
        "Error: Invalid value for '--strategy': ep='" + "x" * 40 + "'... (3,000 characters) is "
        "not a positive integer")
    (tmp_path / "m.csv").write_text(
        HEADER + "\na,llama3.1-8b,h100_dgx,1,1,1,1,,128,128," + "abc" * 30 + ",ttft_ms,9,x\n")
    d = json.loads(run("validate", str(tmp_path / "m.csv"), "--json").stdout)
    assert d["skipped"][0]["reason"] == ("concurrency: '" + ("abc" * 14)[:40] + "'... (90 "
                                         "characters) is not a positive integer")


def test_an_integer_flag_of_thousands_of_digits_or_other_scripts():
    """Every integer flag (cli.Count): a value of 5,000 digits shown cut; digits of another
    script or with underscores, which int() reads but no file reader of lts takes, refused."""
    r = run("search", "llama3.1-8b", "h100_dgx", "--isl", "9" * 5000)
    assert r.exit_code == 2 and "'" + "9" * 40 + "... (5,000 characters)'" in error(r)
    assert len(error(r)) < 200
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "9" * 400)
    assert r.exit_code == 2 and len(error(r)) < 200 and "(533 characters) is more than" in error(r)
    for text in ("٨", "1_0"):
        r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", text)
        assert r.exit_code == 2 and f"'--gpus': '{text}' is not a valid integer" in error(r)
