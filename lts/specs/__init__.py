"""Model and topology files -> frozen dataclasses: the one entry point for loading them.

A model file (``models/*.toml``) and a topology file (``topologies/*.toml``) are described in
docs/design.md §1. Every bad input raises ``SpecError`` naming the file, the key, the
value and what was expected; nothing else in lts reads TOML. ``load_model`` also takes a
HuggingFace config.json (``hf`` translates it). The model's dataclasses and the checked table
reader live in ``specs.model`` (so that ``hf`` can build a ModelSpec without importing this
module) and are re-exported here: callers import every spec name from ``specs``.

Units: TOML keys carry their unit (``hbm_gib``, ``bandwidth_gb_s``, ``latency_us``); the
dataclasses hold SI base units (bytes, bytes/s, FLOP/s, seconds) and say so in the field name.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from . import _toml
from .errors import SpecError, cut, cut_quoted, suggestion
from .model import (DTYPES, FORMATS, MAX_COUNT, MAX_NODES, TOO_DEEP,  # noqa: F401
                    WEIGHT_GROUPS, ModelSpec, PrecisionSpec, _Table, model_from_dict, read_text)
from .model import (MAX_FILE_BYTES, MAX_NUMBER, MAX_PARAMS, MAX_WIDTH,  # noqa: F401
                        MIN_NUMBER, AttentionSpec, FFNSpec,                    # (re-exported)
                        LinearAttentionSpec, Mamba2Spec)
from .model import NOT_ATTENTION
from .units import (FORMAT_ALIASES, GB, GIB, KV_DTYPES, TB, TFLOPS, US, WEIGHT_FORMATS,
                    weight_format)

PACKAGE_DIR = Path(__file__).resolve().parents[1]     # lts/ (the package holding specs/)


# ----------------------------------------------------------------------------------------------
# topology dataclasses (the model's are in specs.model)

@dataclass(frozen=True)
class LinkSpec:
    name: str
    span_gpus: int            # consecutive GPUs this link connects (innermost first)
    bandwidth_bytes_s: float  # per GPU, one direction
    latency_s: float          # alpha per collective step
    efficiency: float         # achievable fraction of bandwidth
    # "switch": one port per GPU reaches any peer (NVSwitch, InfiniBand); "mesh": a link of
    # bandwidth_bytes_s to each of the other span-1 GPUs (AMD Infinity Fabric); "pcie": a PCIe
    # x16 per GPU through the host (bandwidth already capped by what the GPUs share). Costs:
    # cost.collectives; docs/gpus.md.
    shape: str = "switch"
    # one-shot custom all-reduce inside this link's domain (the engines' kernels: each rank reads
    # every peer's whole buffer over the link, one step): alpha and the fraction of bandwidth it
    # reaches (0: not measured, ring only), and the largest message an engine runs it for
    # (set from the engine profile by TopologySpec.engine_links; 0: the engine has none)
    oneshot_latency_s: float = 0.0
    oneshot_efficiency: float = 0.0
    oneshot_max_bytes: float = 0.0


@dataclass(frozen=True)
class TopologySpec:
    name: str
    source: str
    gpu_name: str
    peak_flops: dict          # compute class ("bf16", "fp8", "fp4") -> FLOP/s, dense
    hbm_bytes: float
    hbm_bandwidth_bytes_s: float
    compute_efficiency: float
    memory_efficiency: float
    kernel_overhead_s: float
    hbm_reserve_bytes: float
    gpus_per_node: int
    nodes: int
    links: tuple = field(default_factory=tuple)   # LinkSpec, innermost first
    path: str = ""
    fp8_compute_efficiency: float = 0.0   # fraction of the fp8 peak for fp8 GEMMs (0: compute_efficiency)
    fp8_memory_efficiency: float = 0.0    # fraction of HBM for fp8 weight reads (0: memory_efficiency)
    step_overhead_s: float = 0.0          # engine time per forward pass (scheduling, launch, sampling)
    roofline_exponent: float = 0.0        # p of the smooth roofline (c^p + m^p)^(1/p); 0: max(c, m)
    collective_efficiency: float = 1.0    # share of each link's rate collectives reach in a serving step
    vendor: str = "nvidia"                # "nvidia" or "amd": which engines run on it (Engine.vendors)
    fp4_compute_efficiency: float = 0.0   # fraction of the fp4 peak for fp4 GEMMs (0: compute_efficiency)
    custom_allreduce_bytes: float = 0.0   # the engine's one-shot all-reduce up to this size (0: none)
    # dense GEMM rates by weight format ([gpu.gemm]): format -> (fraction of its peak, fraction of
    # HBM for its weight reads); 0 in either place: the keys above (``compute_efficiency_for``)
    gemm: dict = field(default_factory=dict)
    # MoE experts' grouped GEMMs by weight format ([gpu.grouped_gemm]): format -> (compute at each
    # of ``grouped_tokens`` tokens per expert, fraction of HBM for weight reads); a format not
    # listed runs at its dense rates (``grouped_efficiency``)
    grouped: dict = field(default_factory=dict)
    grouped_tokens: tuple = ()            # tokens per expert the grouped compute rates are given at
    # measured kernels ([gpu] kernels = "h100_sxm": the stem of lts/kernels/<name>.npz) and, as
    # an engine release sees them (EngineProfile.topology), the cost.kernels.KernelSet the cost
    # model reads op times from (None: the roofline everywhere)
    kernel_gpu: str = ""
    kernels: object = None
    # GPUs one host (one operating system, one container) holds: 8 on a DGX/HGX, 4 on an NVL72
    # compute tray, whose NVLink domain (gpus_per_node) spans 18 trays ([node] host_gpus;
    # 0: the node is one host). Launch commands split an instance over hosts, not NVLink domains.
    host_gpus: int = 0
    # each GPU's link to its host's memory, one direction ([gpu] host_bandwidth_gb_s: PCIe or
    # NVLink-C2C; 0: not given): the KV cache offloaded to host memory crosses it
    # (serving.prefix, --kv-offload)
    host_bandwidth_bytes_s: float = 0.0

    @property
    def gpus_per_host(self) -> int:
        """GPUs one host holds (``host_gpus``, else the whole node)."""
        return self.host_gpus or self.gpus_per_node

    @cached_property
    def engine_links(self) -> tuple:
        """The links as collectives see them inside a serving step: each link's efficiency (what
        nccl-tests reach alone) times ``collective_efficiency`` (fitted on serving measurements),
        and the engine's custom all-reduce size limit (``custom_allreduce_bytes``)."""
        if self.collective_efficiency == 1.0 and not self.custom_allreduce_bytes:
            return self.links
        return tuple(replace(l, efficiency=l.efficiency * self.collective_efficiency,
                             oneshot_max_bytes=self.custom_allreduce_bytes) for l in self.links)

    def compute_efficiency_for(self, dtype: str) -> float:
        """Achievable fraction of ``peak_for(dtype)`` by a dense GEMM with ``dtype`` weights: the
        format's own ``[gpu.gemm]`` rate when the file gives one (fp8_block's kernels reach less
        than per-tensor fp8's), else its compute class's (``fp8_compute_efficiency``,
        ``fp4_compute_efficiency`` when set), else ``compute_efficiency``."""
        fmt = FORMAT_ALIASES.get(dtype, dtype)
        own = self.gemm.get(fmt, (0.0, 0.0))[0]
        if own:
            return own
        cls = self.peak_class(fmt)
        if cls == "fp4" and self.fp4_compute_efficiency:
            return self.fp4_compute_efficiency
        return self.fp8_compute_efficiency if cls == "fp8" and self.fp8_compute_efficiency \
            else self.compute_efficiency

    def weight_memory_efficiency_for(self, dtype: str) -> float:
        """Achievable fraction of HBM bandwidth when dense GEMMs read ``dtype`` weights: the
        format's ``[gpu.gemm]`` rate when given, else (per-tensor fp8) ``fp8_memory_efficiency``
        when set, else memory_efficiency (activations and KV cache always keep memory_efficiency)."""
        fmt = FORMAT_ALIASES.get(dtype, dtype)
        own = self.gemm.get(fmt, (0.0, 0.0))[1]
        if own:
            return own
        return self.fp8_memory_efficiency if fmt == "fp8" and self.fp8_memory_efficiency \
            else self.memory_efficiency

    def grouped_efficiency(self, dtype: str) -> tuple:
        """A MoE grouped GEMM's rates with ``dtype`` weights: (tokens per expert, the fraction of
        ``peak_for(dtype)`` reached at each, the fraction of HBM its weight reads reach). Compute
        ramps with the tokens each expert's GEMM gets (small groups fill the tensor-core tiles
        less: ``cost.tables.grouped_compute``); a format ``[gpu.grouped_gemm]`` does not list
        runs at its dense rates, whatever the tokens per expert."""
        fmt = FORMAT_ALIASES.get(dtype, dtype)
        if fmt in self.grouped:
            compute, memory = self.grouped[fmt]
            return self.grouped_tokens, compute, memory
        return (1.0,), (self.compute_efficiency_for(fmt),), self.weight_memory_efficiency_for(fmt)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def peak_for(self, dtype: str) -> float:
        """Dense tensor-core FLOP/s for GEMMs whose weights are ``dtype``.

        A precision the GPU lacks runs at the next one of its format it has (``WEIGHT_FORMATS``:
        fp8 -> bf16; fp4 -> bf16, weight-only dequantization into bf16 math).
        """
        return self.peak_flops[self.peak_class(dtype)]

    def peak_class(self, dtype: str) -> str:
        """The tensor-core class ("fp4", "fp8", "bf16") GEMMs with ``dtype`` weights run on."""
        for cls in WEIGHT_FORMATS[FORMAT_ALIASES.get(dtype, dtype)][1]:
            if cls in self.peak_flops:
                return cls
        raise AssertionError("bf16 peak is required by the loader")


