"""The simulator (lts.serving.simulate) against closed forms, the analytic closed loop, and
itself (determinism); the trace readers; lts simulate's command line."""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.engines import ENGINES
from lts.serving.scheduler import Scheduler
from lts.serving.serve import serve
from lts.serving.simulate import Deployment, Load, run, simulate
from lts.serving.traces import read_trace
from lts.specs import load_model, load_topology
from lts.specs.errors import LtsError, SpecError
from lts.specs.strategy import BATCH, parse_strategy


class ConstantSteps:
    """A step table whose every step takes ``t`` seconds (a closed form's deterministic
    server), whatever it holds."""

    def __init__(self, t):
        self.t = t

    def time(self, d, c, p):
        return self.t

    def decode_line(self, d):
        return self.t, 0.0


def one_at_a_time(t, budget=1024, overlap=False):
    """A deployment that serves one request at a time, each in one step of t seconds."""
    sched = Scheduler("generic", budget, 1, True, "demand", 1)
    return Deployment(1e12, sched, ConstantSteps(t), 0.0, overlap)


def test_burst_of_c_prompts_waits_c_plus_one_over_two_passes():
    # C prompts at once, one prefill pass each, one pass at a time: the i-th first token comes
    # after i passes, (C + 1) / 2 on average
    for c in (1, 7, 64):
        res = run(one_at_a_time(0.01), Load(isl=1024, osl=1, num_prompts=c, max_concurrency=c))
        assert res.ttft.mean() == pytest.approx((c + 1) / 2 * 0.01, rel=1e-9)
        assert sorted(res.ttft) == pytest.approx([0.01 * (i + 1) for i in range(c)])


def md1_wait_cdf(t, lam, d):
    """P(W <= t) of an M/D/1 queue (arrival rate lam, service d): (1 - rho) sum over k <= t/d
    of [lam (k d - t)]^k / k! e^{-lam (k d - t)} (Erlang's formula)."""
    rho = lam * d
    total = 0.0
    for k in range(int(math.floor(t / d)) + 1):
        x = lam * (k * d - t)
        total += x ** k / math.factorial(k) * math.exp(-x)
    return (1 - rho) * total


def test_md1_queue_mean_and_p90_wait():
    lam, d = 50.0, 0.01                       # rho = 0.5
    res = run(one_at_a_time(d), Load(isl=512, osl=1, num_prompts=100_000, request_rate=lam,
                                     seed=3))
    wait = res.ttft - d
    rho = lam * d
    assert wait.mean() == pytest.approx(rho * d / (2 * (1 - rho)), rel=0.03)
    p90 = next(t for t in np.arange(0, 20 * d, d / 1000) if md1_wait_cdf(t, lam, d) >= 0.9)
    assert np.percentile(wait, 90) == pytest.approx(p90, rel=0.03)


def test_overlap_makes_a_request_arriving_during_a_step_wait_for_the_next():
    # two clients, steps of 10 ms: the first request finishes after 3 steps (at 30 ms) while the
    # second still runs; the client's next request, sent at 30 ms, enters the next step when the
    # scheduler plans it at that step's start, and the step after when it planned it while the
    # step before ran (vLLM's async scheduling, the overlap schedulers)
    sched = Scheduler("generic", 4096, 2, True, "demand", 1)
    load = Load(max_concurrency=2, trace=((0, 64, 3), (0, 64, 8), (0, 64, 2)))
    for overlap, ttft in ((False, 0.01), (True, 0.02)):
        res = run(Deployment(1e12, sched, ConstantSteps(0.01), 0.0, overlap), load)
        assert list(res.sent) == pytest.approx([0.0, 0.0, 0.03])
        assert list(res.ttft) == pytest.approx([0.01, 0.01, ttft])


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama3.1-8b"), load_topology("h100_dgx")


