"""Your own cluster (issue 25): measurement files naming model and topology files or config
folders, resolved against the CSV's folder; a file where no row can be predicted fails."""
import json
import shutil
from pathlib import Path

from test_validate import run

ROOT = Path(__file__).resolve().parents[1]
HEADER = "id,model,topology,gpus,tp,ep,pp,precision,isl,osl,concurrency,metric,value,source"


def test_rows_name_files_and_config_folders_relative_to_the_csv(tmp_path):
    (tmp_path / "models").mkdir()
    shutil.copy(ROOT / "models" / "llama3.1-8b.toml", tmp_path / "models" / "mine.toml")
    shutil.copy(ROOT / "topologies" / "h100_dgx.toml", tmp_path / "cluster.toml")
    folder = tmp_path / "hf-llama"
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "hf" / "llama3.1-70b.json", folder / "config.json")
    rows = [HEADER,
            "a,models/mine.toml,cluster.toml,1,1,1,1,,1024,128,8,ttft_ms,100,vllm 0.12",
            "b,hf-llama,h100_dgx,4,4,1,1,,1024,128,8,ttft_ms,100,vllm 0.12",
            "f,llama3.1-70b,h100_dgx,4,4,1,1,,1024,128,8,ttft_ms,100,vllm 0.12",
            "c,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,vllm 0.12",
            "d,missing.toml,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,vllm 0.12",
            "e,llama3.1-8b,cluster.toml,1,1,1,1,,1024,128,8,ttft_ms,100,vllm 0.12"]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    r = run("validate", str(tmp_path / "m.csv"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    got = {row["id"]: row["predicted"] for row in d["rows"]}
    assert set(got) == {"a", "b", "c", "e", "f"}
    # the same model and cluster, named three ways: the same prediction
    assert got["a"] == got["c"] == got["e"]
    assert abs(got["b"] / got["f"] - 1) < 0.02      # its config.json: the shipped model's shapes
    (skip,) = d["skipped"]
    assert skip["id"] == "d" and skip["reason"] == (
        f"model 'missing.toml' is not shipped, nor a file or folder (relative paths resolve "
        f"against {tmp_path.resolve()})")


def test_a_file_no_row_of_which_can_be_predicted_fails(tmp_path):
    rows = [HEADER, "a,nosuch,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,x",
            "b,llama3.1-8b,bad.toml,1,1,1,1,,1024,128,8,ttft_ms,100,x"]
    (tmp_path / "bad.toml").write_text("name = 3\n")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    r = run("validate", str(tmp_path / "m.csv"))
    assert r.exit_code == 1
    assert "no row of" in r.output and "could be predicted (2 skipped; row 1: model 'nosuch'" \
        in " ".join(r.output.split())
    r = run("validate", str(tmp_path / "m.csv"), "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["rows"] == []   # the reasons, in JSON
    r = run("validate", str(tmp_path / "m.csv"))
    assert r.stdout == ""                             # no empty table: the one line says why
    (tmp_path / "one.csv").write_text("\n".join(rows[:1] + rows[2:] + [
        "c,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,x"]) + "\n")
    d = json.loads(run("validate", str(tmp_path / "one.csv"), "--json").stdout)
    assert d["skipped"][0]["reason"].startswith("topology 'bad.toml': ")


def test_duplicate_ids_are_skipped_and_empty_files_refused(tmp_path):
    rows = [HEADER, "a,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,ttft_ms,100,x",
            "a,llama3.1-8b,h100_dgx,1,1,1,1,,1024,128,8,tpot_ms,10,x"]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    r = run("validate", str(tmp_path / "m.csv"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [row["metric"] for row in d["rows"]] == ["ttft_ms"]       # row 1 is predicted
    assert [(s["row"], s["reason"]) for s in d["skipped"]] == [
        (2, "id: 'a' is also row 1 (each row needs its own id)")]
    (tmp_path / "h.csv").write_text(HEADER + "\n")
    r = run("validate", str(tmp_path / "h.csv"))
    assert r.exit_code == 1 and "holds no rows (only a header)" in r.output