# ----------------------------------------------------------------------------------------------
# TOML files

def read_toml(path: Path, expected: str = "a .toml file", max_bytes: int = MAX_FILE_BYTES,
              needs: str = "") -> dict:
    """A TOML file's table (``read_text``'s guards: a regular file of at most ``max_bytes``),
    or one SpecError line: invalid TOML, nesting past Python's stack (``TOO_DEEP``; ``needs``:
    the depth the file's kind needs, in its place), an integer of thousands of digits."""
    return toml_table(read_text(path, expected, max_bytes), path, needs)


def toml_table(text: str, path, needs: str = "") -> dict:
    """``read_toml``'s parse of a text already read (``path`` names it in the message): what a
    file lts writes (``lts calibrate``) reads back as, with the same guards."""
    try:
        return _toml.loads(text)
    except _toml.TOMLDecodeError as e:
        raise SpecError(path, "", f"invalid TOML ({e})") from None
    except RecursionError:
        raise SpecError(path, "", TOO_DEEP.replace("a model or topology needs 2", needs)
                        if needs else TOO_DEEP) from None
    except ValueError:            # Python refuses integers of more than 4300 digits
        raise SpecError(path, "", "invalid TOML (a number of thousands of digits)") from None


# ----------------------------------------------------------------------------------------------
# shipped files and short names