@pytest.mark.parametrize("c,isl,osl", [(32, 1024, 1024), (16, 512, 4096)])
def test_steady_closed_loop_matches_the_analytic_model(llama8b, c, isl, osl):
    # equal lengths keep the burst's cohort in step: a steady closed loop; its output tokens/s
    # and TPOT are the analytic loop's within 2% (TTFT differs by construction: the analytic
    # loop's cohorts are the fitted law's, the burst's one cohort is C)
    m, topo = llama8b
    eng = ENGINES["generic"].profile.for_gpu(topo)
    row = parse_strategy("tp=1", False)
    s = simulate(m, topo, row, eng, Load(isl=isl, osl=osl, max_concurrency=c,
                                         num_prompts=30 * c)).summary()
    row[BATCH] = c
    a = serve(m, topo, row, isl, osl, engine=eng)
    assert s["output_tokens_per_s"] == pytest.approx(a.output_tokens_per_s[0], rel=0.02)
    assert s["tpot_ms"]["mean"] == pytest.approx(a.tpot_s[0] * 1e3, rel=0.02)


def test_same_seed_same_run_other_seed_other_run(llama8b):
    m, topo = llama8b
    eng = ENGINES["vllm"].profile.for_gpu(topo)
    row = parse_strategy("tp=1", False)
    load = Load(isl=2048, osl=256, num_prompts=300, request_rate=30.0, burstiness=0.5,
                range_ratio=0.8, seed=7)
    a, b = (simulate(m, topo, row, eng, load).summary() for _ in range(2))
    assert a == b
    c = simulate(m, topo, row, eng, Load(**{**load.__dict__, "seed": 8})).summary()
    assert c["ttft_ms"] != a["ttft_ms"]


def test_kv_on_demand_preempts_and_reserve_never_does(llama8b):
    # 512 requests of up to 2048 tokens on one H100 with Llama-3.1-8B: the KV cache holds about
    # 210 whole requests; vLLM admits on demand and preempts, TensorRT-LLM reserves and queues
    m, topo = llama8b
    row = parse_strategy("tp=1", False)
    load = Load(isl=1024, osl=1024, max_concurrency=512, num_prompts=1024, range_ratio=0.8)
    v = simulate(m, topo, row, ENGINES["vllm"].profile.for_gpu(topo), load)
    t = simulate(m, topo, row, ENGINES["trtllm"].profile.for_gpu(topo), load)
    assert v.preemptions.sum() > 0 and t.preemptions.sum() == 0
    for r in (v, t):
        assert max(r.timeline["kv_tokens"]) <= r.kv_tokens * 1.0001
        assert np.all(r.finish >= r.first) and np.all(r.first >= r.sent)


def test_every_request_gets_all_its_tokens(llama8b):
    m, topo = llama8b
    row = parse_strategy("tp=1", False)
    for name in ("vllm", "sglang", "trtllm", "generic"):
        res = simulate(m, topo, row, ENGINES[name].profile.for_gpu(topo),
                       Load(isl=700, osl=300, max_concurrency=48, range_ratio=0.5, seed=1))
        assert len(res.finish) == 480 and np.isfinite(res.finish).all()
        # a request's decode takes at least osl - 1 steps of the fastest step there is
        fastest = min(np.asarray(res.timeline["duration"]) /
                      np.asarray(res.timeline["steps"]))
        assert np.all(res.finish - res.first >= (res.osl - 1) * fastest * 0.999)


def test_not_one_request_fits(llama8b):
    m, topo = llama8b
    with pytest.raises(LtsError, match="not one request fits"):
        simulate(load_model("llama3.1-405b"), topo, parse_strategy("tp=8", False),
                 ENGINES["vllm"].profile.for_gpu(topo), Load(isl=100_000, osl=100_000,
                                                             max_concurrency=1))


