"""YAML text of plain data (dicts, lists, strings, numbers, booleans), for the deployment files
lts writes (``deploy``): Kubernetes manifests. Block style, two-space indents; every string is a
double-quoted scalar written as JSON writes it (a JSON string is a valid YAML double-quoted
scalar), so no value is ever read back as another type ("8000", "true", "1e3" stay strings) and
no character needs thought. Keys are plain where they are identifiers, quoted otherwise.
"""
from __future__ import annotations

import json
import re

PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def _key(k: str) -> str:
    return k if PLAIN_KEY.match(k) and k.lower() not in RESERVED else json.dumps(k)


def _scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(f"yamltext: cannot write {type(v).__name__}")


def _lines(v, indent: str) -> list:
    """Lines of a dict or list value at ``indent``."""
    out = []
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                out.append(f"{indent}{_key(k)}:")
                out += _lines(x, indent + ("  " if isinstance(x, dict) else ""))
            else:
                out.append(f"{indent}{_key(k)}: {_empty(x)}")
        return out
    for x in v:
        if isinstance(x, (dict, list)) and x:
            inner = _lines(x, indent + "  ")
            out.append(f"{indent}- {inner[0][len(indent) + 2:]}")
            out += inner[1:]
        else:
            out.append(f"{indent}- {_empty(x)}")
    return out


def _empty(x) -> str:
    return "{}" if x == {} and isinstance(x, dict) else "[]" if isinstance(x, list) else _scalar(x)


def dump(obj: dict) -> str:
    """One YAML document of ``obj``."""
    return "\n".join(_lines(obj, "")) + "\n"


def dump_all(objs: list) -> str:
    """Several documents, each started by ``---``."""
    return "".join("---\n" + dump(o) for o in objs)
