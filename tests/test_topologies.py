"""The GPUs of issue 22 (docs/gpus.md): every new topology loads, a search runs on it, its
datasheet figures are hardware.md's (transcribed below, each with its line), every number in it
carries a comment; the link-shape keys refuse bad values; an engine that does not run on a
GPU's vendor is refused with one line."""
import re

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.specs import SpecError, load_topology, resolve
from lts.specs import _toml

NEW = ("b300_dgx", "gb300_nvl72", "mi300x_x8", "mi325x_x8", "mi355x_x8", "h20_hgx", "l40s_pcie")
AMD = ("mi300x_x8", "mi325x_x8", "mi355x_x8")

# (bf16, fp8, fp4 dense TFLOPS or None, memory the engine sees in GiB, HBM TB/s), transcribed from
# /work/shared/data/hardware.md §5 (the line of each table quoted in the comment)
HARDWARE_MD = {
    # §5.1 "| BF16 | 2,250 |", "| FP8 | 4,500 |", "| FP4 (NVFP4) | 13,500–14,000 |",
    # "| Driver total | **275,040 MiB** |", "| Bandwidth | 7.7 TB/s (datasheet) |"
    "b300_dgx": (2250, 4500, 13500, 275040 / 1024, 7.7),
    # §5.2 "| BF16 | 2,500 |", "| FP8 | 5,000 |", "| FP4 | 15,000 |",
    # "| Driver total | **284,208 MiB** |", "| Bandwidth | 8 TB/s |"
    "gb300_nvl72": (2500, 5000, 15000, 284208 / 1024, 8.0),
    # §5.3 "| BF16 | 1,307.4 |", "| FP8 | 2,614.9 |", "| FP4 | not supported |",
    # "| Driver total | rocm-smi **206,158,430,208 B** = 196,608 MiB = 192 GiB |", "| Bandwidth | 5.3 TB/s |"
    "mi300x_x8": (1307.4, 2614.9, None, 206158430208 / 2**30, 5.3),
    # §5.4 "| BF16 / FP8 | 1,307.4 / 2,614.9 |", "| FP4 | not supported |",
    # "| Driver total | **not found**; inferred 262,144 MiB |", "| Bandwidth | 6.0 TB/s |"
    "mi325x_x8": (1307.4, 2614.9, None, 262144 / 1024, 6.0),
    # §5.5 "| BF16 | 2,516.6 |", "| FP8 | 5,000 (AMD dense) |", "| FP4 (MXFP4; MXFP6 the same) | 10,100 |",
    # "| Driver total | **not found** (inferred 294,912 MiB, as for MI325X) |", "| Bandwidth | 8 TB/s |"
    "mi355x_x8": (2516.6, 5000, 10100, 294912 / 1024, 8.0),
    # §5.6 "| BF16 | 148 |", "| FP8 | 296 |", "| FP4 | not supported (Hopper) |",
    # "| Driver total | **97,871 MiB** (96 GB SKU) |", "| Bandwidth | 4.0 TB/s |"
    "h20_hgx": (148, 296, None, 97871 / 1024, 4.0),
    # §5.7 "| BF16 | 362.05 |", "| FP8 | 733 |", "| FP4 | not supported (Ada) |",
    # "| Driver total | **46,068 MiB** |", "| Bandwidth | 864 GB/s |"
    "l40s_pcie": (362.05, 733, None, 46068 / 1024, 0.864),
}

# the scale-up link per GPU and direction, and its shape (hardware.md §5.1-5.7 "Scale-up" rows)
LINKS = {
    "b300_dgx": ("switch", 8, 900),      # §5.1 "NVLink 5 + NVSwitch, 8-GPU domain, 900 GB/s per direction"
    "gb300_nvl72": ("switch", 72, 900),  # §5.2 "72-GPU NVLink 5 switched domain, 900 GB/s per direction"
    "mi300x_x8": ("mesh", 8, 64),        # §5.3 "7 xGMI links, full mesh of 8: 64 GB/s per link per direction"
    "mi325x_x8": ("mesh", 8, 64),        # §5.4 "Same as MI300X: 7 links × 64 GB/s per direction"
    "mi355x_x8": ("mesh", 8, 76.8),      # §5.5 "inferred 76.8 per direction per link"
    "h20_hgx": ("switch", 8, 450),       # §5.6 "inferred 450 per direction (NVLink 4 convention), 8-GPU NVSwitch"
    "l40s_pcie": ("pcie", 8, 32),        # §5.7 "no NVLink; PCIe Gen4 x16, 32 GB/s per direction"
}


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", NEW)
def test_figures_match_hardware_md(name):
    raw = _toml.loads(resolve("topologies", name).read_text())
    g = raw["gpu"]
    bf16, fp8, fp4, gib, tb_s = HARDWARE_MD[name]
    assert g["bf16_tflops"] == pytest.approx(bf16, rel=1e-9)
    assert g["fp8_tflops"] == pytest.approx(fp8, rel=1e-9)
    assert g.get("fp4_tflops") == (None if fp4 is None else pytest.approx(fp4, rel=1e-9))
    assert g["hbm_gib"] == pytest.approx(gib, abs=0.005)          # rounded to 0.01 GiB
    assert g["hbm_bandwidth_tb_s"] == pytest.approx(tb_s, rel=1e-9)
    assert g.get("vendor", "nvidia") == ("amd" if name in AMD else "nvidia")
    shape, span, gb_s = LINKS[name]
    inner = raw["link"][0]
    assert (inner.get("shape", "switch"), inner["span_gpus"], inner["bandwidth_gb_s"]) == \
        (shape, span, pytest.approx(gb_s))


