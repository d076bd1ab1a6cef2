"""The strategy layout: its coarse axes named once, the 12 fused operators, value sets and the
search space (docs/design.md §2).

A strategy is one integer row: the coarse axes of ``AXES`` in their order, then twelve per-op
choice codes

    0 = shard dim 0, 1 = shard dim 1, 2 = none (replicated), 3 = experts (FFN1/FFN2 of MoE only).

Everything that reads or writes the coarse part goes through the names and helpers here (the
columns ``TP``..., ``N_COARSE``, ``instance_gpus``, ``placement``, ``coarse_key``, ``make_row``,
``coarse_dict``/``format_strategy``/``parse_strategy``, ``Space``): an axis is added by adding it
to ``AXES`` (and a field of ``Space``), not by editing the modules that use rows.

The ranks of one instance (``instance_gpus``: the product of the degree axes) are placed in the
order of ``PLACEMENT``, innermost first: tp innermost, then cp, ep, and pp outermost, so a tp
group is contiguous (stride 1), a cp group has stride tp, an ep group tp*cp and a pp group
tp*cp*ep.

The ``batch`` column is a count of requests whose meaning the phase gives: a decode step's batch,
a prefill pass's prompts, and in the serve phase the concurrency C (``CONCURRENCY`` names the same
column; ``AT_CAPACITY`` = 0 there: as many as the KV cache holds). ``load_name`` says which.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import StrategyError, count_problem, cut_quoted
from .limits import MAX_CONCURRENCY, MAX_DEGREE


@dataclass(frozen=True)
class Axis:
    """One coarse axis of a strategy row."""
    name: str
    degree: bool       # a parallel degree: its ranks are GPUs of the instance
    key_bits: int      # bits it takes in ``coarse_key`` (rows beyond them are grouped exactly
    #                    by a slower path)
    maximum: int       # the largest value a --strategy string may name
    help: str
    shown_at_one: bool = True   # text names it at 1 too (JSON always does)


# the coarse axes in column order
# (the key's 62 bits: tp 8 (< 256; the search's tp stops at 64), ep 10 (< 1,024 expert
# copies), pp 8 (the space's pp stops at 128), cp, dcp and etp 6 each (< 64: 64 itself, --max-cp
# 64 or --moe-tp 64, goes to ``key_exact``'s exact, slower path), batch 18 (< 262,144 requests);
# etp's 6 bits came from tp 9 -> 8, ep 11 -> 10, cp 7 -> 6, dcp 7 -> 6 and batch 20 -> 18)
AXES = (
    Axis("tp", True, 8, MAX_DEGREE,
         "tensor-parallel ranks: the group every op's choice shards over"),
    Axis("ep", True, 10, MAX_DEGREE,
         "expert-parallel groups: MoE experts split over them, the rest data-parallel"),
    Axis("pp", True, 8, MAX_DEGREE, "pipeline stages: the layers split in order"),
    Axis("cp", True, 6, MAX_DEGREE, "context-parallel ranks: each prompt's tokens split over "
         "them in prefill, the step's keys and values all-gathered", shown_at_one=False),
    Axis("dcp", False, 6, MAX_DEGREE, "decode context parallelism: the KV cache split by tokens "
         "over this many of the tp ranks (no more GPUs), the queries gathered and the partial "
         "results combined each layer", shown_at_one=False),
    Axis("etp", False, 6, MAX_DEGREE, "expert tensor parallelism under ffn1/ffn2 = experts: "
         "each expert's matrices split over this many of the tp ranks, the experts over the "
         "stage's tp x ep / etp expert groups (no more GPUs; the engines' moe_tp, moe_ep = "
         "tp x ep / etp)", shown_at_one=False),
    Axis("batch", False, 18, MAX_CONCURRENCY, "requests: a decode step's batch, a prefill pass's "
         "prompts, the serve phase's concurrency"),
)
COARSE = tuple(a.name for a in AXES)        # ("tp", "ep", "pp", "cp", "dcp", "etp", "batch")
COL = {a.name: i for i, a in enumerate(AXES)}        # column of each coarse axis
TP, EP, PP, CP, DCP, ETP, BATCH = (COL[n] for n in ("tp", "ep", "pp", "cp", "dcp", "etp",
                                                    "batch"))
N_COARSE = len(AXES)
DEGREES = tuple(a.name for a in AXES if a.degree)    # the axes whose product is an instance's GPUs
DEGREE_COLS = tuple(COL[n] for n in DEGREES)
# the axes that make an instance (every one but the load: a deployment at any batch)
INSTANCE = tuple(n for n in COARSE if n != "batch")
# rank placement, innermost first: cp just outside tp, as vLLM 0.33.0 (ParallelConfig: world
# pp x tp x pcp) and TensorRT-LLM (mapping.py: cp groups strided by tp) order their ranks
PLACEMENT = ("tp", "cp", "ep", "pp")
assert sorted(PLACEMENT) == sorted(DEGREES)

# the serve phase's name for the batch column, and its "as many as fit" value
CONCURRENCY = BATCH
AT_CAPACITY = 0


def load_name(phase: str) -> str:
    """What the batch column counts in ``phase``: "batch" (decode), "prompts" (prefill),
    "concurrency" (serve)."""
    return {"decode": "batch", "prefill": "prompts", "serve": "concurrency"}.get(phase, "batch")


OPS = ("embedding", "attn_norm", "qkv", "scores", "context", "out_proj",
       "ffn_norm", "router", "ffn1", "ffn2", "final_norm", "lm_head")
N_OPS = len(OPS)
WIDTH = N_COARSE + N_OPS
OP_COL = {name: N_COARSE + i for i, name in enumerate(OPS)}

DIM0, DIM1, NONE, EXPERTS = 0, 1, 2, 3
CHOICE_NAMES = ("0", "1", "none", "experts")
CHOICE_CODES = {"0": DIM0, "1": DIM1, "none": NONE, "experts": EXPERTS}

# what dim 0 / dim 1 mean per op (docs/design.md §2 table), for help text and reports
OP_DIMS = {
    "embedding": ("vocab", "hidden"), "attn_norm": ("tokens", "hidden"),
    "qkv": ("hidden (row)", "heads (column)"), "scores": ("heads", "head_dim (partial sums)"),
    "context": ("heads", "head_dim"), "out_proj": ("heads (row)", "hidden (column)"),
    "ffn_norm": ("tokens", "hidden"), "router": ("hidden", "experts"),
    "ffn1": ("hidden (row)", "intermediate (column)"), "ffn2": ("intermediate (row)", "hidden (column)"),
    "final_norm": ("tokens", "hidden"), "lm_head": ("hidden", "vocab"),
}
# Megatron-LM's per-op sharding: the baseline every report compares with
MEGATRON = (DIM0, NONE, DIM1, DIM0, DIM0, DIM0, NONE, NONE, DIM1, DIM0, NONE, DIM1)


def with_experts(choices) -> tuple:
    """The same per-op choices with whole experts split over the tp group (ffn1/ffn2 = experts)."""
    return tuple(EXPERTS if op in ("ffn1", "ffn2") else c for op, c in zip(OPS, choices))


# Megatron's choices with the experts split: the engines' expert-parallel MoE
EXPERT_CHOICES = with_experts(MEGATRON)
# Megatron with sequence parallelism (Korthikanti et al. 2022, "Reducing activation recomputation
# in large transformer models" §4.2.2): the norms split over tokens; the embedding here
# replicated rather than vocab-parallel
MEGATRON_SP = tuple(DIM0 if op.endswith("norm") else NONE if op == "embedding" else c
                    for op, c in zip(OPS, MEGATRON))
# data-parallel attention (SGLang --attn-dp-size, formerly --enable-dp-attention; DeepSeek-V3
# report §3.4): every rank of the tp group runs whole attention on its own tokens, the FFN as
# Megatron's
DP_ATTENTION = tuple(DIM0 if op.endswith("norm") else NONE if op not in ("ffn1", "ffn2") else c
                     for op, c in zip(OPS, MEGATRON))


def presets(is_moe: bool) -> tuple:
    """The per-op choices of the schemes engines ship: Megatron's, with sequence parallelism,
    data-parallel attention; for a MoE each also with the experts split (ffn1/ffn2 = experts)."""
    base = (MEGATRON, MEGATRON_SP, DP_ATTENTION)
    if not is_moe:
        return base
    return base + tuple(with_experts(v) for v in base)


def n_choices(is_moe: bool) -> tuple:
    """Choices per op: 3 each, 4 for FFN1/FFN2 of a MoE model (the `experts` choice)."""
    return tuple(4 if (is_moe and op in ("ffn1", "ffn2")) else 3 for op in OPS)


# ----------------------------------------------------------------------------------------------
# rows and their coarse part

def make_row(choices=MEGATRON, **coarse) -> np.ndarray:
    """A strategy row from named coarse values (each axis not named: 1) and per-op ``choices``
    (Megatron's unless given): ``make_row(tp=8, batch=64)``."""
    unknown = set(coarse) - set(COARSE)
    if unknown:
        raise TypeError(f"make_row: unknown axis {sorted(unknown)[0]!r} "
                        f"(axes: {', '.join(COARSE)})")
    return np.array([int(coarse.get(n, 1)) for n in COARSE] + list(choices), dtype=np.int64)


def coarse_rows(coarse, choices=MEGATRON) -> np.ndarray:
    """Strategy rows [G, WIDTH] from coarse rows [G, N_COARSE] with the same per-op ``choices``."""
    coarse = np.asarray(coarse, dtype=np.int64).reshape(-1, N_COARSE)
    return np.concatenate([coarse, np.tile(np.asarray(choices, dtype=np.int64),
                                           (len(coarse), 1))], axis=1)


def coarse_of(rows) -> np.ndarray:
    """The coarse part of rows [..., WIDTH] (or of coarse rows themselves): [..., N_COARSE]."""
    return np.asarray(rows)[..., :N_COARSE]


def with_coarse(row, **values) -> np.ndarray:
    """A copy of strategy row(s) with the named coarse axes set (``with_coarse(r, batch=1)``)."""
    out = np.array(row, dtype=np.int64, copy=True)
    for name, v in values.items():
        out[..., COL[name]] = v
    return out


def instance_gpus(rows):
    """GPUs of one instance of each row: the product of its degree axes (rows [..., >= N_COARSE]:
    strategy or coarse rows, one row or many; an int64 scalar or array)."""
    rows = np.asarray(rows)
    out = rows[..., DEGREE_COLS[0]]
    for c in DEGREE_COLS[1:]:
        out = out * rows[..., c]
    return out


def placement(degrees) -> dict:
    """Each degree axis's group as (ranks, stride): ``degrees`` maps axis name -> ranks (numbers
    or arrays); ranks are placed in ``PLACEMENT`` order, innermost first, so an axis's stride is
    the product of the degrees inside it (tp: 1, ep: tp, pp: tp*ep)."""
    out, stride = {}, 1.0
    for name in PLACEMENT:
        out[name] = (degrees[name], stride)
        stride = stride * degrees[name]
    return out


def coarse_dict(row) -> dict:
    """The coarse part of one row by name: {"tp": 8, "ep": 1, "pp": 1, "batch": 64}."""
    return {n: int(row[COL[n]]) for n in COARSE}


def choices_of(row) -> tuple:
    """The per-op choice codes of one row as a tuple of ints (comparable with ``MEGATRON`` and
    the engines' variants)."""
    return tuple(int(c) for c in row[N_COARSE:])


# the packed coarse key: each axis's value in its own bits of one int64, first axis highest
KEY_BITS = tuple(a.key_bits for a in AXES)
KEY_TOTAL = sum(KEY_BITS)
assert KEY_TOTAL <= 62
_KEY_WEIGHTS = np.array([1 << (KEY_TOTAL - sum(KEY_BITS[:i + 1])) for i in range(N_COARSE)]
                        + [0] * N_OPS, dtype=np.int64)


def coarse_key(rows) -> np.ndarray:
    """One int64 per row [N, >= N_COARSE] from its coarse part (exact while each value fits its
    axis's ``key_bits``: ``key_exact``), in the order of the coarse rows: cheap to sort and
    compare."""
    s = np.asarray(rows, dtype=np.int64)
    return s @ _KEY_WEIGHTS[:s.shape[1]]       # a matrix-vector product: one pass over the rows


def key_fields(key) -> list:
    """The coarse values packed in keys (``coarse_key``'s inverse), one contiguous array per
    axis (a strided column of the rows is ~4x slower to scan)."""
    out, shift = [], KEY_TOTAL
    for bits in KEY_BITS:
        shift -= bits
        out.append((key >> shift) & ((1 << bits) - 1))
    return out


def key_exact(coarse) -> bool:
    """Whether ``coarse_key`` keeps every field of these coarse rows [N, >= N_COARSE] (values
    >= 0 are assumed)."""
    coarse = np.asarray(coarse)
    if len(coarse) == 0:
        return True
    top = coarse[:, :N_COARSE].max(axis=0)          # one pass over the rows
    return bool(all(int(t) < 1 << b for t, b in zip(top, KEY_BITS)))


def degree_dict(row) -> dict:
    """The instance axes of one row by name ({"tp": 8, "ep": 1, "pp": 1, "cp": 1, "dcp": 1,
    "etp": 1}:
    every axis but batch): ``make_row(**degree_dict(r))`` is the same instance at batch 1 with
    Megatron's choices."""
    return {n: int(row[COL[n]]) for n in INSTANCE}


def instance_index(flat, shape, batch: int = BATCH) -> np.ndarray:
    """Flat indices into a coarse grid of ``shape`` (the coarse axes' numbers of values, in
    column order) -> the index of the same row at the batch axis's first value: one key per
    instance (every axis but the batch), equal exactly within an instance and rising with the
    grid's order. ``batch``: the batch axis's position in ``shape`` (the agent's grid may lack
    an axis: ``agent_columns``)."""
    flat = np.asarray(flat)
    stride = int(np.prod(shape[batch + 1:]))
    return flat - flat // stride % shape[batch] * stride


# ----------------------------------------------------------------------------------------------
# --strategy strings

# the largest degree and batch a --strategy string may name (a topology's size is checked later)
MAX_VALUE = {a.name: a.maximum for a in AXES}


def _parts(text: str):
    """The (key, value) pairs of a strategy text, each stripped of spaces."""
    for part in filter(None, (s.strip() for s in text.split(","))):
        if "=" not in part:
            raise StrategyError(f"--strategy: {cut_quoted(part)} is not key=value")
        key, value = (s.strip() for s in part.split("=", 1))
        yield key, value


def named_keys(text: str) -> set:
    """The keys a strategy text names (``"tp=8, batch = 5"`` -> {"tp", "batch"}), read as
    ``parse_strategy`` reads them."""
    return {key for key, _ in _parts(text)}


def parse_strategy(text: str, is_moe: bool = True) -> np.ndarray:
    """``"tp=8,ep=16,pp=4,batch=64,ffn2=1"`` -> a strategy row; unnamed ops take Megatron's choice.

    Raises StrategyError (a bad flag) naming the offending part.
    """
    if not text.strip(" ,"):
        raise StrategyError("--strategy: empty (expected e.g. tp=8,ep=1,pp=1,batch=64)")
    values = dict.fromkeys(COARSE, 1)
    ops = dict(zip(OPS, MEGATRON))
    seen = set()
    for key, value in _parts(text):
        if key in seen:
            raise StrategyError(f"--strategy: {cut_quoted(key)} given twice")
        seen.add(key)
        if key in values:
            problem = count_problem(value, MAX_VALUE[key])
            if problem:
                raise StrategyError(f"--strategy: {key}={problem}")
            values[key] = int(value)
        elif key in ops:
            if value not in CHOICE_CODES:
                raise StrategyError(f"--strategy: {key}={cut_quoted(value)} is not one of 0, 1, "
                                    "none, experts")
            code = CHOICE_CODES[value]
            if code == EXPERTS and key not in ("ffn1", "ffn2"):
                raise StrategyError(f"--strategy: {key}=experts: only ffn1 and ffn2 can split experts")
            if code == EXPERTS and not is_moe:
                raise StrategyError(f"--strategy: {key}=experts needs a MoE model")
            ops[key] = code
        else:
            raise StrategyError(f"--strategy: unknown key {cut_quoted(key)} (expected "
                                f"{', '.join(COARSE)} or "
                                f"one of {', '.join(OPS)})")
    return make_row([ops[o] for o in OPS], **values)


def agent_columns(space) -> np.ndarray:
    """The columns of a row the agent acts on (its heads): every one but an added axis's (not
    ``shown_at_one``: cp) where ``space`` gives it one value, so the agent's action space is
    the paper's 16 entries exactly until the axis is a choice."""
    return np.array([i for i, a in enumerate(AXES) if a.shown_at_one or len(space.values[i]) > 1]
                    + list(range(N_COARSE, WIDTH)), dtype=np.int64)


def format_strategy(row, only_changed: bool = False, sep: str = ",") -> str:
    """The inverse of parse_strategy (only ops that differ from Megatron if ``only_changed``;
    ``sep`` ", " for prose, where a narrow terminal then wraps between settings). An axis not
    ``shown_at_one`` (cp) is named only where it is not 1."""
    row = [int(v) for v in row]
    parts = [f"{a.name}={row[i]}" for i, a in enumerate(AXES) if a.shown_at_one or row[i] != 1]
    ops = format_ops(row, only_changed, sep)
    return sep.join(parts + ([ops] if ops else []))


def format_ops(row, only_changed: bool = False, sep: str = ",") -> str:
    """The per-op part of ``format_strategy`` alone ("" when only_changed and none differ)."""
    row = [int(v) for v in row]
    return sep.join(f"{op}={CHOICE_NAMES[row[N_COARSE + i]]}" for i, op in enumerate(OPS)
                    if not only_changed or row[N_COARSE + i] != MEGATRON[i])


def shown_axes(dicts) -> tuple:
    """The coarse axes a table of these strategies (``coarse_dict``s or JSON strategies) names:
    every axis ``shown_at_one``, the others where some strategy's is not 1 (an axis a JSON
    strategy lacks is 1, as in ``make_row``: a ``lts sweep`` output written before cp existed)."""
    dicts = list(dicts)
    return tuple(a.name for a in AXES
                 if a.shown_at_one or any(d.get(a.name, 1) != 1 for d in dicts))


def strategy_dict(row) -> dict:
    """JSON strategy object (docs/design.md §5)."""
    row = [int(v) for v in row]
    return {**coarse_dict(row),
            "ops": {op: CHOICE_NAMES[row[N_COARSE + i]] for i, op in enumerate(OPS)}}


def coarse_text(d: dict, names=COARSE, sep: str = "/") -> str:
    """The coarse values ``names`` of a strategy by name (``coarse_dict``, a JSON strategy or
    record) joined by ``sep``: "8/1/1/64"; ``names=DEGREES``: "8/1/1"."""
    return sep.join(str(d[n]) for n in names)


def coarse_settings(d: dict, names=COARSE, sep: str = " ") -> str:
    """The same as settings: "tp=8 ep=1 pp=1 batch=64" (an axis not ``shown_at_one`` only
    where it is not 1)."""
    return sep.join(f"{n}={d[n]}" for n in names if n in shown_axes([d]))


# ----------------------------------------------------------------------------------------------
# the search space

def _powers_of_two(limit):
    return tuple(2 ** i for i in range(int(math.log2(limit)) + 1)) if limit >= 1 else (1,)


# an ep degree beyond the powers of two: a multiple of this many ranks (whole 8-GPU nodes, and
# the divisors of a 72-GPU NVL72 rack's multiples that engines run: 24, 48, 72, 144, ...)
EP_STEP = 8


def ep_values(model, limit: int) -> tuple:
    """The ep degrees a MoE model's expert copies (``FFNSpec.slots``: its experts and any
    redundant ones) divide evenly: powers of two and multiples of ``EP_STEP``, up to ``limit``
    GPUs and the copies themselves (one each: 256 experts reach ep 256; 256 + 32 redundant
    reach 72, 96, 144 and 288 but not 64). (1,) for a dense model."""
    if not model.is_moe:
        return (1,)
    slots = model.ffn.slots
    return tuple(d for d in range(1, min(slots, limit) + 1) if slots % d == 0
                 and (d & (d - 1) == 0 or d % EP_STEP == 0))


@dataclass(frozen=True)
class Space:
    """Value sets of the coarse degrees and the per-op choices (docs/paper.md §3.2 recommendation,
    ep widened for wide expert parallelism).

    tp: powers of two up to 64; ep: ``ep_values`` (the paper's powers of two up to 64 grew to
    every degree the model's expert copies divide into: powers of two and whole nodes' multiples
    of 8, up to the copies, so EP 72 on an NVL72 rack with 32 redundant experts, EP 128 and 256
    over InfiniBand; 1 for dense models); pp: divisors of the layer count (up to 128); batch:
    powers of two up to ``max_batch``; cp: powers of two up to ``max_cp`` (1 unless asked:
    ``Workload.max_cp``); dcp: powers of two up to ``max_dcp`` (1 unless asked: a decode step's
    context parallelism, ``Workload.cp_space``; a row whose tp it does not divide is refused by
    the cost tables); etp: powers of two up to ``max_etp`` (1 unless asked: ``Workload.max_etp``,
    ``lts search --moe-tp``; a MoE model's only; a row whose tp it does not divide is refused by
    the cost tables, as is one whose ffn1/ffn2 are not `experts`: reason experts). Only instances
    that fit the GPU budget (``instance_gpus`` <= gpus) are in the space.
    """
    tp: tuple
    ep: tuple
    pp: tuple
    batch: tuple
    choices: tuple       # n choices per op
    gpus: int
    cp: tuple = (1,)
    dcp: tuple = (1,)
    etp: tuple = (1,)

    @classmethod
    def for_model(cls, model, gpus: int, max_batch: int = 4096, max_tp: int = 64,
                  max_cp: int = 1, max_dcp: int = 1, max_etp: int = 1):
        pp = tuple(d for d in range(1, min(model.layers, 128) + 1) if model.layers % d == 0)
        return cls(tp=tuple(v for v in _powers_of_two(max_tp) if v <= gpus),
                   ep=ep_values(model, gpus), pp=tuple(v for v in pp if v <= gpus),
                   batch=_powers_of_two(max_batch), choices=n_choices(model.is_moe), gpus=gpus,
                   cp=tuple(v for v in _powers_of_two(max_cp) if v <= gpus),
                   dcp=tuple(v for v in _powers_of_two(min(max_dcp, max_tp)) if v <= gpus),
                   etp=tuple(v for v in _powers_of_two(min(max_etp, max_tp)) if v <= gpus)
                   if model.is_moe else (1,))

    @property
    def values(self) -> tuple:
        """The value set of each coarse axis, in column order."""
        return tuple(getattr(self, n) for n in COARSE)

    def full_grid(self) -> np.ndarray:
        """Every combination of the coarse value sets [G, N_COARSE], the first axis slowest."""
        mesh = np.meshgrid(*self.values, indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1).astype(np.int64)

    def coarse_grid(self) -> np.ndarray:
        """All coarse rows within the GPU budget, [G, N_COARSE]."""
        grid = self.full_grid()
        return grid[instance_gpus(grid) <= self.gpus]

    @property
    def sizes(self) -> tuple:
        """Number of values of each entry of a row (the policy's head sizes)."""
        return tuple(len(v) for v in self.values) + tuple(self.choices)

    @property
    def size(self) -> int:
        return len(self.coarse_grid()) * int(np.prod(self.choices))

    def decode(self, idx: np.ndarray) -> np.ndarray:
        """Index rows [N, WIDTH] (one index per head) -> strategy rows [N, WIDTH]."""
        idx = np.asarray(idx, dtype=np.int64)
        out = idx.copy()
        for col, values in enumerate(self.values):
            out[:, col] = np.asarray(values, dtype=np.int64)[idx[:, col]]
        return out

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """Strategy rows -> index rows (values must be in the value sets)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = rows.copy()
        for col, values in enumerate(self.values):
            v = np.asarray(values)
            out[:, col] = np.searchsorted(v, rows[:, col])
        return out

    def sample(self, rng, n: int) -> np.ndarray:
        """n uniform index rows (not filtered by the budget)."""
        return np.stack([rng.integers(0, s, n) for s in self.sizes], axis=1)
