"""Within-2x shares of `lts validate --json` outputs, per metric, engine and concurrency band,
side by side (the figures of docs/simulate.md and the closing notes).

    python scripts/predictions.py BEFORE.json AFTER.json [--model minimax-m2.5]

BEFORE and AFTER are `lts validate FILE --json` outputs (e.g. with and without --steady).
"""
import argparse
import json
from collections import defaultdict


def shares(path, model):
    rows = json.load(open(path))["rows"]
    out = defaultdict(list)
    for r in rows:
        if model and r["model"] != model:
            continue
        c = r["concurrency"] or 0
        band = "C>=128" if c >= 128 else "C<128"
        ok = abs(r["log2_ratio"]) <= 1.0
        for key in ((r["metric"], "all", "all"), (r["metric"], r["engine"], "all"),
                    (r["metric"], "all", band), (r["metric"], r["engine"], band)):
            out[key].append(ok)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--model", default="")
    a = ap.parse_args()
    b, f = shares(a.before, a.model), shares(a.after, a.model)
    print(f"{'metric':9} {'engine':8} {'band':7} {'rows':>5} {'before':>7} {'after':>7}")
    for key in sorted(set(b) | set(f)):
        nb, nf = b.get(key, []), f.get(key, [])
        pb = f"{100 * sum(nb) / len(nb):6.1f}%" if nb else "      -"
        pf = f"{100 * sum(nf) / len(nf):6.1f}%" if nf else "      -"
        print(f"{key[0]:9} {key[1]:8} {key[2]:7} {len(nf):5d} {pb} {pf}")


if __name__ == "__main__":
    main()
