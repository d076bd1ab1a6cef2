"""lts calibrate (issue 25): a round trip — measurements lts makes from known constants, with
noise, are fitted back to those constants; the files it writes predict what the fit does; a
constant the rows cannot identify is kept and said so."""
import csv
import itertools
import json
import re

import numpy as np
import pytest

from lts.engines import ENGINES
from lts.serving import calibrate as cal
from lts.serving import validate as v
from lts.serving.serve import serve
from lts.specs import load_topology
from lts.specs.strategy import parse_strategy
from lts.specs import load_model
from test_validate import run

HEADER = ["id", "model", "topology", "gpus", "tp", "ep", "pp", "precision", "isl", "osl",
          "concurrency", "metric", "value", "source", "engine", "engine_version"]
TRUE = {"memory_scale": 0.8, "compute_scale": 1.0, "step_overhead_us": 3000.0,
        "request_overhead_ms": 40.0}


def synthetic(path, metrics=("ttft_ms", "tpot_ms"), noise=0.03, seed=0, precisions=("",),
              tps=(1, 2), true=TRUE, model="llama3.1-8b", topology="h100_dgx", osls=(128, 512)):
    """Llama-3.1-8B (``model``) on H100 (``topology``) under vLLM 0.15 as lts predicts it with
    ``true``'s constants, each value times exp(N(0, noise))."""
    rows = [dict(id=f"{pr}p{tp}-{isl}-{osl}-{c}-{m}", model=model, topology=topology,
                 gpus=tp, tp=tp, ep=1, pp=1, precision=pr, isl=isl, osl=osl, concurrency=c,
                 metric=m, value=1, source="synthetic", engine="vllm", engine_version="0.15.1")
            for pr, tp, isl, osl, c in itertools.product(precisions, tps, (512, 2048), osls,
                                                         (1, 16, 64))
            for m in metrics]

    def write(rows):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=HEADER)
            w.writeheader()
            w.writerows(rows)
    write(rows)
    pred = {r["id"]: r["predicted"] for r in v.validate(path, tune=cal.tuned(true))["rows"]}
    rng = np.random.default_rng(seed)
    for r in rows:
        r["value"] = f"{pred[r['id']] * float(np.exp(rng.normal(0.0, noise))):.6g}"
    write(rows)
    return path


def test_round_trip_recovers_the_constants(tmp_path):
    fit = cal.calibrate(synthetic(tmp_path / "m.csv"), train=0.5)
    assert all(fit.identified[k] for k in TRUE), fit.identified
    # the knobs left at their base values in the data: not identified, or fitted near the base
    assert not fit.identified["kernel_overhead_us"] or \
        fit.knobs["kernel_overhead_us"] == pytest.approx(3.0, rel=0.3)
    assert fit.knobs["collective_scale"] == pytest.approx(1.0, rel=0.1)
    assert not fit.identified["oneshot_latency_us"] or \
        fit.knobs["oneshot_latency_us"] == pytest.approx(3.1, rel=0.3)
    assert fit.knobs["memory_scale"] == pytest.approx(0.8, rel=0.05)
    assert fit.knobs["compute_scale"] == pytest.approx(1.0, rel=0.05)
    assert fit.knobs["step_overhead_us"] == pytest.approx(3000.0, rel=0.15)
    assert fit.knobs["request_overhead_ms"] == pytest.approx(40.0, rel=0.15)
    # held out: from the base constants' error down to the noise's (3%: 0.043 log2)
    assert fit.before["held_out"]["median_abs_log2_ratio"] > 0.1
    assert fit.after["held_out"]["median_abs_log2_ratio"] < 0.05


def test_rows_that_cannot_tell_keep_the_constant(tmp_path):
    """TPOT rows alone carry no time per request (it is in TTFT only): not identified, kept at
    the profile's 30 ms; the rest still fit."""
    fit = cal.calibrate(synthetic(tmp_path / "m.csv", metrics=("tpot_ms",)), train=0.5)
    assert not fit.identified["request_overhead_ms"]
    assert fit.knobs["request_overhead_ms"] == fit.base["request_overhead_ms"] == 30.0
    assert fit.identified["memory_scale"]


