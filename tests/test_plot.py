"""The serving trade-off: the Pareto frontier (against brute force), its SVG and its terminal
chart, and `lts search --plot`. Small problems; nothing here is timed."""
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from lts.cli import cli
from lts.report.plot import Series, frontier_svg, frontier_text, nice_ticks
from lts.specs.strategy import BATCH
from lts.serving.pareto import pareto_front

SVG = "{http://www.w3.org/2000/svg}"


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=25))
def test_pareto_front_equals_brute_force(pts):
    """A point is kept iff no other point matches or beats it on both axes (ties: the first)."""
    x, y = (np.array(v, dtype=float) for v in zip(*pts))
    want = [i for i in range(len(x))
            if not any(x[j] >= x[i] and y[j] >= y[i] and ((x[j], y[j]) != (x[i], y[i]) or j < i)
                       for j in range(len(x)) if j != i)]
    want.sort(key=lambda i: x[i])
    assert list(pareto_front(x, y)) == want
    kept = pareto_front(x, y)           # rising x, falling y: a staircase
    assert np.all(np.diff(x[kept]) > 0) and np.all(np.diff(y[kept]) < 0)


def test_nice_ticks_cover_the_range_in_round_steps():
    for hi in (0.7, 1.0, 42.8, 999.0, 5353.7, 1e6):
        t = nice_ticks(hi)
        step = t[1] - t[0]
        assert t[0] == 0 and t[-1] >= hi and t[-2] < hi and 3 <= len(t) <= 12
        assert float(f"{step:.0e}") == pytest.approx(step) and str(f"{step:.0e}")[0] in "125"


def test_svg_has_axes_points_limit_and_chosen():
    pts = [(10.0, 500.0), (20.0, 300.0), (40.0, 100.0)]
    svg = frontier_svg([Series("one pool", "#1f6fb4", pts)], "A & B <title>", "x (units)",
                       "y (units)", chosen=pts[0], x_limit=5.0, limit_label="TPOT ≤ 200 ms",
                       note="every point meets TTFT ≤ 2000 ms", subtitle="sub")
    root = ET.fromstring(svg)                              # well-formed, escaped text
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "A & B <title>" in texts and "x (units)" in texts and "TPOT ≤ 200 ms" in texts
    circles = list(root.iter(SVG + "circle"))
    assert len(circles) == len(pts) + 1                    # the points and the chosen ring
    assert any(c.get("fill") == "none" for c in circles)
    assert any(l.get("stroke-dasharray") for l in root.iter(SVG + "line"))    # the SLO line
    (path,) = root.iter(SVG + "path")
    assert path.get("d").count("L") == 2 * (len(pts) - 1)  # one step down and across per pair


def test_text_chart_fits_80_columns_and_marks_points():
    pts = [(42.8, 5353.7), (68.0, 4300.0), (312.0, 30.0)]
    lines = frontier_text(pts, chosen=pts[0], x_limit=33.3)
    assert all(len(line) <= 80 for line in lines)
    body = "".join(lines)
    assert body.count("o") == 2 and body.count("*") == 1 and ":" in body


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_search_plot_and_pareto_json(tmp_path):
    out = tmp_path / "tradeoff.svg"
    args = ("search", "mixtral-8x7b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "1024", "--osl", "1024", "--tpot-slo-ms", "30", "--ttft-slo-ms", "2000",
            "--method", "random", "--budget", "300", "--plot", str(out))
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    pareto = [p for p in d["pareto"] if p["mode"] == "agg"]
    two = [p for p in d["pareto"] if p["mode"] == "disagg"]
    assert len(pareto) + len(two) == len(d["pareto"])
    for points in (pareto, two):        # each a staircase within the SLOs
        assert points and all(p["tpot_ms"] <= 30 and p["ttft_ms"] <= 2000 for p in points)
        users = [p["tokens_per_s_per_user"] for p in points]
        gpus = [p["tokens_per_s_per_gpu"] for p in points]
        assert users == sorted(users) and gpus == sorted(gpus, reverse=True)
    assert pareto[0]["tokens_per_s_per_gpu"] == pytest.approx(d["best"]["tokens_per_s_per_gpu"])
    assert pareto[0]["tokens_per_s_per_user"] == pytest.approx(1000 / d["best"]["tpot_ms"])
    assert two[0]["tokens_per_s_per_gpu"] == pytest.approx(d["disagg"]["tokens_per_s_per_gpu"])
    root = ET.parse(out).getroot()          # both frontiers' points and the chosen ring
    assert len(list(root.iter(SVG + "circle"))) == len(pareto) + len(two) + 1
    text = run(*args[:-2], "--no-color").output
    assert "Trade-off" in text and "*" in text


