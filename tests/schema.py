"""A small validator for Kubernetes CRD schemas, for use by the tests.

The stored schemas live in ``tests/data/schemas`` (see ``SOURCES.md`` there):
the ``openAPIV3Schema`` of a CustomResourceDefinition version, converted from
YAML to JSON and otherwise unchanged.

``validate(obj, schema)`` checks a decoded YAML/JSON value against such a
schema and returns a list of human-readable errors (empty when valid).  It
covers the OpenAPI v3 "structural schema" subset that CRDs use:

* ``type`` (object, array, string, integer, number, boolean) and ``nullable``
  (a ``null`` is an error unless the schema is nullable or has no type; with
  ``null_is_absent=True`` it is treated as an absent field instead, as the
  API server prunes it);
* ``properties``, ``required`` (a missing field that has a ``default`` is not
  an error, since the API server defaults it before validating),
  ``additionalProperties`` (bool or schema), ``minProperties``/``maxProperties``;
* unknown fields: when a schema has ``properties`` and neither
  ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields``, a key
  not in ``properties`` is an error, as ``kubectl apply --validate=strict``
  reports it;
* ``x-kubernetes-preserve-unknown-fields``: undeclared fields (and anything
  below them) are accepted; declared properties are still checked, as the
  API server does;
* ``x-kubernetes-int-or-string``, ``anyOf``/``oneOf``/``allOf``/``not``;
* ``enum``, ``minimum``/``maximum`` (and the OpenAPI v3.0 boolean
  ``exclusiveMinimum``/``exclusiveMaximum``), ``multipleOf``,
  ``minLength``/``maxLength``, ``pattern`` (unanchored search, as in JSON
  Schema), ``minItems``/``maxItems``, ``uniqueItems``;
* ``x-kubernetes-list-type`` ``set`` and ``map`` (duplicate entries/keys).

Ignored: ``format``, ``default`` (except as said for ``required``),
``description``, ``x-kubernetes-validations`` (CEL rules), and the other
``x-kubernetes-*`` markers.  An object schema with no ``properties`` and no
``additionalProperties`` accepts any keys (the API server would prune them).

``validate_manifest(obj)`` picks the schema from ``apiVersion``/``kind`` and
validates the whole object; ``metadata`` is checked against a subset of
Kubernetes ObjectMeta (``name``, ``namespace``, ``labels``, ``annotations``)
instead of the CRD's free-form ``metadata: {type: object}``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "data" / "schemas"
EXAMPLES_DIR = SCHEMA_DIR / "examples"

# (apiVersion, kind) -> stored schema file stem.
MANIFEST_SCHEMAS: dict[tuple[str, str], str] = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "lws-leaderworkerset-v1",
    ("nvidia.com/v1alpha1", "DynamoGraphDeployment"): "dynamo-dynamographdeployment-v1alpha1",
    ("nvidia.com/v1beta1", "DynamoGraphDeployment"): "dynamo-dynamographdeployment-v1beta1",
}

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

# The part of Kubernetes ObjectMeta that a manifest may set here.  The name
# must be a DNS-1123 subdomain, as the API server requires of custom objects.
OBJECT_META: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": 253,
            "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        },
        "namespace": {
            "type": "string",
            "minLength": 1,
            "maxLength": 63,
            "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        },
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}


@functools.lru_cache(maxsize=None)
def _load_cached(name: str) -> dict:
    path = SCHEMA_DIR / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in SCHEMA_DIR.glob("*.json"))
        raise FileNotFoundError(f"no stored schema {name!r}; known: {known}")
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def load(name: str) -> dict:
    """The stored schema with file stem ``name`` (a ``.json`` suffix is allowed).

    The returned dict is shared between callers: do not modify it.
    """
    if name.endswith(".json"):
        name = name[: -len(".json")]
    return _load_cached(name)


def schema_name_for(api_version: str, kind: str) -> str | None:
    """The stored schema stem for an apiVersion/kind, or None if there is none."""
    return MANIFEST_SCHEMAS.get((api_version, kind))


def manifest_schema(api_version: str, kind: str) -> dict:
    """The CRD schema for apiVersion/kind with ``metadata`` as ObjectMeta."""
    name = schema_name_for(api_version, kind)
    if name is None:
        raise KeyError(f"no stored schema for apiVersion={api_version!r} kind={kind!r}")
    base = load(name)
    props = dict(base.get("properties", {}))
    props["metadata"] = OBJECT_META
    return dict(base, properties=props, required=sorted(set(base.get("required", [])) | {"apiVersion", "kind"}))


def validate_manifest(obj: Any, *, null_is_absent: bool = False) -> list[str]:
    """Validate a whole manifest (one decoded YAML document) against its CRD schema.

    ``null_is_absent`` is passed to ``validate``.
    """
    if not isinstance(obj, dict):
        return [f"(root): manifest must be an object, got {_type_name(obj)}"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    name = schema_name_for(api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
    if name is None:
        known = ", ".join(f"{a} {k}" for a, k in MANIFEST_SCHEMAS)
        return [f"(root): no stored schema for apiVersion={api_version!r} kind={kind!r} (known: {known})"]
    return validate(obj, manifest_schema(api_version, kind), null_is_absent=null_is_absent)


def assert_valid_manifest(obj: Any) -> None:
    """Raise AssertionError listing every error if ``obj`` is not a valid manifest."""
    errors = validate_manifest(obj)
    if errors:
        raise AssertionError(f"{len(errors)} schema error(s):\n" + "\n".join(errors))


# --------------------------------------------------------------------------
# The validator.

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _join(path: str, key: str) -> str:
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _where(path: str) -> str:
    return path or "(root)"


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise ValueError(f"unsupported schema type {t!r}")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


@functools.lru_cache(maxsize=None)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _short(v: Any, limit: int = 60) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else json.dumps(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def validate(obj: Any, schema: dict, path: str = "", *, null_is_absent: bool = False) -> list[str]:
    """Errors of ``obj`` against the structural ``schema``; ``[]`` when valid.

    ``path`` is the location of ``obj`` used as the prefix of messages
    (``spec.services.Frontend``, ``spec.components[0].name``).

    By default a ``null`` where the schema is not ``nullable`` is an error (a
    generator that writes ``key: null`` is usually wrong).  The API server
    instead prunes such nulls before validating; ``null_is_absent=True`` does
    the same here: the field counts as absent (so a required one is missing).
    """
    errors: list[str] = []
    _validate(obj, schema, path, errors, null_is_absent)
    return errors


def _nullable(s: dict) -> bool:
    return bool(s.get("nullable")) or not (s.get("type") or s.get("x-kubernetes-int-or-string"))


def _validate(v: Any, s: dict, path: str, errors: list[str], null_is_absent: bool = False) -> None:
    if not isinstance(s, dict):
        raise TypeError(f"schema at {_where(path)} is not an object: {s!r}")
    where = _where(path)

    if v is None:
        if not _nullable(s) and not null_is_absent:
            errors.append(f"{where}: null is not allowed (field is not nullable)")
        return

    # -- type ---------------------------------------------------------------
    if s.get("x-kubernetes-int-or-string"):
        if not (_is_type(v, "integer") or _is_type(v, "string")):
            errors.append(f"{where}: expected integer or string, got {_type_name(v)} {_short(v)}")
            return
    elif "type" in s:
        if not _is_type(v, s["type"]):
            errors.append(f"{where}: expected {s['type']}, got {_type_name(v)} {_short(v)}")
            return

    # -- enum ---------------------------------------------------------------
    if "enum" in s and not any(_same(v, e) for e in s["enum"]):
        allowed = ", ".join(_short(e) for e in s["enum"])
        errors.append(f"{where}: {_short(v)} is not one of [{allowed}]")

    # -- numbers --------------------------------------------------------------
    if _is_type(v, "number"):
        if "minimum" in s:
            if s.get("exclusiveMinimum") is True and not v > s["minimum"]:
                errors.append(f"{where}: {v} must be greater than {s['minimum']}")
            elif v < s["minimum"]:
                errors.append(f"{where}: {v} is less than the minimum {s['minimum']}")
        if "maximum" in s:
            if s.get("exclusiveMaximum") is True and not v < s["maximum"]:
                errors.append(f"{where}: {v} must be less than {s['maximum']}")
            elif v > s["maximum"]:
                errors.append(f"{where}: {v} is greater than the maximum {s['maximum']}")
        m = s.get("multipleOf")
        if m:
            q = v / m
            if not math.isclose(q, round(q), rel_tol=0, abs_tol=1e-9):
                errors.append(f"{where}: {v} is not a multiple of {m}")

    # -- strings ------------------------------------------------------------
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            errors.append(f"{where}: {_short(v)} is shorter than minLength {s['minLength']}")
        if "maxLength" in s and len(v) > s["maxLength"]:
            errors.append(f"{where}: {_short(v)} is longer than maxLength {s['maxLength']}")
        if "pattern" in s and not _regex(s["pattern"]).search(v):
            errors.append(f"{where}: {_short(v)} does not match pattern {s['pattern']!r}")

    # -- arrays ---------------------------------------------------------------
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            errors.append(f"{where}: has {len(v)} items, fewer than minItems {s['minItems']}")
        if "maxItems" in s and len(v) > s["maxItems"]:
            errors.append(f"{where}: has {len(v)} items, more than maxItems {s['maxItems']}")
        if "items" in s:
            for i, item in enumerate(v):
                _validate(item, s["items"], f"{path}[{i}]", errors, null_is_absent)
        list_type = s.get("x-kubernetes-list-type")
        if s.get("uniqueItems") or list_type == "set":
            for i, item in enumerate(v):
                if any(_same(item, prev) for prev in v[:i]):
                    errors.append(f"{where}[{i}]: duplicate entry {_short(item)}")
        elif list_type == "map" and s.get("x-kubernetes-list-map-keys"):
            _check_list_map(v, s, path, errors)

    # -- objects ----------------------------------------------------------------
    if isinstance(v, dict):
        props = s.get("properties", {})
        addl = s.get("additionalProperties")
        preserve = s.get("x-kubernetes-preserve-unknown-fields", False)
        if "minProperties" in s and len(v) < s["minProperties"]:
            errors.append(f"{where}: has {len(v)} fields, fewer than minProperties {s['minProperties']}")
        if "maxProperties" in s and len(v) > s["maxProperties"]:
            errors.append(f"{where}: has {len(v)} fields, more than maxProperties {s['maxProperties']}")
        for req in s.get("required", []):
            absent = req not in v or (null_is_absent and v[req] is None and not _nullable(props.get(req, {})))
            if absent and "default" not in props.get(req, {}):
                errors.append(f"{where}: missing required field {req!r}")
        for key, val in v.items():
            sub = _join(path, str(key))
            if not isinstance(key, str):
                errors.append(f"{_where(sub)}: field name must be a string, got {_type_name(key)}")
                continue
            if key in props:
                _validate(val, props[key], sub, errors, null_is_absent)
            elif isinstance(addl, dict):
                _validate(val, addl, sub, errors, null_is_absent)
            elif addl is True or preserve:
                continue
            elif addl is False or props:
                known = ", ".join(sorted(props)) or "none"
                errors.append(f"{where}: unknown field {key!r} (known fields: {known})")
            # else: a bare ``type: object`` accepts any keys.

    # -- combinators ------------------------------------------------------------
    if "allOf" in s:
        for sub_schema in s["allOf"]:
            _validate(v, sub_schema, path, errors, null_is_absent)
    if "anyOf" in s:
        branch_errors = [validate(v, b, path, null_is_absent=null_is_absent) for b in s["anyOf"]]
        if all(branch_errors):
            detail = "; ".join(e for errs in branch_errors for e in errs[:1])
            errors.append(f"{where}: matches none of anyOf ({detail})")
    if "oneOf" in s:
        matched = sum(1 for b in s["oneOf"] if not validate(v, b, path, null_is_absent=null_is_absent))
        if matched != 1:
            errors.append(f"{where}: matches {matched} of oneOf's {len(s['oneOf'])} schemas, expected exactly 1")
    if "not" in s and not validate(v, s["not"], path, null_is_absent=null_is_absent):
        errors.append(f"{where}: must not match the 'not' schema")


def _check_list_map(v: list, s: dict, path: str, errors: list[str]) -> None:
    keys = s["x-kubernetes-list-map-keys"]
    item_props = s.get("items", {}).get("properties", {})
    seen: dict[str, int] = {}
    for i, item in enumerate(v):
        if not isinstance(item, dict):
            continue
        ident = []
        for k in keys:
            if k in item:
                ident.append(item[k])
            else:
                ident.append(copy.deepcopy(item_props.get(k, {}).get("default")))
        token = json.dumps(ident, sort_keys=True)
        if token in seen:
            desc = ", ".join(f"{k}={_short(x)}" for k, x in zip(keys, ident))
            errors.append(f"{_where(path)}[{i}]: duplicate entry for key ({desc}), first at [{seen[token]}]")
        else:
            seen[token] = i
