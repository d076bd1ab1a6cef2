"""The new layer kinds of issue 36 against measured kernels: lts's cost of one layer's module at
the shapes the kernel tables time it, beside the measured latency (a maintainer's check, printed;
nothing is fitted to these rows).

    python scripts/kind_check.py

The measured figures are rows of shared/data/kernels (the aiconfigurator-core 0.12.0 tables), each
named below by its file and key values; the modules they time:
- DeepSeek-V4 CSA / HCA: sparse_attention/<engine>/<release>/dsv4_{csa,hca}_{generation,context}
  _module_perf.parquet, the whole attention sublayer on one tp rank (q/kv/o projections, the
  compressor, the indexer and its top-k, the sparse kernel; no collectives): num_heads 16 at
  tp_size 8 (DeepSeek-V4-Pro at tp 8), decode batch 64 at step 8,192, prefill isl 4,096;
- DeepSeek-V4 mHC: mhc/<engine>/<release>/mhc_module_perf.parquet, both sites of a layer, pre
  and post, 4,096 tokens, hidden 7,168, hc_mult 4;
- Kimi-K3 KDA: kda/vllm/0.1.dev19262/kda_perf.parquet, fused_kda_decode (the conv update, the
  recurrence, the gated norm), generation batch 64, 96 heads of 128 (tp 1); context 4,096:
  causal_conv1d_fn_qkv3 + flashkda_fwd;
- MiniMax-M3 MSA: msa/<engine>/<release>/msa_{context,generation}_module_perf.parquet, the whole
  sparse block (projections included), 64 heads (tp 1), prefill 4,096, decode batch 64 at 131,072.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lts.cost.layouts import MODE_DIM0, MODE_DIM1, MODE_NONE, SLOT  # noqa: E402
from lts.cost.tables import build_tables, hc_costs  # noqa: E402
from lts.specs import load_model, load_topology  # noqa: E402
from lts.specs.workload import Workload  # noqa: E402

DATA = "tests/data/hf"
MIXER = (("qkv", MODE_DIM1), ("scores", MODE_DIM0), ("context", MODE_DIM0),
         ("out_proj", MODE_DIM0))
# (kind, GPU, phase) -> {engine release: ms}
MEASURED = {
    ("dsv4 CSA", "b200_dgx", "decode"): {"vllm 0.24.0": 0.1202, "sglang 0.5.14": 0.1899},
    ("dsv4 HCA", "b200_dgx", "decode"): {"vllm 0.24.0": 0.0684, "sglang 0.5.14": 0.0762},
    ("dsv4 CSA", "b200_dgx", "prefill"): {"vllm 0.24.0": 0.9828, "sglang 0.5.14": 1.3325},
    ("dsv4 HCA", "b200_dgx", "prefill"): {"vllm 0.24.0": 0.6562, "sglang 0.5.14": 0.6794},
    ("dsv4 CSA", "h200_dgx", "decode"): {"vllm 0.24.0": 0.1558, "sglang 0.5.14": 0.2397},
    ("dsv4 HCA", "h200_dgx", "decode"): {"vllm 0.24.0": 0.0798, "sglang 0.5.14": 0.0768},
    ("dsv4 CSA", "h200_dgx", "prefill"): {"vllm 0.24.0": 1.7187, "sglang 0.5.14": 2.0318},
    ("dsv4 HCA", "h200_dgx", "prefill"): {"vllm 0.24.0": 1.0912, "sglang 0.5.14": 0.9624},
    ("mHC", "b200_dgx", "prefill"): {"vllm 0.24.0": 0.2178 + 0.1644,
                                     "sglang 0.5.14": 0.1945 + 0.1649},
    ("mHC", "h200_dgx", "prefill"): {"vllm 0.24.0": 0.2766 + 0.2606,
                                     "sglang 0.5.14": 0.2910 + 0.2610},
    ("KDA", "b200_dgx", "decode"): {"vllm 0.1.dev19262": 0.1479},
    ("KDA", "h200_dgx", "decode"): {"vllm 0.1.dev19262": 0.2264},
    ("KDA", "b200_dgx", "prefill"): {"vllm 0.1.dev19262": 0.3853 + 0.5138},
    ("KDA", "h200_dgx", "prefill"): {"vllm 0.1.dev19262": 0.4598 + 0.8675},
    ("MSA", "b200_dgx", "decode"): {"vllm 0.24.0": 0.4361, "sglang 0.5.16": 0.5164},
    ("MSA", "h200_dgx", "decode"): {"vllm 0.24.0": 0.6612, "sglang 0.5.16": 0.6942},
    ("MSA", "b200_dgx", "prefill"): {"vllm 0.24.0": 1.1741, "sglang 0.5.16": 2.9402},
    ("MSA", "h200_dgx", "prefill"): {"vllm 0.24.0": 2.9289, "sglang 0.5.16": 3.7957},
}


def slots_ms(model, topo, tp, batch, ctx, phase, slots=MIXER):
    tab = build_tables(model, topo, Workload(phase, context=ctx), np.array([[tp, 1, 1, batch]]))
    return 1e3 * sum(tab.time_s[0, SLOT[s], mode] for s, mode in slots)


def dsv4(kind, topo, phase):
    """One DeepSeek-V4-Pro layer of the kind (every layer made that ratio), tp 8, fp8 KV."""
    m = load_model(f"{DATA}/deepseek-v4-pro.json")
    r = 4 if "CSA" in kind else 128
    m = dataclasses.replace(m, attention=dataclasses.replace(m.attention,
                                                             compress_ratios=(r,) * m.layers),
                            precision=dataclasses.replace(m.precision, kv_cache="fp8"))
    batch, ctx = (64, 8192) if phase == "decode" else (1, 4096)
    return slots_ms(m, topo, 8, batch, ctx, phase)


def mhc(topo):
    """Both sites' mixing of one DeepSeek-V4-Pro layer at 4,096 tokens (``hc_costs``)."""
    fl, io, _, _ = hc_costs(4, 7168)
    tokens = 4096
    hbm = topo.hbm_bandwidth_bytes_s * topo.memory_efficiency
    peak = topo.peak_for("bf16") * topo.compute_efficiency_for("bf16")
    return 1e3 * 2 * tokens * max(io * 2.0 / hbm, fl / peak)


