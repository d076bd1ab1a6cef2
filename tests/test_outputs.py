"""Outputs never destroy inputs or block (issue 38 item 3): every file a command writes (-o,
--overlay, --plot, --emit-file) is checked before any work, by one rule (``cli._check_output``):
not an empty name, not an existing folder, pipe or socket, not in a missing folder, and not one
of the command's inputs (under another name or as a hard link too); a device such as /dev/null
is written. Each refusal: exit 2, one line naming the flag and the file, the input intact."""
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from test_calibrate import synthetic

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "tests" / "data" / "imports" / "vllm-bench-serve.json"
GRID = """models = ["llama3.1-8b"]
topologies = ["h100_dgx"]
gpus = [1]

[[workloads]]
name = "decode"
phase = "decode"
context = 4096
"""


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def error(r):
    lines = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert len(lines) == 1, r.output
    return lines[0]


def refused(r, text):
    assert r.exit_code == 2, r.output
    assert error(r) == text


def test_import_onto_its_input(tmp_path):
    res = tmp_path / "r.json"
    shutil.copy(RESULT, res)
    before = res.read_bytes()
    r = run("import", res, "--model", "llama3.1-8b", "--topology", "h100_dgx", "--tp", "1",
            "--engine", "vllm", "-o", res)
    refused(r, f"Error: -o {res}: is {res}, an input of this command")
    assert res.read_bytes() == before


def test_calibrate_onto_its_csv(tmp_path):
    csv = synthetic(tmp_path / "m.csv")
    before = Path(csv).read_bytes()
    refused(run("calibrate", csv, "-o", csv), f"Error: -o {csv}: is {csv}, an input of this "
                                              "command")
    out = tmp_path / "f.toml"
    refused(run("calibrate", csv, "-o", out, "--overlay", csv),
            f"Error: --overlay {csv}: is {csv}, an input of this command")
    assert Path(csv).read_bytes() == before and not out.exists()


def test_calibrate_onto_dev_null_or_a_folder(tmp_path):
    """-o /dev/null: a device, written (the overlay too: a file beside a device is the device,
    never /dev/null-engine.toml); a derived overlay name that is a folder is named as derived."""
    csv = synthetic(tmp_path / "m.csv")
    r = run("calibrate", csv, "-o", "/dev/null", "--json")
    assert r.exit_code == 0, r.output
    assert not Path("/dev/null-engine.toml").exists()
    (tmp_path / "f-engine.toml").mkdir()
    refused(run("calibrate", csv, "-o", tmp_path / "f.toml"),
            f"Error: --overlay (-o's name with -engine.toml) {tmp_path / 'f-engine.toml'}: is "
            "not a file lts can write (a folder, a pipe or a socket); give a file or a device "
            "such as /dev/null")


def test_plot_onto_the_model_file(tmp_path):
    model = tmp_path / "m.toml"
    shutil.copy(ROOT / "models" / "llama3.1-8b.toml", model)
    before = model.read_bytes()
    r = run("search", model, "h100_dgx", "--gpus", "1", "--phase", "serve", "--plot", model)
    refused(r, f"Error: --plot {model}: is {model}, an input of this command")
    assert model.read_bytes() == before


def test_plot_onto_a_shipped_model_by_its_name():
    """The model given by its shipped name: its file is an input all the same."""
    path = ROOT / "models" / "llama3.1-8b.toml"
    before = path.read_bytes()
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "1", "--phase", "serve",
            "--plot", path)
    refused(r, f"Error: --plot {path}: is {path}, an input of this command")
    assert path.read_bytes() == before