def shipped_dir(kind: str) -> Path:
    """The folder holding shipped ``models`` or ``topologies`` (checkout or installed wheel)."""
    for candidate in (PACKAGE_DIR / kind, PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    return PACKAGE_DIR.parent / kind


def shipped_names(kind: str) -> list[str]:
    return sorted(p.stem for p in shipped_dir(kind).glob("*.toml"))


NAME_MAX = 255    # bytes in one path component (POSIX NAME_MAX on Linux, macOS, ext4, APFS)
PATH_MAX = 4096   # bytes in a path with its NUL (Linux limits.h PATH_MAX; macOS has 1024)


def path_problem(name_or_path) -> str:
    """Why a string cannot name a file at all ("" when it can): a NUL byte, or a component
    longer than the filesystem allows (the OSError it would raise, said in one line)."""
    text = str(name_or_path)
    if "\0" in text:
        return "holds a NUL byte, which no file name can"
    longest = max((len(c.encode("utf-8", "surrogateescape")) for c in text.split(os.sep)),
                  default=0)
    total = len(text.encode("utf-8", "surrogateescape"))
    if total >= PATH_MAX:
        return f"is not a path: {total:,} bytes, over the {PATH_MAX - 1:,} a path may have"
    if longest > NAME_MAX:
        return f"is not a file name: a part of it is {longest:,} bytes, over the {NAME_MAX} a " \
               "file name may have"
    return ""


def exists(name_or_path) -> bool:
    """Path.exists that answers False where the string cannot name a file (``path_problem``)
    or the system refuses to say (an OSError), never raising."""
    if path_problem(name_or_path):
        return False
    try:
        return Path(name_or_path).exists()
    except (OSError, ValueError):
        return False


def resolve(kind: str, name_or_path: str) -> Path:
    """A path as given, or a shipped short name (``moe1.6t``) -> its file."""
    problem = path_problem(name_or_path)
    if problem:
        what = "model" if kind == "models" else "topology"
        shown = str(name_or_path)
        shown = cut(shown)
        raise SpecError(shown, "", f"{problem} (nor a shipped {what})")
    p = Path(name_or_path)
    if exists(p) or os.sep in str(name_or_path) or str(name_or_path).endswith((".toml", ".json")):
        return p
    candidate = shipped_dir(kind) / f"{name_or_path}.toml"
    if exists(candidate):
        return candidate
    names = shipped_names(kind)
    what = "model" if kind == "models" else "topology"
    hint = suggestion(name_or_path, names)
    raise SpecError(name_or_path, "", f"no such file or shipped {what} ("
                                      f"{hint + ' ' if hint else ''}lts {kind} lists the "
                                      f"{len(names)} shipped)")


# ----------------------------------------------------------------------------------------------
# models

def load_model(name_or_path, precision: str | None = None,
               kv_cache: str | None = None) -> ModelSpec:
    """Load a model TOML file (or shipped name, or HuggingFace config.json) and validate it.

    Args:
        name_or_path: path to a ``.toml`` or ``config.json`` (or its folder), or a shipped name.
        precision: optional override of the weight format (``--precision``; ``with_precision``).
        kv_cache: optional override of the KV-cache type (``--kv-cache-dtype``; None or "auto":
            the model's).
    """
    path = resolve("models", str(name_or_path))
    if path.is_dir():
        if not (path / "config.json").exists():
            raise SpecError(path, "", "is a folder without a config.json (expected a model .toml "
                                      "file, a config.json or a folder holding one)")
        path = path / "config.json"
    if path.suffix == ".json":
        from .hf import model_from_hf_config     # (imported when a config.json is read)
        spec = model_from_hf_config(path)
    else:
        spec = model_from_dict(read_toml(path), path)
    if precision is not None or kv_cache not in (None, "auto"):
        spec = with_precision(spec, precision, kv_cache)
    return spec


# --precision names that also set the KV cache to their type (as before the formats: kept so that
# every earlier result stays the same); the other formats leave the KV cache the model's
_KV_TOO = ("fp32", "bf16", "fp16", "fp8", "int8")
# what quantizing a model with the other formats leaves in the activation type: embeddings and
# norms (only Linear layers are quantized), the LM head and the MoE router (ModelOpt 0.37
# modelopt/torch/quantization/config.py, _default_disabled_quantizer_cfg: "*lm_head*",
# "*router*", "*mlp.gate.*", "*block_sparse_moe.gate*" disabled)
_KEPT = ("embedding", "norm", "lm_head", "router")


def with_precision(spec: ModelSpec, precision: str | None, kv_cache: str | None = None) \
        -> ModelSpec:
    """``spec`` with its weights in the format ``precision`` (a ``WEIGHT_FORMATS`` name or
    another spelling, ``units.weight_format``; None: unchanged) and its KV cache in ``kv_cache``
    (None or "auto": the model's, except that the names in ``_KV_TOO`` also set the KV cache, as
    ``--precision`` always did). The groups
    the model leaves unquantized stay so; the formats not in ``_KV_TOO`` also leave ``_KEPT``
    unquantized (a checkpoint's own list when its format is asked for again); another format
    than the model's puts every quantized group in it (a mixed checkpoint's ``formats`` go)."""
    p = spec.precision
    if precision is not None:
        try:
            weights = weight_format(precision)
        except ValueError as e:
            raise SpecError("--precision", "", str(e)) from None
        if weights in _KV_TOO:
            p = replace(p, weights=weights, kv_cache=weights, formats=())
        elif weights != p.weights:
            kept = set(p.unquantized) | set(_KEPT)
            p = replace(p, weights=weights, unquantized=tuple(g for g in WEIGHT_GROUPS if g in kept),
                        formats=())
    if kv_cache not in (None, "auto"):
        if kv_cache not in KV_DTYPES:
            raise SpecError("--kv-cache-dtype", "",
                            f"{cut_quoted(kv_cache)} is not one of auto, {', '.join(KV_DTYPES)}")
        p = replace(p, kv_cache=kv_cache)
    return replace(spec, precision=p)


EXPERT_LOADS = ("power_law", "uniform")     # FFNSpec.expert_load (cost.expert_load.LOADS)


def with_expert_placement(spec: ModelSpec, redundant: int | None = None, eplb: bool = False,
                          load: str | None = None) -> ModelSpec:
    """``spec`` deployed with ``redundant`` extra expert copies (EPLB's redundant experts; None:
    unchanged), the engines' expert-parallel load balancer on (``eplb``, implied by redundant
    experts: every engine places them with it) and the routed load ``load`` ("power_law" or
    "uniform"; None: unchanged). SpecError (its flag named) for a dense model or more redundant
    copies than experts (at most one extra copy of each)."""
    if redundant is None and not eplb and load is None:
        return spec
    f = spec.ffn
    if load is not None and load not in EXPERT_LOADS:
        raise SpecError("--expert-load", "", f"{cut_quoted(load)} is not one of "
                                             f"{', '.join(EXPERT_LOADS)}")
    for flag, given in (("--redundant-experts", redundant is not None), ("--eplb", eplb)):
        if given and not spec.is_moe:
            raise SpecError(flag, "", f"needs a MoE model ({spec.name} has no routed experts)")
    if redundant is not None and not 0 <= redundant <= f.experts:
        raise SpecError("--redundant-experts", "",
                        f"{redundant} is not between 0 and the model's {f.experts} experts "
                        "(at most one extra copy of each)")
    f = replace(f, redundant_experts=f.redundant_experts if redundant is None else redundant,
                eplb=f.eplb or eplb or bool(redundant), expert_load=load or f.expert_load)
    return replace(spec, ffn=f)


# ----------------------------------------------------------------------------------------------
# topologies

def load_topology(name_or_path) -> TopologySpec:
    path = resolve("topologies", str(name_or_path))
    return topology_from_dict(read_toml(path), path)


MIN_TFLOPS = 1.0        # TFLOP/s of any tensor-core class (a T4: 65 fp16)
MIN_HBM_GIB = 1.0       # GiB of device memory (a T4: 16)
MIN_HBM_TB_S = 0.05     # TB/s of device memory (a T4: 0.32)
MIN_LINK_GB_S = 0.1     # GB/s a link (1 Gb/s Ethernet: 0.125)


def topology_from_dict(data: dict, path) -> TopologySpec:
    t = _Table(data, path)
    name = t.get("name", str)
    source = t.get("source", str)
    g = t.table("gpu")
    gpu_name = g.get("name", str)
    # lower bounds far below any accelerator that serves a model (a T4: 65 fp16 TFLOP/s, 16 GiB
    # at 0.32 TB/s): a smaller figure is a unit slip (GFLOP/s for TFLOP/s, MB for GiB)
    peaks = {"bf16": g.get("bf16_tflops", float, minimum=MIN_TFLOPS) * TFLOPS}
    for cls in ("fp8", "fp4"):
        v = g.get(f"{cls}_tflops", float, required=False, minimum=MIN_TFLOPS)
        if v is not None:
            peaks[cls] = v * TFLOPS
    hbm = g.get("hbm_gib", float, minimum=MIN_HBM_GIB) * GIB
    hbm_bw = g.get("hbm_bandwidth_tb_s", float, minimum=MIN_HBM_TB_S) * TB
    eff_c = g.get("compute_efficiency", float, positive=True, maximum=1.0)
    eff_m = g.get("memory_efficiency", float, positive=True, maximum=1.0)
    overhead = g.get("kernel_overhead_us", float, minimum=0.0) * US
    fp8_eff_c = g.get("fp8_compute_efficiency", float, 0.0, required=False, positive=True,
                      maximum=1.0)
    fp8_eff_m = g.get("fp8_memory_efficiency", float, 0.0, required=False, positive=True,
                      maximum=1.0)
    fp4_eff_c = g.get("fp4_compute_efficiency", float, 0.0, required=False, positive=True,
                      maximum=1.0)
    vendor = g.get("vendor", str, "nvidia", required=False, choices=VENDORS)
    step_overhead = g.get("step_overhead_us", float, 0.0, required=False, minimum=0.0) * US
    rexp = g.get("roofline_exponent", float, 0.0, required=False, minimum=1.0)
    # the measured-kernel tables of this GPU (lts/kernels/<name>.npz, or a --kernels folder's
    # <name>.npz or <name>/; docs/kernels.md): a plain name
    kernel_gpu = g.get("kernels", str, "", required=False)
    if kernel_gpu and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", kernel_gpu):
        raise SpecError(path, "gpu.kernels", f"{cut_quoted(kernel_gpu)} is not a table name "
                                             "(letters, digits, _ . -; shipped: "
                        + ", ".join(sorted(p.stem for p in (PACKAGE_DIR / "kernels")
                                           .glob("*.npz"))) + ")")
    coll_eff = g.get("collective_efficiency", float, 1.0, required=False, positive=True,
                     maximum=1.0)
    gemm, grouped, grouped_tokens = _format_rates(g, path)
    for key, fmt, i in (("fp8_compute_efficiency", "fp8", 0), ("fp8_memory_efficiency", "fp8", 1),
                        ("fp4_compute_efficiency", "nvfp4", 0)):
        if g.has(key) and gemm.get(fmt, (0.0, 0.0))[i]:
            raise SpecError(path, f"gpu.gemm.{fmt}", f"gives the rate gpu.{key} gives: "
                                                     "give one of them")
    host_bw = g.get("host_bandwidth_gb_s", float, 0.0, required=False,
                    minimum=MIN_LINK_GB_S) * GB
    reserve = g.get("hbm_reserve_gib", float, minimum=0.0) * GIB
    if reserve >= hbm:
        raise SpecError(path, "gpu.hbm_reserve_gib",
                        f"{reserve / GIB:g} must be smaller than gpu.hbm_gib = {hbm / GIB:g}")
    g.finish()
    n = t.table("node")
    per_node = n.get("gpus", int, positive=True)
    nodes = n.get("count", int, positive=True, maximum=MAX_NODES)
    host_gpus = n.get("host_gpus", int, per_node, required=False, positive=True)
    if per_node % host_gpus:
        raise SpecError(path, "node.host_gpus", f"{host_gpus} must divide node.gpus = {per_node} "
                                                "(a node's hosts hold its GPUs evenly)")
    n.finish()
    links = []
    for lt in t.array_of_tables("link"):
        links.append(_link(lt))
        lt.finish()
    for i in range(1, len(links)):
        if links[i].span_gpus <= links[i - 1].span_gpus:
            raise SpecError(path, f"link[{i}].span_gpus",
                            f"{links[i].span_gpus} must be larger than the span of the link "
                            f"inside it ({links[i - 1].span_gpus}); list links innermost first")
    for i, link in enumerate(links):
        # a link's domains tile the cluster: they nest in the next link's, and a node either
        # holds whole domains or is part of one
        span, key = link.span_gpus, f"link[{i}].span_gpus"
        if i + 1 < len(links) and links[i + 1].span_gpus % span:
            raise SpecError(path, key, f"{span} must divide the span of the link outside it "
                                       f"({links[i + 1].span_gpus})")
        if per_node % span and span % per_node:
            raise SpecError(path, key, f"{span} must divide node.gpus = {per_node} or be a "
                                       "multiple of it")
    if links[-1].span_gpus < per_node * nodes:
        raise SpecError(path, f"link[{len(links) - 1}].span_gpus",
                        f"{links[-1].span_gpus} must cover the whole cluster "
                        f"(node.gpus x node.count = {per_node * nodes})")
    t.finish()
    return TopologySpec(name, source, gpu_name, peaks, hbm, hbm_bw, eff_c, eff_m, overhead,
                        reserve, per_node, nodes, tuple(links), str(path), fp8_eff_c, fp8_eff_m,
                        step_overhead, rexp, coll_eff, vendor, fp4_eff_c, gemm=gemm,
                        grouped=grouped, grouped_tokens=grouped_tokens, kernel_gpu=kernel_gpu,
                        host_gpus=0 if host_gpus == per_node else host_gpus,
                        host_bandwidth_bytes_s=host_bw)


MAX_GROUPED_POINTS = 16    # [gpu.grouped_gemm] tokens_per_expert: at most this many points


def _format_rates(g, path) -> tuple:
    """[gpu.gemm] and [gpu.grouped_gemm]: each weight format's (compute, memory) efficiencies.

    ``[gpu.gemm]``: ``fp8_block = {compute = 0.57, memory = 0.65}`` (either may be left out:
    the format's class keys then apply, ``TopologySpec.compute_efficiency_for``).
    ``[gpu.grouped_gemm]``: ``tokens_per_expert = [64, 256, 1024]`` (increasing) and per format
    ``bf16 = {compute = [0.19, 0.46, 0.60], memory = 0.78}``: compute one number (at every size) or
    one per point, memory one number; both required."""
    gemm = {}
    gt = g.table("gemm", required=False)
    for fmt in list(gt.data):
        _check_format(gt, fmt)
        e = gt.table(fmt)
        gemm[fmt] = (e.get("compute", float, 0.0, required=False, positive=True, maximum=1.0),
                     e.get("memory", float, 0.0, required=False, positive=True, maximum=1.0))
        e.finish()
    gt.finish()
    grouped, tokens = {}, ()
    gg = g.table("grouped_gemm", required=False)
    if gg.data:
        raw = gg.data.get("tokens_per_expert")
        gg.used.add("tokens_per_expert")
        key = f"{gg.prefix}tokens_per_expert"
        if (not isinstance(raw, list) or not 1 <= len(raw) <= MAX_GROUPED_POINTS
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw)):
            raise SpecError(path, key, f"{cut_quoted(raw)} is not a list of 1 to "
                                       f"{MAX_GROUPED_POINTS} "
                                       "numbers (tokens per expert)")
        tokens = tuple(float(v) for v in raw)
        if not all(1.0 <= v <= MAX_COUNT for v in tokens) or \
                any(b <= a for a, b in zip(tokens, tokens[1:])):
            raise SpecError(path, key, f"{cut_quoted(raw)} must increase, each from 1 to "
                                       f"{MAX_COUNT:,}")
        for fmt in [k for k in gg.data if k != "tokens_per_expert"]:
            _check_format(gg, fmt)
            e = gg.table(fmt)
            c = e.data.get("compute")
            if isinstance(c, list):
                e.used.add("compute")
                if len(c) != len(tokens) or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1
                        for v in c):
                    raise SpecError(path, f"{e.prefix}compute",
                                    f"{cut_quoted(c)} must be {len(tokens)} numbers in (0, 1], "
                                    "one per "
                                    f"{gg.prefix}tokens_per_expert point")
                compute = tuple(float(v) for v in c)
            else:
                compute = (e.get("compute", float, positive=True, maximum=1.0),) * len(tokens)
            grouped[fmt] = (compute, e.get("memory", float, positive=True, maximum=1.0))
            e.finish()
    gg.finish()
    return gemm, grouped, tokens


