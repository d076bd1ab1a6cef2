"""lts import (issue 25): each benchmark format's example becomes measurement rows that lts
validate reads; runs without a fixed concurrency and files that are no result are refused."""
import csv
import io
import json
from pathlib import Path

import pytest

from lts.serving import imports
from test_validate import run

DATA = Path(__file__).parent / "data" / "imports"
EXAMPLES = {"vllm": "vllm-bench-serve.json", "sglang": "sglang-bench-serving.jsonl",
            "aiperf": "profile_export_aiperf.json",
            "genai-perf": "profile_export_genai_perf.json"}
# (concurrency, isl, osl, TTFT ms, TPOT ms, output tokens/s) of each file's runs
WANT = {"vllm": [(16, 1024, 128, 71.32, 11.27, 1347.01)],
        "sglang": [(8, 1024, 128, 61.7, 9.68, 793.8), (32, 1024, 128, 148.3, 14.68, 2017.7)],
        "aiperf": [(32, 1024, 128, 152.4, 14.87, 1998.1)],
        "genai-perf": [(16, 1024, 128, 77.9, 11.39, 1328.6)]}


@pytest.mark.parametrize("fmt", sorted(EXAMPLES))
def test_each_format_reads_its_example(fmt):
    runs = imports.read(DATA / EXAMPLES[fmt])
    assert [r["format"] for r in runs] == [fmt] * len(WANT[fmt])
    got = [(r["concurrency"], round(r["isl"]), round(r["osl"]), r["ttft_ms"], r["tpot_ms"],
            r["output_tokens_per_s"]) for r in runs]
    assert got == WANT[fmt]


def test_import_writes_rows_lts_validate_predicts(tmp_path):
    files = [str(DATA / name) for name in EXAMPLES.values()]
    out = tmp_path / "m.csv"
    r = run("import", *files, "--model", "llama3.1-8b", "--topology", "h100_dgx", "--tp", "1",
            "-o", str(out))
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"{out}: 15 rows from 5 runs"
    rows = list(csv.DictReader(out.open()))
    sg = [x for x in rows if x["id"].startswith("sglang-bench-serving-2")]
    assert {x["metric"]: x["value"] for x in sg} == {"ttft_ms": "148.3", "tpot_ms": "14.68",
                                                    "output_tokens_per_s": "2017.7"}
    # the engine and version an SGLang result names; vLLM's result names its backend only
    assert {(x["engine"], x["engine_version"]) for x in sg} == {("sglang", "0.5.23")}
    assert {x["engine"] for x in rows if x["id"].startswith("vllm-")} == {"vllm"}
    d = json.loads(run("validate", str(out), "--json").output)
    assert d["summary"]["count"] == 15 and not d["skipped"]


def test_engine_and_strategy_flags_go_into_the_rows():
    r = run("import", str(DATA / EXAMPLES["sglang"]), "--model", "deepseek-v3", "--topology",
            "h200_dgx", "--strategy", "tp=8,ep=2", "--engine", "trtllm", "--engine-version",
            "1.2.1")
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert {(x["gpus"], x["tp"], x["ep"], x["strategy"], x["engine"], x["engine_version"])
            for x in rows} == {("16", "8", "2", "tp=8,ep=2", "trtllm", "1.2.1")}


def test_model_files_are_written_as_absolute_paths(tmp_path):
    r = run("import", str(DATA / EXAMPLES["vllm"]), "--model", "models/llama3.1-8b.toml",
            "--topology", "h100_dgx")
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert Path(rows[0]["model"]).is_absolute() and rows[0]["topology"] == "h100_dgx"


def test_refusals(tmp_path):
    rate = json.loads((DATA / EXAMPLES["vllm"]).read_text())
    rate["max_concurrency"] = None
    (tmp_path / "rate.json").write_text(json.dumps(rate))
    r = run("import", str(tmp_path / "rate.json"), "--model", "llama3.1-8b", "--topology",
            "h100_dgx")
    assert r.exit_code == 1 and "run 1: no fixed concurrency" in r.output
    (tmp_path / "other.json").write_text('{"hello": 1}')
    r = run("import", str(tmp_path / "other.json"), "--model", "llama3.1-8b", "--topology",
            "h100_dgx")
    assert r.exit_code == 1 and "not a result of vllm bench serve" in r.output
    r = run("import", str(DATA / EXAMPLES["vllm"]), "--model", "llama3.1-8b", "--topology",
            "h100_dgx", "--strategy", "tp=2", "--tp", "2")
    assert r.exit_code == 2 and "--tp: not with --strategy" in r.output


