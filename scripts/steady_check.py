"""Whether the simulator could replace the analytic loop's fitted cohort law: each point of
serving_calibration.csv (Qwen3-32B on H100, three engines; how the runs were made is not
recorded) simulated as a benchmark run and compared with the measurement, beside the analytic
loop's prediction (lts validate's).

    python scripts/steady_check.py [--range-ratio R] [--skip W] [--prompts P]

Each run: (W + P) x C requests created at once behind C in flight, lengths over [R L, L]; the
first W x C requests (the burst and its first waves) are left out of the means. The figures are
docs/validation.md's ("The cohort law, under the simulation").
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.engines import ENGINES                                   # noqa: E402
from lts.serving.simulate import Load, prepare, run              # noqa: E402
from lts.serving.validate import _model_for, read_measurements, validate   # noqa: E402
from lts.specs import load_model, load_topology                  # noqa: E402
from lts.specs.strategy import make_row                      # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "serving_calibration.csv"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--range-ratio", type=float, default=1.0)
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--file", default=str(DATA))
    a = ap.parse_args()
    analytic = {r["id"]: r["predicted"] for r in validate(a.file)["rows"]}
    groups = {}
    for m in read_measurements(a.file)[0]:
        key = (m.model, m.topology, m.precision, m.engine, m.engine_version, m.tp, m.isl, m.osl)
        groups.setdefault(key, []).append(m)
    out = []
    for (model, topo, prec, eng, ver, tp, isl, osl), ms in groups.items():
        spec, t = _model_for(load_model(model), prec, ""), load_topology(topo)
        e = ENGINES[eng]
        prof = e.profiles[e.release_for(ver)].for_gpu(t)
        loads = {c: Load(isl=isl, osl=osl, num_prompts=(a.skip + a.prompts) * c,
                         max_concurrency=c, range_ratio=a.range_ratio)
                 for c in sorted({m.concurrency for m in ms})}
        dep = prepare(spec, t, make_row(tp=tp), prof, list(loads.values()))
        for c, load in loads.items():
            r = run(dep, load)
            keep = np.arange(len(r.sent)) >= a.skip * c
            more = keep & (r.osl > 1)
            sim = {"ttft_ms": r.ttft[keep].mean() * 1e3,
                   "tpot_ms": ((r.finish[more] - r.first[more]) / (r.osl[more] - 1)).mean() * 1e3}
            for m in ms:
                if m.concurrency == c and m.id in analytic:
                    out.append((m.metric, eng, math.log2(sim[m.metric] / m.value),
                                math.log2(analytic[m.id] / m.value)))
    print(f"range ratio {a.range_ratio}, {a.skip} x C left out, {a.prompts} x C kept")
    for metric in ("ttft_ms", "tpot_ms"):
        for eng in ("vllm", "sglang", "trtllm", "all"):
            sel = [x for x in out if x[0] == metric and eng in ("all", x[1])]
            if sel:
                s, an = np.array([x[2] for x in sel]), np.array([x[3] for x in sel])
                print(f"{metric} {eng:7} {len(sel):4} rows: within 2x simulated "
                      f"{100 * np.mean(np.abs(s) <= 1):5.1f}%, analytic "
                      f"{100 * np.mean(np.abs(an) <= 1):5.1f}%; median log2 simulated "
                      f"{np.median(s):+.2f}, analytic {np.median(an):+.2f}")


if __name__ == "__main__":
    main()
