"""Fuzzing the command line: hypothesis draws flags and file contents (model and topology TOML,
config.json, measurement CSV, --strategy strings), valid and not.

Whatever comes in, lts must exit 0, 1 or 2, never print a traceback, and say what is wrong in
one `Error: ...` line that names the flag or the file; the one exit-1 answer without such a line
is an estimate whose strategy is invalid, and it says "invalid". Searches run with small budgets
here; how long the big ones take is measured by scripts, not by tests.
"""
import json
import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]
MODEL_TOML = (ROOT / "models" / "llama3.1-8b.toml").read_text(encoding="utf-8")
TOPO_TOML = (ROOT / "topologies" / "h100_dgx.toml").read_text(encoding="utf-8")
CONFIG_JSON = (ROOT / "tests" / "data" / "hf" / "mixtral-8x7b.json").read_text(encoding="utf-8")
CSV_HEADER = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"
CSV_ROW = "a,llama3.1-8b,h100_dgx,2,2,1,1,fp8,1024,128,16,ttft_ms,100,vLLM run"

# awkward values, as a user (or a bad script) writes them
NUMBERS = ["0", "-1", "1", "7", "1e400", "nan", "inf", "-inf", "1.5", "99999999999999999999999",
           "9" * 5000, "1e-300",
           "0x10", "١٢", "", " ", "abc", "\x1b[31m", "2e30", "4096", "-0"]
fuzz_text = st.one_of(st.sampled_from(NUMBERS), st.text(max_size=12),
                      st.integers(-10**25, 10**25).map(str))


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=True)


def check(r, args, names):
    """Exit 0/1/2, no traceback, one Error line naming one of ``names`` (a flag or a file)."""
    out = r.output
    assert r.exit_code in (0, 1, 2), (args, r.exit_code, out[-1500:], r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception))
    assert "Traceback" not in out, (args, out[-1500:])
    if r.exit_code == 0:
        return
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    if not errors:      # an estimate of an invalid strategy: the table, then why it is invalid
        assert r.exit_code == 1 and "invalid" in out, (args, out[-1500:])
        return
    assert len(errors) == 1, (args, out)
    assert any(n in errors[0] for n in names) or "no feasible strategy" in errors[0], \
        (args, errors[0], names)


# ----------------------------------------------------------------------------------------------
# flags

FLAGS = {
    "estimate": ["--context", "--tpot-slo-ms", "--ttft-slo-ms", "--gpus", "--precision",
                 "--isl", "--osl", "--concurrency", "--engine", "--phase", "--strategy"],
    "search": ["--context", "--tpot-slo-ms", "--ttft-slo-ms", "--gpus", "--precision", "--seed",
               "--top", "--budget", "--phase", "--isl", "--osl", "--engine", "--emit"],
}
CHOICES = {"--phase": ["decode", "prefill", "serve", "Serve", ""],
           "--precision": ["fp8", "bf16", "fp7", ""],
           "--engine": ["vllm", "sglang", "trtllm", "generic", "tgi", ""],
           "--emit": ["vllm", "sglang", "trtllm", "tensorrt"],
           "--strategy": ["tp=8", "tp=1,batch=4", "tp=2,ep=2", "tp=x", "tp=0", "tp=1,tp=2",
                          "foo=1", "tp=99999999999999999999999", "ffn1=experts", "qkv=2",
                          "tp=８", "batch=1e3", ",,,", "tp=4,pp=2,batch=3,scores=1"],
           # plausible values, so that the fuzzed runs also reach the cost model and searches
           "--context": ["1024", "16384", "1"], "--tpot-slo-ms": ["50", "inf", "5", "1e-3"],
           "--ttft-slo-ms": ["2000", "inf", "10"], "--gpus": ["1", "8", "16", "24576"],
           "--isl": ["128", "1000", "9000"], "--osl": ["1", "128", "2048"],
           "--concurrency": ["1", "7", "64", "100000"], "--seed": ["0", "7"],
           "--top": ["1", "3"]}