@pytest.mark.parametrize("name", NEW)
def test_every_number_has_a_comment(name):
    """Numbers have sources: every key = number line of a new topology carries a comment."""
    for line in resolve("topologies", name).read_text().splitlines():
        if re.match(r"^\w+ = [\d.]+", line):
            assert "#" in line, (name, line)


@pytest.mark.parametrize("name", NEW)
def test_loads_and_a_search_runs(name):
    t = load_topology(name)
    assert t.vendor == ("amd" if name in AMD else "nvidia")
    assert t.gpus >= 8 and t.links[-1].span_gpus >= t.gpus
    r = run("search", "llama3.1-70b", name, "--gpus", "8", "--json")
    assert r.exit_code == 0, r.output
    assert '"valid": true' in r.output


@pytest.mark.parametrize("name", AMD)
@pytest.mark.parametrize("args", [
    ("search", "llama3.1-70b", "{t}", "--gpus", "8", "--emit", "trtllm"),
    ("search", "llama3.1-70b", "{t}", "--gpus", "8", "--phase", "serve", "--engine", "trtllm"),
    ("estimate", "llama3.1-70b", "{t}", "--strategy", "tp=8", "--phase", "serve",
     "--engine", "trtllm"),
], ids=["search-emit", "search-engine", "estimate-engine"])
def test_trtllm_refused_on_amd(name, args):
    flag = "--emit" if "--emit" in args else "--engine"
    r = run(*[a.format(t=name) for a in args])
    gpu = load_topology(name).gpu_name
    assert r.exit_code == 1
    assert r.output == (f"Error: {flag} trtllm: TensorRT-LLM does not run on {gpu} ({name}, "
                        "gpu.vendor = amd); it runs on nvidia GPUs only\n")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_rocm_engines_run_on_amd(engine):
    r = run("estimate", "llama3.1-8b", "mi300x_x8", "--strategy", "tp=1", "--phase", "serve",
            "--engine", engine, "--json")
    assert r.exit_code == 0, r.output


def test_trtllm_runs_on_nvidia_pcie():
    r = run("estimate", "llama3.1-8b", "l40s_pcie", "--strategy", "tp=1", "--phase", "serve",
            "--engine", "trtllm", "--json")
    assert r.exit_code == 0, r.output


def write_variant(tmp_path, name, old, new):
    text = resolve("topologies", name).read_text()
    assert old in text
    p = tmp_path / "t.toml"
    p.write_text(text.replace(old, new, 1))
    return str(p)


@pytest.mark.parametrize("name,old,new,message", [
    ("mi300x_x8", 'shape = "mesh"', 'shape = "torus"',
     "link[0].shape: 'torus' is not one of 'switch', 'mesh', 'pcie'"),
    ("mi300x_x8", 'vendor = "amd"', 'vendor = "intel"',
     "gpu.vendor: 'intel' is not one of 'nvidia', 'amd'"),
    ("mi300x_x8", 'shape = "mesh"', 'shape = "mesh"\nshared_gb_s = 64',
     "link[0].shared_gb_s: only with shape = \"pcie\" (this link's shape is 'mesh')"),
])
def test_link_shape_keys_refuse_bad_values(tmp_path, name, old, new, message):
    path = write_variant(tmp_path, name, old, new)
    with pytest.raises(SpecError) as e:
        load_topology(path)
    assert str(e.value) == f"{path}: {message}"


def test_mesh_of_one_gpu_is_refused(tmp_path):
    text = resolve("topologies", "l40s_pcie").read_text()
    text = text.replace('shape = "pcie"', 'shape = "mesh"').replace("span_gpus = 8 ", "span_gpus = 1 ")
    text = text.replace("gpus = 8 ", "gpus = 1 ")
    p = tmp_path / "t.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as e:
        load_topology(str(p))
    assert str(e.value) == f"{p}: link[0].span_gpus: 1: a mesh connects at least 2 GPUs"


@pytest.mark.parametrize("shared,per_gpu", [(64, 8e9), (256, 32e9), (1000, 32e9)])
def test_pcie_shared_capacity_caps_each_gpu(tmp_path, shared, per_gpu):
    """shared_gb_s: the span's GPUs all move data at once, each gets min(x16, shared / span)."""
    path = write_variant(tmp_path, "l40s_pcie", 'shape = "pcie"',
                         f'shape = "pcie"\nshared_gb_s = {shared}')
    assert load_topology(path).links[0].bandwidth_bytes_s == pytest.approx(per_gpu)