def test_plot_needs_the_serve_phase(tmp_path):
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--plot", str(tmp_path / "a.svg"))
    assert r.exit_code == 2 and "--plot draws the serving trade-off: it needs --phase serve" \
        in r.output
    r = run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--method",
            "megatron", "--plot", str(tmp_path / "missing" / "a.svg"))
    # refused before the search (tests/test_outputs.py: one rule for every output)
    assert r.exit_code == 2 and f"--plot {tmp_path / 'missing' / 'a.svg'}: its folder does not " \
        "exist" in r.output


def test_sizing_is_the_fewest_gpus_among_the_strategies_found():
    """--request-rate: ceil(rate / requests/s of an instance) instances of the strategy that
    needs the fewest GPUs, checked against every candidate; replicas fill the budget."""
    from lts.search.problems import ServeProblem
    from lts.search.methods import replicas, run as run_search
    from lts.specs import load_model, load_topology
    problem = ServeProblem(load_model("mixtral-8x7b"), load_topology("h100_dgx"), 1024, 1024,
                           tpot_slo_ms=30, ttft_slo_ms=2000, gpus=8)
    rate = 37.5
    r = run_search(problem, "random", 300, 0, request_rate=rate)
    cand, sz = r.candidates, r.sizing
    per_instance = cand.tokens_per_s / 1024
    need = np.ceil(rate / per_instance) * cand.gpus
    assert sz.gpus == need.min() and sz.instances * sz.result.tokens_per_s[0] / 1024 >= rate
    assert (sz.instances - 1) * sz.result.tokens_per_s[0] / 1024 < rate
    assert sz.fits == (sz.gpus <= 8)
    assert np.array_equal(replicas(problem, cand), 8 // cand.gpus)


def test_request_rate_flag(tmp_path):
    d = json.loads(run("search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "serve",
                       "--method", "megatron", "--request-rate", "5", "--json").stdout)
    sz = d["sizing"]
    assert sz["request_rate"] == 5 and sz["gpus"] == sz["instances"] * sz["strategy"]["gpus"]
    assert sz["instances"] * sz["strategy"]["requests_per_s"] >= 5
    best = d["best"]
    assert best["replicas"] == 8 // best["gpus"]
    assert best["tokens_per_s_per_cluster_gpu"] == pytest.approx(
        best["replicas"] * best["tokens_per_s"] / 8)
    r = run("search", "llama3.1-8b", "h100_dgx", "--request-rate", "5")
    assert r.exit_code == 2 and "--request-rate sizes a serving deployment" in r.output
    r = run("search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--request-rate", "0")
    assert r.exit_code == 2 and "--request-rate" in r.output


def test_disaggregated_pools_match_their_rates_within_the_budget_and_slos():
    """Two pools: each the exact optimum of its phase for its instance size, instance counts
    within the GPU budget by rate matching, and the figures of the whole the two-pool closed
    loop's (serving.two_pool) at the most clients the decode pool holds within the SLOs."""
    import numpy as np
    from lts.search.disagg import best_pool, closed_loop, disaggregate, pair, pool_problem
    from lts.search.problems import ServeProblem
    from lts.specs import load_model, load_topology
    from lts.specs.workload import Workload
    p = ServeProblem(load_model("llama3.1-70b"), load_topology("h100_dgx"), 4000, 1000,
                     tpot_slo_ms=30, ttft_slo_ms=2000, gpus=8)
    d, _ = disaggregate(p)
    g_p, g_d = int(d.prefill.gpus[0]), int(d.decode.gpus[0])
    assert d.gpus == d.prefill_instances * g_p + d.decode_instances * g_d <= 8
    # the instance counts are the rate-matched best of the two strategies
    got = pair(p, d.prefill, d.decode)
    assert (got[2], got[3]) == (d.prefill_instances, d.decode_instances)
    # the figures are the loop's at its concurrency, within the SLOs
    pairs = [(d.prefill, d.decode, d.prefill_instances, d.decode_instances)]
    loop = closed_loop(p, pairs, np.array([d.concurrency]))
    assert d.ttft_s == loop.ttft_s[0] and d.tpot_s == loop.tpot_s[0]
    assert d.requests_per_s == loop.requests_per_s[0]
    assert d.tokens_per_s_per_gpu == pytest.approx(d.requests_per_s * 1000 / d.gpus)
    assert d.tokens_per_s_per_cluster_gpu == pytest.approx(d.requests_per_s * 1000 / 8)
    assert d.tpot_s <= 0.030 and d.ttft_s <= 2.0
    # Little's law over the loop; the most clients within the SLOs, at most the decode slots
    assert d.requests_per_s * (d.ttft_s + 999 * d.tpot_s) == pytest.approx(d.concurrency,
                                                                           rel=1e-3)
    slots = d.decode_instances * int(d.decode.strategies[0][BATCH])
    assert d.concurrency <= slots
    if d.concurrency < slots:
        more = closed_loop(p, pairs, np.array([d.concurrency + 1]))
        assert more.ttft_s[0] > 2.0 or more.tpot_s[0] > 0.030
    # the decode pool is its phase's optimum at its instance size: none better per GPU
    again = best_pool(pool_problem(p, Workload("decode", 5000, tpot_slo_ms=30, gpus=g_d)))
    assert again.tokens_per_s_per_gpu[0] == pytest.approx(d.decode.tokens_per_s_per_gpu[0])


def test_equal_points_keep_the_least_ttft():
    """A concurrency beyond the KV cache runs the same batch (same tokens/s, same TPOT) and only
    queues: of equal points the frontier keeps the least TTFT, whatever the order."""
    x, y, ttft = [10.0, 10.0, 5.0], [100.0, 100.0, 50.0], [500.0, 4.0, 1.0]
    assert list(pareto_front(x, y, ttft)) == [1]
    assert list(pareto_front(x[::-1], y[::-1], ttft[::-1])) == [1]


def test_pools_solve_instance_sizes_that_are_not_powers_of_two():
    """Regression: Llama-3.1-405B fp8 on 16 H100 has a prefill instance on 6 GPUs (pp = 6) that
    solving only the bounds 1, 2, 4, 8 missed (then the best per GPU used: 223.4 tokens/s/GPU on
    14 GPUs). Per GPU of the budget, 14 of 16 GPUs gave 195.4 by rate matching; 8 + 8 GPUs 213.4,
    and 216.1 through the two-pool closed loop at its 256 clients (issue 24)."""
    from lts.search.disagg import disaggregate, pools, prefill_pool
    from lts.search.problems import ServeProblem
    from lts.specs import load_model, load_topology
    p = ServeProblem(load_model("llama3.1-405b", "fp8"), load_topology("h100_dgx"), 1024, 1024,
                     tpot_slo_ms=100, ttft_slo_ms=2000, gpus=16)
    assert 6 in {int(r.gpus[0]) for r in pools(prefill_pool(p))}
    d, _ = disaggregate(p)
    assert d.gpus == 16
    assert d.tokens_per_s_per_cluster_gpu == pytest.approx(216.14, rel=1e-3)
    assert d.tokens_per_s_per_cluster_gpu > 223.37 * 14 / 16 and d.concurrency == 256


def test_two_pools_are_named_when_the_search_finds_no_one_pool_strategy():
    r = run("search", "llama3.1-405b", "h100_dgx", "--gpus", "32", "--phase", "serve", "--isl",
            "4000", "--osl", "1000", "--tpot-slo-ms", "30", "--ttft-slo-ms", "2000", "--method",
            "random", "--budget", "20")
    assert r.exit_code == 1 and "no feasible strategy found" in r.output
    assert "two pools would serve it: 1 prefill instance of tp=16" in r.output
