"""The ``Engine`` type: one serving engine as a unit (docs/engines.md).

An engine is what ``--engine`` and ``--emit`` name: its scheduler profile for each release lts
models (``profiles.EngineProfile``), what it runs in lts's strategy encoding (``space``), and the
release its launch flags are written for with the data those flags need (``lts.launch``). Each
engine's values live in its own module (``generic``, ``vllm``, ``sglang``, ``trtllm``); the
registry (``lts.engines``) holds one ``Engine`` per name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ..specs.versions import numbers
from .profiles import EngineProfile


@dataclass(frozen=True, eq=False)
class Engine:
    """One serving engine: its name, profiles by version, space rule and launch-flag data."""
    name: str                   # the --engine/--emit value, and the JSON "engine" field
    label: str                  # its name in sentences ("vLLM")
    profiles: Mapping[str, EngineProfile]   # release -> scheduler profile (lts.serving)
    version: str                # the release whose profile lts serves with (a key of profiles)
    source_keys: tuple = ()     # lower-case words that name it in a measurement's source
    # what it runs (engines.space): the MoE variants it also runs at ep > 1 (every variant runs
    # at ep = 1); None: no engine space, the paper's whole per-op space
    ep_variants: tuple | None = None
    more_reasons: Callable | None = None   # (tp, ep, choices) -> further sentences for check
    # context parallelism (lts's cp axis: more GPUs, each prompt's tokens split over them in
    # prefill): the attention kinds it runs it for (() none) and, where it runs none or not
    # this model's, why, with its source
    cp_kinds: tuple = ()
    cp_why: str = ""
    # decode context parallelism (lts's dcp axis: the KV cache split by tokens over dcp of the
    # tp ranks): the attention kinds it runs it for, why not elsewhere, and whether a gqa
    # model's dcp is bounded by its duplicated KV heads (vLLM's rule: engines.space.dcp_mask)
    dcp_kinds: tuple = ()
    dcp_why: str = ""
    dcp_kv_rule: bool = False
    # expert tensor parallelism (lts's etp axis: under ffn1/ffn2 = experts each expert split over
    # etp tp ranks, the engine's moe_tp = etp x moe_ep = tp x ep / etp): whether it runs it, and
    # where it does not, why, with its source
    runs_etp: bool = False
    etp_why: str = ""
    # launch flags (lts.launch): "" where lts writes none
    flags_version: str = ""     # the release whose source the flags were read from
    flags_docs: str = ""        # the files they were read from
    disagg_docs: str = ""       # the files its disaggregation flags were read from
    command: str = ""           # the words that mark its server's command line
    gpu_flags: tuple = ()       # the flags whose product is the GPUs one command asks for
    fp8_kv_dtype: str = ""      # --kv-cache-dtype for an fp8 KV cache ("": no such flag)
    chunked_prefill: bool = True   # splits a long prompt over steps by default
    # KV-cache offload to host memory (--kv-offload, serving.offload): where the engine ships
    # it ("": it has none), and whether the host copy includes what the GPU holds (every block
    # stored to host as computed: True; blocks copied to host only when the GPU evicts them:
    # False)
    kv_offload: str = ""
    offload_inclusive: bool = False
    # the GPU vendors it runs on (a topology's [gpu] vendor); --engine/--emit on another vendor's
    # GPU is refused with one line (cli); each engine module cites the docs of its platforms
    vendors: tuple = ("nvidia",)

    @property
    def profile(self) -> EngineProfile:
        """The scheduler profile of ``version``."""
        return self.profiles[self.version]

    def release_for(self, version: str) -> str:
        """The profile release that stands for an engine ``version`` (a measurement's
        ``engine_version``): the newest release not newer than it, by its numeric dotted prefix
        ("0.18.0" -> "0.12" of {"0.12", "0.19"}); older than every release, the oldest; a
        version without numbers ("nightly-...", a branch name) or "", the served ``version``."""
        want = numbers(version)
        numbered = [r for r in self.profiles if numbers(r)]
        if not want or not numbered:
            return self.version
        older = [r for r in numbered if numbers(r) <= want]
        return max(older, key=numbers) if older else min(numbered, key=numbers)

    @staticmethod
    def release_key(version: str) -> tuple:
        """A version's numbers without trailing zeros: equal for versions that name one release
        ("0.12.0", "v0.12" and "0.12")."""
        parts = list(numbers(version))
        while parts and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    @staticmethod
    def same_release(a: str, b: str) -> bool:
        """Whether two versions name one release (``release_key``)."""
        return Engine.release_key(a) == Engine.release_key(b)

    def vendor_problem(self, topo, topology: str) -> str:
        """Why this engine does not run on ``topo``'s GPUs (named ``topology``), or "": the one
        sentence ``lts estimate``/``search`` refuse with and ``validate`` skips a row for."""
        if self.whole_space or topo.vendor in self.vendors:
            return ""
        return (f"{self.label} does not run on {topo.gpu_name} ({topology}, gpu.vendor = "
                f"{topo.vendor}); it runs on {' and '.join(self.vendors)} GPUs only")

    @property
    def whole_space(self) -> bool:
        """True when the engine runs every strategy (no engine space: ``generic``)."""
        return self.ep_variants is None


