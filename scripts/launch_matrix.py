"""Emit every shipped model on every engine, and check what comes out (issue 35's count).

For each shipped model x engine (vLLM, SGLang, TensorRT-LLM) this runs
``lts search MODEL TOPOLOGY --gpus G --phase serve --emit ENGINE --json`` (one pool and two
pools), again with speculative decoding (``--spec mtp`` where the model has MTP layers, else an
EAGLE-3 head), and once per deployment-file format (slurm, k8s-lws, dynamo); then checks

- every flag and YAML key against the engine release's own argument list
  (tests/data/engine_flags/, tests/test_engine_flags.py),
- every command through bash (tests/shell_run.py: parsed, split, run with the programs
  replaced by ones printing their arguments, the user's variables set),
- every Slurm script with ``bash -n``, every manifest against its project's schema
  (tests/schema.py, tests/data/schemas/),

and prints the counts and each failure. Usage:

    python scripts/launch_matrix.py [--topology h200_dgx] [--gpus 16] [--jobs 2]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lts.engines import REAL_ENGINES  # noqa: E402
from lts.specs import load_model, shipped_names  # noqa: E402

SEARCH = ("--phase", "serve", "--method", "random", "--budget", "100")
FORMATS = ("slurm", "k8s-lws", "dynamo")


def _run(args: list) -> tuple:
    r = subprocess.run([sys.executable, str(ROOT / "lts.py"), *args], capture_output=True,
                       text=True)
    return r.returncode, r.stdout, r.stderr


def one(job: tuple) -> dict:
    """Run and check one search (model, engine, mode, format)."""
    from shell_run import check
    from test_engine_flags import unknown_flags
    model, engine, mode, fmt, topo, gpus = job
    args = [model, topo, "--gpus", str(gpus), *SEARCH, "--emit", engine, "--json"]
    if mode == "spec":
        args += (["--spec", "mtp"] if load_model(model).mtp_layers else
                 ["--spec", "eagle", "--acceptance", "0.7"])
    if fmt:
        args += ["--emit-format", fmt]
    rc, out, err = _run(["search", *args])
    while rc == 1 and "no feasible strategy" in err and gpus < 128:   # a model too large for
        gpus *= 2                                                     # the budget: more GPUs
        args[args.index("--gpus") + 1] = str(gpus)
        rc, out, err = _run(["search", *args])
    res = {"job": job, "commands": 0, "files": 0, "problems": [], "refused": [], "gpus": gpus}
    if rc == 1 and fmt and "--emit-format" in err:      # a format that cannot express it says so
        res["refused"].append(err.strip().splitlines()[-1])
        return res
    if rc != 0:
        res["problems"].append(f"exit {rc}: {(err or out).strip().splitlines()[-1:]}")
        return res
    d = json.loads(out)
    for key in ("emit", "emit_disagg"):
        for c in d.get(key, {}).get("commands", []):
            res["commands"] += 1
            res["problems"] += [f"{key}: {p}" for p in check(c["command"])]
            res["problems"] += [f"{key}: unknown flag {f}" for f in unknown_flags(c["command"])]
    res["pools"] = sorted(k for k in ("emit", "emit_disagg") if d.get(k, {}).get("commands"))
    for f in d.get("deployment_files", []):
        res["files"] += 1
        res["problems"] += [f"{f['format']} {f['deployment']}: {p}" for p in check_file(f)]
    return res


def check_file(f: dict) -> list:
    """Problems of one deployment file: a batch script bash parses, manifests valid against
    their schemas."""
    if f["format"] in ("slurm", "shell"):
        r = subprocess.run(["bash", "-n"], input=f["content"], capture_output=True, text=True)
        return [] if r.returncode == 0 else [f"bash -n: {r.stderr.strip()}"]
    import yaml
    from schema import validate_manifest
    out = []
    for doc in yaml.safe_load_all(f["content"]):
        if doc["apiVersion"] in ("v1", "apps/v1"):       # Service, Deployment: core kinds
            continue
        out += [f"{doc['kind']}: {e}" for e in validate_manifest(doc)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="h200_dgx")
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--models", default="", help="comma-separated (default: every shipped)")
    ap.add_argument("--formats", default=",".join(FORMATS),
                    help="deployment-file formats to write (comma-separated; '' for none)")
    a = ap.parse_args()
    models = a.models.split(",") if a.models else shipped_names("models")
    jobs = [(m, e, mode, None, a.topology, a.gpus) for m in models for e in REAL_ENGINES
            for mode in ("plain", "spec")]
    jobs += [(m, e, "plain", fmt, a.topology, a.gpus) for m in models for e in REAL_ENGINES
             for fmt in a.formats.split(",") if fmt]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = list(pool.map(one, jobs))
    cmds = sum(r["commands"] for r in results)
    files = sum(r["files"] for r in results)
    bad = [r for r in results if r["problems"]]
    runs = {(r["job"][0], r["job"][1], r["job"][2]): r for r in results if r["job"][3] is None}
    two = sum(1 for r in runs.values() if "emit_disagg" in r.get("pools", []))
    print(f"{len(models)} models x {len(REAL_ENGINES)} engines x (one pool + two pools, "
          f"speculative decoding) = {len(runs)} searches ({two} with a two-pool deployment), "
          f"{cmds:,} commands; {len(jobs) - len(runs)} searches writing {files} deployment files "
          f"({a.formats}) on {a.topology} --gpus {a.gpus}")
    more = sorted({(r["job"][0], r["gpus"]) for r in results if r.get("gpus", a.gpus) > a.gpus})
    if more:
        print("more GPUs where the model does not fit --gpus: " +
              ", ".join(f"{m} {g}" for m, g in more))
    refused = [r for r in results if r["refused"]]
    print(f"refused with a one-line reason (the format cannot express the deployment): "
          f"{len(refused)}")
    for r in refused:
        print("  ", " ".join(str(x) for x in r["job"][:4] if x), "->", r["refused"][0][:200])
    print(f"problems: {sum(len(r['problems']) for r in bad)} in {len(bad)} of {len(jobs)} runs")
    for r in bad:
        print(" ", " ".join(str(x) for x in r["job"][:4] if x), "->")
        for p in r["problems"][:5]:
            print("     ", p[:300])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