def test_the_files_predict_what_the_fit_does(tmp_path):
    """lts calibrate writes a topology file and an engine overlay; estimate with both equals the
    fit's own prediction."""
    path = synthetic(tmp_path / "m.csv")
    n = len(path.read_text().splitlines())         # the header and the rows
    with path.open("a") as f:                      # a row lts cannot read: left out, said why
        f.write("bad,llama3.1-8b,h100_dgx,1,1,1,1,,512,128,16,ttft_ms,fast,synthetic,vllm,"
                "0.15.1\n")
    out = tmp_path / "mine.toml"
    r = run("calibrate", str(path), "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["skipped"] == [{"id": "bad", "row": n, "model": "llama3.1-8b", "topology": "h100_dgx",
                             "reason": "value: 'fast' is not a number from 1e-06 to 1e+15"}]
    assert d["overlay_file"] == str(tmp_path / "mine-engine.toml")
    topo = load_topology(str(out))
    assert topo.name == "h100_dgx-fitted"
    want_topo, want_prof = cal.tuned(d["knobs"])(load_topology("h100_dgx"),
                                                 ENGINES["vllm"].profiles["0.15"].for_gpu(topo))
    assert topo.memory_efficiency == pytest.approx(want_topo.memory_efficiency, rel=1e-3)
    e = json.loads(run("estimate", "llama3.1-8b", str(out), "--strategy", "tp=2", "--phase",
                       "serve", "--isl", "2048", "--osl", "512", "--concurrency", "16",
                       "--engine", "vllm@0.15", "--engine-profile", d["overlay_file"],
                       "--json").output)
    res = serve(load_model("llama3.1-8b"), want_topo, np.array([parse_strategy("tp=2,batch=16")]),
                2048, 512, engine=want_prof)
    assert e["ttft_ms"] == pytest.approx(res.ttft_s[0] * 1e3, rel=1e-3)
    assert e["tpot_ms"] == pytest.approx(res.tpot_s[0] * 1e3, rel=1e-3)


def test_the_written_files_validate_as_the_fit_predicts(tmp_path):
    """calibrate -o / --overlay, then validate with the files written: every row's prediction
    is the fit's own, and so is the held-out figure calibrate reports. Mixtral on H200: MoE
    rows read the grouped-GEMM rates under h200_dgx's ``[gpu.grouped_gemm]  # ...`` header,
    which the writer once left at the base's (validate then read 70.1 ms for a fitted 72.5)."""
    path = synthetic(tmp_path / "m.csv", tps=(2,), osls=(128,), model="mixtral-8x7b",
                     topology="h200_dgx")
    out, over = tmp_path / "fit.toml", tmp_path / "fit-overlay.toml"
    r = run("calibrate", str(path), "-o", str(out), "--overlay", str(over), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    fitted = {x["id"]: x["predicted"]
              for x in v.validate(path, tune=cal.tuned(d["knobs"]))["rows"]}
    back = tmp_path / "back.csv"                   # the same rows on the written topology
    back.write_text(path.read_text().replace(",h200_dgx,", f",{out.name},"))
    r = run("validate", str(back), "--engine-profile", str(over), "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert not got["skipped"] and len(got["rows"]) == len(fitted) == 12
    for x in got["rows"]:
        assert x["predicted"] == pytest.approx(fitted[x["id"]], rel=2e-3), x["id"]
    _, held = cal.split(got["rows"], 0.5)
    assert v.summarize(held, split=False)["median_abs_log2_ratio"] == pytest.approx(
        d["after"]["held_out"]["median_abs_log2_ratio"], abs=1e-3)


def test_calibrate_refuses_two_clusters(tmp_path):
    path = synthetic(tmp_path / "m.csv")
    text = path.read_text().replace("h100_dgx", "h200_dgx", 3)
    path.write_text(text)
    r = run("calibrate", str(path), "-o", str(tmp_path / "x.toml"))
    assert r.exit_code == 1 and "calibrate fits one cluster and one engine at a time" in r.output


def test_an_overlay_for_another_engine_is_refused(tmp_path):
    (tmp_path / "o.toml").write_text('[engine]\nname = "vllm"\nstep_overhead_us = 100\n')
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--engine", "sglang", "--engine-profile", str(tmp_path / "o.toml"))
    assert r.exit_code == 2 and "the overlay is for vllm, not sglang" in r.output
    (tmp_path / "bad.toml").write_text('[engine]\nname = "vllm"\nstep_overhead_us = -1\n')
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--engine", "vllm", "--engine-profile", str(tmp_path / "bad.toml"))
    assert r.exit_code == 2 and "engine.step_overhead_us: -1 is not a number from 0" in r.output


@pytest.mark.parametrize("value, message", [
    ("[" * 5000 + "1" + "]" * 5000, "nested too deeply (hundreds of levels of tables or arrays; "
                                    "an overlay needs 1)"),
    ("9" * 5000, "invalid TOML (a number of thousands of digits)")])
def test_an_overlay_is_read_with_the_guards_of_every_toml_file(tmp_path, value, message):
    """Nesting past Python's stack and integers of thousands of digits were tracebacks."""
    (tmp_path / "o.toml").write_text(f'[engine]\nname = "vllm"\nstep_overhead_us = {value}\n')
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--engine", "vllm", "--engine-profile", str(tmp_path / "o.toml"))
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        f"Error: Invalid value for '--engine-profile': {tmp_path / 'o.toml'}: {message}")


def test_an_overlay_for_another_release_is_refused(tmp_path):
    """An overlay fitted on one release's profile is not applied under another (issue 38)."""
    (tmp_path / "o.toml").write_text('[engine]\nname = "vllm"\nrelease = "0.12"\n'
                                     'step_overhead_us = 100\n')
    args = ("estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1", "--phase", "serve",
            "--engine-profile", str(tmp_path / "o.toml"), "--engine")
    r = run(*args, "vllm")
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        "Error: --engine-profile: the overlay is for vllm 0.12's profile, not 0.15's (name it "
        "with --engine vllm@0.12)")
    assert run(*args, "vllm@0.12").exit_code == 0