def test_trace_formats(tmp_path):
    plain = tmp_path / "t.csv"
    plain.write_text("arrival_s,isl,osl\n0.5,100,10\n0.0,200,20\n")
    assert read_trace(plain) == ((0.0, 200, 20), (0.5, 100, 10))
    moon = tmp_path / "m.jsonl"
    moon.write_text('{"timestamp": 1000, "input_length": 30, "output_length": 3, "hash_ids": []}\n'
                    '{"timestamp": 1500, "input_length": 40, "output_length": 4}\n')
    assert read_trace(moon) == ((0.0, 30, 3), (0.5, 40, 4))
    azure = tmp_path / "a.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
    tr = read_trace(azure)
    assert tr[0] == (0.0, 374, 44) and tr[1][0] == pytest.approx(4.314579, abs=1e-5)
    bad = tmp_path / "b.csv"
    bad.write_text("arrival_s,isl,osl\n0,-3,10\n")
    with pytest.raises(SpecError, match="row 1: isl: '-3' is not a whole number of tokens"):
        read_trace(bad)
    bad.write_text("when,isl,osl\n0,3,10\n")
    with pytest.raises(SpecError, match="arrival_s: missing column"):
        read_trace(bad)
    huge = tmp_path / "h.jsonl"         # an integer no float holds: one line, cut
    huge.write_text('{"timestamp": 0, "input_length": ' + "9" * 400 + ', "output_length": 3}\n')
    with pytest.raises(SpecError, match=r"input_length: 9{40}\.\.\. \(400 characters\) is not "
                                        "a whole number of tokens"):
        read_trace(huge)


def test_cli_simulate_json_and_plot(tmp_path):
    svg = tmp_path / "run.svg"
    r = CliRunner().invoke(cli, ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1",
                                 "--engine", "vllm", "--max-concurrency", "16", "--range-ratio",
                                 "0.8", "--ttft-slo-ms", "200", "--json", "--plot", str(svg)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["requests"] == 160 and d["load"]["kind"] == "burst"
    assert d["ttft_ms"]["p50"] <= d["ttft_ms"]["p90"] <= d["ttft_ms"]["p99"]
    text = svg.read_text()
    assert text.startswith("<svg") and "KV cache in use" in text
    import xml.dom.minidom
    xml.dom.minidom.parseString(text)          # well-formed


@pytest.mark.parametrize("args,code,message", [
    ([], 2, "say how requests come: --max-concurrency C"),
    (["--max-concurrency", "4", "--burstiness", "2"], 2, "--burstiness: only with --request-rate"),
    (["--trace", "x.csv", "--isl", "5"], 2, "--isl: not with --trace"),
    (["--request-rate", "nan"], 2, "'nan' is not a finite number"),
    (["--trace", "/nonexistent/t.csv"], 1, "Error: /nonexistent/t.csv"),
    (["--max-concurrency", "4", "--prefill", "tp=1", "--decode", "tp=1"], 2,
     "--strategy: not with --prefill"),
    (["--max-concurrency", "4", "--prefill-workers", "2"], 2,
     "--prefill-workers: only with --prefill and --decode"),
])
def test_cli_simulate_bad_input(args, code, message):
    r = CliRunner().invoke(cli, ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1"]
                           + args)
    assert r.exit_code == code, r.output
    assert message in r.output


from hypothesis import given, strategies as st   # noqa: E402

from lts.serving.simulate import spread          # noqa: E402


@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.integers(0, 6)), min_size=1, max_size=30))
def test_spread_is_numpys_percentile_of_the_expanded_values(pairs):
    v = np.array([a for a, _ in pairs])
    w = np.array([b for _, b in pairs])
    if not w.sum():
        return
    flat = np.repeat(v, w)
    s = spread(v, w, (0, 13, 50, 90, 99, 100))
    for p in (0, 13, 50, 90, 99, 100):
        assert s[f"p{p}"] == pytest.approx(np.percentile(flat, p), rel=1e-9, abs=1e-6)
    assert s["mean"] == pytest.approx(flat.mean(), rel=1e-9, abs=1e-6)


