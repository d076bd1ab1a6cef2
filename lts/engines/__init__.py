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

from . import generic, sglang, trtllm, vllm
from .engine import Engine

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
