"""The README's own examples: every `lts ...` line in a fenced code block exits with the status
its text gives it (0 unless the line says `# exits N`), with no traceback.

Lines run in process (click's CliRunner) from the checkout's root, so relative paths in the README
resolve as they do for a reader; a line naming ../shared (the data beside the checkout) is skipped
when that folder is absent.
"""
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    """(command line, expected exit status) for every `lts` command in a fenced code block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            m = re.search(r"#\s*exits\s+(\d+)", line)
            status = int(m.group(1)) if m else 0
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("lts "):
                    out.append((part, status))
    return out


COMMANDS = readme_commands()


def test_the_readme_has_examples():
    assert len(COMMANDS) >= 8


@pytest.mark.parametrize("line, status", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_readme_example_exits_as_the_text_says(line, status):
    args = shlex.split(line, comments=True)[1:]
    if any("../shared" in a for a in args) and not (ROOT.parent / "shared").exists():
        pytest.skip("../shared is not beside this checkout")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        r = CliRunner().invoke(cli, args)
    finally:
        os.chdir(cwd)
    assert r.exit_code == status, (line, r.output[-2000:])
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
