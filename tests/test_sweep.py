"""lts sweep (issue 26): a grid of problems, each answered as `lts search --json` answers it;
resumable; the same lines with one job or two; the grid's mistakes one line each."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts import sweep as sw

ROOT = Path(__file__).resolve().parents[1]

GRID = '''models = ["llama3.1-8b", "mixtral-8x7b"]
topologies = ["h100_dgx"]
engines = ["", "vllm"]
gpus = [8]

[[workloads]]
name = "decode"
phase = "decode"
context = 4096

[prices]
h100_dgx = 2.0
'''


def run(*args):
    return CliRunner().invoke(cli, list(args))


def lines(path):
    """The whole lines of an output file, by key (a line cut short is none)."""
    out = []
    for x in path.read_text().splitlines():
        try:
            out.append(json.loads(x))
        except ValueError:
            continue
    return sorted(out, key=lambda d: d["key"])


def strip(result):
    return {k: v for k, v in result.items() if k not in ("wall_s", "stats")}


def test_each_line_is_what_search_answers(tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    r = run("sweep", str(tmp_path / "g.toml"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["problems"], d["answered"], d["ran"], d["skipped"]) == (4, 4, 4, 0)
    got = lines(tmp_path / "g.jsonl")
    assert [x["key"].rsplit("|", 1)[0] for x in got] == [
        "llama3.1-8b|h100_dgx|decode|vllm|8", "llama3.1-8b|h100_dgx|decode||8",
        "mixtral-8x7b|h100_dgx|decode|vllm|8", "mixtral-8x7b|h100_dgx|decode||8"]
    want = json.loads(run("search", "mixtral-8x7b", "h100_dgx", "--phase", "decode",
                          "--context", "4096", "--gpus", "8", "--engine", "vllm",
                          "--method", "exact", "--json").stdout)
    assert strip(got[2]["result"]) == strip(want)
    # the summary: the best per model over the engines, and tokens per dollar at $2/GPU-h
    best = {row["model"]: row for row in d["rows"]}
    b = want["best"]
    per_gpu = b.get("tokens_per_s_per_cluster_gpu", b["tokens_per_s_per_gpu"])
    assert best["Mixtral-8x7B"]["tokens_per_s_per_gpu"] >= per_gpu
    row = best["Mixtral-8x7B"]
    assert row["tokens_per_dollar"] == pytest.approx(row["tokens_per_s_per_gpu"] * 3600 / 2.0)


def test_a_sweep_goes_on_where_it_stopped_and_jobs_do_not_change_it(tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    out = tmp_path / "a.jsonl"
    assert run("sweep", str(tmp_path / "g.toml"), "-o", str(out), "--json").exit_code == 0
    first = lines(out)
    text = out.read_text().splitlines()
    out.write_text("\n".join(text[:2]) + "\n" + text[2][:50])     # stopped mid-line
    d = json.loads(run("sweep", str(tmp_path / "g.toml"), "-o", str(out), "--json").stdout)
    assert (d["ran"], d["skipped"]) == (2, 2)
    again = lines(out)
    assert [strip(x["result"]) for x in again] == [strip(x["result"]) for x in first]
    two = tmp_path / "b.jsonl"
    assert run("sweep", str(tmp_path / "g.toml"), "-o", str(two), "--jobs", "2",
               "--json").exit_code == 0
    assert [strip(x["result"]) for x in lines(two)] == [strip(x["result"]) for x in first]


def test_an_infeasible_problem_is_a_line_with_its_error(tmp_path):
    """Nothing feasible: each line says why, the summary lists them, the sweep exits 1, and a
    rerun tries them again."""
    (tmp_path / "g.toml").write_text(GRID.replace('context = 4096', 'context = 4096\n'
                                                  'tpot_slo_ms = 0.001'))
    r = run("sweep", str(tmp_path / "g.toml"), "--json")
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["failed"] == 4 and d["rows"] == [] and len(d["errors"]) == 4
    one = lines(tmp_path / "g.jsonl")[0]
    assert one["exit"] == 1 and one["result"] is None and one["error"]
    d = json.loads(run("sweep", str(tmp_path / "g.toml"), "--json").stdout)
    assert (d["ran"], d["resolved"], d["skipped"], d["failed"]) == (4, 4, 0, 4)


def test_an_edited_grid_solves_what_changed_and_sums_only_its_own_lines(tmp_path):
    """The key holds a digest of the search's flags: a new context is a new problem; the
    summary counts this grid's problems only, not the old lines beside them."""
    (tmp_path / "g.toml").write_text(GRID)
    out = str(tmp_path / "o.jsonl")
    first = json.loads(run("sweep", str(tmp_path / "g.toml"), "-o", out, "--json").stdout)
    # (32,768: mixtral-8x7b's context window; a longer context is refused)
    (tmp_path / "g.toml").write_text(GRID.replace("context = 4096", "context = 32768"))
    d = json.loads(run("sweep", str(tmp_path / "g.toml"), "-o", out, "--json").stdout)
    assert (d["ran"], d["skipped"], d["problems"], d["answered"]) == (4, 0, 4, 4)
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 8
    assert d["rows"][0]["tokens_per_s_per_gpu"] < first["rows"][0]["tokens_per_s_per_gpu"]