@pytest.mark.parametrize("holdout", ["isl", "concurrency"])
def test_held_out_request_shapes_and_loads(tmp_path, holdout):
    """Fitted on half the (isl, osl) pairs, or on the lower concurrencies, the constants carry
    to the rest (the rows were made with them: the held-out error falls to the noise's)."""
    r = run("calibrate", str(synthetic(tmp_path / "m.csv")), "-o", str(tmp_path / "f.toml"),
            "--holdout", holdout, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["held_points"] > 0 and d["after"]["held_out"]["median_abs_log2_ratio"] < 0.06
    rows = v.validate(tmp_path / "m.csv")["rows"]
    train, held = cal.split(rows, 0.5, holdout)
    key = (lambda r: (r["isl"], r["osl"])) if holdout == "isl" else (lambda r: r["concurrency"])
    assert not {key(r) for r in train} & {key(r) for r in held}


def test_what_calibrate_refuses_before_fitting(tmp_path):
    """Two releases of one engine, a hold-out that holds nothing, an overlay that is the
    topology file, a missing output folder: each one line, nothing written."""
    path = synthetic(tmp_path / "m.csv")
    out = str(tmp_path / "f.toml")
    r = run("calibrate", str(path), "-o", out, "--overlay", out)
    assert r.exit_code == 2 and "--overlay: the same file as -o (the topology)" in r.output
    r = run("calibrate", str(path), "-o", str(tmp_path / "no" / "f.toml"))
    assert r.exit_code == 2 and "its folder does not exist" in r.output
    rows = list(csv.DictReader(path.open()))
    mixed = tmp_path / "mixed.csv"
    with mixed.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows([dict(r_, engine_version="0.12.0") for r_ in rows[:4]] + rows[4:])
    r = run("calibrate", str(mixed), "-o", out)
    assert r.exit_code == 1 and "calibrate one release at a time" in r.output
    one = tmp_path / "one.csv"
    with one.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows(r_ for r_ in rows if r_["isl"] == "512" and r_["osl"] == "128")
    r = run("calibrate", str(one), "-o", out, "--holdout", "isl")
    assert r.exit_code == 1 and "--holdout isl holds nothing out" in r.output
    unread = tmp_path / "unread.csv"
    with unread.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows(dict(r_, metric="tokens") for r_ in rows[:3])
    r = run("calibrate", str(unread), "-o", out)
    assert r.exit_code == 1 and r.output == (
        f"Error: no row of {unread} could be predicted (3 skipped; row 1: metric: 'tokens' is "
        "not one of output_tokens_per_s, output_tokens_per_s_per_gpu, ttft_ms, tpot_ms)\n")
    assert not (tmp_path / "f.toml").exists()


def test_too_few_rows_identify_few_knobs(tmp_path):
    """At least two training rows a knob (fewer and the fit passes through them): eight rows
    fit four knobs at most, the ones that move the rows most; one row fits none, every knob
    kept at its base and said so."""
    path = synthetic(tmp_path / "m.csv")
    rows = list(csv.DictReader(path.open()))
    for n, most in ((8, 4), (1, 0)):
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=HEADER)
            w.writeheader()
            w.writerows(rows[:n])
        fit = cal.calibrate(path, train=1.0)
        assert sum(fit.identified.values()) <= most
        assert all(fit.knobs[k] == fit.base[k] for k in fit.knobs if not fit.identified[k])
    assert fit.knobs == fit.base


