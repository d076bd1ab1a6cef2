"""`lts validate` (measurement files, docs/design.md §5) and the calibration figures."""
import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.specs.units import ACCEPTED_FORMATS

# copies of ../shared/data's files (tests/data/measurements/README.md), so no test skips on a clone
DATA = Path(__file__).resolve().parent / "data" / "measurements"
CALIBRATION = DATA / "calibration.csv"
SERVING = DATA / "serving_calibration.csv"
HEADER = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# ----------------------------------------------------------------------------------------------
# lts validate

def write(tmp_path, text, name="m.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_validate_small_file(tmp_path):
    lines = [HEADER]
    for i, tp in enumerate((1, 2, 4, 8)):
        lines.append(f"r{i},llama3.1-8b,h100_dgx,{tp},{tp},1,1,fp8,1000,1000,,"
                     f"output_tokens_per_s,{5000 * tp},doc")
    lines.append("ttft,llama3.1-8b,h100_dgx,1,1,1,1,,128,128,16,ttft_ms,20,doc")
    lines.append("nomodel,gpt-5,h100_dgx,8,8,1,1,fp8,128,128,,output_tokens_per_s,1,doc")
    lines.append("notopo,llama3.1-8b,tpu_v9,8,8,1,1,fp8,128,128,,output_tokens_per_s,1,doc")
    lines.append("toobig,llama3.1-70b,h100_dgx,1,1,1,1,bf16,128,128,,output_tokens_per_s,1,doc")
    r = run("validate", write(tmp_path, "\n".join(lines) + "\n"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [row["id"] for row in d["rows"]] == ["r0", "r1", "r2", "r3", "ttft"]
    for row in d["rows"]:
        assert row["predicted"] > 0 and row["ratio"] == pytest.approx(row["predicted"]
                                                                      / row["measured"])
    reasons = {s["id"]: s["reason"] for s in d["skipped"]}
    assert set(reasons) == {"nomodel", "notopo", "toobig"}
    assert "not shipped" in reasons["nomodel"] and "not shipped" in reasons["notopo"]
    assert "memory" in reasons["toobig"]
    s = d["summary"]
    assert s["count"] == 5 and 0 <= s["within_2x"] <= 1 and s["median_abs_log2_ratio"] >= 0
    groups = s["spearman_by_group"]["groups"]
    assert len(groups) == 1 and groups[0]["ids"] == ["r0", "r1", "r2", "r3"]
    assert s["spearman_by_group"]["mean"] == groups[0]["spearman"]
    table = run("validate", str(tmp_path / "m.csv"), "--no-color")
    assert table.exit_code == 0
    assert "r3" in table.output and "nomodel" in table.output and "not shipped" in table.output


@pytest.mark.parametrize("cell, reason", [
    (("osl", "abc"), "osl: 'abc' is not a positive integer"),
    (("metric", "tokens"), "metric: 'tokens' is not one of output_tokens_per_s, "
                           "output_tokens_per_s_per_gpu, ttft_ms, tpot_ms"),
    (("value", "fast"), "value: 'fast' is not a number from 1e-06 to 1e+15"),
    (("precision", "fp7"), f"precision: 'fp7' is not a weight format lts knows (expected one of "
                           f"{ACCEPTED_FORMATS}; any case, - or _); did you mean fp8?"),
    (("engine", "tgi"), "engine: 'tgi' is not one of generic, vllm, sglang, trtllm (or empty)"),
    (("tp", "99999999999999999999"), "tp: 99999999999999999999 is above the maximum 65,536"),
    (("isl", "99999999999"), "isl: 99999999999 is above the maximum 10,000,000"),
    (("value", "1e300"), "value: '1e300' is not a number from 1e-06 to 1e+15"),
    (("source", "a\x1b[2Jb"), "source: 'a\\x1b[2Jb' contains control or bidirectional "
                              "formatting characters (expected plain text)"),
])
def test_a_bad_cell_skips_its_row_with_the_reason(tmp_path, cell, reason):
    """Issue 36: a bad cell skips its row (listed with the reason, in the table and the JSON);
    the other rows are predicted, the exit status 0."""
    good = "a,llama3.1-8b,h100_dgx,1,1,1,1,fp8,128,128,,output_tokens_per_s,100,doc,vllm"
    cols = (HEADER + ",engine").split(",")
    bad = good.split(",")
    bad[0] = "b"
    bad[cols.index(cell[0])] = cell[1]
    path = write(tmp_path, "\n".join([",".join(cols), good, ",".join(bad)]) + "\n")
    r = run("validate", path, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [row["id"] for row in d["rows"]] == ["a"] and d["total"] == 2
    assert d["skipped"] == [{"id": "b", "row": 2, "model": "llama3.1-8b",
                             "topology": "h100_dgx", "reason": reason}]
    table = run("validate", path, "--no-color")
    assert table.exit_code == 0 and "Skipped: 1 row" in table.output
    assert "1 of 2 rows predicted (1 skipped)" in " ".join(table.output.split())


def test_one_file_of_a_good_row_and_bad_rows_of_every_kind(tmp_path):
    """Every kind of bad row in one file: each is listed with its exact reason, in file order,
    and the good rows are still predicted."""
    cols = (HEADER + ",engine,strategy,attention_tp,attention_dp,moe_tp,moe_ep,gemm_quant,"
            "moe_quant,arrival").split(",")
    good = dict(zip(cols, "ok,llama3.1-8b,h100_dgx,1,1,1,1,fp8,128,128,8,ttft_ms,100,doc,vllm,"
                          ",,,,,,,".split(",")))

    def row(**cells):
        return ",".join(str({**good, **cells}[c]) for c in cols)
    formats = f"(expected one of {ACCEPTED_FORMATS}; any case, - or _)"
    bad = [   # (id, line, reason)
        ("badint", row(id="badint", isl="12x"), "isl: '12x' is not a positive integer"),
        ("badmetric", row(id="badmetric", metric="tok"),
         "metric: 'tok' is not one of output_tokens_per_s, output_tokens_per_s_per_gpu, ttft_ms, "
         "tpot_ms"),
        ("badvalue", row(id="badvalue", value="0"),
         "value: '0' is not a number from 1e-06 to 1e+15"),
        ("badengine", row(id="badengine", engine="tgi"),
         "engine: 'tgi' is not one of generic, vllm, sglang, trtllm (or empty)"),
        ("badquant", row(id="badquant", gemm_quant="int3", moe_quant="int3"),
         f"gemm_quant: 'int3' is not a weight format lts knows {formats}; did you mean int8?"),
        ("refused", row(id="refused", precision="int8_wo"),
         "precision: 'int8_wo' is int8 weights with bf16 activations (W8A16), not a format "
         f"lts costs {formats}"),
        ("twoquants", row(id="twoquants", gemm_quant="fp8", moe_quant="nvfp4"),
         "gemm_quant 'fp8' and moe_quant 'nvfp4' differ: lts costs one format for the quantized "
         "weights"),
        ("badarrival", row(id="badarrival", arrival="poisson"),
         "arrival: 'poisson' is not one of burst (or empty)"),
        ("halflayout", row(id="halflayout", attention_tp=1),
         "attention_dp: empty, but attention_tp is given (the layout is all of attention_tp, "
         "attention_dp, moe_tp, moe_ep or none)"),
        ("ok", row(metric="tpot_ms"), "id: 'ok' is also row 1 (each row needs its own id)"),
        ("", row(id=""), "id: '' is empty: expected a row identifier"),
        ("short", "short,llama3.1-8b,h100_dgx,1",
         f"has 4 fields: expected {len(cols)}, one per column of the header"),
        ("'a\\x07b'", row(id="a\x07b"),
         "id: 'a\\x07b' contains control or bidirectional formatting characters (expected "
         "plain text)"),
        ("nomodel", row(id="nomodel", model="gpt-5"),
         "model 'gpt-5' is not shipped, nor a file or folder (relative paths resolve against "
         f"{tmp_path.resolve()})"),
        ("badstrategy", row(id="badstrategy", strategy="tp=two"),
         "strategy: 'tp=two': tp='two' is not a positive integer"),
    ]
    lines = [",".join(cols), row()] + [line for _, line, _ in bad] + \
        [row(id="ok2", metric="tpot_ms", value=10)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    r = run("validate", path, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [row_["id"] for row_ in d["rows"]] == ["ok", "ok2"] and d["total"] == len(bad) + 2
    assert [(s["id"], s["row"], s["reason"]) for s in d["skipped"]] == \
        [(i, n, why) for n, (i, _, why) in enumerate(bad, 2)]
    table = run("validate", path, "--no-color")
    assert table.exit_code == 0 and f"Skipped: {len(bad)} rows" in table.output


def test_validate_missing_column(tmp_path):
    path = write(tmp_path, "id,model,topology\na,llama3.1-8b,h100_dgx\n")
    r = run("validate", path)
    assert r.exit_code == 1 and r.output.startswith(f"Error: {path}: header: gpus: missing column")


@pytest.fixture(scope="module")
def calibration_json():
    """``lts validate calibration.csv --json``, run once for the tests below (~10 s)."""
    r = run("validate", str(CALIBRATION), "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_validate_calibration_file(calibration_json):
    d = calibration_json
    ids = [row["id"] for row in d["rows"]] + [s["id"] for s in d["skipped"]]
    assert len(ids) == d["total"] > 0 and len(set(ids)) == len(ids)
    assert all(s["reason"] for s in d["skipped"])
    s = d["summary"]
    print(f"\ncalibration: {s['count']} predicted, {len(d['skipped'])} skipped, median |log2| "
          f"{s['median_abs_log2_ratio']:.3f}, within 2x {s['within_2x']:.1%}, Spearman mean "
          f"{s['spearman_by_group']['mean']}, per GPU {s['spearman_by_group']['mean_per_gpu']}")


def test_calibration_accuracy_train_and_held_out(calibration_json):
    """The topologies hold their accuracy on the calibration set, on both halves of the split
    docs/validation.md describes: the (isl, osl) pairs at even positions in sorted order ("train")
    and at odd positions ("held-out"). One constant, ``collective_efficiency``, was fitted on the
    training half (scripts/calibrate.py); every other constant comes from hardware.md or
    microbenchmarks.csv. These TensorRT-LLM v0.14 rows take the trtllm engine profile (their
    source names TensorRT-LLM), so their GEMMs, MoE layers, attention and all-reduces read the
    measured kernels of TensorRT-LLM 1.x (docs/kernels.md: the tables hold no 0.x release).
    Measured with the closed loop (train / held-out): median |log2| 0.223 / 0.168 (by the
    roofline alone 0.181 / 0.177), within 2x 99.4% / 100%, Spearman per group 1.00 / 1.00
    (whole-instance tokens/s, the metric measured) and 0.87 / 0.83 per GPU, mean log2 0.165 /
    0.106 (predicted a little fast: 1.x kernels are faster than v0.14's). The thresholds sit a
    little outside (and inside the targets: >= 97% within 2x, per-GPU Spearman >= 0.8), so a
    regression fails here."""
    from lts.serving.validate import summarize
    d = calibration_json        # the command's JSON rows: what validate() returns, as written
    assert not d["skipped"] and d["summary"]["count"] == d["total"]
    pairs = sorted({(r["isl"], r["osl"]) for r in d["rows"]})
    train_pairs = set(pairs[0::2])
    train = [r for r in d["rows"] if (r["isl"], r["osl"]) in train_pairs]
    held = [r for r in d["rows"] if (r["isl"], r["osl"]) not in train_pairs]
    assert len(train) == 165 and len(held) == 135
    for name, rows in (("train", train), ("held-out", held), ("all", d["rows"])):
        s = summarize(rows)
        assert s["median_abs_log2_ratio"] <= 0.24, (name, s["median_abs_log2_ratio"])
        assert s["within_2x"] >= 0.97, (name, s["within_2x"])
        assert s["spearman_by_group"]["mean"] >= 0.95, (name, s["spearman_by_group"]["mean"])
        assert s["spearman_by_group"]["mean_per_gpu"] >= 0.8, (name, s["spearman_by_group"])
        mean_log2 = float(np.mean([r["log2_ratio"] for r in rows]))
        assert abs(mean_log2) <= 0.18, (name, mean_log2)


def test_serving_calibration_accuracy_train_and_held_out():
    """The closed-loop model on the measured TTFT/TPOT points (serving_calibration.csv: Qwen3-32B
    on 1-8 H100, TensorRT-LLM 1.0, vLLM 0.12, SGLang 0.5, fixed concurrency), on both halves of
    the same (isl, osl) split. Fitted on the training half (scripts/calibrate.py): the cohort
    constants of vLLM and TensorRT-LLM and the engines' time per step. Measured (train /
    held-out), the measured kernels read: TTFT within 2x 97.0% / 94.4%, TPOT 100% / 99.2%,
    median |log2| 0.114 / 0.129 (by the roofline alone 97.4% / 94.4%, 100% / 99.2%, 0.127 /
    0.143; docs/validation.md); the issue's bar is TTFT >= 80%, TPOT >= 95%, median <= 0.3 on the
    held-out half. The thresholds sit a little outside the measured figures."""
    from lts.serving.validate import summarize, validate
    d = validate(SERVING)
    assert not d["skipped"] and d["summary"]["count"] == d["total"] == 714
    # the profile by the version in source ("vllm 0.12.0"): the release fitted on this file
    assert {r["profile"] for r in d["rows"] if r["engine"] == "vllm"} == {"0.12"}
    assert {r["engine"] for r in d["rows"]} == {"trtllm", "vllm", "sglang"}
    pairs = sorted({(r["isl"], r["osl"]) for r in d["rows"]})
    train_pairs = set(pairs[0::2])
    train = [r for r in d["rows"] if (r["isl"], r["osl"]) in train_pairs]
    held = [r for r in d["rows"] if (r["isl"], r["osl"]) not in train_pairs]
    assert len(train) == 466 and len(held) == 248
    for name, rows in (("train", train), ("held-out", held)):
        s = summarize(rows)
        assert s["median_abs_log2_ratio"] <= 0.2, (name, s["median_abs_log2_ratio"])
        assert s["by_metric"]["ttft_ms"]["within_2x"] >= 0.9, (name, s["by_metric"]["ttft_ms"])
        assert s["by_metric"]["tpot_ms"]["within_2x"] >= 0.97, (name, s["by_metric"]["tpot_ms"])
        assert s["spearman_by_group"]["mean"] >= 0.9, (name, s["spearman_by_group"]["mean"])


MOE = DATA / "serving_moe.csv"


def test_serving_moe_held_out_floor():
    """serving_moe.csv (two MoE models, H100-B300, vLLM 0.15-0.19 and TensorRT-LLM 1.2-1.3) is
    held out: no constant is fitted to it. Every row is predicted, the 74 TensorRT-LLM rows of
    attention tp over experts split both by tensor and by expert (moe tp 2 x ep 2, 4 x 4,
    8 x 8) at lts's etp (engines.space.from_layout). One constant is fitted on part of it, split by model: vLLM
    0.15's time per request on gpt-oss-120b's vLLM rows; MiniMax-M2.5's rows are held out from
    that fit. The floor guards what lts reaches today (docs/validation.md: within 2x 93.2%,
    TTFT 87.6%, TPOT 98.7%, MiniMax-M2.5 93.1%, with the measured kernels read; by the roofline
    alone 90.4%, 82.4%, 98.4%, 90.8%); issue 23's bar (TTFT >= 90%, TPOT >= 97%, median <= 0.25
    on the held-out model) is not met yet for TTFT. Rows take the profile of their engine_version
    (vLLM 0.15 for 0.15.1-0.19 and the nightlies)."""
    from lts.serving.validate import validate
    d = validate(MOE)
    assert d["total"] == d["summary"]["count"] == 1916 and not d["skipped"]
    assert sum(r["etp"] > 1 for r in d["rows"]) == 74
    s = d["summary"]
    assert set(s["by_model"]) == {"gpt-oss-120b", "minimax-m2.5"}
    assert s["within_2x"] >= 0.9, s["within_2x"]
    assert s["by_metric"]["ttft_ms"]["within_2x"] >= 0.84, s["by_metric"]["ttft_ms"]
    assert s["by_metric"]["tpot_ms"]["within_2x"] >= 0.95, s["by_metric"]["tpot_ms"]
    vllm = {r["profile"] for r in d["rows"] if r["engine"] == "vllm"}
    assert vllm == {"0.12", "0.15"}        # 0.11.2 rows: the oldest release lts models
    # the held-out model of the fit: MiniMax-M2.5's vLLM rows
    held = [r for r in d["rows"] if r["model"] == "minimax-m2.5"]
    assert np.mean([abs(r["log2_ratio"]) <= 1 for r in held]) >= 0.9


def test_validate_engine_cells_take_the_profile_names_and_their_spellings(tmp_path):
    lines = [HEADER + ",engine"]
    for i, eng in enumerate(("vllm", "VLLM", "TensorRT-LLM", "", "sglang")):
        lines.append(f"r{i},llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,a vLLM run,{eng}")
    r = run("validate", write(tmp_path, "\n".join(lines) + "\n"), "--json")
    assert r.exit_code == 0, r.output
    # an empty cell falls back to the engine the source names
    assert [row["engine"] for row in json.loads(r.output)["rows"]] == \
        ["vllm", "vllm", "trtllm", "vllm", "sglang"]


def test_an_engine_on_another_vendors_gpu_is_skipped_and_not_fitted(tmp_path):
    """What estimate and search refuse (TensorRT-LLM on an AMD GPU), validate skips with the
    same sentence and calibrate refuses: rows of serving_moe.csv moved onto MI300X."""
    import csv
    with open(MOE, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["engine"] == "trtllm"][:2]
    for r in rows:
        r["topology"] = "mi300x_x8"
    path = tmp_path / "amd.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    why = ("TensorRT-LLM does not run on AMD Instinct MI300X 192GB (mi300x_x8, gpu.vendor = "
           "amd); it runs on nvidia GPUs only")
    r = run("validate", str(path), "--json")
    d = json.loads(r.stdout)
    assert [s["reason"] for s in d["skipped"]] == [why, why] and d["rows"] == []
    r = run("calibrate", str(path), "-o", str(tmp_path / "fit.toml"))
    assert r.exit_code == 1 and why in r.output and not (tmp_path / "fit.toml").exists()
    r = run("estimate", "gpt-oss-120b", "mi300x_x8", "--phase", "serve", "--engine", "trtllm",
            "--strategy", "tp=1")
    assert r.exit_code == 1 and r.output.strip() == f"Error: --engine trtllm: {why}"


def test_validate_predicts_within_its_bound(tmp_path, monkeypatch):
    """Closed-loop groups count too (validate.work_s): a file of rows each its own group (a
    distinct isl) is predicted up to WORK_S, the groups past it skipped with the reason."""
    from lts.serving import validate as v
    rows = list(csv.DictReader(open(DATA / "serving_calibration.csv", newline="")))
    one = [r for r in rows if r["concurrency"]][0]
    path = tmp_path / "m.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(one))
        w.writeheader()
        w.writerows([dict(one, id=f"r{i}", isl=str(500 + i)) for i in range(6)])
    assert v.validate(path, work_only=True) == pytest.approx(6 * (v.GROUP_S + v.ROW_S))
    whole = v.validate(path)
    assert len(whole["rows"]) == 6
    monkeypatch.setattr(v, "WORK_S", 6 * v.ROW_S + 2.5 * v.GROUP_S)
    part = v.validate(path)
    assert [r["id"] for r in part["rows"]] == ["r0", "r1"]
    assert [r["predicted"] for r in part["rows"]] == [r["predicted"] for r in whole["rows"][:2]]
    assert [s["reason"] for s in part["skipped"]] == 4 * [
        "past lts validate's bound of 0 s of predictions a file (docs/limits.md): split the file"]


def test_a_file_over_the_row_limit_is_refused(tmp_path, monkeypatch):
    from lts.serving import validate as v
    text = (DATA / "serving_calibration.csv").read_text()
    n = len(text.splitlines()) - 1
    monkeypatch.setattr(v, "MAX_ROWS", n)
    assert len(v.read_measurements(DATA / "serving_calibration.csv")[0]) == n
    (tmp_path / "m.csv").write_text(text + text.splitlines()[1].replace(",", "x,", 1) + "\n")
    with pytest.raises(v.SpecError, match=rf"m.csv: over {n:,} rows \(docs/limits.md\): split "
                                          "the file"):
        v.read_measurements(tmp_path / "m.csv")
