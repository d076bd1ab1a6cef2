"""Engine registry helpers: which profile release stands for an engine version."""
from dataclasses import replace

from lts.engines import get


def test_release_for_picks_the_newest_profile_not_newer_than_the_version():
    vllm = get("vllm")
    base = vllm.profile
    eng = replace(vllm, profiles={"0.12": base, "0.15": base, "0.19": base}, version="0.19")
    assert eng.release_for("0.12.0") == "0.12"
    assert eng.release_for("0.15.1") == "0.15"
    assert eng.release_for("0.18.0") == "0.15"
    assert eng.release_for("0.19") == "0.19"
    assert eng.release_for("0.33.0") == "0.19"
    assert eng.release_for("1.2.0rc2.post2") == "0.19"
    # no number, older than every release, or empty: the served release
    for v in ("nightly-5b8c30d62b754b57", "gpt-oss-dev", "0.11.2", ""):
        assert eng.release_for(v) == "0.19"