def test_the_base_is_the_topology_file_beside_the_csv(tmp_path):
    """A topology named by a file relative to the CSV: its kernel time is the base."""
    from lts.specs import resolve
    body = open(resolve("topologies", "h100_dgx"), encoding="utf-8").read()
    assert "kernel_overhead_us" in body
    (tmp_path / "mine.toml").write_text(re.sub(r"kernel_overhead_us\s*=\s*[0-9.e+-]+",
                                               "kernel_overhead_us = 7.5", body))
    path = synthetic(tmp_path / "m.csv")
    path.write_text(path.read_text().replace("h100_dgx", "mine.toml"))
    fit = cal.calibrate(path, train=0.5)
    assert fit.base["kernel_overhead_us"] == 7.5


def test_two_formats_get_their_own_rates(tmp_path):
    """Rows of bf16 and fp8 weights: the commoner format (bf16, first by name at a tie) sets
    the common scales and fp8 gets its own two; the effective fp8 rates come back within the
    noise's reach, and the topology file written carries them (the class keys fp8 reads)."""
    true = dict(TRUE, **{"memory_scale@fp8": 1.25, "compute_scale@fp8": 0.8})
    path = synthetic(tmp_path / "m.csv", precisions=("bf16", "fp8"), tps=(1, 4), true=true)
    fit = cal.calibrate(path, train=0.5)
    assert fit.identified["memory_scale@fp8"] and fit.identified["compute_scale@fp8"]
    assert "memory_scale@bf16" not in fit.knobs
    base = load_topology("h100_dgx")
    want, got = cal.tuned_topology(base, true), cal.tuned_topology(base, fit.knobs)
    for f in ("bf16", "fp8"):
        assert got.weight_memory_efficiency_for(f) == pytest.approx(
            want.weight_memory_efficiency_for(f), rel=0.15)
        assert got.compute_efficiency_for(f) == pytest.approx(want.compute_efficiency_for(f),
                                                              rel=0.15)
    assert fit.after["held_out"]["median_abs_log2_ratio"] < 0.05
    from lts.specs import resolve
    (tmp_path / "t.toml").write_text(cal.topology_text(resolve("topologies", "h100_dgx"), fit,
                                                       "test"))
    written = load_topology(str(tmp_path / "t.toml"))
    for f in ("bf16", "fp8", "fp8_block", "nvfp4"):
        assert written.weight_memory_efficiency_for(f) == pytest.approx(
            got.weight_memory_efficiency_for(f), rel=1e-3)
        assert written.compute_efficiency_for(f) == pytest.approx(got.compute_efficiency_for(f),
                                                                  rel=1e-3)
        assert written.grouped_efficiency(f)[1] == pytest.approx(got.grouped_efficiency(f)[1],
                                                                 rel=1e-3)


def test_a_format_without_a_line_gets_one(tmp_path):
    """A format whose rates the file gives by no key of its own (nvfp4 on a topology without
    it): the written file adds its [gpu.gemm] line, which predicts what the fit does."""
    from lts.specs import resolve
    fit = cal.Fit(knobs={"memory_scale": 0.9, "compute_scale": 1.1, "memory_scale@mxfp4": 1.2,
                         "compute_scale@mxfp4": 0.7},
                  base={}, identified={"memory_scale": True, "compute_scale": True,
                                       "memory_scale@mxfp4": True, "compute_scale@mxfp4": True},
                  engine="vllm", release="0.15", before={}, after={}, train_points=0,
                  held_points=0)
    for name in ("h100_dgx", "a100_dgx"):
        src = resolve("topologies", name)
        (tmp_path / "t.toml").write_text(cal.topology_text(src, fit, "test"))
        written = load_topology(str(tmp_path / "t.toml"))
        got = cal.tuned_topology(load_topology(name), fit.knobs)
        for f in ("bf16", "mxfp4", "fp8"):
            assert written.weight_memory_efficiency_for(f) == pytest.approx(
                got.weight_memory_efficiency_for(f), rel=1e-3)
            assert written.compute_efficiency_for(f) == pytest.approx(
                got.compute_efficiency_for(f), rel=1e-3)
        assert "mxfp4" in written.gemm