def kda(topo, phase):
    """One Kimi-K3 KDA layer's recurrence and conv (scores + context), tp 1: a model of 92 KDA
    layers and one MLA layer with the MLA share taken out."""
    m = load_model(f"{DATA}/kimi-k3.json")
    heavy = dataclasses.replace(m, layer_types=("linear_attention",) * 92 + ("full_attention",))
    full = dataclasses.replace(m, layer_types=())
    batch = 64 if phase == "decode" else 1
    slots = (("scores", MODE_DIM0), ("context", MODE_DIM0))
    t = [slots_ms(x, topo, 1, batch, 4096, phase, slots) for x in (heavy, full)]
    return (t[0] - t[1] / 93) * 93 / 92


def msa(topo, phase):
    """One MiniMax-M3 block-sparse layer, tp 1, bf16."""
    m = load_model(f"{DATA}/minimax-m3.json")
    m = dataclasses.replace(m, layer_types=("block_sparse_attention",) * m.layers)
    batch, ctx = (64, 131072) if phase == "decode" else (1, 4096)
    return slots_ms(m, topo, 1, batch, ctx, phase)


def main() -> int:
    for (kind, gpu, phase), meas in MEASURED.items():
        topo = load_topology(gpu)
        t = (dsv4(kind, topo, phase) if kind.startswith("dsv4") else mhc(topo) if kind == "mHC"
             else kda(topo, phase) if kind == "KDA" else msa(topo, phase))
        print(f"{kind:9s} {gpu:9s} {phase:8s} lts {t:7.4f} ms  " + "  ".join(
            f"{e} {v:.4f} ms (lts/measured {t / v:.2f})" for e, v in meas.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
