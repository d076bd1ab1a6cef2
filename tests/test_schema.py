"""The schema validator in tests/schema.py, and the stored CRD schemas and examples it checks.

Every stored example is a manifest taken from the upstream project itself (see
tests/data/schemas/SOURCES.md), so a clean pass over them shows that the validator and
the stored schemas agree with what those projects ship.
"""
import copy
import json
import re

import pytest

from schema import (EXAMPLES_DIR, MANIFEST_SCHEMAS, SCHEMA_DIR, load, manifest_schema, validate,
                    validate_manifest)

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))


def _example(stem):
    return json.loads((EXAMPLES_DIR / f"{stem}.json").read_text())


# ---------------------------------------------------------------- the validator on small schemas

OBJ = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]*$"},
        "mode": {"type": "string", "enum": ["prefill", "decode"]},
        "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
        "ratio": {"type": "number"},
        "enabled": {"type": "boolean"},
        "gpu": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        "args": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "opt": {"type": "string", "nullable": True},
        "port": {"type": "integer", "default": 80},
    },
}


def test_valid_object_has_no_errors():
    ok = {"name": "abc", "mode": "decode", "replicas": 3, "ratio": 0.5, "enabled": False,
          "gpu": 1, "args": ["--x"], "labels": {"a.b/c": "d"}, "free": {"any": {"thing": [1]}},
          "opt": None}
    assert validate(ok, OBJ) == []


def test_unknown_field_rejected():
    errors = validate({"name": "abc", "replica": 1}, OBJ)
    assert len(errors) == 1
    assert "unknown field 'replica'" in errors[0]


def test_unknown_field_reported_with_nested_path():
    schema = {"type": "object", "properties": {"spec": OBJ}}
    errors = validate({"spec": {"name": "abc", "bogus": 1}}, schema)
    assert len(errors) == 1 and errors[0].startswith("spec: unknown field 'bogus'")


def test_missing_required_field_rejected():
    errors = validate({"mode": "decode"}, OBJ)
    assert errors == ["(root): missing required field 'name'"]


def test_required_field_with_default_may_be_omitted():
    schema = {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer", "default": 1}}}
    assert validate({}, schema) == []


@pytest.mark.parametrize("field,value", [
    ("name", 3), ("replicas", "3"), ("replicas", 1.5), ("replicas", True), ("ratio", "0.5"),
    ("enabled", "true"), ("args", "--x"), ("args", [1]), ("labels", {"a": 1}), ("labels", []),
])
def test_wrong_type_rejected(field, value):
    errors = validate({"name": "abc", field: value}, OBJ)
    assert len(errors) == 1 and "expected" in errors[0], errors


def test_bad_enum_rejected():
    errors = validate({"name": "abc", "mode": "both"}, OBJ)
    assert len(errors) == 1
    assert re.search(r'mode: "both" is not one of \["prefill", "decode"\]', errors[0])


def test_enum_does_not_confuse_bool_and_int():
    assert validate(True, {"enum": [1]}) and validate(1, {"enum": [True]})
    assert validate(1, {"enum": [1]}) == []


@pytest.mark.parametrize("value", [8, "8", "500m", "1Gi"])
def test_int_or_string_accepted(value):
    assert validate({"name": "abc", "gpu": value}, OBJ) == []


@pytest.mark.parametrize("value", [1.5, True, [1], {"a": 1}])
def test_int_or_string_rejects_other_types(value):
    assert validate({"name": "abc", "gpu": value}, OBJ)


def test_int_or_string_pattern_applies_to_strings_only():
    quantity = load("lws-leaderworkerset-v1")["properties"]["spec"]["properties"]["leaderWorkerTemplate"][
        "properties"]["leaderTemplate"]["properties"]["spec"]["properties"]["containers"]["items"][
        "properties"]["resources"]["properties"]["limits"]["additionalProperties"]
    assert quantity.get("x-kubernetes-int-or-string") and "pattern" in quantity
    for ok in (8, 125, "8", "1124Gi", "500m", "0.5"):
        assert validate(ok, quantity) == [], ok
    for bad in ("eight", "8 GiB", 1.5):
        assert validate(bad, quantity), bad


@pytest.mark.parametrize("doc,fragment", [
    ({"name": ""}, "shorter than minLength"),
    ({"name": "abcdefghij"}, "longer than maxLength"),
    ({"name": "ABC"}, "does not match pattern"),
    ({"name": "abc", "replicas": -1}, "less than the minimum"),
    ({"name": "abc", "replicas": 11}, "greater than the maximum"),
    ({"name": "abc", "args": []}, "fewer than minItems"),
    ({"name": "abc", "args": ["a", "b", "c", "d"]}, "more than maxItems"),
    ({"name": "abc", "enabled": None}, "null is not allowed"),
])
def test_value_constraints(doc, fragment):
    errors = validate(doc, OBJ)
    assert len(errors) == 1 and fragment in errors[0], errors


def test_preserve_unknown_fields_and_additional_properties():
    assert validate({"x": {"y": [1, None, "z"]}}, {"type": "object", "x-kubernetes-preserve-unknown-fields": True}) == []
    keeps_known = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                   "properties": {"n": {"type": "integer"}}}
    assert validate({"n": 1, "other": "x"}, keeps_known) == []
    assert validate({"n": "1"}, keeps_known)
    assert validate({"a": 1}, {"type": "object", "properties": {}, "additionalProperties": True}) == []
    assert "unknown field" in validate({"a": 1}, {"type": "object", "additionalProperties": False})[0]