def test_small_all_reduces_have_their_own_time(tmp_path):
    """Collectives by message size: rows at tp 1-8 with a one-shot all-reduce of 10 us (the
    base 3.1) and a 0.3 ms step: the small all-reduce's time comes back beside the large ones'
    scale; the time per kernel, which one model cannot tell from the time per step, is kept."""
    true = dict(TRUE, step_overhead_us=300.0, oneshot_latency_us=10.0)
    fit = cal.calibrate(synthetic(tmp_path / "m.csv", tps=(1, 2, 4, 8), true=true), train=0.5)
    assert fit.identified["oneshot_latency_us"] and not fit.identified["kernel_overhead_us"]
    assert fit.knobs["oneshot_latency_us"] == pytest.approx(10.0, rel=0.2)
    assert fit.knobs["step_overhead_us"] == pytest.approx(300.0, rel=0.3)
    assert fit.knobs["memory_scale"] == pytest.approx(0.8, rel=0.05)
    assert fit.after["held_out"]["median_abs_log2_ratio"] < 0.05
    from lts.specs import resolve
    (tmp_path / "t.toml").write_text(cal.topology_text(resolve("topologies", "h100_dgx"), fit,
                                                       "test"))
    assert load_topology(str(tmp_path / "t.toml")).links[0].oneshot_latency_s == \
        pytest.approx(fit.knobs["oneshot_latency_us"] * 1e-6, rel=1e-3)


@pytest.mark.parametrize("name", ["h200_dgx", "h20_hgx", "h100_dgx", "gb200_nvl72", "mi300x_x8"])
def test_the_written_topology_reads_back_with_the_fitted_rates(tmp_path, name):
    """What calibrate writes, lts reads back with the same figures (issue 38 item 2): every
    tuned rate of the topology — memory, compute, per-format GEMM and grouped-GEMM rates, the
    kernel overhead, the one-shot latency — is the tuned topology's, also under a section
    header that carries a comment (h200_dgx's ``[gpu.grouped_gemm]  # ...`` once lost them)."""
    from lts.specs import resolve
    base = resolve("topologies", name)
    knobs = {"memory_scale": 0.8, "compute_scale": 0.7, "kernel_overhead_us": 3.5,
             "oneshot_latency_us": 7.0, "memory_scale@fp8": 0.9, "compute_scale@fp8": 0.6,
             "step_overhead_us": 100.0, "request_overhead_ms": 1.0, "collective_scale": 1.0}
    fit = cal.Fit(knobs, {}, {k: True for k in knobs}, "vllm", "0.15", {}, {}, 0, 0)
    out = tmp_path / "t.toml"
    out.write_text(cal.topology_text(base, fit, "test"))
    got, want = load_topology(str(out)), cal.tuned_topology(load_topology(str(base)), knobs)
    for key in ("memory_efficiency", "fp8_memory_efficiency", "compute_efficiency",
                "fp8_compute_efficiency", "fp4_compute_efficiency", "kernel_overhead_s"):
        assert getattr(got, key) == pytest.approx(getattr(want, key), rel=1e-3), key
    assert set(got.gemm) == set(want.gemm) and set(got.grouped) == set(want.grouped)
    for f in want.gemm:
        assert got.gemm[f] == pytest.approx(want.gemm[f], rel=1e-3), f
    for f in want.grouped:
        assert np.allclose(got.grouped[f][0], want.grouped[f][0], rtol=1e-3), f
        assert got.grouped[f][1] == pytest.approx(want.grouped[f][1], rel=1e-3), f
    assert got.links[0].oneshot_latency_s == pytest.approx(want.links[0].oneshot_latency_s,
                                                           rel=1e-3)