def _check_format(t, fmt):
    if fmt not in WEIGHT_FORMATS:
        raise SpecError(t.file, f"{t.prefix}{fmt}",
                        f"is not a weight format (one of {', '.join(WEIGHT_FORMATS)})")


VENDORS = ("nvidia", "amd")                   # [gpu] vendor: which engines run on it
LINK_SHAPES = ("switch", "mesh", "pcie")      # [[link]] shape (LinkSpec.shape, docs/gpus.md)


def _link(lt) -> LinkSpec:
    """One [[link]] table. ``shape`` (default "switch") says what bandwidth_gb_s is: per GPU
    (switch, pcie) or per peer link (mesh). A mesh's span is the GPUs fully connected to each
    other. A pcie link may give ``shared_gb_s``, the capacity (one direction) its span_gpus GPUs
    share through the host: every GPU of the domain moves data at once in a collective step
    (each group of the domain runs the same collective), so each gets min(bandwidth_gb_s,
    shared_gb_s / span_gpus)."""
    name = lt.get("name", str)
    span = lt.get("span_gpus", int, positive=True, maximum=MAX_COUNT * MAX_NODES)
    bw = lt.get("bandwidth_gb_s", float, minimum=MIN_LINK_GB_S) * GB
    latency = lt.get("latency_us", float, minimum=0.0) * US
    eff = lt.get("efficiency", float, positive=True, maximum=1.0)
    shape = lt.get("shape", str, "switch", required=False, choices=LINK_SHAPES)
    shared = lt.get("shared_gb_s", float, 0.0, required=False, positive=True)
    if shared and shape != "pcie":
        raise SpecError(lt.file, lt._key("shared_gb_s"),
                        f"only with shape = \"pcie\" (this link's shape is {cut_quoted(shape)})")
    if shape == "mesh" and span < 2:
        raise SpecError(lt.file, lt._key("span_gpus"), f"{span}: a mesh connects at least 2 GPUs")
    if shared:
        bw = min(bw, shared * GB / span)
    os_latency = lt.get("oneshot_latency_us", float, 0.0, required=False, positive=True) * US
    os_eff = lt.get("oneshot_efficiency", float, 0.0, required=False, positive=True, maximum=1.0)
    if bool(os_latency) != bool(os_eff):
        missing = "oneshot_efficiency" if os_latency else "oneshot_latency_us"
        raise SpecError(lt.file, lt._key(missing), "missing: oneshot_latency_us and "
                                                   "oneshot_efficiency come together")
    if os_latency and shape != "switch":
        raise SpecError(lt.file, lt._key("oneshot_latency_us"),
                        f"only with shape = \"switch\" (this link's shape is {cut_quoted(shape)})")
    return LinkSpec(name, span, bw, latency, eff, shape, os_latency, os_eff)


