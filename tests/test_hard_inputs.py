"""Hard inputs (one rule per kind of value): the cases that once crashed or were accepted, each
with its exact exit status and message. The fuzz test (test_fuzz.py) covers their classes."""
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.search.names import MAX_BUDGET

ROOT = Path(__file__).resolve().parents[1]
TOPO = (ROOT / "topologies" / "h100_dgx.toml").read_text(encoding="utf-8")
MODEL = (ROOT / "models" / "llama3.1-8b.toml").read_text(encoding="utf-8")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def error(r):
    lines = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert len(lines) == 1, r.output
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (["--gpus", "100000000", "--method", "megatron"],
     "Error: Invalid value for '--gpus': 100,000,000 is more than the 24,576 GPUs of h100_dgx "
     "(3,072 nodes of 8)"),
    (["--tpot-slo-ms", "nan"], "Error: Invalid value for '--tpot-slo-ms': 'nan' is not a "
                               "positive number of milliseconds (inf: no limit)"),
    (["--ttft-slo-ms", "-3"], "Error: Invalid value for '--ttft-slo-ms': '-3' is not a "
                              "positive number of milliseconds (inf: no limit)"),
    (["--seed", "-1"], "Error: Invalid value for '--seed': -1 is not in the range "
                       "0<=x<=9223372036854775807."),
    (["--method", "random", "--budget", "1000000000"],
     "Error: Invalid value for '--budget': 1,000,000,000 is above the maximum of 10,000,000 "
     "evaluator calls for --method random --phase decode (the largest run finishes within 60 s "
     "on a 2-core machine)"),
    (["--method", "ppo", "--budget", str(2**62)],
     f"Error: Invalid value for '--budget': {2**62:,} is above the maximum of "
     f"{MAX_BUDGET['ppo']['decode']:,} evaluator calls for --method ppo --phase decode (the "
     "largest run finishes within 60 s on a 2-core machine)"),
    (["--method", "anneal", "--phase", "serve", "--budget", "100000"],
     "Error: Invalid value for '--budget': 100,000 is above the maximum of 7,500 evaluator "
     "calls for --method anneal --phase serve (the largest run finishes within 60 s on a "
     "2-core machine)"),
])
def test_bad_search_flags_exit_2_with_the_limit(args, message):
    r = run("search", "llama3.1-8b", "h100_dgx", *args)
    assert r.exit_code == 2 and error(r) == message


def test_gpus_beyond_a_one_node_cluster(tmp_path):
    one = tmp_path / "one.toml"
    one.write_text(re.sub(r"^count = 3072.*$", "count = 1", TOPO, flags=re.M), encoding="utf-8")
    r = run("search", "llama3.1-405b", str(one), "--gpus", "64", "--method", "exact")
    assert r.exit_code == 2
    assert error(r) == (f"Error: Invalid value for '--gpus': 64 is more than the 8 GPUs of {one} "
                        "(1 node of 8)")


def test_inf_slo_means_no_limit_and_is_null_in_json():
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--tpot-slo-ms", "inf",
            "--method", "megatron", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["workload"]["tpot_slo_ms"] is None
    text = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--tpot-slo-ms", "inf",
               "--method", "megatron", "--no-color").output
    assert "no TPOT SLO" in " ".join(text.split()) and "inf" not in text


def test_huge_strategy_degree_is_a_bad_flag():
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1180591620717411303424")
    assert r.exit_code == 2
    assert error(r) == ("Error: Invalid value for '--strategy': tp=1180591620717411303424 is "
                        "above the maximum 65,536")


