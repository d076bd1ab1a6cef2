"""What the measured-kernel tables cover (``lts kernels``): per GPU, the engines, releases,
op classes, formats and shapes they hold; for a model on a topology under an engine release,
which of its ops are costed from them and which by the roofline."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from . import kernels
from .layouts import SLOTS
from .tables import build_tables
from ..specs import ModelSpec, TopologySpec
from ..specs.workload import Workload


def gpu_rows(data_dir=None) -> list:
    """One row per (GPU, op class, engine, release): formats and shapes held, source table."""
    rows = []
    for gpu in kernels.gpus(data_dir):
        d = kernels._load(str(kernels.gpu_path(gpu, data_dir)))
        if "sources" not in d:
            continue
        sources = json.loads(str(d["sources"]))
        for kind in kernels.KINDS:
            for key, src in sorted(sources.get(kind, {}).items(),
                                   key=lambda kv: (kv[0].split("|")[0],
                                                   kernels._version(kv[0].split("|")[1]))):
                engine, release = key.split("|")
                p = f"{kind}|{engine}|{release}|"
                if kind == "gemm":
                    formats = sorted({k.split("|")[3] for k in d if k.startswith(p)})
                    shapes = sum(int(np.isfinite(d[f"{p}{f}|lat"].astype(float)).sum())
                                 for f in formats)
                elif kind == "moe":
                    formats = [str(x) for x in d[p + "dtypes"]]
                    shapes = len({tuple(r) for r in d[p + "keys"][:, 2:6].tolist()})
                elif kind in ("gen", "ctx"):
                    formats = ["kv " + str(x) for x in d[p + "kv_dtypes"]]
                    shapes = len(d[p + "keys"])
                else:
                    formats = [f"{int(g)} GPUs" for g in d[p + "gpus"]]
                    shapes = len(d[p + "bytes"])
                rows.append({"gpu": gpu, "op": kind, "title": kernels.KIND_TITLES[kind],
                             "engine": engine, "release": release, "formats": formats,
                             "shapes": shapes, "source": src})
    return rows


def model_rows(model: ModelSpec, topo: TopologySpec) -> dict:
    """For ``topo`` as an engine sees it (``EngineProfile.topology``: its ``kernels`` set), each
    op slot of ``model`` in a decode step and a prefill pass at tp 1: "table" where its time
    was read from the measured kernels, "roofline" elsewhere; and what the set reads."""
    ks = topo.kernels
    out = {"gpu": topo.kernel_gpu or None, "engine": ks.engine if ks else None,
           "version": ks.version if ks else None,
           "tables": [{"op": k, "release": r, "note": n, "source": s}
                      for k, r, n, s in (ks.describe() if ks else [])], "ops": []}
    coarse = np.array([[1, 1, 1, 8]])
    phases = {"decode": Workload(phase="decode", context=2048),
              "prefill": Workload(phase="prefill", context=2048)}
    measured = {ph: set(build_tables(model, topo, w, coarse).extra["measured"])
                for ph, w in phases.items()}
    bare = {ph: build_tables(model, replace(topo, kernels=None), w, coarse)
            for ph, w in phases.items()}
    for slot in SLOTS:
        if slot.endswith("_dense") and not model.dense_ffn_layers:
            continue            # a MoE model without dense FFN layers
        if all(not np.isfinite(t.time_s[0, SLOTS.index(slot)]).any() or
               np.nanmax(np.where(np.isfinite(t.time_s[0, SLOTS.index(slot)]),
                                  t.time_s[0, SLOTS.index(slot)], 0)) == 0
               for t in bare.values()):
            continue            # an op the model does not have
        out["ops"].append({"op": slot, **{ph: "table" if slot in measured[ph] else "roofline"
                                          for ph in phases}})
    return out