def test_combinators():
    one = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert validate("x", one) and validate(1, one)  # 1 matches both branches
    assert validate(1.5, one) == []
    both = {"allOf": [{"type": "string"}, {"type": "string", "minLength": 2}]}
    assert validate("ab", both) == [] and validate("a", both)
    either = {"anyOf": [{"type": "string"}, {"type": "boolean"}]}
    assert validate(True, either) == [] and validate(1, either)


def test_list_map_and_set_duplicates():
    lm = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
    assert validate([{"name": "a"}, {"name": "b"}], lm) == []
    assert "duplicate entry" in validate([{"name": "a"}, {"name": "a"}], lm)[0]
    st = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
    assert "duplicate entry" in validate(["a", "a"], st)[0]


# ---------------------------------------------------------------- the stored schemas

@pytest.mark.parametrize("name", sorted(set(MANIFEST_SCHEMAS.values())))
def test_stored_schema_loads_and_patterns_compile(name):
    schema = load(name)
    assert schema["type"] == "object"
    assert {"apiVersion", "kind", "metadata", "spec"} <= set(schema["properties"])
    assert load(name + ".json") is schema

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                re.compile(node["pattern"])
            for key, value in node.items():
                if key not in ("enum", "default", "example"):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(schema)


def test_every_stored_schema_file_is_registered():
    assert {p.stem for p in SCHEMA_DIR.glob("*.json")} == set(MANIFEST_SCHEMAS.values())


def test_load_unknown_name():
    with pytest.raises(FileNotFoundError):
        load("no-such-schema")


# ---------------------------------------------------------------- the projects' own examples

def test_there_are_examples_for_every_schema():
    kinds = set()
    for path in EXAMPLES:
        doc = json.loads(path.read_text())
        kinds.add((doc["apiVersion"], doc["kind"]))
    assert kinds == set(MANIFEST_SCHEMAS)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_upstream_example_validates(path):
    doc = json.loads(path.read_text())
    assert validate_manifest(doc) == []


def test_manifest_metadata_is_object_meta():
    doc = _example("lws-v1-vllm-gpu")
    doc["metadata"].update(namespace="default", labels={"app": "x"}, annotations={"a/b": "c"})
    assert validate_manifest(doc) == []
    doc["metadata"]["uid"] = "123"
    assert any("unknown field 'uid'" in e for e in validate_manifest(doc))
    del doc["metadata"]["uid"], doc["metadata"]["name"]
    assert validate_manifest(doc) == ["metadata: missing required field 'name'"]
    doc["metadata"]["name"] = "Not_A_Name"
    assert "does not match pattern" in validate_manifest(doc)[0]
    # The stored schema itself keeps the CRD's free-form metadata.
    assert load("lws-leaderworkerset-v1")["properties"]["metadata"] == {"type": "object"}
    assert manifest_schema("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")["properties"]["metadata"][
        "properties"].keys() == {"name", "namespace", "labels", "annotations"}