@pytest.mark.parametrize("which, edit, message", [
    ("model", lambda t: re.sub(r"^layers = \d+", "layers = 9223372036854775807", t, flags=re.M),
     "layers: 9223372036854775807 must be <= 65,536"),
    ("model", lambda t: re.sub(r"^hidden = \d+", "hidden = 99999999", t, flags=re.M),
     "hidden: 99999999 must be <= 16,777,216"),
    ("model", lambda t: re.sub(r'^name = ".*?"', lambda _: 'name = "a\\u001b[2Jb"', t,
                               flags=re.M),
     "name: 'a\\x1b[2Jb' contains control or bidirectional formatting characters (expected "
     "plain text)"),
    ("model", lambda t: t + "deep = " + "[" * 5000 + "]" * 5000 + "\n",
     "nested too deeply (hundreds of levels of tables or arrays; a model or topology needs 2)"),
    ("topo", lambda t: t.replace("span_gpus = 8 ", "span_gpus = 3 ", 1),
     "link[0].span_gpus: 3 must divide node.gpus = 8 or be a multiple of it"),
    ("topo", lambda t: t.replace("bandwidth_gb_s = 450 ", "bandwidth_gb_s = 1e300 ", 1),
     "link[0].bandwidth_gb_s: 1e+300 must be <= 1,000,000"),
])
def test_bad_file_values_exit_1_naming_file_key_value_and_limit(tmp_path, which, edit, message):
    path = tmp_path / f"{which}.toml"
    path.write_text(edit(MODEL if which == "model" else TOPO), encoding="utf-8")
    args = [str(path), "h100_dgx"] if which == "model" else ["llama3.1-8b", str(path)]
    r = run("estimate", *args, "--strategy", "tp=1")
    assert r.exit_code == 1 and error(r) == f"Error: {path}: {message}"


def test_byte_order_mark_and_deep_json(tmp_path):
    bom = tmp_path / "bom.toml"
    bom.write_text("\ufeff" + TOPO, encoding="utf-8")
    assert run("estimate", "llama3.1-8b", str(bom), "--strategy", "tp=1").exit_code == 0
    deep = tmp_path / "config.json"
    deep.write_text('{"a":' * 5000 + "1" + "}" * 5000, encoding="utf-8")
    r = run("models", "--show", str(deep))
    assert r.exit_code == 1 and error(r) == (f"Error: {deep}: nested too deeply (hundreds of "
                                             "levels of objects or arrays; a config.json needs "
                                             "a few)")
    trace = tmp_path / "t.jsonl"         # (was "not JSON (maximum recursion depth exceeded...")
    trace.write_text('{"a":' + "[" * 10_000 + "]" * 10_000 + "}\n")
    r = run("simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--engine", "vllm",
            "--trace", str(trace))
    assert r.exit_code == 1 and error(r) == (f"Error: {trace}: line 1: nested too deeply "
                                             "(hundreds of levels of objects or arrays; a trace "
                                             "line needs 1)")


def test_control_characters_in_a_path_are_shown_escaped():
    r = run("estimate", "evil\x1b[31mRED", "h100_dgx", "--strategy", "tp=1")
    assert r.exit_code == 1 and "\x1b" not in r.output
    assert error(r).startswith("Error: 'evil\\x1b[31mRED': no such file or shipped model")


HUGE = "9" * 5000          # Python refuses to convert integers of more than 4300 digits


def test_integers_of_thousands_of_digits(tmp_path):
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", f"tp={HUGE}")
    assert r.exit_code == 2 and error(r) == ("Error: Invalid value for '--strategy': "
                                             "tp=999999999999... (5,000 digits) is above the "
                                             "maximum 65,536")
    toml = tmp_path / "m.toml"
    toml.write_text(f'name = "x"\nlayers = {HUGE}\n', encoding="utf-8")
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "hidden_size": ' + HUGE + "}", encoding="utf-8")
    for path, kind in ((toml, "TOML"), (cfg, "JSON")):
        r = run("models", "--show", str(path))
        assert r.exit_code == 1
        assert error(r) == f"Error: {path}: invalid {kind} (a number of thousands of digits)"
    csv = tmp_path / "m.csv"
    csv.write_text("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,"
                   f"source\na,llama3.1-8b,h100_dgx,1,{HUGE},1,1,,128,128,8,ttft_ms,9,x\n")
    r = run("validate", str(csv))     # the row skipped with the reason; none left: exit 1
    assert r.exit_code == 1 and error(r) == (f"Error: no row of {csv} could be predicted (1 "
                                             "skipped; row 1: tp: 999999999999... (5,000 "
                                             "digits) is above the maximum 65,536)")


def test_only_regular_files_are_read(tmp_path):
    import os
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)                       # reading it would block forever
    r = run("estimate", "llama3.1-8b", str(fifo), "--strategy", "tp=1")
    assert r.exit_code == 1
    assert error(r) == f"Error: {fifo}: is not a regular file, expected a .toml file"
    if Path("/dev/zero").exists():        # reading it would never end
        r = run("models", "--show", "/dev/zero")
        assert r.exit_code == 1 and "is not a regular file" in error(r)