def test_shards_cover_the_grid_and_the_whole_run_solves_nothing_more(tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    parts = []
    for i in (1, 2, 3):
        out = tmp_path / f"p{i}.jsonl"
        assert run("sweep", str(tmp_path / "g.toml"), "--shard", f"{i}/3", "-o", str(out),
                   "--json").exit_code == 0
        parts.append(out.read_text())
    (tmp_path / "all.jsonl").write_text("".join(parts))
    d = json.loads(run("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "all.jsonl"),
                       "--json").stdout)
    assert (d["ran"], d["skipped"], d["answered"]) == (0, 4, 4)
    r = run("sweep", str(tmp_path / "g.toml"), "--shard", "4/3")
    assert r.exit_code == 2 and "'4/3': I must be from 1 to N" in r.output


def test_an_output_that_is_not_a_regular_file(tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    r = run("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path))
    assert r.exit_code == 2 and "is not a file lts can write" in r.output
    r = run("sweep", str(tmp_path / "g.toml"), "-o", "/dev/null")     # written, never read back
    assert r.exit_code == 2 and "is not a regular file (a sweep reads its output back" in r.output
    (tmp_path / "junk.jsonl").write_bytes(b"\xff\xfe null\n5\n[]\n")
    r = run("sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "junk.jsonl"), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["answered"] == 4


@pytest.mark.parametrize("text, message", [
    ('models = []\ntopologies = ["h100_dgx"]\n[[workloads]]\n',
     "models: expected a non-empty list of strings"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n', "workloads: missing: at least one "
                                                    "[[workloads]] table"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[[workloads]]\nphase = "train"\n',
     "workloads[0].phase: 'train' is not one of decode, prefill, serve"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[[workloads]]\nisl = 0\n',
     "workloads[0].isl: 0 is not from 1 to 10,000,000"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\nspeed = 1\n[[workloads]]\n',
     "speed: unknown key"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[prices]\nh100_dgx = -1\n[[workloads]]\n',
     "prices: expected a table of topology = dollars per GPU-hour"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[prices]\nh100 = 3\n[[workloads]]\n',
     "prices.h100: is not one of the grid's topologies (h100_dgx), as written there"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\nengines = ["foo"]\n[[workloads]]\n',
     "engines: 'foo' is not an engine lts knows"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\nmethod = "bogus"\n[[workloads]]\n',
     "method: 'bogus' is not one of ppo"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\ngpus = [8, 8]\n[[workloads]]\n',
     "gpus: names one budget twice"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[[workloads]]\nphase = "decode"\nisl = 9\n',
     "workloads[0].isl: not with phase 'decode' (only serve)"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[[workloads]]\nphase = "prefill"\n'
     'tpot_slo_ms = 5\n', "workloads[0].tpot_slo_ms: not with phase 'prefill'"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\n[[workloads]]\ntpot_slo_ms = nan\n',
     "workloads[0].tpot_slo_ms: nan is not a positive number of milliseconds"),
    ('models = ["a\u202eb"]\ntopologies = ["h100_dgx"]\n[[workloads]]\n',  # (shown in a key)
     "models: 'a\\u202eb' contains control or bidirectional formatting characters (expected "
     "plain text)"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\nworkloads = 5\n',    # (was "missing")
     "workloads: 5 is not a list of [[workloads]] tables (at least one)"),
    # one thing under two spellings was solved twice
    (f'models = ["llama3.1-8b", "{ROOT}/models/llama3.1-8b.toml"]\ntopologies = ["h100_dgx"]\n'
     "[[workloads]]\n", f"models: 'llama3.1-8b' and '{ROOT}/models/llama3.1-8b.toml' name one "
                        "model file: give it once"),
    ('models = ["a"]\ntopologies = ["h100_dgx"]\nengines = ["vllm@0.15.0", "vllm@v0.15"]\n'
     "[[workloads]]\n", "engines: 'vllm@0.15.0' and 'vllm@v0.15' name one engine release: "
                        "give it once"),
])
def test_a_bad_grid_is_one_line(tmp_path, text, message):
    (tmp_path / "g.toml").write_text(text, encoding="utf-8")
    r = run("sweep", str(tmp_path / "g.toml"))
    assert r.exit_code == 1 and message in r.output, r.output
    assert not (tmp_path / "g.jsonl").exists()


def test_grid_problems_are_the_product():
    problems, prices = sw.read_grid(Path(__file__).resolve().parents[1] / "scripts" /
                                    "sweep_example.toml")
    assert len(problems) == 60 and len({p.key for p in problems}) == 60
    assert prices == {"h100_dgx": 3.0, "h200_dgx": 3.7, "b200_dgx": 5.5}


def test_a_grid_over_the_limit_is_refused_before_a_problem_is_made(tmp_path):
    """5,000 models x 5,000 topologies: counted from the lists (it once built 25 M problems,
    5.5 GiB, before the check)."""
    names = ", ".join(f'"m{i}"' for i in range(5000))
    tops = ", ".join(f'"t{i}"' for i in range(5000))
    (tmp_path / "g.toml").write_text(f"models = [{names}]\ntopologies = [{tops}]\n"
                                     "[[workloads]]\nphase = \"decode\"\n")
    r = run("sweep", str(tmp_path / "g.toml"))
    assert r.exit_code == 1
    assert "25,000,000 problems, over the 100,000 a sweep takes (split the grid)" in r.output
    assert not (tmp_path / "g.jsonl").exists()


def _mangled(good: dict) -> list:
    """Lines of an output file another hand has edited: each holds the key of a problem but no
    answer the summary may read."""
    def with_best(**edit):
        d = json.loads(json.dumps(good))
        b = d["result"]["best"]
        for k, v in edit.items():       # (tokens/s: per GPU of the budget too, where given)
            for key in (k, k.replace("per_gpu", "per_cluster_gpu")):
                if key == k or key in b:
                    b[key] = v
        return d
    no_best = json.loads(json.dumps(good))
    del no_best["result"]["best"]
    no_tp = json.loads(json.dumps(good))
    del no_tp["result"]["best"]["tp"]
    one_nan = json.loads(json.dumps(good))        # NaN in the figure the summary does not read
    one_nan["result"]["best"]["tokens_per_s_per_gpu"] = float("nan")
    stray = json.loads(json.dumps(good))          # Infinity anywhere: lts never writes one
    stray["result"]["evaluations"] = float("inf")
    return [json.dumps(with_best(tokens_per_s_per_gpu=float("nan"))),       # NaN (Python's)
            json.dumps(one_nan), json.dumps(stray),
            json.dumps(with_best(tokens_per_s_per_gpu=float("-inf"))),
            json.dumps(with_best(tokens_per_s_per_gpu=-1e308)),
            json.dumps(with_best(tokens_per_s_per_gpu="10")),
            json.dumps(with_best(tp="8")),
            json.dumps(with_best(tp=10**400)),                              # no float holds it
            json.dumps(no_best), json.dumps(no_tp),
            json.dumps({**good, "result": "[" * 50}),
            json.dumps(good)[:-1] + ', "exit": 0}',                        # a key twice
            '{"key": "' + good["key"] + '", "result": ' + "[" * 100_000 + "]" * 100_000 + "}"]


def test_a_resumed_sweep_solves_a_bad_line_again_and_never_sums_it(tmp_path):
    """A line whose answer is not whole (a key missing, a tokens/s that is NaN, negative or a
    string, a degree that is text, nesting past Python's stack) is no answer: the problem is
    solved again and the summary reads the new line."""
    grid = GRID.replace('engines = ["", "vllm"]', 'engines = [""]').replace(
        '"llama3.1-8b", "mixtral-8x7b"', '"llama3.1-8b"')
    (tmp_path / "g.toml").write_text(grid)
    out = tmp_path / "a.jsonl"
    first = json.loads(run("sweep", str(tmp_path / "g.toml"), "-o", str(out), "--json").stdout)
    good = lines(out)[0]
    for bad in _mangled(good):
        out.write_text(bad + "\n")
        assert sw.done_keys(sw.read_lines(out)) == set()
        r = run("sweep", str(tmp_path / "g.toml"), "-o", str(out), "--json")
        assert r.exit_code == 0, (bad[:200], r.output)
        d = json.loads(r.stdout)
        assert (d["ran"], d["skipped"], d["answered"]) == (1, 0, 1), bad[:200]
        # (said: solved again; a line too deep to read names no problem)
        assert d["resolved"] == (len(bad) < 100_000), bad[:200]
        assert d["rows"] == first["rows"], bad[:200]
    out.write_text(_mangled(good)[1] + "\n")      # the table says it too
    r = run("sweep", str(tmp_path / "g.toml"), "-o", str(out), "--no-color")
    assert "this run: 1 solved (1 of them again: their lines held no whole answer), 0 already " \
           "answered" in " ".join(r.output.split()), r.output


def test_jobs_are_bounded_by_memory(tmp_path):
    """--jobs at most MAX_JOBS (3 workers of at most ~0.64 GB, the heaviest shipped search:
    under 2 GiB), refused as a bad flag."""
    (tmp_path / "g.toml").write_text(GRID)
    r = run("sweep", str(tmp_path / "g.toml"), "--jobs", "256")
    assert r.exit_code == 2 and "'--jobs': 256 is not in the range 1<=x<=3" in r.output
    assert not (tmp_path / "g.jsonl").exists()


# ---- the library entry (issue 38 item 8): a sweep problem is plan(...), what lts search calls

def _grid(tmp_path, head: str, workload: str = 'phase = "decode"\ncontext = 4096') -> list:
    (tmp_path / "g.toml").write_text(f"{head}\n[[workloads]]\n{workload}\n")
    return sw.read_grid(tmp_path / "g.toml")[0]


def test_a_sweep_line_holds_what_search_prints(tmp_path):
    """A serve problem with an engine release: the line's result is `lts search --json`'s."""
    p, = _grid(tmp_path, 'models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\n'
                         'engines = ["vllm@0.12"]\ngpus = [8]',
               'phase = "serve"\nisl = 1000\nosl = 500\ntpot_slo_ms = 50')
    got = json.loads(sw.line(*sw.solve(p)))
    r = run("search", p.model, p.topology, *p.args)
    assert r.exit_code == 0 and got["exit"] == 0 and got["error"] is None
    assert strip(got["result"]) == strip(json.loads(r.stdout))


@pytest.mark.parametrize("head, workload, code, message", [
    ('models = ["no-such-model"]\ntopologies = ["h100_dgx"]', None, 1, "no-such-model"),
    ('models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\ngpus = [30000]', None, 2,
     "Invalid value for '--gpus': 30,000 is more than the 24,576 GPUs of h100_dgx"),
    ('models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\nengines = ["vllm@abc"]',
     'phase = "serve"', 2, "Invalid value for '--engine': 'vllm@abc': 'abc' is not a version"),
    ('models = ["llama3.1-8b"]\ntopologies = ["mi300x_x8"]\nengines = ["trtllm"]',
     'phase = "serve"', 1, "--engine trtllm: TensorRT-LLM does not run on"),
    ('models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]', 'phase = "decode"\n'
     'context = 1000000', 2, "Invalid value for '--context': 1,000,000 tokens"),
    ('models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\ngpus = [8]', 'phase = "decode"\n'
     'tpot_slo_ms = 0.001', 1, "no feasible strategy found (Llama-3.1-8B on h100_dgx with 8 "
                               "GPUs, decode"),
])
def test_a_refused_sweep_problem_has_the_exit_status_and_line_of_search(tmp_path, head,
                                                                         workload, code,
                                                                         message):
    p, = _grid(tmp_path, head, *([workload] if workload else []))
    _, got, result, error = sw.solve(p)
    r = run("search", p.model, p.topology, *p.args)
    assert (got, result) == (code, None) and message in error, error
    assert r.exit_code == code and r.output.strip().splitlines()[-1] == f"Error: {error}"


def test_the_sweep_solves_without_click(tmp_path):
    """The workers call the library: solving a problem imports no click."""
    import subprocess
    import sys
    code = ("import sys, lts.sweep as sw\n"
            f"p, = sw.read_grid({str(tmp_path / 'g.toml')!r})[0]\n"
            "_, status, result, _ = sw.solve(p)\n"
            "print(status, result['best']['tp'] >= 1, 'click' in sys.modules)\n")
    _grid(tmp_path, 'models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\ngpus = [8]')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert out.stdout.split() == ["0", "True", "False"], out.stderr


def test_a_grid_file_has_the_guards_of_every_file(tmp_path):
    """Nesting past Python's stack, integers of thousands of digits, a file over 4 MiB, a list
    longer than a sweep's problems: one line each, exit 1, nothing run (issue 38 item 1)."""
    head = 'models = ["llama3.1-8b"]\ntopologies = ["h100_dgx"]\n'
    names = ", ".join(f'"m{i}"' for i in range(sw.MAX_PROBLEMS + 1))
    for text, message in [
            (head + "gpus = " + "[" * 5000 + "]" * 5000 + "\n[[workloads]]\n",
             "g.toml: nested too deeply (hundreds of levels of tables or arrays; a sweep grid "
             "needs 2)"),
            (head + f"gpus = [1{'0' * 5000}]\n[[workloads]]\n",
             "g.toml: invalid TOML (a number of thousands of digits)"),
            (head + "#" * sw.MAX_GRID_BYTES + "\n[[workloads]]\n",
             f"g.toml: is {sw.MAX_GRID_BYTES + len(head) + 15:,} bytes, more than the "
             f"{sw.MAX_GRID_BYTES:,} expected of a sweep grid (.toml)"),
            (f"models = [{names}]\ntopologies = [\"h100_dgx\"]\n[[workloads]]\n",
             "g.toml: models: 100,001 entries, over the 100,000 problems a sweep takes (split "
             "the grid)")]:
        (tmp_path / "g.toml").write_text(text)
        r = run("sweep", str(tmp_path / "g.toml"))
        assert r.exit_code == 1 and r.output.strip().splitlines()[-1].endswith(message), \
            r.output[-300:]
        assert len(r.output.strip().splitlines()) == 1
        assert not (tmp_path / "g.jsonl").exists()


def test_a_resumed_output_of_too_many_lines_is_refused_before_it_is_read(tmp_path):
    """More lines than a sweep of MAX_PROBLEMS problems writes (a file of junk: 20,000,000
    lines were read for 79 s): refused at once, one line, exit 1, the file untouched."""
    (tmp_path / "g.toml").write_text(GRID)
    out = tmp_path / "o.jsonl"
    out.write_text('{"a":1}\n' * (sw.MAX_OUTPUT_LINES + 1))
    before = out.stat().st_size
    r = run("sweep", str(tmp_path / "g.toml"), "-o", str(out))
    assert r.exit_code == 1 and f"Error: {out}: 400,001 lines, more than a sweep of at most " \
        "100,000 problems writes (400,000): give another -o" in r.output, r.output
    assert out.stat().st_size == before
