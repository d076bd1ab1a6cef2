"""Turn the measured kernel timings of ``shared/data/kernels`` into the compact tables lts ships
(``lts/kernels/<gpu>.npz``, read with NumPy alone by ``lts.cost.kernels``).

    python scripts/kernel_tables.py [../shared/data/kernels] [--out lts/kernels]

A maintainer's tool: the source tables are parquet, which needs ``pyarrow`` (``pip install
pyarrow``); lts does not. The source is the performance tables of the ``aiconfigurator-core``
0.12.0 package (PyPI, Apache-2.0, NVIDIA), one file per GPU, op, engine and release (its
README). What is kept, and how, is ``lts.cost.kernel_build``'s docstring.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lts.cost import kernel_build as kb     # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default="../shared/data/kernels")
    ap.add_argument("--out", default="lts/kernels")
    a = ap.parse_args()
    src, out = Path(a.src), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    # b60 (Intel Arc, oneCCL) is left out: no topology of lts has that GPU
    for gdir in sorted(p for p in src.iterdir()
                       if p.is_dir() and p.name not in ("systems", "b60")):
        arrays, notes = kb.build(src, gdir.name)
        for line in notes:
            print("  " + line)
        if not arrays:
            continue
        path = out / f"{gdir.name}.npz"
        np.savez_compressed(path, **arrays)
        size = path.stat().st_size
        total += size
        print(f"{path}: {len(arrays)} arrays, {size / 1e6:.2f} MB, "
              + ", ".join(f"{k} {len(v)}" for k, v in
                          sorted(json.loads(str(arrays["sources"])).items())))
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
