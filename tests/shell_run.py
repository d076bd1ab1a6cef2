"""Run an emitted command through a real shell without running the engine (tests and
scripts/launch_matrix.py): ``bash -n`` parses it; ``shlex`` splits it; and bash runs it with each
program (vllm, python, trtllm-serve, srun, ray, env, ...) replaced by a function that prints the
arguments it got, with the variables the notes ask the user to set given values and ``set -u``
on, so a variable left unexpanded or unset, or a word split where it should not be, shows.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile

PROGRAMS = ("vllm", "python", "python3", "trtllm-serve", "trtllm-llmapi-launch", "srun", "ray",
            "env")
# what a user sets before running the commands (the notes say which)
USER_ENV = {"HEAD_IP": "10.0.0.1", "NODE_RANK": "1", "EAGLE3_DRAFT": "/ckpt/eagle3 head",
            "CHECKPOINT": "/ckpt/my weights",
            **{f"NODE{k}_IP": f"10.0.1.{k}" for k in range(64)},
            # what a LeaderWorkerSet pod is given (LWS sets the first two; the manifest the third)
            "LWS_LEADER_ADDRESS": "lts-0.lts.default", "LWS_WORKER_INDEX": "2",
            "POD_IP": "10.0.2.7"}
VAR = re.compile(r"\$(\(\(([^)]*)\)\)|[A-Za-z_][A-Za-z0-9_]*)")


def expand(word: str, env: dict = USER_ENV) -> str:
    """A shlex word with its $NAME and $((arithmetic)) as bash would expand them."""
    def one(m):
        if m.group(2) is not None:
            expr = VAR.sub(lambda v: env[v.group(1)], m.group(2))
            return str(eval(expr, {"__builtins__": {}}))      # digits and * + only
        return env[m.group(1)]
    return VAR.sub(one, word)


def parses(cmd: str) -> str:
    """'' when bash parses ``cmd`` (bash -n), else its complaint."""
    r = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stderr.strip()


def run_words(cmd: str, cwd: str) -> list:
    """The argument lists the programs of ``cmd`` receive when bash runs it (each program a
    function printing its name and arguments, NUL-separated, one record per call)."""
    fns = "".join(f'{p}() {{ printf "%s\\0" "{p}" "$@"; printf "\\1"; }}; '
                  for p in PROGRAMS)
    env = {**os.environ, **USER_ENV}
    r = subprocess.run(["bash", "-c", f"set -u; {fns}{cmd}"], capture_output=True,
                       text=True, cwd=cwd, env=env)
    if r.returncode:
        raise AssertionError(f"bash exited {r.returncode}: {r.stderr.strip()}\n{cmd}")
    return [rec.split("\0")[:-1] for rec in r.stdout.split("\1") if rec]


def check(cmd: str) -> list:
    """Problems of one emitted command ([] when none): it parses, shlex splits it, and bash
    passes the program exactly the words shlex reads, each variable expanded."""
    why = parses(cmd)
    if why:
        return [f"bash -n: {why}"]
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        return [f"shlex: {e}"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            got = run_words(cmd, tmp)
        except AssertionError as e:
            return [str(e)]
        written = sorted(os.listdir(tmp))
    if words and words[0] == "printf":           # a config file: it was written
        return [] if written else [f"no file written: {cmd}"]
    while words and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)                              # VAR=value before the program
    want = [expand(w) for w in words]
    if len(got) != 1 or got[0] != want:
        return [f"the program got {got} where shlex reads {want}"]
    return []
