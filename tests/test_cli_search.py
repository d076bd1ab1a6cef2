"""`lts search`, `lts compare` and `lts bench`: JSON contract, determinism, exit codes, and the
exact optimum bounding every other method. Small problems (8 GPUs, budgets of a few hundred
calls) keep the file fast; nothing here is timed."""
import json
import re

import pytest
from click.testing import CliRunner

from lts.cli import cli

SMALL = ("llama3.1-8b", "h100_dgx", "--gpus", "8")
RESULT_KEYS = {"tp", "ep", "pp", "batch", "ops", "valid", "reasons", "tokens_per_s_per_gpu",
               "tokens_per_s", "tpot_ms", "ttft_ms", "memory_gib_per_gpu", "gpus"}


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def search_json(*args):
    r = run("search", *args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_search_json_keys():
    d = search_json(*SMALL, "--method", "random", "--budget", "300", "--top", "5")
    assert {"method", "budget", "evaluations", "wall_s", "seed", "best", "top", "megatron_best",
            "stats"} <= set(d)
    assert d["method"] == "random" and d["budget"] == 300 and d["evaluations"] == 300
    assert d["seed"] == 0 and d["wall_s"] >= 0
    assert RESULT_KEYS <= set(d["best"]) and RESULT_KEYS <= set(d["megatron_best"])
    assert 1 <= len(d["top"]) <= 5 and d["top"][0] == d["best"]
    assert all(RESULT_KEYS <= set(t) and t["valid"] for t in d["top"])
    tps = [t["tokens_per_s_per_gpu"] for t in d["top"]]
    assert tps == sorted(tps, reverse=True)
    assert d["best"]["ttft_ms"] is None and d["best"]["tpot_ms"] <= 50


def test_search_same_seed_same_output():
    args = (*SMALL, "--method", "ppo", "--budget", "200", "--seed", "3", "--top", "3")
    a, b = search_json(*args), search_json(*args)
    assert 0 < a["evaluations"] <= 200       # the bound-guided agent may stop on a proof
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    # the table too, except the footer's wall time
    ta, tb = (re.sub(r"[0-9.]+ s, seed", "- s, seed", run("search", *args).stdout)
              for _ in range(2))
    assert ta == tb and "- s, seed 3" in ta
    assert ("Why it wins" in ta or "Why it loses" in ta) and "Megatron best" in ta


def test_exact_is_at_least_every_other_method():
    exact = search_json(*SMALL, "--method", "exact", "--top", "3")
    assert exact["best"]["valid"]
    best = exact["best"]["tokens_per_s_per_gpu"]
    assert best >= exact["megatron_best"]["tokens_per_s_per_gpu"]
    for method in ("megatron", "random", "random-walk", "anneal", "ppo"):
        d = search_json(*SMALL, "--method", method, "--budget", "200")
        assert d["best"]["tokens_per_s_per_gpu"] <= best * (1 + 1e-9), method


def test_search_table_lists_megatron_ratio():
    r = run("search", *SMALL, "--method", "exact", "--top", "3")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Llama-3.1-8B on h100_dgx" in out and "×Meg" in out and "TPOT ms" in out
    assert "Why it wins" in out and "exact: " in out


def test_infeasible_exits_1_with_message():
    r = CliRunner().invoke(cli, ["search", "llama3.1-405b", "h100_dgx", "--gpus", "1",
                                 "--method", "exact"])
    assert r.exit_code == 1
    assert r.output == ("Error: no feasible strategy found (Llama-3.1-405B on h100_dgx with 1 "
                        "GPU, decode, context 16384, TPOT ≤ 50 ms; the exact optimum: none "
                        "exists; its weights alone, 756 GiB, exceed the 76 GiB usable on 1 GPU: "
                        "at least 10 H100 SXM5 80GB are needed)\n")
    r = CliRunner().invoke(cli, ["search", "llama3.1-405b", "h100_dgx", "--gpus", "1",
                                 "--method", "random", "--budget", "100", "--json"])
    assert r.exit_code == 1
    assert r.output.startswith("Error: no feasible strategy found (Llama-3.1-405B on h100_dgx")
    assert "random, 100 evaluations" in r.output
    for phase in ("decode", "serve"):       # the agent's bounds prove it before any call
        r = CliRunner().invoke(cli, ["search", "llama3.1-405b", "a100_dgx", "--gpus", "4",
                                     "--method", "ppo", "--phase", phase])
        assert r.exit_code == 1 and "Traceback" not in r.output
        assert r.output.startswith("Error: no feasible strategy found (Llama-3.1-405B on "
                                   "a100_dgx with 4 GPUs, " + phase)
        assert r.output.endswith("ppo: its bounds prove none exists; its weights alone, 756 "
                                 "GiB, exceed the 304 GiB usable on 4 GPUs: at least 10 A100 "
                                 "SXM4 80GB are needed)\n"), r.output


@pytest.mark.parametrize("args,message", [
    (("--method", "sgd"), "Invalid value for '--method': 'sgd' is not one of"),
    (("--budget", "0"), "Invalid value for '--budget'"),
    (("--top", "0"), "Invalid value for '--top'"),
])
def test_search_bad_flags_exit_2(args, message):
    r = CliRunner().invoke(cli, ["search", *SMALL, *args])
    assert r.exit_code == 2
    assert message in r.output


def test_compare_json():
    r = run("compare", *SMALL, "--seeds", "2", "--budget", "200", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert {"methods", "exact", "megatron"} <= set(d)
    assert RESULT_KEYS <= set(d["exact"]) and RESULT_KEYS <= set(d["megatron"])
    rows = {m["method"]: m for m in d["methods"]}
    assert list(rows) == ["ppo", "random-walk", "anneal", "random", "megatron", "exact"]
    for m in d["methods"]:
        assert {"method", "seeds", "mean_tokens_per_s_per_gpu", "best_tokens_per_s_per_gpu",
                "fraction_of_exact_mean", "fraction_of_exact_best", "wall_s_mean"} <= set(m)
        assert m["seeds"] == (1 if m["method"] in ("megatron", "exact") else 2)
        assert 0 <= m["fraction_of_exact_mean"] <= m["fraction_of_exact_best"] <= 1 + 1e-9
        assert m["mean_tokens_per_s_per_gpu"] <= m["best_tokens_per_s_per_gpu"]
    assert rows["exact"]["fraction_of_exact_mean"] == 1.0
    assert rows["exact"]["fraction_of_exact_best"] == 1.0
    assert rows["exact"]["best_tokens_per_s_per_gpu"] == d["exact"]["tokens_per_s_per_gpu"]
    assert rows["random-walk"]["table1"] == 1.0 and rows["megatron"]["figure3"] == 1.0


def test_compare_table_and_bad_methods():
    r = run("compare", *SMALL, "--seeds", "1", "--budget", "100", "--methods", "random,anneal")
    assert r.exit_code == 0, r.output
    assert "Table 1" in r.stdout and "Fig. 3" in r.stdout and "exact" in r.stdout
    r = CliRunner().invoke(cli, ["compare", *SMALL, "--methods", "random,sgd"])
    assert r.exit_code == 2
    assert "Invalid value for '--methods': 'sgd' is not one of" in r.output


def test_bench_no_search_json():
    r = run("bench", "llama3.1-8b", "h100_dgx", "--evaluations", "1000", "--no-search", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["evaluations_per_s"] > 0 and d["kernel_per_s"] > 0
    assert d["evaluations_per_s_grouped"] > 0 and d["kernel_per_s_random"] > 0
    assert d["search_wall_s"] is None and d["exact_wall_s"] is None


def test_search_serve_phase_json_and_flags():
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "128", "--osl", "512", "--method", "megatron", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["workload"] == {"phase": "serve", "isl": 128, "osl": 512, "tpot_slo_ms": None,
                             "ttft_slo_ms": None, "gpus": 8, "engine": "generic",
                             "speculation": None, "prefix_cache": None}
    best = d["best"]
    assert best["valid"] and best["tpot_ms"] > 0 and best["ttft_ms"] > 0
    e = json.loads(run("estimate", "llama3.1-8b", "h100_dgx", "--strategy",
                       f"tp={best['tp']},pp={best['pp']},batch={best['batch']}", "--phase",
                       "serve", "--isl", "128", "--osl", "512", "--json").output)
    assert best["tokens_per_s_per_gpu"] == pytest.approx(e["output_tokens_per_s_per_gpu"])
    r = run("search", "llama3.1-8b", "h100_dgx", "--isl", "100")
    assert r.exit_code == 2 and "--isl: only with --phase serve" in r.output
    r = run("search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--concurrency", "8")
    assert r.exit_code == 2 and "No such option '--concurrency'" in r.output


def test_compare_takes_the_serve_phase():
    """With the exact serve optimum, compare runs the serve phase: every method's fraction of
    it, the workload in the JSON; serve flags without --phase serve stay refused."""
    r = run("compare", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "1024", "--osl", "256", "--tpot-slo-ms", "20", "--seeds", "1", "--budget", "64",
            "--methods", "random", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["workload"]["phase"] == "serve" and d["workload"]["isl"] == 1024
    rows = {m["method"]: m for m in d["methods"]}
    assert rows["exact"]["fraction_of_exact_best"] == 1.0
    assert 0 < rows["random"]["fraction_of_exact_best"] <= 1 + 1e-9
    assert rows["megatron"]["fraction_of_exact_best"] <= 1 + 1e-9
    r = run("compare", "llama3.1-8b", "h100_dgx", "--isl", "100")
    assert r.exit_code == 2 and "--isl: only with --phase serve" in r.output


@pytest.mark.parametrize("columns", [80, 99, 100, 160])
def test_the_ops_vs_megatron_are_never_folded_inside_a_name(columns, monkeypatch):
    """The ranked table keeps the ops vs Megatron beside each row from 100 columns on; below,
    where that column would be a few letters wide and fold names like ``attn_norm=1`` in two,
    they go under the table, a line per rank. Either way every row's changed ops are printed
    whole, and each number of the table is in it."""
    monkeypatch.setenv("COLUMNS", str(columns))
    d = search_json(*SMALL, "--top", "3")
    r = run("search", *SMALL, "--top", "3")
    assert r.exit_code == 0, r.output
    beside = re.search(r"ops vs\s+Megatron\s+on", r.output.replace("\n", " ")) is not None
    assert beside == (columns >= 100)
    assert ("by rank:" in r.output) == (columns < 100)
    changed = 0
    for t in d["top"]:
        for name, choice in t["ops"].items():
            if choice != d["megatron_best"]["ops"][name]:
                assert f"{name}={choice}" in r.output
                changed += 1
        assert f"{t['tokens_per_s_per_cluster_gpu']:,.1f}" in r.output
    assert changed > 0


def test_strategy_strings_wrap_between_settings_at_80_columns(monkeypatch):
    """A strategy in a sentence (the disaggregated deployment, the sizing, Megatron's best, the
    headroom) has a space after each comma, so an 80-column terminal wraps it between settings:
    every ``key=value`` printed is a whole setting the parser knows, and the text as printed
    is what ``--strategy`` takes."""
    from lts.specs.strategy import OPS
    monkeypatch.setenv("COLUMNS", "80")
    r = run("search", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--phase", "serve",
            "--isl", "2000", "--osl", "500", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "25")
    assert r.exit_code == 0, r.output
    keys = {"tp", "ep", "pp", "batch", *OPS}
    pairs = re.findall(r"(?<![\w.])([a-z_0-9]+)=([^\s,]*)", r.output)
    assert len(pairs) > 10
    broken = [(k, v) for k, v in pairs if k not in keys or not v]
    assert not broken
    assert "tp=" in r.output and ", ep=" in r.output


@pytest.mark.parametrize("version,other", [("99.0", True), ("0.0.1", True), ("0.12.0", False),
                                           ("0.12", False)])
def test_an_engine_version_without_its_own_profile_is_said(version, other):
    """--engine vllm@VERSION takes the profile of the newest release lts models not newer than
    it (else the oldest); where that is another release, stderr says which, once, and the
    answer (here --json) is unchanged in form."""
    from lts.engines import ENGINES
    engine = ENGINES["vllm"]
    releases = [r for r in engine.profiles if r]
    r = run("search", *SMALL, "--phase", "serve", "--engine", f"vllm@{version}", "--json")
    assert r.exit_code == 0, r.output
    json.loads(r.stdout)
    notes = [line for line in r.stderr.splitlines() if line.startswith("Note:")]
    if not other:
        assert notes == []
    else:
        used = max(releases, key=lambda v: [int(x) for x in v.split(".")]) if version == "99.0" \
            else min(releases, key=lambda v: [int(x) for x in v.split(".")])
        assert notes == [f"Note: vllm@{version}: lts has no profile of that release; it uses "
                         f"{used}'s (of {', '.join(releases)}: the newest not newer than it, "
                         "else the oldest)"]