# ----------------------------------------------------------------------------------------------
# parameter counts (used by `lts models`, the JSON `model` block and the graph)

def attention_params(m: ModelSpec, a=None) -> dict:
    """Weights of one attention block by matrix group: {"qkv": n, "o": n}, {"bias": n} for
    GQA with biases or sinks (``AttentionSpec.bias``, ``sinks``), {"indexer": n} for sparse
    attention: wq_b [q_lora_rank -> index_heads x index_head_dim], wk [hidden ->
    index_head_dim], k_norm (a LayerNorm, weight and bias), weights_proj [hidden -> index_heads]
    (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py, class Indexer), or a gqa model's
    block-sparse indexer (MiniMax-M3, below). ``a``: the shape of one
    layer kind (``ModelSpec.kind_attention``; default the model's ``attention``)."""
    a, h = (m.attention if a is None else a), m.hidden
    if a.compressed:
        # deepseek-ai/DeepSeek-V4-Pro inference/model.py Attention: wq_a [hidden, q_lora],
        # q_norm, wq_b [q_lora, heads head_dim], wkv [hidden, head_dim] (one KV head), kv_norm,
        # wo_a [heads head_dim / o_groups, o_lora] a group, wo_b [o_groups o_lora, hidden], a
        # sink logit a head (the compressor and indexer: ``compressor_params``)
        q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.heads * a.head_dim
        return {"qkv": q + h * a.head_dim + a.head_dim,
                "o": a.heads * a.head_dim * a.o_lora_rank + a.o_groups * a.o_lora_rank * h,
                "bias": a.heads * a.sinks}
    if a.kind == "mla":
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.heads * qk) if a.q_lora_rank \
            else h * a.heads * qk
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank \
            + a.kv_lora_rank * a.heads * (a.qk_nope_head_dim + a.v_head_dim)
        # Kimi-K3's output gate: g_proj [hidden, heads v_head_dim] (SGLang kimi_k3.py)
        gate = h * a.heads * a.v_head_dim if a.output_gate else 0
        out = {"qkv": q + kv + gate, "o": a.heads * a.v_head_dim * h}
        if a.sparse:
            ih, d = a.index_heads, a.index_head_dim
            out["indexer"] = (a.q_lora_rank or h) * ih * d + h * d + 2 * d + h * ih
        return out
    if a.v_head_dim or a.k_eq_v:
        # V of its own width (MiMo-V2-Flash: vLLM mimo_v2_flash.py QKVParallelLinear(...,
        # v_head_size)), or none (k_eq_v, Gemma 4's full layers: transformers
        # modeling_gemma4.py Gemma4TextAttention v_proj None); o_proj [heads v_dim, hidden]
        v = 0 if a.k_eq_v else a.kv_heads * a.v_dim
        out = {"qkv": h * (a.q_out + a.kv_heads * a.head_dim + v), "o": a.heads * a.v_dim * h}
        if a.bias or a.sinks:
            out["bias"] = a.bias * (a.heads * a.head_dim + a.kv_heads * a.head_dim + v + h) \
                + a.sinks * a.heads
        return out
    out = {"qkv": h * (a.q_out + 2 * a.kv_heads * a.head_dim),
           "o": a.heads * a.head_dim * h}     # the gates with the queries (AttentionSpec.q_out)
    if a.bias or a.sinks:   # gpt-oss: q, k, v, o biases and a sink logit per head (not costed)
        out["bias"] = a.bias * ((a.heads + 2 * a.kv_heads) * a.head_dim + h) + a.sinks * a.heads
    if a.block_sparse:
        # MiniMax-M3's indexer (sgl-project/sglang commit 01b5f572
        # python/sglang/srt/models/minimax_m3.py MiniMaxM3Attention, checkpoint index_q_proj /
        # index_k_proj): its queries [hidden, index_heads index_head_dim], its one key [hidden,
        # index_head_dim], index_q_norm and index_k_norm of index_head_dim; no value or output
        # (sparse_disable_index_value). The block_sparse_attention layers' only (mixer_params)
        d = a.index_head_dim
        out["indexer"] = h * a.index_heads * d + h * d + 2 * d
    return out