def test_slo_percentile_answer_meets_its_limits_when_simulated_again():
    from lts.search.percentile import MARGIN, RANGE_RATIO, RUNS_PER_PROMPT
    r = CliRunner().invoke(cli, ["search", "llama3.1-70b", "h100_dgx", "--gpus", "8", "--phase",
                                 "serve", "--isl", "2000", "--osl", "500", "--ttft-slo-ms",
                                 "1000", "--tpot-slo-ms", "25", "--engine", "vllm",
                                 "--slo-percentile", "99", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)["slo_percentile"]
    best = d["best"]
    assert best["ttft_ms"]["p99"] <= 1000 and best["tpot_ms"]["p99"] <= 25
    m, topo = load_model("llama3.1-70b"), load_topology("h100_dgx")
    row = parse_strategy(best["strategy"], False)
    c = best["concurrency"]
    again = simulate(m, topo, row, ENGINES["vllm"].profile.for_gpu(topo),
                     Load(isl=2000, osl=500, num_prompts=RUNS_PER_PROMPT * c, max_concurrency=c,
                          range_ratio=RANGE_RATIO)).summary()
    # the same run but for the step table's grid (built up to the search's concurrency there)
    assert again["ttft_ms"]["p99"] == pytest.approx(best["ttft_ms"]["p99"], rel=1e-3)
    assert again["ttft_ms"]["p99"] <= 1000 and again["tpot_ms"]["p99"] <= 25
    ran = [x for x in d["checked"] if not x["skipped"]]
    assert best["tokens_per_s_per_cluster_gpu"] == max(x["tokens_per_s_per_cluster_gpu"] or 0
                                                       for x in ran)
    for x in d["checked"]:
        if x["skipped"]:
            assert x["search_tokens_per_s_per_cluster_gpu"] * MARGIN < \
                best["tokens_per_s_per_cluster_gpu"]


@pytest.mark.parametrize("args,message", [
    (["--phase", "serve", "--slo-percentile", "90"],
     "--slo-percentile: give the limits it applies to"),
    (["--slo-percentile", "90", "--tpot-slo-ms", "20"], "--slo-percentile: only with --phase serve"),
    (["--phase", "serve", "--slo-percentile", "95", "--tpot-slo-ms", "20"], "'95' is not one of"),
])
def test_slo_percentile_bad_flags(args, message):
    r = CliRunner().invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8"] + args)
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_estimate_of_two_pools_adds_their_simulated_run():
    r = CliRunner().invoke(cli, ["estimate", "deepseek-v3", "h200_dgx", "--phase", "serve",
                                 "--isl", "4000", "--osl", "1000", "--prefill",
                                 "tp=1,ep=8,batch=8", "--decode", "tp=8,batch=64",
                                 "--concurrency", "32", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)["simulated"]
    assert s["requests"] == 320
    assert s["ttft_ms"]["p50"] <= s["ttft_ms"]["p99"]
    # the decode pool holds the 32 requests: every step decodes all that arrived
    assert s["tpot_ms"]["mean"] > 0 and s["output_tokens_per_s"] > 0


def test_cli_simulate_two_pools():
    r = CliRunner().invoke(cli, ["simulate", "deepseek-v3", "h200_dgx", "--prefill", "tp=1,ep=8",
                                 "--decode", "tp=8,batch=64", "--engine", "sglang",
                                 "--max-concurrency", "32", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["requests"] == 320 and d["pools"]["decode"]["tp"] == 8
    assert d["pools"]["prefill"]["workers"] == 1 and d["strategy"].startswith("prefill 1 x")
    r = CliRunner().invoke(cli, ["simulate", "deepseek-v3", "h200_dgx", "--prefill", "tp=1,ep=8",
                                 "--max-concurrency", "4"])
    assert r.exit_code == 2 and "two pools need both --prefill and --decode" in r.output


def test_a_prompt_takes_one_ranks_budget_a_step():
    # attention DP over 16 ranks pools 16 budgets, but a prompt lives on one rank: a 40,000-token
    # prompt alone takes ceil(40000 / 8192) = 5 steps, not one
    m, topo = load_model("deepseek-v3"), load_topology("h200_dgx")
    eng = ENGINES["vllm"].profile.for_gpu(topo)
    res = simulate(m, topo, parse_strategy("tp=1,ep=16", True), eng,
                   Load(isl=40_000, osl=2, num_prompts=1, max_concurrency=1))
    assert res.timeline["prefill_tokens"][:5] == [8192] * 4 + [40_000 - 4 * 8192]


def test_the_time_per_request_holds_the_clients_slot():
    # one client, steps of 10 ms, 50 ms between sending and the scheduler: each request takes
    # 60 ms end to end and the next is sent when it ends (Little's law: 1 / 60 ms requests/s)
    dep = Deployment(1e12, Scheduler("generic", 1024, 1, True, "demand", 1), ConstantSteps(0.01),
                     0.05, False)
    res = run(dep, Load(isl=64, osl=1, num_prompts=10, max_concurrency=1))
    assert list(res.ttft) == pytest.approx([0.06] * 10)
    assert res.duration == pytest.approx(0.6)
    assert res.summary()["requests_per_s"] == pytest.approx(1 / 0.06)


def test_a_request_the_kv_cache_cannot_hold_is_refused(llama8b):
    m, topo = llama8b
    with pytest.raises(LtsError, match="requests do not fit the KV cache"):
        simulate(m, topo, parse_strategy("tp=1", False), ENGINES["vllm"].profile.for_gpu(topo),
                 Load(max_concurrency=1, trace=((0, 100, 10), (0.1, 400_000, 100_000))))


def test_a_run_over_a_billion_seconds_is_refused(llama8b):
    m, topo = llama8b
    with pytest.raises(LtsError, match="arrive over"):
        simulate(m, topo, parse_strategy("tp=1", False), ENGINES["vllm"].profile.for_gpu(topo),
                 Load(max_concurrency=1, trace=((0, 100, 10), (1e300, 100, 10))))


def test_validate_simulates_rows_that_say_how_they_were_measured():
    from pathlib import Path
    from lts.serving.validate import validate
    root = str(Path(__file__).parent / "data" / "measurements") + "/"
    d = validate(root + "benchmark_runs.csv")
    assert len(d["rows"]) == 4 and not d["skipped"]
    assert all(r["predicted_by"] == "simulation" for r in d["rows"])
    assert all(r["simulated"]["requests"] == 10 * r["concurrency"] for r in d["rows"])
    steady = validate(root + "benchmark_runs.csv", steady=True)
    assert all("predicted_by" not in r for r in steady["rows"])
    # two pools naming srt-slurm's sa-bench: its protocol (10 x C at once, [0.8 L, L])
    d = validate(root + "benchmark_runs_disagg.csv")
    assert len(d["rows"]) == 2 and all(r["predicted_by"] == "simulation" for r in d["rows"])


def test_an_arrival_lts_cannot_replay_skips_the_row(tmp_path):
    from pathlib import Path
    from lts.serving.validate import validate
    src = Path(__file__).parent / "data" / "measurements" / "benchmark_runs.csv"
    bad = tmp_path / "m.csv"
    bad.write_text(src.read_text().replace(",burst,", ",poisson,", 1))
    d = validate(bad)
    assert [(s["row"], s["reason"]) for s in d["skipped"]] == [
        (1, "arrival: 'poisson' is not one of burst (or empty)")]
    assert len(d["rows"]) == 3 and d["total"] == 4


def test_validate_simulates_within_its_bound(monkeypatch):
    """lts validate counts a file's simulations before running them (validate.work_s): the
    runs past WORK_S are skipped with the reason, the others predicted as before."""
    from pathlib import Path
    from lts.serving import validate as v
    path = str(Path(__file__).parent / "data" / "measurements" / "benchmark_runs.csv")
    whole = v.validate(path)
    assert len(whole["rows"]) == 4
    monkeypatch.setattr(v, "WORK_S", 0.0)
    none = v.validate(path)
    assert not none["rows"] and len(none["skipped"]) == 4
    assert all(s["reason"] == "past lts validate's bound of 0 s of predictions a file "
                              "(docs/limits.md): split the file" for s in none["skipped"])
    # room for the cheaper deployment only: its rows predicted as in the whole file
    costs = []                  # each deployment's count (its rows' and its runs')
    for row in whole["rows"]:
        only = {r["id"] for r in whole["rows"] if r["model"] == row["model"]}
        costs.append((v.validate(path, only=only, work_only=True), row["model"], len(only)))
    cheap = min(costs)
    monkeypatch.setattr(v, "WORK_S", cheap[0] + v.ROW_S * (4 - cheap[2]))
    some = v.validate(path)
    assert {r["model"] for r in some["rows"]} == {cheap[1]}
    assert [r["predicted"] for r in some["rows"]] == \
        [r["predicted"] for r in whole["rows"] if r["model"] == cheap[1]]


def test_stretches_give_the_expanded_values_percentiles():
    """``Stretches.spread`` (a long run's inter-token gaps kept per stretch) gives numpy's
    percentiles of the values ``_Run.result`` would expand, bit for bit, and their mean to
    1e-9 (summed per stretch): random stretches with ties, zero slopes and one-step ones."""
    from lts.serving.simulate import Stretches, spread
    rng = np.random.default_rng(1)
    ps = (0, 10, 50, 90, 99, 100)
    for t in range(200):
        n = int(rng.integers(1, 8))
        d, k = rng.integers(1, 5, n).astype(float), rng.integers(1, 7, n).astype(float)
        gap0 = rng.choice([1e-3, 2e-3, 1.5e-3], n) + rng.random(n) * 1e-4 * (t % 2)
        first = rng.choice([1e-3, 2e-3], n) + rng.random(n) * 1e-4 * (t % 3 > 0)
        slope = rng.choice([0.0, 1e-6, 3e-7], n)
        values, counts = [], []
        for di, ki, g0, f, sl in zip(d, k, gap0, first, slope):
            g = f + sl * np.arange(int(ki)) if ki > 1 else np.zeros(1)
            g[0] = g0
            values.append(g)
            counts.append(np.full(int(ki), di))
        want = spread(np.concatenate(values) * 1e3, np.concatenate(counts), ps)
        got = Stretches(d, k, gap0, first, slope).spread(ps, 1e3)
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-9)
        assert {p: got[f"p{p}"] for p in ps} == {p: want[f"p{p}"] for p in ps}, t


def test_a_long_run_keeps_its_gaps_per_stretch(monkeypatch):
    """Past EXPAND_STEPS steps a run's gaps stay per stretch: the same summary (the mean to
    1e-12) in a few MB where a 120,000,000-step run held 8.5 GB."""
    import lts.serving.simulate as sim
    from lts.cli import cli
    args = ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--engine", "vllm",
            "--max-concurrency", "4", "--num-prompts", "40", "--isl", "500", "--osl", "3000",
            "--json"]
    expanded = json.loads(CliRunner().invoke(cli, args).output)
    monkeypatch.setattr(sim, "EXPAND_STEPS", 100)
    kept = json.loads(CliRunner().invoke(cli, args).output)
    assert expanded["steps"] > 100
    a, b = expanded["itl_ms"], kept["itl_ms"]
    assert b["mean"] == pytest.approx(a["mean"], rel=1e-12)
    assert {k: v for k, v in a.items() if k != "mean"} == {k: v for k, v in b.items()
                                                            if k != "mean"}


def test_a_run_that_preempts_without_end_is_refused(tmp_path):
    """A KV cache too small for the requests in flight as they grow preempts without end (2,000
    requests of 120,000 output tokens at C = 2,000 passed 120 s and 7.4 GB): past
    LOOPS_PER_REQUEST scheduler steps a request (and MAX_LOOPS) the run is refused, one line;
    in lts validate its rows are skipped with the reason, the others predicted."""
    from lts.cli import cli
    r = CliRunner().invoke(cli, ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1",
                                 "--engine", "vllm", "--max-concurrency", "2000",
                                 "--num-prompts", "200", "--isl", "100", "--osl", "120000"])
    assert r.exit_code == 1 and r.output.startswith(
        "Error: the run passed 110,000 scheduler steps with "), r.output
    assert "lts simulates at most that many (docs/limits.md)" in r.output
    csv = tmp_path / "m.csv"
    csv.write_text(
        "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source,"
        "strategy,engine,engine_version,num_prompts,arrival,range_ratio\n"
        'x1,llama3.1-8b,h100_dgx,1,1,1,1,bf16,100,120000,2000,tpot_ms,10,s,"tp=1",vllm,0.12.0,'
        "200,burst,1.0\n"
        'x2,llama3.1-8b,h100_dgx,1,1,1,1,bf16,1000,100,8,tpot_ms,10,s,"tp=1",vllm,0.12.0,80,'
        "burst,1.0\n")
    d = json.loads(CliRunner().invoke(cli, ["validate", str(csv), "--json"]).output)
    assert [x["id"] for x in d["rows"]] == ["x2"]
    assert d["skipped"][0]["reason"].startswith("simulation: the run passed 110,000 scheduler "
                                                "steps")


def test_validate_counts_the_steps_of_its_runs_against_its_bound(tmp_path, monkeypatch):
    """A run's scheduler steps past its count (STEPS_PER_REQUEST a request and STEPS_PER_RUN)
    are charged STEP_S each against what is left of WORK_S, and bound the next runs: of three
    runs that preempt without end, the first stops at its own bound, the second where the file's
    work runs out (skipped with validate's reason), the third takes no step past its count; a
    normal run predicted before them stays predicted, and the work counted stays within
    WORK_S (a file of eight such runs of 50,000 requests took 100 s, now 35-40 s)."""
    from lts.serving import simulate as sim
    from lts.serving import validate as v
    head = ("id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source,"
            "strategy,engine,engine_version,num_prompts,arrival,range_ratio\n")
    normal = ('x2,llama3.1-8b,h100_dgx,1,1,1,1,bf16,1000,100,8,tpot_ms,10,s,"tp=1",vllm,'
              "0.12.0,80,burst,1.0\n")
    churn = "".join(f'c{i},llama3.1-8b,h100_dgx,1,1,1,1,bf16,100,120000,{2000 + i},tpot_ms,10,'
                    f's,"tp=1",vllm,0.12.0,200,burst,1.0\n' for i in range(3))
    csv = tmp_path / "m.csv"
    csv.write_text(head + normal + churn)
    count = v.validate(csv, work_only=True)
    monkeypatch.setattr(v, "WORK_S", count + v.STEP_S * 150_000)
    taken, real = [], sim.run

    def run(dep, load, progress=None, max_loops=None):
        try:
            r = real(dep, load, progress, max_loops)
        except sim.TooManySteps as e:
            taken.append((max_loops, e.steps, e.caller))
            raise
        taken.append((max_loops, r.loops, None))
        return r
    monkeypatch.setattr(sim, "run", run)
    meter = {}
    d = v.validate(csv, meter=meter)
    assert [x["id"] for x in d["rows"]] == ["x2"]
    reasons = {s["id"]: s["reason"] for s in d["skipped"]}
    assert reasons["c0"].startswith("simulation: the run passed 110,000 scheduler steps")
    assert reasons["c1"] == reasons["c2"] == v.over()
    assert v.over().startswith("past lts validate's bound of 1 s of predictions a file")
    paid = v.STEPS_PER_REQUEST * 200 + v.STEPS_PER_RUN
    assert taken[0][1] <= v.STEPS_PER_REQUEST * 80 + v.STEPS_PER_RUN     # x2: within its count
    assert taken[1] == (paid + 150_000, 110_000, False)     # its own bound, below the file's
    left = paid + 150_000 - (110_000 - paid)                 # what c0 left c1
    assert taken[2][2] is True and abs(taken[2][0] - left) <= 1 and taken[2][1] == taken[2][0]
    assert taken[3] == (paid, paid, True)                   # nothing left past its count
    assert meter["work_s"] <= v.WORK_S + 1e-9
    assert meter["work_s"] == pytest.approx(v.WORK_S, abs=v.STEP_S * 2)