@st.composite
def flag_cases(draw):
    cmd = draw(st.sampled_from(sorted(FLAGS)))
    args = [cmd, draw(st.sampled_from(["llama3.1-8b", "mixtral-8x7b", "qwen3-32b",
                                       "no-such-model"])),
            draw(st.sampled_from(["h100_dgx", "a100_dgx", "gb200_nvl72", "tpu_v9"]))]
    chosen = draw(st.lists(st.sampled_from(FLAGS[cmd]), max_size=4, unique=True))
    if cmd == "estimate" and "--strategy" not in chosen:
        chosen.append("--strategy")
    for flag in chosen:
        if flag in CHOICES and draw(st.integers(0, 3)):       # plausible 3 times in 4
            value = draw(st.sampled_from(CHOICES[flag]))
        elif flag == "--budget":        # keep accepted budgets small: searches run here
            value = draw(st.sampled_from(["0", "-5", "3", "64", "abc", "1e3", str(2**62),
                                          "20000000"]))
        else:
            value = draw(fuzz_text)
        args += [flag, value]
    if cmd == "search" and "--method" not in args:
        args += ["--method", draw(st.sampled_from(["megatron", "random", "anneal"]))]
    if cmd == "search" and "--budget" not in chosen:
        args += ["--budget", "64"]
    return args


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(args=flag_cases())
def test_fuzzed_flags_never_crash(args):
    names = [a for a in args if a.startswith("--")] + ["--strategy", "no-such-model", "tpu_v9",
                                                       "MODEL", "TOPOLOGY", "--phase"]
    check(invoke(args), args, names)


# ----------------------------------------------------------------------------------------------
# files

TOML_VALUES = st.one_of(
    st.integers(-2**63, 2**63 - 1).map(str), st.floats(allow_nan=True).map(
        lambda x: {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(x), repr(x))),
    st.sampled_from(['"text"', '"\\u001b[2J"', "true", "[1, 2]", "{ a = 1 }", '""', "0",
                     "9223372036854775807", "1e308", "-1", "3", "[[[[[1]]]]]", "9" * 5000,
                     "1e-300"]))


@st.composite
def toml_files(draw, base):
    """A shipped file with a few lines' values replaced, lines dropped or garbage added."""
    lines = base.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "drop", "garbage", "bom", "deep"]))
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "value" and "=" in lines[i] and not lines[i].lstrip().startswith("#"):
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {draw(TOML_VALUES)}"
        elif kind == "drop":
            del lines[i]
        elif kind == "garbage":
            lines.insert(i, draw(st.sampled_from(["[gpu", "x = = 1", "]]", "name = 'a'",
                                                  "unknown_key = 1", "[extra]"])))
        elif kind == "bom":
            lines[0] = "\ufeff" + lines[0]
        else:
            lines.append("deep = " + "[" * 3000 + "]" * 3000)
    return "\n".join(lines) + "\n"


@st.composite
def json_files(draw):
    data = json.loads(CONFIG_JSON)
    key = draw(st.sampled_from(sorted(data)))
    data[key] = draw(st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=False),
                               st.text(max_size=8), st.none(), st.booleans(),
                               st.lists(st.integers(), max_size=3)))
    text = json.dumps(data)
    if draw(st.booleans()):
        text = draw(st.sampled_from(["{" + '"a":{' * 3000 + "}" * 3001, text[:-5], "[]",
                                     "\ufeff" + text, text]))
    return text


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture])
@given(model=toml_files(MODEL_TOML), topo=toml_files(TOPO_TOML), config=json_files())
def test_fuzzed_files_never_crash(tmp_path, model, topo, config):
    (tmp_path / "m.toml").write_text(model, encoding="utf-8")
    (tmp_path / "t.toml").write_text(topo, encoding="utf-8")
    (tmp_path / "config.json").write_text(config, encoding="utf-8")
    for args in (["estimate", str(tmp_path / "m.toml"), "h100_dgx", "--strategy", "tp=1"],
                 ["estimate", "llama3.1-8b", str(tmp_path / "t.toml"), "--strategy", "tp=2"],
                 ["models", "--show", str(tmp_path / "config.json")]):
        check(invoke(args), args, [str(tmp_path)])


CSV_CELLS = st.one_of(st.sampled_from(NUMBERS + ["vllm", "VLLM", "tgi", "ttft_ms", "tok",
                                                 "llama3.1-8b", "h100_dgx", "fp8", '"a,b"']),
                      st.text(max_size=10))


@st.composite
def csv_files(draw):
    cols = CSV_HEADER.split(",") + draw(st.sampled_from([[], ["engine"], ["strategy"]]))
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        cells = CSV_ROW.split(",") + ["vllm" if c == "engine" else "tp=2" for c in cols[14:]]
        for _ in range(draw(st.integers(0, 3))):
            cells[draw(st.integers(0, len(cells) - 1))] = draw(CSV_CELLS)
        rows.append(",".join(re.sub(r"[\r\n]", " ", c) for c in cells))
    header = ",".join(cols)
    if draw(st.booleans()):
        header = draw(st.sampled_from([header.replace("model,", ""), "\ufeff" + header,
                                       header + ",extra", header]))
    return header + "\n" + "\n".join(rows) + "\n"


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture])
@given(text=csv_files())
def test_fuzzed_measurement_files_never_crash(tmp_path, text):
    path = tmp_path / "m.csv"
    path.write_text(text, encoding="utf-8")
    args = ["validate", str(path)]
    check(invoke(args), args, [str(path)])
