"""Regenerate tests/data/engine_flags/ from an engine's unpacked wheel or source tree.

    python scripts/engine_flags.py vllm   SRC 0.33.0   > tests/data/engine_flags/vllm-0.33.0.txt
    python scripts/engine_flags.py sglang SRC 0.5.23   > tests/data/engine_flags/sglang-0.5.23.txt
    python scripts/engine_flags.py trtllm SRC 1.2.1    > tests/data/engine_flags/trtllm-1.2.1.txt
    python scripts/engine_flags.py trtllm-yaml SRC 1.2.1 > tests/data/engine_flags/trtllm-1.2.1-yaml.txt

SRC is the folder that holds the package (``unzip vllm-0.33.0-*.whl -d SRC`` gives SRC/vllm/...;
a git checkout of TensorRT-LLM gives SRC/tensorrt_llm/...). The engines are never imported: the
files are parsed with ``ast``, so this runs without torch, CUDA or the engines' dependencies.
Then set FLAGS_VERSION in the engine's module (lts/engines/vllm.py, sglang.py, trtllm.py):
tests/test_engine_flags.py finds the lists by that version.

What is read, per engine:

- vLLM (``vllm serve``): every string starting with ``-`` passed to an ``add_argument`` call in
  vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and vllm/entrypoints/common/cli_args.py
  (make_arg_parser), plus ``--field-name`` for each field of the frontend dataclasses
  (BaseFrontendArgs, FrontendArgs) that ``FrontendArgs.add_cli_args`` registers.
- SGLang (``python -m sglang.launch_server``): ``--field-name`` (or ``Arg(cli_name=...)``) and the
  ``Arg(aliases=[...])`` of every ``A[type, ...]`` field of the classes in
  sglang/srt/arg_groups/fields/*.py that ``add_cli_args_from_dataclass`` turns into flags (not
  ``no_cli=True``; ``--no-X`` too for ``argparse.BooleanOptionalAction``), plus the
  ``add_argument`` strings of sglang/srt/server_args.py (ServerArgs.add_cli_args); those with a
  ``Deprecated*Action`` (still parsed, with a warning) under ``[deprecated]``.
- TensorRT-LLM (``trtllm-serve``): the ``@click.option`` strings of the ``serve`` and
  ``disaggregated`` commands in tensorrt_llm/commands/serve.py, one ``[section]`` each.
- TensorRT-LLM YAML (``--extra_llm_api_options`` / ``trtllm-serve disaggregated -c``): the
  pydantic fields of BaseLlmArgs and TorchLlmArgs and, dotted, of the nested configs lts writes
  (CacheTransceiverConfig as ``cache_transceiver_config.*``) in tensorrt_llm/llmapi/llm_args.py;
  and the keys extract_disagg_cfg / extract_ctx_gen_cfgs take in
  tensorrt_llm/llmapi/disagg_utils.py (any other key there is passed on as an LLM API option).

Boolean flags vLLM builds from dataclass fields also accept ``--no-X``; those negations are not
listed (lts never emits them).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

VLLM_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/common/cli_args.py")
VLLM_FRONTEND = ("BaseFrontendArgs", "FrontendArgs")
SGLANG_FIELDS = "sglang/srt/arg_groups/fields"
SGLANG_SERVER_ARGS = "sglang/srt/server_args.py"
TRTLLM_SERVE = "tensorrt_llm/commands/serve.py"
TRTLLM_COMMANDS = ("serve", "disaggregated")
TRTLLM_LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
TRTLLM_ARGS_CLASSES = ("BaseLlmArgs", "TorchLlmArgs")
TRTLLM_NESTED = {"cache_transceiver_config": "CacheTransceiverConfig"}
TRTLLM_DISAGG = "tensorrt_llm/llmapi/disagg_utils.py"
TRTLLM_DISAGG_FUNCS = {"": "extract_disagg_cfg", "SERVERS": "extract_ctx_gen_cfgs"}


def _tree(src: Path, rel: str) -> ast.Module:
    return ast.parse((src / rel).read_text(encoding="utf-8"), filename=rel)


def _dashed(call: ast.Call) -> list:
    """The option strings among a call's positional arguments."""
    return [a.value for a in call.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]


def _calls(tree, name: str):
    """Every call of ``*.name(...)`` or ``name(...)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == name) or \
                    (isinstance(f, ast.Name) and f.id == name):
                yield node


def _add_argument_flags(tree) -> set:
    return {s for call in _calls(tree, "add_argument") for s in _dashed(call)}


def _class_fields(tree, names) -> dict:
    """{class name: [(field, annotation node)]} of the annotated public fields of the classes
    named (all classes when ``names`` is None)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and (names is None or node.name in names):
            out[node.name] = [(s.target.id, s.annotation) for s in node.body
                              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                              and not s.target.id.startswith("_")]
    return out


def _dash(name: str) -> str:
    return "--" + name.replace("_", "-")


def vllm_flags(src: Path) -> set:
    flags = set()
    for rel in VLLM_FILES:
        tree = _tree(src, rel)
        flags |= _add_argument_flags(tree)
        for fields in _class_fields(tree, VLLM_FRONTEND).values():
            flags |= {_dash(name) for name, _ in fields}
    return flags


