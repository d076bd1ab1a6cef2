"""The documentation's own examples: every `lts ...` line in a fenced code block of README.md or
docs/*.md exits with the status its text gives it (0 unless the line says `# exits N`), with no
traceback.

Lines run in process (click's CliRunner) from the checkout's root, so relative paths in the docs
resolve as they do for a reader; a line naming ../shared/data/ (the data beside the checkout)
reads the test's copy of that file (tests/data/measurements/) when that folder is absent. Examples are kept to a few seconds each: a long run is shown in a
light form (`lts bench --evaluations 1000`) or in prose, not in a code block.
"""
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def commands(path: Path):
    """(command line, expected exit status) for every `lts` command in a fenced code block."""
    text = path.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            m = re.search(r"#\s*exits\s+(\d+)", line)
            status = int(m.group(1)) if m else 0
            parts = [p.strip() for p in line.split("&&")]
            if len(parts) > 1 and all(p.startswith("lts ") for p in parts):
                out.append((line, status))       # a chain: its parts run in order, in one test
                continue
            for part in parts:
                if part.startswith("lts "):
                    out.append((part, status))
    return out


def unique(rows):
    """Each command line once (the first page that shows it), so a page repeating an example
    costs no second run."""
    seen, out = set(), []
    for doc, line, status in rows:
        key = (tuple(shlex.split(line, comments=True)), status)
        if key not in seen:
            seen.add(key)
            out.append((doc, line, status))
    return out


COMMANDS = unique([(p.relative_to(ROOT).as_posix(), line, status)
                   for p in DOCS for line, status in commands(p)])


def test_the_readme_has_examples():
    assert len(commands(ROOT / "README.md")) >= 8


@pytest.mark.parametrize("doc, line, status", COMMANDS, ids=[f"{d}: {c}" for d, c, _ in COMMANDS])
def test_doc_example_exits_as_the_text_says(doc, line, status):
    """Each line (or each part of an `lts ... && lts ...` chain, in order: the earlier parts
    exit 0, the last as the text says)."""
    parts = [p.strip() for p in line.split("&&")]
    for i, part in enumerate(parts):
        want = status if i == len(parts) - 1 else 0
        args = shlex.split(part, comments=True)[1:]
        if not (ROOT.parent / "shared").exists():     # a clone alone: the copies of the files
            args = [a.replace("../shared/data/", "tests/data/measurements/") for a in args]
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            r = CliRunner().invoke(cli, args)
        finally:
            os.chdir(cwd)
        assert r.exit_code == want, (doc, part, r.output[-2000:])
        assert "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