def test_the_fit_is_sized_within_its_bound(tmp_path, monkeypatch):
    """calibrate's work is counted before it starts (validate.work_s): the training rows are
    predicted at most as often as the bound allows, and where fewer than FEWEST predictions of
    them fit, training points are cut (held out, in an even spread) until FEWEST do."""
    path = synthetic(tmp_path / "m.csv")
    every = v.validate(path, work_only=True)
    fit = cal.calibrate(path, train=0.5)
    assert 0 < fit.evaluations <= fit.allowed <= cal.EVALUATIONS
    assert fit.train_points == fit.asked_points == 12
    # a bound that holds FEWEST predictions of half the training rows' serve calls: points cut
    monkeypatch.setattr(cal, "BOUND_S", 2 * every + cal.FEWEST * every / 2)
    small = cal.calibrate(path, train=0.5)
    assert 0 < small.train_points < small.asked_points == 12
    assert small.train_points + small.held_points == 24
    assert small.evaluations <= small.allowed
    train, held = cal.split(v.validate(path)["rows"], 0.5)
    kept, _, _, allowed, _ = cal.within_bound(path, train, held)
    assert len({cal._point(r["id"]) for r in kept}) == small.train_points
    assert allowed == small.allowed >= cal.FEWEST
    assert allowed * v.validate(path, work_only=True, only={r["id"] for r in kept}) <= \
        cal.BOUND_S - 2 * every + 1e-9


def test_every_prediction_is_bounded_and_their_work_is_within_the_bound(tmp_path, monkeypatch):
    """Each of calibrate's predictions is given the work it was sized for (validate's bound_s),
    and the work they count together (validate's meter: their groups and their runs' steps past
    their count) is within BOUND_S, with and without points cut."""
    path = synthetic(tmp_path / "m.csv")
    every = v.validate(path, work_only=True)
    real = v.validate
    for bound in (cal.BOUND_S, 2 * every + cal.FEWEST * every / 2):
        monkeypatch.setattr(cal, "BOUND_S", bound)
        calls = []

        def counted(*a, **k):
            if k.get("work_only"):
                return real(*a, **k)
            assert k.get("bound_s") is not None
            meter = k.setdefault("meter", {})
            out = real(*a, **k)
            calls.append((meter["work_s"], k["bound_s"]))
            return out
        monkeypatch.setattr(v, "validate", counted)
        fit = cal.calibrate(path, train=0.5)
        monkeypatch.setattr(v, "validate", real)
        assert len(calls) == fit.evaluations + 2
        assert all(w <= b for w, b in calls)
        assert sum(w for w, _ in calls) <= bound + 1e-6


def test_a_file_too_large_to_fit_is_refused(tmp_path, monkeypatch):
    path = synthetic(tmp_path / "m.csv")
    every = v.validate(path, work_only=True)
    monkeypatch.setattr(cal, "BOUND_S", 2 * every)
    predicted = []                  # refused from the count alone, before any prediction
    real = v.validate
    monkeypatch.setattr(v, "validate", lambda *a, **k: (
        real(*a, **k) if k.get("work_only") else predicted.append(a) or real(*a, **k)))
    with pytest.raises(cal.LtsError, match=r"predicting its rows takes about \d+ s, and "
                                           r"calibrate predicts them twice and fits within "
                                           r"\d+ s \(docs/limits.md\): fit fewer rows at a time"):
        cal.calibrate(path, train=0.5)
    assert predicted == []
    monkeypatch.setattr(v, "validate", real)
    monkeypatch.setattr(cal, "BOUND_S", 2 * every / 0.74)
    with pytest.raises(cal.LtsError, match=r"fitting even one point \(.*\) takes 80 predictions"):
        cal.calibrate(path, train=0.5)


def test_a_fit_stopped_by_its_bound_keeps_what_it_cannot_pin(tmp_path, monkeypatch):
    """Too few predictions for the refits: every knob still above its threshold is kept at its
    base, and those kept fitted only if they beat the base on the training rows."""
    path = synthetic(tmp_path / "m.csv")
    monkeypatch.setattr(cal, "EVALUATIONS", 30)       # the unbounded fit takes 66
    fit = cal.calibrate(path, train=0.5)
    assert fit.bounded and fit.evaluations <= fit.allowed == 30
    assert 0 < sum(fit.identified.values()) < len(fit.identified)
    for n, ok in fit.identified.items():
        if not ok:
            assert fit.knobs[n] == fit.base[n]
    assert fit.knobs["memory_scale"] == pytest.approx(0.8, rel=0.05)
    assert fit.after["train"]["median_abs_log2_ratio"] < \
        fit.before["train"]["median_abs_log2_ratio"]
    monkeypatch.setattr(cal, "EVALUATIONS", 20)       # no refit fits: nothing identified
    fit = cal.calibrate(path, train=0.5)
    assert fit.bounded and not any(fit.identified.values()) and fit.knobs == fit.base