def test_csv_duplicate_column_and_tiny_values(tmp_path):
    head = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"
    dup = tmp_path / "dup.csv"
    dup.write_text(head + ",value\na,llama3.1-8b,h100_dgx,1,1,1,1,,128,128,8,ttft_ms,9,x,99\n")
    r = run("validate", str(dup))
    assert r.exit_code == 1 and error(r) == f"Error: {dup}: header: value: duplicate column"
    tiny = tmp_path / "tiny.csv"
    tiny.write_text(head + "\na,llama3.1-8b,h100_dgx,1,1,1,1,,128,128,8,ttft_ms,1e-300,x\n")
    r = run("validate", str(tiny))
    assert r.exit_code == 1 and error(r) == (f"Error: no row of {tiny} could be predicted (1 "
                                             "skipped; row 1: value: '1e-300' is not a number "
                                             "from 1e-06 to 1e+15)")


def test_empty_strategy_tiny_rates_and_compare_totals(tmp_path):
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", ",")
    assert r.exit_code == 2 and error(r) == ("Error: Invalid value for '--strategy': empty "
                                             "(expected e.g. tp=8,ep=1,pp=1,batch=64)")
    topo = tmp_path / "t.toml"
    topo.write_text(TOPO.replace("bf16_tflops = 989.4 ", "bf16_tflops = 1e-300 ", 1))
    r = run("estimate", "llama3.1-8b", str(topo), "--strategy", "tp=1")
    assert r.exit_code == 1 and error(r) == f"Error: {topo}: gpu.bf16_tflops: 1e-300 must be >= 1.0"
    r = run("compare", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--seeds", "1000", "--budget",
            "1000000", "--methods", "ppo")
    assert r.exit_code == 2 and error(r) == (
        "Error: Invalid value for '--seeds x --budget': 1,000,000,000 is above the maximum of "
        "150,000 evaluator calls for --methods ppo --phase decode (the largest run finishes "
        "within 60 s on a 2-core machine)")


@pytest.mark.parametrize("args", [
    ["search", "llama3.1-8b", "h100_dgx", "--engine", "vllm"],
    ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1"],
    ["search", "llama3.1-8b", "h100_dgx", "--phase", "prefill", "--engine", "vllm"],
], ids=["search-decode", "estimate-decode", "search-prefill"])
def test_an_engine_overlay_outside_the_serve_phase_is_refused(tmp_path, args):
    """--engine-profile holds the serving loop's constants: a decode step or a prefill pass
    never reads them, so the flag is refused there as the other serve-only flags are (issue 38
    item 6), not accepted and ignored."""
    overlay = tmp_path / "o.toml"
    overlay.write_text('[engine]\nname = "vllm"\nrelease = "0.15"\nstep_overhead_us = 2900.0\n')
    r = run(*args, "--engine-profile", str(overlay))
    assert r.exit_code == 2 and error(r) == "Error: --engine-profile: only with --phase serve"
    r = run("search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--engine", "vllm",
            "--gpus", "1", "--engine-profile", str(overlay), "--json")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b", "\u2028"],
                         ids=["RLO", "LRI", "zero-width-space", "line-separator"])
def test_a_name_with_bidirectional_or_hidden_characters(tmp_path, char):
    """A bidirectional override or isolate, a zero-width space or a line separator in a file's
    name: refused as control characters are (they reorder or hide what a terminal shows),
    shown escaped; in a measurement row's id, the row is skipped with the same words."""
    path = tmp_path / "m.toml"
    path.write_text(re.sub(r'^name = ".*?"', f'name = "a{char}b"', MODEL, flags=re.M))
    r = run("estimate", str(path), "h100_dgx", "--strategy", "tp=1")
    escaped = "a" + char.encode("unicode_escape").decode() + "b"
    assert r.exit_code == 1 and error(r) == (
        f"Error: {path}: name: '{escaped}' contains control or bidirectional formatting "
        "characters (expected plain text)")
    csv = tmp_path / "v.csv"
    csv.write_text("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,"
                   f"source\nr{char}1,llama3.1-8b,h100_dgx,1,1,1,1,bf16,1000,100,8,tpot_ms,10,x\n"
                   "r2,llama3.1-8b,h100_dgx,1,1,1,1,bf16,1000,100,8,tpot_ms,10,x\n")
    d = json.loads(run("validate", str(csv), "--json").stdout)
    (skip,) = d["skipped"]
    assert skip["id"] == f"'r{char.encode('unicode_escape').decode()}1'"
    assert skip["reason"].endswith("contains control or bidirectional formatting characters "
                                   "(expected plain text)")