def test_results_named_alike_get_distinct_ids(tmp_path):
    """aiperf names every export profile_export_aiperf.json: their folders tell the runs apart."""
    paths = []
    for run_dir in ("c8", "c32"):
        (tmp_path / run_dir).mkdir()
        target = tmp_path / run_dir / "profile_export_aiperf.json"
        target.write_text((DATA / EXAMPLES["aiperf"]).read_text())
        paths.append(str(target))
    r = run("import", *paths, "--model", "llama3.1-8b", "--topology", "h100_dgx")
    ids = [x["id"] for x in csv.DictReader(io.StringIO(r.output))]
    assert len(ids) == len(set(ids)) == 6 and ids[0].startswith("c8-profile_export_aiperf")


@pytest.mark.parametrize("key, value, message", [
    ("mean_ttft_ms", -5, "mean_ttft_ms: -5 is not a positive number"),
    ("mean_tpot_ms", float("nan"), "mean_tpot_ms: nan is not a positive number"),
    ("total_output_tokens", 0, "total_output_tokens: 0 is not a positive number"),
    ("request_rate", 5.0, "request_rate: 5.0 paces the requests"),
    ("max_concurrency", 16.5, "concurrency: 16.5 is not an integer from 1 to 10,000,000"),
    # a 400-digit number is shown cut, its length said
    ("max_concurrency", 10**400 - 1, "concurrency: " + "9" * 40 + "... (400 characters) is not "
                                     "an integer from 1 to 10,000,000"),
    ("mean_ttft_ms", "x" * 1000, "mean_ttft_ms: '" + "x" * 40 + "'... (1,000 characters) is "
                                 "not a number"),
])
def test_values_a_measurement_cannot_hold_are_refused(tmp_path, key, value, message):
    d = json.loads((DATA / EXAMPLES["vllm"]).read_text())
    d[key] = value
    (tmp_path / "r.json").write_text(json.dumps(d))
    r = run("import", str(tmp_path / "r.json"), "--model", "llama3.1-8b", "--topology",
            "h100_dgx")
    assert r.exit_code == 1 and message in r.output, r.output


def test_an_empty_list_is_no_result(tmp_path):
    (tmp_path / "e.json").write_text("[]")
    r = run("import", str(tmp_path / "e.json"), "--model", "llama3.1-8b", "--topology",
            "h100_dgx")
    assert r.exit_code == 1 and "holds no runs" in r.output


def _vllm(**edit) -> str:
    d = json.loads((DATA / EXAMPLES["vllm"]).read_text())
    d.update(edit)
    return json.dumps(d)


@pytest.mark.parametrize("text, where, message", [
    ("[1, 2]", "run 1", "a JSON integer, not a result object"),
    ("null", "run 1", "a JSON null, not a result object"),
    ('"text"', "run 1", "a JSON string, not a result object"),
    ("[" * 100_000 + "]" * 100_000, "", "nested too deeply (hundreds of levels of objects or "
                                        "arrays; a benchmark result needs a few)"),
    ('{"completed": ' + "9" * 5000 + "}", "", "a number of thousands of digits"),
    # a key given twice: json keeps the last, silently
    (_vllm()[:-1] + ', "completed": 1}', "", "key 'completed' given twice in one object (which "
                                              "one is meant?)"),
    (_vllm(request_rate=10.0), "run 1", "request_rate: 10.0 paces the requests"),
    (_vllm(request_rate="10"), "run 1", "request_rate: '10' paces the requests"),
    (_vllm(request_rate=float("nan")), "run 1", "request_rate: nan paces the requests"),
    (_vllm(completed=2.5), "run 1", "completed: 2.5 is not a whole number of requests"),
    (_vllm(total_input_tokens=0.3), "run 1", "tokens per request"),
    # what validate's own row reader would skip (validate.row_problem), named by the row's cell
    (_vllm(mean_ttft_ms=1e-9), "run 1", "value: '1e-09' is not a number from 1e-06 to 1e+15 "
                                        "(lts validate would not read its ttft_ms row)"),
    (_vllm(completed=2_000_000, num_prompts=2_000_000, total_input_tokens=2_048_000_000,
           total_output_tokens=256_000_000), "run 1",
     "num_prompts: 2000000 is above the maximum 1,000,000 (lts validate would not read its "
     "ttft_ms row)"),
    (_vllm(total_input_tokens=160 * 20_000_000), "run 1",
     "isl: 20000000 is above the maximum 10,000,000 (lts validate would not read its ttft_ms "
     "row)"),
    (_vllm(max_concurrency=10**8), "run 1", "concurrency: 100000000 is not an integer from 1 to "
                                            "10,000,000 (what lts validate reads)"),
])
def test_a_file_that_is_no_closed_loop_result_is_one_line(tmp_path, text, where, message):
    """Issue 38: a top level that is no object, nesting past the stack, 5,000-digit integers
    (tracebacks before); a run paced at a rate, NaN or "10" (taken as closed loops before);
    fractional or sub-token counts. With and without --format."""
    path = tmp_path / "r.json"
    path.write_text(text)
    for fmt in ((), ("--format", "vllm")):
        r = run("import", str(path), "--model", "llama3.1-8b", "--topology", "h100_dgx", *fmt)
        assert r.exit_code == 1, r.output
        last = r.output.strip().splitlines()[-1]
        assert last.startswith(f"Error: {path}{': ' + where if where else ''}: "), last
        assert message in last, last


