"""Fuzzing, round two (issue 26): the process as a shell leaves it, and flags against phases.

1. **Process-level conditions**: hypothesis draws a command and what its output meets — a pipe
   the reader closed, a full disk, a standard output closed before the start, an encoding
   without lts's symbols, a terminal 1-200 columns wide, a path longer than a file name may be
   — and runs lts in a real process. Each condition has one answer (``lts.streams``): exit 0
   quietly, or one ``Error:`` line and exit 1; never a traceback.
2. **Phase and flag combinations**: hypothesis draws a phase and a few flags with plausible
   values; a flag the phase (or its partner flag) does not use must be refused with a line
   naming it, never accepted and ignored (the silent wrong answers of the first round).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]
LTS = [sys.executable, str(ROOT / "lts.py")]

# quick commands that print tables with lts's symbols (µ, ×, →)
COMMANDS = [["models"], ["topologies"], ["models", "--show", "mixtral-8x7b"],
            ["estimate", "llama3.1-8b", "h100_dgx", "--strategy", "tp=2"],
            ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--method", "megatron"],
            ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--json"]]
CONDITIONS = ["closed pipe", "full disk", "closed stdout", "ascii", "latin-1", "C locale",
              "columns", "long path"]


def _run(cmd, condition, columns):
    env = {**os.environ, "PYTHONUTF8": "0"}
    if condition == "ascii":
        env["PYTHONIOENCODING"] = "ascii"
    elif condition == "latin-1":
        env["PYTHONIOENCODING"] = "latin-1"
    elif condition == "C locale":
        env.update(LANG="C", LC_ALL="C", PYTHONIOENCODING="")
    elif condition == "columns":
        env["COLUMNS"] = str(columns)
    if condition == "long path":      # the model argument (a command without one: --show's)
        cmd = [cmd[0], cmd[1] + "/" + "y" * 300, *cmd[2:]] if cmd[0] in ("estimate", "search") \
            else ["models", "--show", "y" * 300]
    kw = dict(stderr=subprocess.PIPE, env=env, timeout=120)
    if condition == "closed pipe":
        r, w = os.pipe()
        os.close(r)
        try:
            return subprocess.run(LTS + cmd, stdout=w, **kw), ""
        finally:
            os.close(w)
    if condition == "full disk":
        with open("/dev/full", "wb") as full:
            return subprocess.run(LTS + cmd, stdout=full, **kw), ""
    if condition == "closed stdout":
        return subprocess.run(LTS + cmd, preexec_fn=lambda: os.close(1), **kw), ""
    p = subprocess.run(LTS + cmd, stdout=subprocess.PIPE, **kw)
    return p, p.stdout


@pytest.mark.skipif(not Path("/dev/full").exists() or os.name != "posix",
                    reason="needs /dev/full and POSIX file descriptors")
@settings(max_examples=24, suppress_health_check=[HealthCheck.too_slow])
@given(cmd=st.sampled_from(COMMANDS), condition=st.sampled_from(CONDITIONS),
       columns=st.integers(1, 200))
def test_every_output_condition_has_one_answer(cmd, condition, columns):
    p, out = _run(list(cmd), condition, columns)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, (cmd, condition, err[-1500:])
    errors = [x for x in err.splitlines() if x.startswith("Error:")]
    if condition == "closed pipe":
        assert p.returncode == 0 and err == "", (cmd, err)
    elif condition == "full disk":
        assert p.returncode == 1 and errors == ["Error: cannot write the output: No space left "
                                                "on device"], (cmd, err)
    elif condition == "closed stdout":
        assert p.returncode == 1 and errors == ["Error: standard output is closed: lts has "
                                                "nowhere to write its answer"], (cmd, err)
    elif condition == "long path":
        assert p.returncode in (1, 2) and len(errors) == 1 and "a file name may have" in \
            errors[0], (cmd, err)
    else:
        assert p.returncode == 0, (cmd, condition, err[-1500:])
        if condition in ("ascii", "C locale"):
            assert out.isascii(), (cmd, condition)
        if condition == "columns" and "--json" not in cmd:
            assert "…".encode() not in out, (cmd, columns)


# ----------------------------------------------------------------------------------------------
# phase and flag combinations

# flag -> (plausible value, the phases that use it, the flag it needs beside it or None)
PHASE_FLAGS = {
    "--context": ("4096", {"decode", "prefill"}, None),
    "--tpot-slo-ms": ("50", {"decode", "serve"}, None),
    "--ttft-slo-ms": ("2000", {"prefill", "serve"}, None),
    "--isl": ("1000", {"serve"}, None),
    "--osl": ("200", {"serve"}, None),
    "--request-rate": ("5", {"serve"}, None),
    "--prefix-hit": ("0.5", {"serve"}, None),
    "--prefixes": ("4", {"serve"}, "--prefix-hit"),
    "--spec": ("eagle", {"serve"}, None),
    "--spec-tokens": ("2", {"serve"}, "--spec"),
    "--acceptance": ("0.7", {"serve"}, "--spec"),
    "--decode-topology": ("h200_dgx", {"serve"}, None),
}
COMMAND_FLAGS = {"search": set(PHASE_FLAGS),
                 "compare": {"--context", "--tpot-slo-ms", "--ttft-slo-ms", "--isl", "--osl"}}


@st.composite
def phase_cases(draw):
    cmd = draw(st.sampled_from(sorted(COMMAND_FLAGS)))
    phase = draw(st.sampled_from(["decode", "prefill", "serve"]))
    flags = draw(st.lists(st.sampled_from(sorted(COMMAND_FLAGS[cmd])), max_size=3, unique=True))
    args = [cmd, "llama3.1-8b", "h100_dgx", "--phase", phase,      # (compare runs exact too)
            "--gpus", "8" if cmd == "search" else "1"]
    for f in flags:
        args += [f, PHASE_FLAGS[f][0]]
    if "--spec" in flags and "--acceptance" not in flags:
        args += ["--acceptance", "0.7"]           # eagle needs an acceptance: not the question
        flags = flags + ["--acceptance"]
    args += ["--method", "megatron"] if cmd == "search" else \
        ["--seeds", "1", "--budget", "8", "--methods", "random"]
    return args, phase, flags


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(case=phase_cases())
def test_a_flag_the_phase_does_not_use_is_refused(case):
    """Accepted means used: every given flag applies to the phase and has its partner; a
    refusal is exit 2 with one line naming a flag that does not (or exit 1: nothing
    feasible)."""
    args, phase, flags = case
    r = CliRunner().invoke(cli, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception))
    unused = [f for f in flags if phase not in PHASE_FLAGS[f][1]
              or (PHASE_FLAGS[f][2] and PHASE_FLAGS[f][2] not in flags)]
    if r.exit_code == 0:
        assert not unused, (args, "accepted and ignored", unused)
    elif r.exit_code == 2:
        errors = [x for x in r.output.splitlines() if x.startswith("Error:")]
        assert len(errors) == 1 and any(f in errors[0] for f in flags), (args, r.output)
        assert unused or "--request-rate" in errors[0] or "--decode-topology" in errors[0] or \
            "--spec" in errors[0], (args, errors[0])
    else:
        assert r.exit_code == 1, (args, r.exit_code, r.output[-800:])