def test_spread_orders_every_index_once():
    for n in range(1, 70):
        order = cal._spread(n)
        assert sorted(order) == list(range(n))
        assert order[0] == n // 2


def test_the_report_says_when_the_fit_is_worse_than_the_base(tmp_path):
    """The report of a fit: no warning where it predicts the training rows better; where it
    predicts them worse than the base (the tables the fitted roofline replaces), it says so."""
    from rich.console import Console
    from lts.report.validate import render_calibrate
    r = run("calibrate", str(synthetic(tmp_path / "m.csv")), "-o", str(tmp_path / "f.toml"),
            "--json")
    d = json.loads(r.stdout)
    assert d["after"]["train"]["median_abs_log2_ratio"] < \
        d["before"]["train"]["median_abs_log2_ratio"]

    def text(d):
        console = Console(record=True, width=200)
        render_calibrate(console, d)
        return console.export_text()
    assert "worse than the base" not in text(d)
    d["after"]["train"]["median_abs_log2_ratio"] = 0.5
    before = d["before"]["train"]["median_abs_log2_ratio"]
    assert (f"the fitted files predict the training rows worse than the base (median |log2| "
            f"{before:.3f} -> 0.500)") in text(d)


# a base topology written in a way TOML reads and the writer does not edit: a quoted part of a
# table header (the grouped rates would stay the base's), a value continued on the next line
# (the line the writer replaces leaves the rest behind)
UNEDITABLE = {
    "quoted": ("[gpu.grouped_gemm]", '["gpu".grouped_gemm]',
               "calibrate: the fitted topology would read grouped.bf16[0][0] back as 0.21, not "
               "the fitted 0.147: a line of {base} lts cannot rewrite, nothing written"),
    "continued": ("bf16 = { compute = [0.210, ", "bf16 = { compute = [0.210,\n    ",
                  "calibrate: the fitted topology would not read back (mine.toml as calibrate "
                  "writes it: invalid TOML (Expected '=' after a key in a key/value pair (at "
                  "line 61, column 10))); a line of {base} lts cannot rewrite, nothing written"),
}


@pytest.mark.parametrize("case", sorted(UNEDITABLE))
def test_a_topology_that_would_read_back_otherwise_is_not_written(tmp_path, case):
    """calibrate reads the topology text it would write as lts reads a topology file: a rate
    it would read back other than the fitted one (or no topology at all) is refused, one line,
    exit 1, and neither file is written."""
    from lts.specs import resolve
    old, new, message = UNEDITABLE[case]
    body = resolve("topologies", "h100_dgx").read_text(encoding="utf-8")
    assert body.count(old) == 1
    base = tmp_path / "mine.toml"
    base.write_text(body.replace(old, new))
    load_topology(str(base))                       # a topology lts reads
    knobs = {"memory_scale": 0.7, "compute_scale": 0.7, "step_overhead_us": 100.0,
             "request_overhead_ms": 1.0, "collective_scale": 1.0}
    fit = cal.Fit(knobs, {}, {k: True for k in knobs}, "vllm", "0.15", {}, {}, 0, 0)
    with pytest.raises(cal.LtsError) as e:
        cal.topology_text(base, fit, "test")
    assert str(e.value) == message.format(base=base)
    if case == "quoted":                           # through lts calibrate
        path = synthetic(tmp_path / "m.csv", tps=(1,))
        path.write_text(path.read_text().replace("h100_dgx", "mine.toml"))
        r = run("calibrate", str(path), "-o", str(tmp_path / "fit.toml"))
        assert r.exit_code == 1 and r.output.count("\n") == 1
        assert r.output.startswith("Error: calibrate: the fitted topology would read grouped.")
        assert r.output.endswith(f"a line of {base} lts cannot rewrite, nothing written\n")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv", "mine.toml"]
