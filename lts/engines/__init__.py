"""engines: what each serving engine is, one module per engine, and the registry of them.

Each engine is one ``engine.Engine`` built in its own module (``generic``, ``vllm``, ``sglang``,
``trtllm``): its scheduler profiles by release, what it runs (``space``) and the release its
launch flags are written for. The command line, search, serving, launch and report all look an
engine up here by its name.

Adding an engine version: add its ``EngineProfile`` to ``PROFILES`` in the engine's module under
the release's name, and set ``version`` of the module's ``ENGINE`` to it where lts should serve
with it (the profile's ``title`` names the release). Launch flags for a new release: set
``FLAGS_VERSION`` there and add the release's flag lists to tests/data/engine_flags/
(scripts/engine_flags.py). Adding an engine: a module with an ``ENGINE``, listed below.
"""
from __future__ import annotations

from dataclasses import replace

from . import generic, sglang, trtllm, vllm
from .engine import Engine
from .profiles import EngineProfile
from ..specs.workload import Workload

ENGINES = {e.name: e for e in (generic.ENGINE, vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE)}
ENGINE_NAMES = tuple(ENGINES)                # the --engine choices
GENERIC = generic.ENGINE.name                # no engine: the paper's whole per-op space
# the released engines (all but generic): lts knows what they run and writes their launch flags
REAL_ENGINES = tuple(name for name, e in ENGINES.items() if not e.whole_space)


def get(name: str) -> Engine:
    """The engine of that name (a ValueError names the known ones)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINE_NAMES)}") from None


def engine_for_source(text: str) -> str:
    """The engine a measurement's ``source`` names (``trtllm``/TensorRT-LLM, ``vllm``,
    ``sglang``), or "" when it names none or several."""
    t = text.lower()
    found = [name for name, e in ENGINES.items() if any(k in t for k in e.source_keys)]
    return found[0] if len(found) == 1 else ""


def version_in_source(text: str, engine: str) -> str:
    """The version written after the engine's name in a measurement's ``source`` ("...: vllm
    0.12.0" -> "0.12.0"; "trtllm 1.2.0rc2.post2" -> "1.2.0rc2.post2"), or ""."""
    words = text.lower().replace("==", " ").replace(":", " ").replace(",", " ").split()
    for i, w in enumerate(words[:-1]):
        nxt = words[i + 1]
        nxt = nxt[1:] if nxt.startswith("v") else nxt
        if w in ENGINES[engine].source_keys and nxt[:1].isdigit():
            return nxt
    return ""


def chunked(work: Workload, profile: EngineProfile) -> Workload:
    """A prefill pass as the engine of ``profile`` runs it: a prompt longer than its token budget
    per step (``step_tokens``, each attention-DP rank its own or a share: ``budget_per_rank``)
    prefilled in chunks over several steps (``specs.workload.prefill_steps``), where the engine
    chunks a long prompt by default (``Engine.chunked_prefill``: vLLM, SGLang). Unchanged (one
    pass) for the generic engine, lts's own with no release behind it, and TensorRT-LLM
    (enable_chunked_prefill off; lts's prefill launch sets --max_num_tokens to the pass)."""
    e = ENGINES.get(profile.name)
    if e is None or e.whole_space or not e.chunked_prefill:
        return work
    return replace(work, step_tokens=profile.step_tokens,
                   budget_per_rank=profile.budget_per_rank)