def test_sweep_onto_a_hard_link_of_its_grid(tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    link = tmp_path / "g.jsonl"
    os.link(grid, link)
    refused(run("sweep", grid, "-o", link),
            f"Error: -o {link}: is {grid}, an input of this command")
    assert grid.read_text() == GRID


def test_a_pipe_is_refused_not_written(tmp_path):
    """A FIFO as --plot: refused before the run (writing would block until a reader came)."""
    fifo = tmp_path / "p.svg"
    os.mkfifo(fifo)
    r = run("simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--num-prompts", "8",
            "--max-concurrency", "4", "--plot", fifo)
    refused(r, f"Error: --plot {fifo}: is not a file lts can write (a folder, a pipe or a "
               "socket); give a file or a device such as /dev/null")


@pytest.mark.parametrize("args, flag", [
    (["import", RESULT, "--model", "llama3.1-8b", "--topology", "h100_dgx", "--tp", "1",
      "--engine", "vllm", "-o", ""], "-o"),
    (["search", "llama3.1-8b", "h100_dgx", "--gpus", "1", "--phase", "serve", "--plot", ""],
     "--plot"),
    (["search", "llama3.1-8b", "h100_dgx", "--gpus", "1", "--emit", "vllm", "--emit-format",
      "slurm", "--emit-file", ""], "--emit-file"),
    (["sweep", ROOT / "scripts" / "sweep_example.toml", "-o", ""], "-o"),
], ids=["import", "plot", "emit-file", "sweep"])
def test_an_empty_output_name(args, flag):
    refused(run(*args), f"Error: {flag}: an empty file name")


def test_calibrate_with_an_empty_overlay_name(tmp_path):
    """--overlay '': refused, not the name derived from -o."""
    csv = synthetic(tmp_path / "m.csv")
    refused(run("calibrate", csv, "-o", tmp_path / "f.toml", "--overlay", ""),
            "Error: --overlay: an empty file name")
    assert not (tmp_path / "f.toml").exists()


def test_sweep_onto_a_topology_its_grid_names(tmp_path):
    """The model and topology files a grid names are its inputs too (a topology named by its
    file; the shipped ones by name alike)."""
    topo = tmp_path / "t.toml"
    shutil.copy(ROOT / "topologies" / "h100_dgx.toml", topo)
    grid = tmp_path / "g.toml"
    grid.write_text(GRID.replace('["h100_dgx"]', f'["{topo}"]'))
    before = topo.read_bytes()
    refused(run("sweep", grid, "-o", topo), f"Error: -o {topo}: is {topo}, an input of this "
                                            "command")
    assert topo.read_bytes() == before


def test_calibrate_onto_a_model_file_its_rows_name(tmp_path):
    """A model file the measurement rows name (beside the CSV) is read again, never written:
    refused before the fit."""
    shutil.copy(ROOT / "models" / "llama3.1-8b.toml", tmp_path / "mine.toml")
    csv = synthetic(tmp_path / "m.csv", model="mine.toml")
    before = (tmp_path / "mine.toml").read_bytes()
    model = (tmp_path / "mine.toml").resolve()
    refused(run("calibrate", csv, "-o", tmp_path / "mine.toml"),
            f"Error: -o {tmp_path / 'mine.toml'}: is {model}, an input of this command")
    assert (tmp_path / "mine.toml").read_bytes() == before


def test_a_missing_folder(tmp_path):
    out = tmp_path / "no" / "m.csv"
    r = run("import", RESULT, "--model", "llama3.1-8b", "--topology", "h100_dgx", "--tp", "1",
            "--engine", "vllm", "-o", out)
    refused(r, f"Error: -o {out}: its folder does not exist")


def test_a_good_output_is_written(tmp_path):
    """The rule refuses only what it names: a new file in an existing folder is written."""
    out = tmp_path / "m.csv"
    r = run("import", RESULT, "--model", "llama3.1-8b", "--topology", "h100_dgx", "--tp", "1",
            "--engine", "vllm", "-o", out)
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("id,")


def test_an_existing_output_is_replaced(tmp_path):
    """An output file that exists and is no input is written over (simulate's --plot, whose
    trace is not given: no input of None is compared)."""
    out = tmp_path / "run.svg"
    out.write_text("old")
    r = run("simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--num-prompts", "8",
            "--max-concurrency", "4", "--plot", out)
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("<svg")
