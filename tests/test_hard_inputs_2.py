"""Hard inputs, round two (issue 26): each class that once crashed or was silently accepted,
with its exact exit status and message."""
import json

from click.testing import CliRunner

from lts.cli import cli

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
    assert r.exit_code == 1 and "is not a path: 6000 bytes, over the 4095 a path may have " \
        "(nor a shipped topology)" in error(r)


def test_a_measurement_cell_no_file_can_have(tmp_path):
    (tmp_path / "m.csv").write_text(
        HEADER + "\na," + "9" * 3000 + ",h100_dgx,2,2,1,1,fp8,1024,128,16,ttft_ms,100,x\n"
        "b,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,16,ttft_ms,100,x\n")
    d = json.loads(run("validate", str(tmp_path / "m.csv"), "--json").stdout)
    assert d["skipped"][0]["reason"] == (
        f"model '{'9' * 40}'... (3000 characters): is not a file name: a part of it is 3000 "
        "bytes, over the 255 a file name may have")