def test_manifest_needs_known_kind():
    assert "no stored schema" in validate_manifest({"apiVersion": "v1", "kind": "Service"})[0]
    assert "no stored schema" in validate_manifest({"kind": "LeaderWorkerSet"})[0]
    assert "must be an object" in validate_manifest([])[0]


def test_lws_example_mutations_are_caught():
    doc = _example("lws-v1-vllm-gpu")
    lwt = doc["spec"]["leaderWorkerTemplate"]

    bad = copy.deepcopy(doc)
    bad["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
    assert any("restartPolicy" in e and "is not one of" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["leaderWorkerTemplate"]["size"] = "2"
    assert any("leaderWorkerTemplate.size: expected integer" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["cmd"] = ["sh"]
    assert any("unknown field 'cmd'" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    del bad["spec"]["leaderWorkerTemplate"]
    assert validate_manifest(bad) == ["spec: missing required field 'leaderWorkerTemplate'"]

    bad = copy.deepcopy(doc)
    bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["name"] = \
        lwt["workerTemplate"]["spec"]["containers"][0]["name"]
    bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"].append(
        copy.deepcopy(lwt["workerTemplate"]["spec"]["containers"][0]))
    assert any("duplicate entry" in e for e in validate_manifest(bad))


def test_dynamo_v1alpha1_example_mutations_are_caught():
    doc = _example("dynamo-v1alpha1-vllm-disagg")
    services = doc["spec"]["services"]

    bad = copy.deepcopy(doc)
    bad["spec"]["backendFramework"] = "llamacpp"
    assert any("backendFramework" in e and "is not one of" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["services"]["VllmPrefillWorker"]["extraPodSpec"]["mainContainer"]["arguments"] = []
    assert any("mainContainer: unknown field 'arguments'" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["services"]["VllmPrefillWorker"]["multinode"] = {"nodeCount": 1}
    assert any("nodeCount" in e and "minimum" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["services"]["VllmPrefillWorker"]["resources"]["limits"]["gpu"] = 1
    assert any("limits.gpu: expected string" in e for e in validate_manifest(bad))

    assert services["Frontend"]["componentType"] == "frontend"


def test_dynamo_v1beta1_example_mutations_are_caught():
    doc = _example("dynamo-v1beta1-vllm-disagg")

    bad = copy.deepcopy(doc)
    bad["spec"]["components"][1]["type"] = "worker-prefill"
    assert any("components[1].type" in e and "is not one of" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["components"][1]["name"] = bad["spec"]["components"][2]["name"]
    assert any("duplicate entry" in e for e in validate_manifest(bad))

    bad = copy.deepcopy(doc)
    bad["spec"]["services"] = {}
    assert any("spec: unknown field 'services'" in e for e in validate_manifest(bad))


def test_null_is_absent_follows_api_server_pruning():
    doc = {"name": "abc", "enabled": None, "opt": None}
    assert validate(doc, OBJ) == ["enabled: null is not allowed (field is not nullable)"]
    assert validate(doc, OBJ, null_is_absent=True) == []
    assert validate({"name": None}, OBJ, null_is_absent=True) == ["(root): missing required field 'name'"]
    frontend = _example("dynamo-v1alpha1-vllm-disagg")
    frontend["spec"]["services"]["Frontend"]["subComponentType"] = None  # as `subComponentType:` in YAML
    assert validate_manifest(frontend) == [
        "spec.services.Frontend.subComponentType: null is not allowed (field is not nullable)"]
    assert validate_manifest(frontend, null_is_absent=True) == []