def test_messages_stay_short_whatever_the_input(tmp_path):
    """A message names the value (cut where long) and where the rest is, not every choice: an
    unknown model listed every shipped name (354 characters), --precision every format with
    its other names (477), a measurement file's missing column every column (436)."""
    nocol = tmp_path / "m.csv"
    nocol.write_text("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,"
                     "source\nx,llama3.1-8b,h100_dgx,1,1,1,1,bf16,100,100,1,tpot_ms,s\n")
    cases = [
        (["estimate", "llama3.1-8bx", "h100_dgx"], 1,
         "Error: llama3.1-8bx: no such file or shipped model (did you mean llama3.1-8b? lts "
         "models lists the 21 shipped)"),
        (["estimate", "llama3.1-8b", "h100"], 1,
         "Error: h100: no such file or shipped topology (did you mean h100_dgx? lts topologies "
         "lists the 12 shipped)"),
        (["estimate", "llama3.1-8b", "h100_dgx", "--precision", "fp9"], 2,
         "Error: Invalid value for '--precision': 'fp9' is not a weight format lts knows "
         "(expected one of fp32, bf16, fp16, fp8, int8, fp8_block, nvfp4, mxfp4, mxfp8, w4a16, "
         "w4a16_zp, w4a16_g32, w4a16_nvfp4, w4a8 or another name of one (docs/design.md, Weight "
         "formats); any case, - or _); did you mean fp8?"),
        (["estimate", "llama3.1-8b", "h100_dgx", "--precision", "x" * 3000], 2,
         "Error: Invalid value for '--precision': '" + "x" * 40 + "'... (3,000 characters) is "
         "not a weight format lts knows"),
        (["validate", str(nocol)], 1,
         f"Error: {nocol}: header: value: missing column (expected id, model, topology, gpus, "
         "tp, ep, pp, precision, isl, osl, concurrency, metric, value, source; the optional "
         "ones: docs/validation.md)"),
    ]
    for args, code, message in cases:
        r = run(*args)
        assert r.exit_code == code and error(r).startswith(message), r.output
        assert len(error(r)) <= 400, error(r)


def test_numbers_are_ascii_decimals_everywhere(tmp_path):
    """Python's float (and NumPy's) reads '٨٤٠', '１٠٠٠' and '8_40' as numbers: a file's cell
    and a flag take ASCII digits without "_", as integer flags do; a JSON trace takes JSON
    numbers, not "1000"."""
    from lts.serving import validate as v
    head = ("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,"
            "source,engine\n")
    rows = "".join(f"{i},llama3.1-8b,h100_dgx,1,1,1,1,bf16,512,128,8,tpot_ms,{value},s,vllm\n"
                   for i, value in (("a", "٨٤٠"), ("b", "8_40"), ("c", "840")))
    (tmp_path / "m.csv").write_text(head + rows, encoding="utf-8")
    d = v.validate(tmp_path / "m.csv")
    assert [r["id"] for r in d["rows"]] == ["c"]
    assert [s["reason"] for s in d["skipped"]] == [
        "value: '٨٤٠' is not a number from 1e-06 to 1e+15",
        "value: '8_40' is not a number from 1e-06 to 1e+15"]
    sim = ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--engine", "vllm"]
    (tmp_path / "t.csv").write_text("arrival_s,isl,osl\n0,１٠٠٠,100\n", encoding="utf-8")
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": "1000", '
                                      '"output_length": 100}\n')
    for trace, message in (
            ("t.csv", "row 1: isl: '１٠٠٠' is not a whole number of tokens from 1 to 10,000,000 "
                      "(ASCII digits, no _)"),
            ("t.jsonl", "line 1: input_length: '1000' is not a whole number of tokens from 1 "
                        "to 10,000,000 (a JSON string: write the number bare)")):
        r = run(*sim, "--trace", str(tmp_path / trace))
        assert r.exit_code == 1 and error(r) == f"Error: {tmp_path / trace}: {message}"
    for flag, value, message in (
            ("--tpot-slo-ms", "٨", "'٨' is not a number of milliseconds"),
            ("--request-rate", "1_0", "'1_0' is not a decimal number")):
        r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve",
                flag, value)
        assert r.exit_code == 2 and error(r) == \
            f"Error: Invalid value for '{flag}': {message}", r.output


