"""The packages of lts are layers and imports flow one way (docs/modules.md):

    specs -> cost -> engines -> serving -> agent -> search -> launch -> report -> cli

A module may import its own package and any package before it, never one after it. Only the
command line imports click and only the report imports rich."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

LTS = Path(__file__).resolve().parents[1] / "lts"
LAYERS = ["specs", "cost", "engines", "serving", "agent", "search", "launch", "report", "cli"]
TOP = {"__init__": -1, "__main__": len(LAYERS), "cli": LAYERS.index("cli"),
       "streams": LAYERS.index("cli"),   # the process's output streams: the CLI's own
       "plan": LAYERS.index("report"),   # the search as a library call (its JSON: report)
       "sweep": LAYERS.index("report")}  # a grid of search problems, each through plan


def layer(module: str) -> int:
    """'lts.cost.model' -> its layer's rank; 'lts' itself (the version) is below everything."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else TOP[parts[1]]


def imports(path: Path):
    """(dotted name of the module, [(imported lts module, line), ...], [third-party roots])."""
    rel = path.relative_to(LTS.parent).with_suffix("")
    name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out, third = [], set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            if target.split(".")[0] == "lts":
                targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                out += [(t, node.lineno) for t in targets]
            else:
                third.add(target.split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "lts":
                    out.append((a.name, node.lineno))
                else:
                    third.add(a.name.split(".")[0])
    return name, out, third


MODULES = sorted(p for p in LTS.rglob("*.py"))


def test_every_module_sits_in_a_layer():
    names = {imports(p)[0] for p in MODULES}
    for name in names:
        layer(name)          # raises ValueError/KeyError for a module outside the layers
    assert {n.split(".")[1] for n in names if n.count(".")} >= set(LAYERS) - {"cli"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LTS)))
def test_imports_flow_one_way(path):
    name, targets, _ = imports(path)
    upward = [f"{t} (line {line})" for t, line in targets if layer(t) > layer(name)]
    assert not upward, f"{name} imports a later layer: {', '.join(upward)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LTS)))
def test_click_only_in_the_cli_and_rich_only_in_the_report(path):
    name, _, third = imports(path)
    if "click" in third:
        assert name == "lts.cli"
    if "rich" in third:
        assert name.startswith("lts.report")