def compressor_params(m: ModelSpec, ratio: int) -> dict:
    """Weights of a compressed-attention layer's compressor and indexer at compress ``ratio``
    (deepseek-ai/DeepSeek-V4-Pro inference/model.py Compressor, Indexer): {"compressor": its
    ape [ratio c, head_dim], wkv and wgate [hidden, c head_dim] and norm, "indexer": the
    indexer's wq_b [q_lora, index_heads index_head_dim], weights_proj [hidden, index_heads]
    and its own compressor of index_head_dim}; c = 2 on the layers that run the indexer (their
    compression windows overlap: ``coff``), else 1; {} at ratio 0 (a window alone)."""
    a, h = m.attention, m.hidden
    if not ratio:
        return {}
    indexed = a.sparse and ratio == a.index_ratio
    c = 2 if indexed else 1

    def comp(d):
        return ratio * c * d + 2 * h * c * d + d
    out = {"compressor": comp(a.head_dim)}
    if indexed:
        out["indexer"] = a.q_lora_rank * a.index_heads * a.index_head_dim \
            + h * a.index_heads + comp(a.index_head_dim)
    return out


def hc_params(m: ModelSpec) -> int:
    """Weights of the hyper-connections (``ModelSpec.hc_mult``; deepseek-ai/DeepSeek-V4-Pro
    inference/model.py Block hc_attn_fn/base/scale and hc_ffn_*, Transformer hc_head_*): per
    block [(2 + hc) hc, hc hidden] with its base and 3 scales, two blocks a layer, and the head's
    [hc, hc hidden] with its base and scale; 0 without."""
    hc, h = m.hc_mult, m.hidden
    if hc == 1:
        return 0
    block = (2 + hc) * hc * hc * h + (2 + hc) * hc + 3
    return m.layers * 2 * block + hc * hc * h + hc + 1


