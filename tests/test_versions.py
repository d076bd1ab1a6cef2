"""Engine versions of any text (issue 38 item 5): read one way everywhere
(``specs.versions``), never an error where a version is read, and a clear refusal where the
user names one (``--engine NAME@VERSION``)."""
import json

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.specs.errors import cut_quoted
from lts.cost.kernels import pick_release
from lts.engines import ENGINES
from lts.specs.versions import numbers, order_key

HUGE = "9" * 5000


@pytest.mark.parametrize("text, want", [
    ("0.12", (0, 12)), ("v0.12", (0, 12)), ("1.2.0rc2.post2", (1, 2, 0)), ("", ()),
    ("nightly-2025", ()), ("²", ()), ("0.1²", (0, 1)), ("٣.1", ()), (HUGE, ()),
    ("0." + HUGE, (0,)), ("123456789.1", (123456789, 1)), ("1234567890.1", ()),
])
def test_numbers(text, want):
    assert numbers(text) == want


def test_order_key_puts_release_candidates_first():
    assert order_key("1.3.0rc20") == (1, 3, 0, -1, 20) < order_key("1.3.0") == (1, 3, 0, 0, 0)
    assert order_key("0.5.6.post2") == (0, 5, 6, 0, 0)
    assert order_key("rc" + HUGE) == (0, 0, 0, 0, 0)


def test_releases_of_odd_versions():
    """The profile and kernel releases lts picks for any text: the served or newest one."""
    vllm = ENGINES["vllm"]
    for text in ("²", HUGE, "nightly"):
        assert vllm.release_for(text) == vllm.version
        assert pick_release(["0.11.0", "0.12.0"], text)[0] == "0.12.0"
    assert pick_release(["0.11.0", "0.12.0"], "0.11.5")[0] == "0.11.0"


@pytest.mark.parametrize("version, shown", [("²", "²"),
                                            (HUGE, "9" * 20 + "... (5,000 characters)"),
                                            ("v0.12", "v0.12")])
def test_engine_flag_refuses_what_is_no_version(version, shown):
    r = CliRunner().invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--phase", "serve",
                                 "--engine", f"vllm@{version}"])
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == (
        f"Error: Invalid value for '--engine': 'vllm@{shown}': '{shown}' is not a version "
        "(releases lts models: 0.12, 0.15)")


@pytest.mark.parametrize("version", ["²", HUGE])
def test_a_measurement_of_any_version_is_predicted(tmp_path, version):
    path = tmp_path / "m.csv"
    path.write_text("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,"
                    "source,engine,engine_version\n"
                    f"r1,llama3.1-8b,h100_dgx,1,1,1,1,bf16,1000,100,8,tpot_ms,10,vllm x,vllm,"
                    f"{version}\n")
    r = CliRunner().invoke(cli, ["validate", str(path), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["summary"]["count"] == 1 and d["rows"][0]["profile"] == ENGINES["vllm"].version
    # said: the version is not one lts reads, and which release stood for it
    assert r.stderr == (f"Note: 1 row names an engine version lts cannot read as a release (r1: "
                        f"{cut_quoted(version)}): each is predicted with the release lts "
                        f"reads in it, else its engine's served one (vllm "
                        f"{ENGINES['vllm'].version} for that one)\n")