def _sglang_field_flags(field: str, annotation) -> list:
    """The flags ``add_cli_args_from_dataclass`` registers for one ``A[type, meta]`` field (meta
    a help string or ``Arg(...)``): none without meta or with ``no_cli=True``."""
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name)
            and annotation.value.id in ("A", "Annotated")
            and isinstance(annotation.slice, ast.Tuple)):
        return []
    for meta in annotation.slice.elts[1:]:
        if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
            return [_dash(field)]
        if isinstance(meta, ast.Call) and isinstance(meta.func, ast.Name) and meta.func.id == "Arg":
            kw = {k.arg: k.value for k in meta.keywords}
            if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                return []
            name = kw["cli_name"].value if isinstance(kw.get("cli_name"), ast.Constant) \
                else _dash(field)
            flags = [name] + [e.value for e in getattr(kw.get("aliases"), "elts", [])
                              if isinstance(e, ast.Constant)]
            if isinstance(kw.get("action"), ast.Attribute) and \
                    kw["action"].attr == "BooleanOptionalAction":
                flags.append("--no-" + name[2:])
            return flags
    return []


def _deprecated(call: ast.Call) -> bool:
    """An ``add_argument`` whose action is one of SGLang's Deprecated*Action classes."""
    return any(k.arg == "action" and isinstance(k.value, ast.Name)
               and k.value.id.startswith("Deprecated") for k in call.keywords)


def sglang_flags(src: Path) -> tuple:
    """(flags, deprecated flags: still parsed, with a warning naming the replacement)."""
    calls = list(_calls(_tree(src, SGLANG_SERVER_ARGS), "add_argument"))
    deprecated = {f for c in calls if _deprecated(c) for f in _dashed(c)}
    flags = {f for c in calls if not _deprecated(c) for f in _dashed(c)}
    for path in sorted((src / SGLANG_FIELDS).glob("*.py")):
        tree = _tree(src, str(path.relative_to(src)))
        for fields in _class_fields(tree, None).values():
            for field, annotation in fields:
                flags.update(_sglang_field_flags(field, annotation))
    return flags, deprecated


def trtllm_flags(src: Path) -> dict:
    """{command: flags} of the click commands in serve.py."""
    out = {}
    for node in ast.walk(_tree(src, TRTLLM_SERVE)):
        if not isinstance(node, ast.FunctionDef):
            continue
        command, options = None, set()
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)):
                continue
            if dec.func.attr == "command" and dec.args and isinstance(dec.args[0], ast.Constant):
                command = dec.args[0].value
            elif dec.func.attr == "option":
                options |= set(_dashed(dec))
        if command in TRTLLM_COMMANDS:
            out[command] = options
    return out


def trtllm_yaml_keys(src: Path) -> dict:
    """{section: keys}: "llm_api" (the LLM API options YAML, nested keys dotted),
    "disaggregated" (the top level of the disaggregated server YAML) and
    "disaggregated.SERVERS" (inside context_servers / generation_servers)."""
    classes = _class_fields(_tree(src, TRTLLM_LLM_ARGS),
                            set(TRTLLM_ARGS_CLASSES) | set(TRTLLM_NESTED.values()))
    keys = {name for c in TRTLLM_ARGS_CLASSES for name, _ in classes.get(c, [])}
    for key, cls in TRTLLM_NESTED.items():
        keys |= {f"{key}.{name}" for name, _ in classes.get(cls, [])}
    out = {"llm_api": keys}
    funcs = {n.name: n for n in ast.walk(_tree(src, TRTLLM_DISAGG))
             if isinstance(n, ast.FunctionDef)}
    for suffix, func in TRTLLM_DISAGG_FUNCS.items():
        args = funcs[func].args
        names = {a.arg for a in args.args + args.kwonlyargs} - {"type", "self"}
        if suffix == "SERVERS":
            names.add("router")        # popped by extract_router_config before the servers
        out["disaggregated" + ("." + suffix if suffix else "")] = names
    return out


def render(engine: str, version: str, sections: dict, sources: str) -> str:
    lines = [f"# {engine} {version}: {sources}",
             "# written by scripts/engine_flags.py from the package's source (never imported);",
             "# one accepted name a line, [section] before each command's or file's names"]
    for section, names in sections.items():
        if section:
            lines.append(f"[{section}]")
        lines += sorted(names)
    return "\n".join(lines) + "\n"


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    kind, src, version = argv[0], Path(argv[1]), argv[2]
    if kind == "vllm":
        text = render("vllm", version, {"": vllm_flags(src)},
                      " + ".join(VLLM_FILES) + " (vllm serve: make_arg_parser)")
    elif kind == "sglang":
        flags, deprecated = sglang_flags(src)
        text = render("sglang", version, {"": flags, "deprecated": deprecated},
                      f"{SGLANG_SERVER_ARGS} add_cli_args + {SGLANG_FIELDS}/*.py fields")
    elif kind == "trtllm":
        text = render("tensorrt-llm", version, trtllm_flags(src), f"{TRTLLM_SERVE} click options")
    elif kind == "trtllm-yaml":
        text = render("tensorrt-llm", version, trtllm_yaml_keys(src),
                      f"{TRTLLM_LLM_ARGS} pydantic fields + {TRTLLM_DISAGG}")
    else:
        print(f"unknown engine {kind!r}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