def res_params(m: ModelSpec) -> int:
    """Weights of the attention residuals (``ModelSpec.attn_res_block``; SGLang
    attn_residual.py AttnResidual): a [hidden] scoring weight and an RMSNorm of hidden at each
    layer's two points (self_attention_res_proj, mlp_res_proj) and at the output; 0 without."""
    if not m.attn_res_block:
        return 0
    return (2 * m.layers + 1) * 2 * m.hidden


def attention_layer_params(m: ModelSpec) -> int:
    """Weights of the softmax-attention blocks of all layers: each kind's own shape
    (``ModelSpec.kind_attention``) times its layers."""
    if m.attention.compressed:
        core = sum(attention_params(m).values())
        return sum(core + sum(compressor_params(m, r).values())
                   for r in m.attention.compress_ratios)
    if not m.attention.kinds:
        return m.attention_layers * sum(attention_params(m).values())
    return sum(count * sum(attention_params(m, m.kind_attention(w)).values())
               for w, count in m.kind_groups if w not in NOT_ATTENTION)


def linear_params(m: ModelSpec) -> dict:
    """Weights of one linear-attention (Gated DeltaNet) block, ``LinearAttentionSpec``: {"qkv":
    in_proj_qkvz + in_proj_ba, "o": out_proj, "conv": the conv1d taps, "other": per head A_log
    and dt_bias, the gated norm's weight}; {} for a model without linear layers."""
    g, h = m.linear, m.hidden
    if g is None:
        return {}
    if isinstance(g, Mamba2Spec):   # Mamba-2 (HF NemotronHMamba2Mixer): in_proj, out_proj, the
        # conv1d's taps and bias, per head A_log, D and dt_bias, the gated norm's weight
        return {"qkv": h * g.in_proj_out, "o": g.intermediate * h,
                "conv": g.conv_channels * (g.conv_kernel + 1),
                "other": 3 * g.heads + g.intermediate}
    # KDA (SGLang kimi_k3.py KimiK3DeltaAttention): its projections (``in_proj``), per key
    # channel dt_bias, per head A_log, the gated per-head norm's weight
    other = g.key_dim + g.value_heads + g.value_head_dim if g.kda \
        else 2 * g.value_heads + g.value_head_dim
    return {"qkv": sum(w for w, _ in g.in_proj(h).values()),
            "o": g.value_dim * h, "conv": g.conv_channels * g.conv_kernel, "other": other}


def mixer_params(m: ModelSpec) -> int:
    """Weights of every layer's token mixer: softmax attention (``attention_params``) in the
    attention layers, Gated DeltaNet (``linear_params``) in the linear ones."""
    n_lin = m.linear_layers
    att = attention_params(m)
    # the layers without their own indexer (attention.indexer_types "shared"; the full layers
    # beside block-sparse ones) hold none of its weights (a GLM-5.2 checkpoint has
    # model.layers.N.self_attn.indexer.* on the full layers only; MiniMax-M3's index_q_proj /
    # index_k_proj are on its sparse layers only)
    shared = m.attention_layers - sum(m.layer_indexed) \
        if "indexer" in att and not m.attention.compressed else 0
    return attention_layer_params(m) - shared * att.get("indexer", 0) \
        + n_lin * sum(linear_params(m).values())


