"""The HuggingFace checkpoints of the shipped models (lts/launch/checkpoints.py).

Every shipped model but the paper's synthetic ones has an entry; its first checkpoint is the
repository its TOML file's ``source`` names, stored in the format the TOML costs; every format is
an lts weight format; ``checkpoint_for`` finds a model's checkpoint by format.
"""
import re
from pathlib import Path

import pytest

from lts.launch.checkpoints import CHECKPOINTS, Checkpoint, checkpoint_for
from lts.specs import WEIGHT_FORMATS, load_model, shipped_names
from lts.specs._toml import loads

MODELS = Path(__file__).resolve().parent.parent / "models"
SYNTHETIC = ("moe1.6t", "moe1.2t")          # the paper's models: no weights were ever published
SHIPPED = [n for n in shipped_names("models") if n not in SYNTHETIC]
# huggingface.co/<org>/<name>/... : a repository id is its first two path components
HF_REPO = re.compile(r"^https://huggingface\.co/([^/]+/[^/]+)/")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _source(name: str) -> str:
    return loads((MODELS / f"{name}.toml").read_text())["source"]


def test_the_shipped_list_is_the_models_folder():
    assert set(SYNTHETIC) <= set(shipped_names("models"))
    assert len(SHIPPED) == 19 and sorted(SHIPPED) == sorted(
        p.stem for p in MODELS.glob("*.toml") if p.stem not in SYNTHETIC)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_model_has_its_own_repository_first(name):
    assert name in CHECKPOINTS
    own = CHECKPOINTS[name][0]
    match = HF_REPO.match(_source(name))
    assert match, f"{name}: source is not a huggingface.co URL"
    assert own.repo == match.group(1)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_own_repository_stores_the_format_the_model_file_costs(name):
    assert CHECKPOINTS[name][0].weights == load_model(name).precision.weights


def test_synthetic_models_have_no_entry():
    assert set(CHECKPOINTS) == set(SHIPPED)
    for name in SYNTHETIC:
        assert name not in CHECKPOINTS
        assert checkpoint_for(name, None) is None
        assert checkpoint_for(name, "bf16") is None


@pytest.mark.parametrize("name", SHIPPED)
def test_entries_are_well_formed(name):
    entries = CHECKPOINTS[name]
    assert isinstance(entries, tuple) and entries
    for c in entries:
        assert isinstance(c, Checkpoint)
        assert c.weights in WEIGHT_FORMATS, f"{name}: {c.repo} stores {c.weights!r}"
        assert REPO_ID.match(c.repo), c.repo
        assert c.source.startswith("https://"), c.source
    repos = [c.repo for c in entries]
    assert len(repos) == len(set(repos)), f"{name}: a repository listed twice"
    # one checkpoint per format, so that the format names the checkpoint
    formats = [c.weights for c in entries]
    assert len(formats) == len(set(formats)), f"{name}: two checkpoints of one format"


@pytest.mark.parametrize("name", SHIPPED)
def test_checkpoint_for_finds_each_entry_by_its_format(name):
    entries = CHECKPOINTS[name]
    assert checkpoint_for(name, None) is entries[0]
    for c in entries:
        assert checkpoint_for(name, c.weights) is c
    stored = {c.weights for c in entries}
    for fmt in WEIGHT_FORMATS:
        if fmt not in stored:
            assert checkpoint_for(name, fmt) is None


def test_checkpoint_for_unknown_names_and_formats():
    assert checkpoint_for("no-such-model", None) is None
    assert checkpoint_for("no-such-model", "fp8") is None
    assert checkpoint_for("llama3.1-8b", "no-such-format") is None
    # aliases are the caller's to resolve (FORMAT_ALIASES): "fp4" is not a stored format name
    assert checkpoint_for("llama3.1-8b", "fp4") is None


def test_a_few_known_checkpoints():
    assert checkpoint_for("deepseek-v3", None).repo == "deepseek-ai/DeepSeek-V3"
    assert checkpoint_for("deepseek-v3", "fp8_block").repo == "deepseek-ai/DeepSeek-V3"
    assert checkpoint_for("qwen3-235b-a22b", "fp8_block").repo == "Qwen/Qwen3-235B-A22B-FP8"
    assert checkpoint_for("qwen3-235b-a22b", "fp8").repo == "nvidia/Qwen3-235B-A22B-FP8"
    assert checkpoint_for("gpt-oss-120b", "mxfp4").repo == "openai/gpt-oss-120b"
    assert checkpoint_for("gpt-oss-120b", "nvfp4") is None
    assert checkpoint_for("kimi-k2.5", "w4a16_g32").repo == "moonshotai/Kimi-K2.5"
    assert checkpoint_for("minimax-m2.5", "nvfp4").repo == "nvidia/MiniMax-M2.5-NVFP4"
    assert checkpoint_for("glm-5", "fp8_block").repo == "zai-org/GLM-5-FP8"


def test_checkpoints_are_frozen():
    c = CHECKPOINTS["llama3.1-8b"][0]
    with pytest.raises(AttributeError):
        c.repo = "x/y"