def test_an_engine_version_with_hidden_characters_is_refused():
    """--engine 'sglang@0.5.1<U+202E>evil' was read as 0.5.1 without a word."""
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--engine",
            "sglang@0.5.1\u202eevil", "--strategy", "tp=1", "--concurrency", "4")
    assert r.exit_code == 2 and error(r) == (
        "Error: Invalid value for '--engine': sglang@'0.5.1\\u202eevil' contains control or "
        "bidirectional formatting characters (expected plain text)")


def test_a_third_hostile_pass(tmp_path):
    """What a third pass found (2026-11-29), each one line with its exit status: integers under
    json's limit of 4,300 digits that no float or list holds (tracebacks), a file's own key of
    50,000 characters or with a bidi override shown whole or raw, a kernel release folder
    with a bidi override shown raw, contradicting or unused flags taken silently, a vLLM result
    read as SGLang's under --format."""
    big = "9" * 3000
    cfg = tmp_path / "c"
    cfg.mkdir()
    (cfg / "config.json").write_text(
        (ROOT / "tests" / "data" / "hf" / "llama3.1-70b.json").read_text().replace(
            '"num_hidden_layers": 80', '"num_hidden_layers": ' + big))
    line = json.loads((ROOT / "tests" / "data" / "imports" / "sglang-bench-serving.jsonl")
                      .read_text().splitlines()[0])
    (tmp_path / "s.jsonl").write_text(json.dumps({**line, "random_input_len": int(big)}))
    (tmp_path / "b.jsonl").write_text(json.dumps({**line, "server_info": {
        "version": "0.5.23\u202e"}}))
    (tmp_path / "m.toml").write_text("f" * 50_000 + " = 1\n" + MODEL)
    (tmp_path / "n.toml").write_text('"f\u202eoo" = 1\n' + MODEL, encoding="utf-8")
    kb = tmp_path / "k" / "h100_sxm" / "gemm" / "vllm" / "0.24.0\u202ex"
    kb.mkdir(parents=True)
    (kb / "gemm_perf.csv").write_text("gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,0.01\n")
    imp = ("import", "--model", "llama3.1-8b", "--topology", "h100_dgx")
    cases = [
        (("models", "--show", str(cfg)), 1,
         f"Error: {cfg / 'config.json'}: num_hidden_layers: {'9' * 40}... (3,000 characters) is "
         "above the maximum 1,099,511,627,776 (the model file's limits then apply: "
         "docs/limits.md)"),
        ((imp[0], str(tmp_path / "s.jsonl"), *imp[1:]), 1,
         f"Error: {tmp_path / 's.jsonl'}: run 1: random_input_len: {'9' * 40}... (3,000 "
         "characters) is not a positive number up to 1e+15"),
        ((imp[0], str(tmp_path / "b.jsonl"), *imp[1:]), 1,
         f"Error: {tmp_path / 'b.jsonl'}: run 1: server_info.version: '0.5.23\\u202e' contains "
         "control or bidirectional formatting characters (expected plain text)"),
        ((imp[0], str(ROOT / "tests" / "data" / "imports" / "vllm-bench-serve.json"), *imp[1:],
          "--tp", "1", "--format", "sglang"), 1,
         f"Error: {ROOT / 'tests' / 'data' / 'imports' / 'vllm-bench-serve.json'}: run 1: reads "
         "as vllm's result, not sglang's (--format names the tool that wrote it)"),
        (("models", "--show", str(tmp_path / "m.toml")), 1,
         f"Error: {tmp_path / 'm.toml'}: {'f' * 60}... (50,000 characters): unknown key"),
        (("models", "--show", str(tmp_path / "n.toml")), 1,
         f"Error: {tmp_path / 'n.toml'}: 'f\\u202eoo': unknown key"),
        (("kernels", "--kernels", str(tmp_path / "k")), 2,
         f"Error: Invalid value for '--kernels': '{kb}/gemm_perf.csv': a folder or file name "
         "contains control or bidirectional formatting characters (expected plain text)"
         .replace("\u202e", "\\u202e")),
        (("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--kernels",
          str(tmp_path), "--no-kernels"), 2,
         "Error: --kernels and --no-kernels: give one or the other"),
        (("kernels", "--precision", "fp8"), 2,
         "Error: --precision is read with --model and --topology"),
    ]
    for args, code, message in cases:
        r = run(*args)
        assert (r.exit_code, error(r)) == (code, message), r.output[-600:]