def param_counts(m: ModelSpec) -> dict:
    """Total and per-token active parameters of the model that runs (norms included, expert
    and router biases excluded), and ``params_mtp``: its multi-token-prediction layers as the
    checkpoint stores them (``mtp_params``), outside the totals (not loaded, not run)."""
    h, f = m.hidden, m.ffn
    att = mixer_params(m)          # over all layers
    norms = 2 * h
    embed = m.vocab * h * (1 if m.tie_embeddings else 2) + h       # + final norm
    if m.is_moe:
        # a latent MoE's experts at the latent width, plus its two latent projections
        # (FFNSpec.latent), which every token passes, like the shared expert
        expert = f.n_mats * f.expert_width(h) * f.expert_intermediate
        shared = f.n_mats * h * f.shared_intermediate + latent_proj_params(m)
        router = h * f.experts
        moe_total = f.experts * expert + shared + router
        moe_active = f.top_k * expert + shared + router
    else:
        moe_total = moe_active = 0
    # a layer without an FFN (``no_ffn``) has its attn_norm only; hyper-connections' mixing
    # and attention residuals' weights with the norms (``hc_params``, ``res_params``)
    all_norms = m.layers * norms - (len(m.no_ffn) + m.bare_layers) * h + hc_params(m) \
        + res_params(m)     # (a layer without an FFN or without a mixer: one norm)
    dense = dense_ffn_params(m)
    total = att + all_norms + dense + m.moe_layers * moe_total
    active = att + all_norms + dense + m.moe_layers * moe_active
    return {"params_total": float(total + embed), "params_active": float(active + embed),
            "params_mtp": float(m.mtp_layers * mtp_params(
                m, sum(attention_params(m).values()) + norms, moe_total))}


def dense_ffn_params(m: ModelSpec) -> int:
    """Weights of all the dense FFNs: each dense layer's matrices at its width (``FFNSpec.
    widths``: a layer of its own; else ``intermediate``)."""
    f = m.ffn
    widths = sum(f.widths) if f.widths else m.dense_ffn_layers * f.intermediate
    return f.n_mats * m.hidden * widths


def latent_proj_params(m: ModelSpec) -> int:
    """Weights of a latent MoE layer's fc1_latent_proj [hidden, latent] and fc2_latent_proj
    [latent, hidden] (transformers NemotronHMoE; no biases: mlp_bias false); 0 without."""
    return 2 * m.hidden * m.ffn.latent


def mtp_params(m: ModelSpec, layer_attention: float, moe_total: float) -> float:
    """Parameters of one multi-token-prediction module as DeepSeek-V3's checkpoint stores it
    (model.layers.61, huggingface.co/deepseek-ai/DeepSeek-V3 README_WEIGHTS.md): one decoder
    layer (attention and norms ``layer_attention``, the MoE FFN of the model's MoE layers, or its
    dense FFN), eh_proj [2 hidden -> hidden], enorm, hnorm and the shared head's norm, and its
    own copies of the embedding and the LM head (11.5B unique parameters + 0.9B + 0.9B for
    DeepSeek-V3, the card's "14B of MTP module weights")."""
    h, f = m.hidden, m.ffn
    ffn = moe_total if m.is_moe else f.n_mats * h * f.intermediate
    # Qwen3-Next / Qwen3.5 (the models with linear-attention layers): the MTP module (mtp.fc
    # [2 hidden -> hidden], mtp.layers.0 a full-attention layer, mtp.norm, mtp.pre_fc_norm_hidden
    # and _embedding) shares the model's embedding and LM head (vLLM qwen3_next_mtp.py loads them
    # from the model's), so no copies are counted; nor for MiMo (mtp_shared_embeddings:
    # huggingface.co/XiaomiMiMo/MiMo-7B-Base modeling_mimo.py MiMoMTPLayers holds norms, an
    # input_proj [2 hidden -> hidden], a Qwen2 attention and MLP; the embedding and head are the
    # model's)
    copies = 0 if m.linear is not None or m.mtp_shared_embeddings else 2 * m.vocab * h
    return layer_attention + ffn + 2 * h * h + 3 * h + copies


def weight_params(m: ModelSpec) -> dict:
    """Weights by op group (``WEIGHT_GROUPS``), summing to ``param_counts``' total: each group's
    format is ``m.precision.format_of(group)``. A tied LM head is the embedding's matrix."""
    h, f = m.hidden, m.ffn
    moe = m.moe_layers
    ssm = m.linear_layers * sum(linear_params(m).values()) \
        if isinstance(m.linear, Mamba2Spec) else 0
    return {"embedding": float(m.vocab * h),
            "attention": float(mixer_params(m) - ssm),
            "ssm": float(ssm),                  # the Mamba-2 layers' mixers
            "router": float(moe * h * f.experts) if m.is_moe else 0.0,
            "experts": float(moe * f.experts * f.n_mats * f.expert_width(h)
                             * f.expert_intermediate) if m.is_moe else 0.0,
            # a latent MoE's fc1/fc2_latent_proj count in the shared experts' group: dense
            # GEMMs of every token of the MoE layer (docs/design.md §1, "Latent MoE")
            "shared_experts": float(moe * (f.n_mats * h * f.shared_intermediate
                                           + latent_proj_params(m))) if m.is_moe else 0.0,
            "dense_ffn": float(dense_ffn_params(m)),
            "lm_head": 0.0 if m.tie_embeddings else float(m.vocab * h),
            "norm": float(m.layers * 2 * h - (len(m.no_ffn) + m.bare_layers) * h + h
                          + hc_params(m)
                          + res_params(m))}


def weight_bytes(m: ModelSpec) -> dict:
    """Bytes of the weights by op group in their formats (scales included) and their "total"."""
    out = {g: n * m.precision.bytes_of(g) for g, n in weight_params(m).items()}
    out["total"] = sum(out.values())
    return out


def __getattr__(name):
    """``model_from_hf_config`` without importing ``hf`` at start-up (it is a large module)."""
    if name == "model_from_hf_config":
        from .hf import model_from_hf_config
        return model_from_hf_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
