"""docs/modules.md names every module under lts/ (scripts/module_map.py writes it), and the
README and docs link only to docs files and headings that exist.

Line counts drifting is not a failure here: `python scripts/module_map.py --check` reports a
stale map, and the map is refreshed by running the script.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LTS = ROOT / "lts"


def mapped():
    """{(package, module file name)} of the rows of docs/modules.md's table."""
    text = (ROOT / "docs" / "modules.md").read_text(encoding="utf-8")
    return {(pkg, name) for pkg, name in
            re.findall(r"^\| `([a-z_]+)/` \| `([a-z_]+\.py)` \|", text, flags=re.M)}


def test_every_module_is_in_the_map():
    rows = mapped()
    missing = []
    for path in sorted(LTS.rglob("*.py")):
        rel = path.relative_to(LTS)
        package = "lts" if len(rel.parts) == 1 else rel.parts[0]
        if (package, path.name) not in rows:
            missing.append(str(rel))
    assert not missing, f"not in docs/modules.md (run python scripts/module_map.py): {missing}"


def anchors(path: Path):
    """The #anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped,
    spaces to hyphens)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_links_between_docs_resolve():
    broken = []
    for doc in [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]+\.md)(?:#([^)]*))?\)", text):
            path = doc.parent / target
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
            elif anchor and anchor not in anchors(path):
                broken.append(f"{doc.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, broken


PACKAGES = "specs|cost|engines|serving|agent|search|launch|report"
DOTTED = re.compile(r"`+((?:lts\.)?(?:%s)\.[A-Za-z_][\w.]*?)(?:\(\))?`+" % PACKAGES)


def resolves(name: str) -> bool:
    """Whether a dotted name (``search.methods.run``, ``lts.cost.kv``) is a module or an
    attribute of one."""
    import importlib
    parts = ("lts." + name if not name.startswith("lts.") else name).split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_dotted_names_in_docs_and_docstrings_resolve():
    """A name written in backticks as ``package.module[.name]`` in the code or the docs exists:
    a renamed or moved function shows up here rather than as a stale pointer."""
    stale = []
    docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for path in sorted(LTS.rglob("*.py")) + docs:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in DOTTED.finditer(line):
                name = m.group(1).rstrip(".")
                if not name.endswith(".py") and not resolves(name):
                    stale.append(f"{path.relative_to(ROOT)}:{i}: {name}")
    assert not stale, "\n".join(stale)