@pytest.mark.parametrize("edit, message", [
    # SGLang's random lengths (the longest, which the range ratio spreads) are the rows' isl and
    # osl: above validate's 10,000,000 tokens, refused as the means are
    ({"random_input_len": 2e7}, "isl: 20000000 is above the maximum 10,000,000 (lts validate "
                                "would not read its ttft_ms row)"),
    # server_info.version [1] was written as the text '[1]'
    ({"server_info": {"version": [1]}}, "server_info.version: [1] is not a version (a JSON "
                                        "string)"),
])
def test_an_sglang_run_lts_validate_would_not_read_is_refused(tmp_path, edit, message):
    line = json.loads((DATA / EXAMPLES["sglang"]).read_text().splitlines()[0])
    line.update(edit)
    (tmp_path / "s.jsonl").write_text(json.dumps(line))
    r = run("import", str(tmp_path / "s.jsonl"), "--model", "llama3.1-8b", "--topology",
            "h100_dgx")
    assert (r.exit_code, r.output) == (1, f"Error: {tmp_path / 's.jsonl'}: run 1: {message}\n")


@pytest.mark.parametrize("flags, code, message", [
    (("--tp", "65537"), 2, "Error: Invalid value for '--tp': 65537 is not in the range "
                           "1<=x<=65536."),
    (("--pp", "65537"), 2, "Error: Invalid value for '--pp': 65537 is not in the range "
                           "1<=x<=65536."),
    (("--tp", "65536", "--ep", "65536", "--pp", "65536"), 1,
     "Error: {path}: run 1: gpus: 281474976710656 is above the maximum 68,719,476,736 (lts "
     "validate would not read its ttft_ms row)"),
    (("--strategy", "tp=65536,ep=65536,pp=65536"), 1,
     "Error: {path}: run 1: gpus: 281474976710656 is above the maximum 68,719,476,736 (lts "
     "validate would not read its ttft_ms row)"),
])
def test_degrees_validate_would_not_read_are_refused(flags, code, message):
    """--tp/--ep/--pp up to validate's largest degree (MAX_DEGREE, 65,536; MAX_GPUS before),
    and their product up to a measurement's GPUs: rows validate skipped before."""
    path = DATA / EXAMPLES["vllm"]
    r = run("import", str(path), "--model", "llama3.1-8b", "--topology", "h100_dgx", *flags)
    assert r.exit_code == code
    assert r.output.strip().splitlines()[-1] == message.format(path=path)


def test_what_import_writes_validate_reads_every_row_of(tmp_path):
    """Round trip (issue 38 item 2): a file name and an engine version holding control
    characters, and each weight format --precision takes, give rows lts validate predicts,
    none skipped (the escapes are written as text: ``\\x1b``)."""
    odd = tmp_path / "r\x1bx.json"
    odd.write_text((DATA / EXAMPLES["vllm"]).read_text())
    for extra in (("--engine", "vllm", "--engine-version", "0.12\x07"), ("--precision", "w4a16"),
                  ("--precision", "mxfp8"), ("--precision", "fp8_block")):
        out = tmp_path / "m.csv"
        r = run("import", str(odd), "--model", "llama3.1-8b", "--topology", "h100_dgx",
                *extra, "-o", str(out))
        assert r.exit_code == 0, r.output
        d = json.loads(run("validate", str(out), "--json").stdout)
        assert (len(d["rows"]), d["skipped"]) == (3, []), (extra, d["skipped"])
        assert "\\x1b" in out.read_text()


def test_an_engine_version_that_is_no_version_is_refused(tmp_path):
    """``--engine-version`` is checked as ``--engine NAME@VERSION`` is: 3,000 letters were
    written into every row's cell; now one line, cut, exit 2."""
    r = run("import", str(DATA / EXAMPLES["vllm"]), "--model", "llama3.1-8b", "--topology",
            "h100_dgx", "--engine", "vllm", "--engine-version", "x" * 3000,
            "-o", str(tmp_path / "m.csv"))
    assert r.exit_code == 2 and not (tmp_path / "m.csv").exists()
    assert ("Invalid value for '--engine-version': '" + "x" * 40 + "'... (3,000 characters) is "
            "not a version") in r.output
