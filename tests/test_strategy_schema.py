"""The strategy layout named once (specs/strategy.py): its helpers against plain arithmetic, and
the property the schema exists for — a coarse axis added to ``AXES`` (and a field of ``Space``)
changes no answer and needs no edit elsewhere."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lts.specs.errors import StrategyError
from lts.specs.strategy import (AXES, BATCH, COARSE, COL, CP, DCP, DEGREES, EP, ETP, KEY_BITS, MEGATRON,
                                N_COARSE, PP, TP, WIDTH, Space, coarse_dict, coarse_key,
                                coarse_rows, format_strategy, instance_gpus, instance_index,
                                key_exact, make_row, parse_strategy, placement, strategy_dict,
                                with_coarse)

ROOT = Path(__file__).resolve().parents[1]
degree = st.integers(1, (1 << 8) - 1)


def test_columns_follow_the_axes():
    assert COARSE == ("tp", "ep", "pp", "cp", "dcp", "etp", "batch") and N_COARSE == len(AXES)
    assert (TP, EP, PP, CP, DCP, ETP, BATCH) == tuple(COL[n] for n in COARSE)
    assert DEGREES == ("tp", "ep", "pp", "cp") and WIDTH == N_COARSE + len(MEGATRON)


@given(degree, degree, degree, degree, st.integers(1, 64), st.integers(1, 64),
       st.integers(1, 4096))
def test_row_helpers_are_the_arithmetic(tp, ep, pp, cp, dcp, etp, batch):
    row = make_row(tp=tp, ep=ep, pp=pp, cp=cp, dcp=dcp, etp=etp, batch=batch)
    assert list(row) == [tp, ep, pp, cp, dcp, etp, batch, *MEGATRON]
    assert int(instance_gpus(row)) == tp * ep * pp * cp          # dcp, etp: tp's own ranks
    assert coarse_dict(row) == {"tp": tp, "ep": ep, "pp": pp, "cp": cp, "dcp": dcp,
                                "etp": etp, "batch": batch}
    assert list(with_coarse(row, batch=7)[:N_COARSE]) == [tp, ep, pp, cp, dcp, etp, 7]
    assert np.array_equal(coarse_rows([row[:N_COARSE]])[0], row)
    # ranks tp innermost, then cp, ep, pp
    assert placement(coarse_dict(row)) == {"tp": (tp, 1.0), "cp": (cp, tp), "ep": (ep, tp * cp),
                                           "pp": (pp, tp * cp * ep)}
    # parse and format are each other's inverse, the JSON object names the same values; text
    # names cp only where it is not 1
    assert np.array_equal(parse_strategy(format_strategy(row)), row)
    assert (",cp=" in format_strategy(row)) == (cp != 1)
    assert ("dcp=" in format_strategy(row)) == (dcp != 1)
    assert ("etp=" in format_strategy(row)) == (etp != 1)
    assert {k: v for k, v in strategy_dict(row).items() if k != "ops"} == coarse_dict(row)


@given(st.lists(st.tuples(degree, st.integers(1, 1023), degree, st.integers(1, 63),
                          st.integers(1, 63), st.integers(1, 63), st.integers(0, (1 << 18) - 1)),
                min_size=2, max_size=30))
def test_coarse_key_orders_rows_as_their_values(rows):
    """The packed key sorts rows lexicographically (first axis slowest) and is one-to-one."""
    coarse = np.array(rows, dtype=np.int64)
    assert key_exact(coarse)
    keys = coarse_key(coarse)
    lex = np.lexsort(coarse.T[::-1])
    assert np.all(np.diff(keys[lex]) >= 0)
    assert len(np.unique(keys)) == len(np.unique(coarse, axis=0))


def test_key_exact_names_rows_beyond_the_bits():
    ok = np.array([[(1 << b) - 1 for b in KEY_BITS]])
    assert key_exact(ok) and not key_exact(ok + np.eye(N_COARSE, dtype=np.int64)[[TP]])


def test_grid_and_instance_index():
    sp = Space(tp=(1, 2, 4), ep=(1, 2), pp=(1, 3), batch=(1, 8, 64), choices=(3,) * 12, gpus=8,
               cp=(1, 2))
    full, grid = sp.full_grid(), sp.coarse_grid()
    assert len(full) == 3 * 2 * 2 * 2 * 3 and np.all(instance_gpus(grid) <= 8)
    assert len(grid) == sum(int(np.prod(r[:BATCH])) <= 8 for r in full)
    # one key per instance: equal across the batch values of an instance, distinct across them
    inst = instance_index(np.arange(len(full)), sp.sizes[:N_COARSE])
    for i, r in enumerate(full):
        same = np.all(full[:, :BATCH] == r[:BATCH], axis=1)
        assert set(inst[same]) == {inst[i]} and inst[i] not in set(inst[~same])


def test_make_row_and_parse_name_the_axes():
    with pytest.raises(TypeError, match="unknown axis 'cq'"):
        make_row(cq=2)
    with pytest.raises(StrategyError,
                       match=r"unknown key .cq. \(expected tp, ep, pp, cp, dcp, etp, batch or"):
        parse_strategy("tp=2,cq=2")


# ----------------------------------------------------------------------------------------------
# an axis added to the schema: nothing else edited, every answer the same

def _with_axis(dst: Path) -> Path:
    """A copy of the package whose strategy rows carry one more degree axis, ``xp`` (one value,
    1), between pp and cp and placed just outside cp: edits to specs/strategy.py only."""
    shutil.copytree(ROOT / "lts", dst / "lts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "lts.py", dst / "lts.py")
    for shipped in ("models", "topologies"):
        (dst / shipped).symlink_to(ROOT / shipped)
    path = dst / "lts" / "specs" / "strategy.py"
    src = path.read_text()
    edits = [
        ('    Axis("ep", True, 10,', '    Axis("ep", True, 8,'),
        ('    Axis("pp", True, 8, MAX_DEGREE, "pipeline stages: the layers split in order"),',
         '    Axis("pp", True, 8, MAX_DEGREE, "pipeline stages: the layers split in order"),\n'
         '    Axis("xp", True, 2, MAX_DEGREE, "an added degree"),'),
        ('PLACEMENT = ("tp", "cp", "ep", "pp")', 'PLACEMENT = ("tp", "cp", "xp", "ep", "pp")'),
        ("    cp: tuple = (1,)\n", "    cp: tuple = (1,)\n    xp: tuple = (1,)\n"),
    ]
    for old, new in edits:
        assert src.count(old) == 1, f"specs/strategy.py no longer holds {old!r}: update this test"
        src = src.replace(old, new)
    path.write_text(src)
    return dst


def _strip(o):
    """An output without the added axis: its JSON keys and its ``xp=1`` settings."""
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k != "xp" and not k.endswith("wall_s")}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    if isinstance(o, str):
        return o.replace(",xp=1", "").replace(", xp=1", "").replace(" xp=1", "")
    return o


COMMANDS = [
    ["estimate", "moe1.6t", "h100_dgx", "--strategy", "tp=8,ep=16,pp=4,batch=64"],
    ["estimate", "llama3.1-70b", "h100_dgx", "--phase", "prefill", "--strategy", "tp=8,batch=4",
     "--gpus", "8"],
    ["search", "moe1.2t", "h100_dgx"],
    ["search", "llama3.1-70b", "h100_dgx", "--phase", "serve", "--gpus", "16",
     "--tpot-slo-ms", "50", "--engine", "vllm"],
    ["search", "mixtral-8x7b", "h100_dgx", "--phase", "serve", "--gpus", "16", "--engine",
     "trtllm"],
    ["simulate", "mixtral-8x7b", "h100_dgx", "--prefill", "tp=2", "--decode", "tp=4,batch=32",
     "--engine", "sglang", "--num-prompts", "32", "--max-concurrency", "16"],
    ["simulate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=2", "--num-prompts", "40",
     "--max-concurrency", "8"],
]


def _run(root: Path, args) -> dict:
    out = subprocess.run([sys.executable, str(root / "lts.py"), *args, "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a[:2] + a[-1:]))
def test_an_added_axis_changes_no_answer(tmp_path, args):
    """The proof that every module reads rows through the schema: with a sixth coarse column
    whose only value is 1, the answers are the same as without it."""
    added = _with_axis(tmp_path)
    assert _strip(_run(added, args)) == _strip(_run(ROOT, args))
