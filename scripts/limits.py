"""Hard inputs and the time and memory bounds of lts, measured (never by a timed test).

    python scripts/limits.py              # the hard-input cases: exit status and message line
    python scripts/limits.py --bounds     # + each method and phase at its largest budget on
                                          #   moe1.6t h100_dgx, and the large validates (~8 min)
    python scripts/limits.py --serve      # only the exact serve search of every shipped serve
                                          #   problem, start-up included (~2 min)

Each case runs `python lts.py ...` in a child process from the checkout; the peak memory is the
child's maximum resident set size (getrusage, read by a probe process per run). The files the cases need (a one-node cluster, a
config.json with 1e30 layers, TOML nested 5000 deep, a byte-order mark, a 3-GPU link span, a model
name with terminal escapes, a 100,000-row measurement file) are written to a temporary folder.
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def write_files(d: Path) -> dict:
    topo = (ROOT / "topologies" / "h100_dgx.toml").read_text(encoding="utf-8")
    model = (ROOT / "models" / "llama3.1-8b.toml").read_text(encoding="utf-8")
    files = {
        "one_node": re.sub(r"^count = 3072.*$", "count = 1", topo, flags=re.M),
        "bom": "\ufeff" + topo,
        "span3": topo.replace("span_gpus = 8 ", "span_gpus = 3 ", 1),
        "huge_layers": re.sub(r"^layers = \d+", "layers = 9223372036854775807", model, flags=re.M),
        "escape": re.sub(r'^name = ".*?"', lambda _: 'name = "evil\\u001b[31mRED\\u001b[0m"',
                         model, flags=re.M),
        "deep": "a = " + "[" * 5000 + "]" * 5000 + "\n",
    }
    out = {}
    for name, text in files.items():
        out[name] = d / f"{name}.toml"
        out[name].write_text(text, encoding="utf-8")
    cfg = json.loads((ROOT / "tests" / "data" / "hf" / "mixtral-8x7b.json").read_text())
    cfg["num_hidden_layers"] = 1e30
    out["huge_json"] = d / "huge.json"
    out["huge_json"].write_text(json.dumps(cfg))
    out["deep_json"] = d / "deep.json"
    out["deep_json"].write_text('{"a":' * 5000 + "1" + "}" * 5000)
    return out


def big_csv(d: Path, n: int = 100_000) -> Path:
    """The serving measurements repeated at random concurrencies, n rows."""
    rows = list(csv.DictReader(open(SHARED / "serving_calibration.csv", newline="")))
    rng = random.Random(0)
    path = d / "big.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for i in range(n):
            r = dict(rows[i % len(rows)], id=f"r{i}", concurrency=str(rng.randint(1, 300)))
            w.writerow(r)
    return path


PROBE = ("import resource, subprocess, sys, json; "
         "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
         "print(json.dumps([p.returncode, p.stdout[-20000:], p.stderr[-20000:], "
         "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")


def run(args):
    """(exit status, the Error line or last output line, wall s, peak RSS MiB) of `lts ARGS`,
    run under a fresh probe process so that the peak is this run's alone."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PROBE, sys.executable, str(ROOT / "lts.py"), *args],
                       capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    rc, out, err, peak_kib = json.loads(p.stdout)
    lines = [x for x in (out + err).splitlines() if x.strip()]
    last = next((x for x in lines if x.startswith("Error:")), lines[-1] if lines else "")
    if "Traceback" in out + err:
        last = "TRACEBACK: " + last
    return rc, last, wall, peak_kib / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bounds", action="store_true", help="also measure the large runs")
    ap.add_argument("--serve", action="store_true",
                    help="only the exact serve search of every shipped serve problem")
    a = ap.parse_args()
    if a.serve:
        return serve_times()
    d = Path(tempfile.mkdtemp(prefix="lts-limits-"))
    f = write_files(d)
    cases = [
        ["search", "llama3.1-405b", str(f["one_node"]), "--gpus", "64", "--method", "exact"],
        ["search", "llama3.1-8b", "h100_dgx", "--gpus", "100000000", "--method", "megatron"],
        ["search", "mixtral-8x7b", "h100_dgx", "--gpus", "8", "--method", "random",
         "--budget", "1000000000"],
        ["search", "mixtral-8x7b", "h100_dgx", "--gpus", "8", "--budget", str(2**62)],
        ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--tpot-slo-ms", "nan"],
        ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase", "prefill",
         "--ttft-slo-ms", "nan"],
        ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--tpot-slo-ms", "inf", "--json",
         "--method", "megatron"],
        ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--seed", "-1"],
        ["estimate", str(f["huge_json"]), "h100_dgx", "--strategy", "tp=1"],
        ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=1180591620717411303424"],
        ["estimate", str(f["huge_layers"]), "h100_dgx", "--strategy", "tp=1"],
        ["estimate", str(f["deep"]), "h100_dgx", "--strategy", "tp=1"],
        ["estimate", str(f["deep_json"]), "h100_dgx", "--strategy", "tp=1"],
        ["estimate", "llama3.1-8b", str(f["bom"]), "--strategy", "tp=1", "--json"],
        ["estimate", "llama3.1-8b", str(f["span3"]), "--strategy", "tp=1"],
        ["estimate", str(f["escape"]), "h100_dgx", "--strategy", "tp=1"],
        ["estimate", "moe1.6t", "h100_dgx", "--strategy", "tp=8,ep=16,pp=4,batch=64"],
        ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=x"],
        # round two (issue 26)
        ["search", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--request-rate", "nan"],
        ["search", "llama3.1-8b", "h100_dgx", "--phase", "decode", "--ttft-slo-ms", "100"],
        ["estimate", "llama3.1-8b", "h100_dgx", "--phase", "prefill", "--tpot-slo-ms", "100",
         "--strategy", "tp=1"],
        ["search", "a" * 300, "h100_dgx"],
        ["search", "moe1.6t", "h100_dgx", "--phase", "serve", "--method", "anneal", "--budget",
         "100000"],
    ]
    for args in cases:
        rc, last, _, _ = run(args)
        shown = " ".join(x if len(x) < 40 else "…" + x[-30:] for x in args)
        print(f"[exit {rc}] lts {shown}\n          {last[:160]}")
    if not a.bounds:
        return
    print("\nbounds (wall s, peak RSS MiB):")
    sys.path.insert(0, str(ROOT))
    from lts.search.names import MAX_BUDGET
    bounds = [["search", "moe1.6t", "h100_dgx", "--phase", phase, "--method", method,
               "--budget", str(top[phase]), "--json"]
              for method, top in MAX_BUDGET.items() for phase in ("decode", "prefill", "serve")]
    # the slowest serve calls: speculative decoding and prefix caching on a MoE model
    bounds += [["search", "deepseek-v3", "h100_dgx", "--phase", "serve", "--method", method,
                "--budget", str(MAX_BUDGET[method]["serve"]), "--spec", "mtp", "--prefix-hit",
                "0.5", "--json"] for method in ("anneal", "ppo-paper")]
    if SHARED.exists():
        big = str(big_csv(d))
        bounds += [["validate", big], ["validate", big, "--json"]]
    for args in bounds:
        rc, _, wall, peak = run(args)
        shown = " ".join(x if len(x) < 40 else "…" + x[-20:] for x in args)
        print(f"  [exit {rc}] lts {shown}: {wall:.1f} s, {peak:.0f} MiB")


def serve_times():
    """Wall time (start-up included) and peak RSS of ``lts search --phase serve`` (the exact
    serve search, then the two-pool comparison and the report) on every serve problem of
    scripts/benchmark.py, the whole-cluster ones and DeepSeek-V3 on a GB200 NVL72 rack."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from golden import commands
    problems = [v for v in commands().values()
                if v[0] == "search" and "serve" in v and "--method" not in v]
    problems += [["search", "moe1.6t", "h100_dgx", "--phase", "serve"],
                 ["search", "moe1.6t", "h100_dgx", "--phase", "serve", "--ttft-slo-ms", "2000",
                  "--tpot-slo-ms", "50"],
                 ["search", "deepseek-v3", "gb200_nvl72", "--phase", "serve", "--gpus", "72",
                  "--engine", "sglang"]]
    walls = []
    for args in problems:
        rc, _, wall, peak = run(args + ["--json"])
        walls.append(wall)
        print(f"  [exit {rc}] {wall:5.1f} s {peak:5.0f} MiB  lts {' '.join(args[1:])}")
    print(f"{len(walls)} problems: median {np.median(walls):.1f} s, slowest {max(walls):.1f} s")


if __name__ == "__main__":
    main()
