"""What the measured-kernel tables cover (``lts kernels``): per GPU, the engines, releases,
op classes, formats and shapes they hold; for a model on a topology under an engine release,
which of its ops are costed from them and which by the roofline."""
from __future__ import annotations

import json

import numpy as np

from . import kernels
from .layouts import SLOTS
from .tables import build_tables
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import coarse_of, make_row
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
           "tables": ks.as_dict()["tables"] if ks else [], "ops": []}
    coarse = coarse_of(make_row(batch=8))[None]           # tp 1, 8 sequences
    tables = {ph: build_tables(model, topo, Workload(phase=ph, context=2048), coarse)
              for ph in ("decode", "prefill")}
    for i, slot in enumerate(SLOTS):
        if slot.endswith("_dense") and not model.dense_ffn_layers:
            continue            # a MoE model without dense FFN layers
        t = [tab.time_s[0, i] for tab in tables.values()]
        if not any((np.isfinite(x) & (x > 0)).any() for x in t):
            continue            # an op the model does not have
        out["ops"].append({"op": slot, **{ph: "table" if slot in tab.extra["measured"]
                                          else "roofline" for ph, tab in tables.items()}})
    out["moe"] = None
    read = tables["decode"].extra.get("moe_read") if ks is not None and model.is_moe else None
    if ks is not None and model.is_moe:
        out["moe"] = moe_read(ks, model.precision.format_of("experts"), read)
        picked = ks.picked.get("moe")
        if read is not None and picked is not None and \
                (read["engine"], read["release"]) != (picked[3], picked[0]):
            for t in out["tables"]:     # the op class's row: the table the experts read
                if t["op"] == "moe":
                    t.update(release=read["release"],
                             note=f"{read['engine']} {read['release']}'s, for this model's "
                                  "routed experts (below)",
                             source=kernels.source_of(ks, read["prefix"]))
    return out


def moe_read(ks: kernels.KernelSet, fmt: str, read) -> dict:
    """What the routed experts in ``fmt`` read under ``ks`` (``read``: ``KernelSet.moe_source``
    as the cost tables recorded it; None: no table holds the format), as ``lts kernels`` says
    it: the table, the kernels its rows of that shape were timed with, and a note on whether
    that is the kernel the engine release runs there (``kernels.ENGINE_MOE_KERNEL``)."""
    if read is None:
        held = any(ks.moe_tables(dt) for dt in kernels.MOE_FORMAT.get(fmt, ()))
        return {"format": fmt, "engine": None, "release": None, "shape": None, "held": None,
                "kernels": [], "note": "the roofline: " + (
                    "the tables hold no MoE layer of this kind (a latent MoE)" if held
                    else "no table holds this format")}
    who = f"{ks.engine} {ks.version}".strip()
    words = []
    if read["engine"] != ks.engine:
        words.append(f"{read['engine']}'s table, the first that holds this shape in "
                     f"{read['dtype']}")
    if not read["held"]:
        words.append("the nearest held shape ({}, {}, top {}, {} experts), scaled".format(
            *read["shape"]))
    if read["runs"] is None:
        words.append(f"lts has no rule for which kernel {who} runs here: read as timed")
    elif read["runs_timed"] is None:
        words.append(f"the table does not name its kernels; {who} runs {read['runs']} here")
    elif read["runs_timed"]:
        words.append(f"the kernel {who} runs here ({read['runs']})")
    else:
        words.append(f"not the kernel {who} runs here ({read['runs']}): no table times that "
                     "kernel at expert parallelism 1, so these rows are read")
    return {"format": read["dtype"], "engine": read["engine"], "release": read["release"],
            "shape": list(read["shape"]), "held": read["held"], "kernels": read["kernels"],
            "note": "; ".join(words)}