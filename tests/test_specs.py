"""Spec loading: every shipped file loads; every kind of bad input is one SpecError naming file,
key, value and expectation."""

import re

import pytest

from lts.specs.errors import SpecError
from lts.specs import (load_model, load_topology, model_from_dict, param_counts, shipped_names)

GOOD_MODEL = """
name = "tiny"
source = "test"
layers = 4
hidden = 256
vocab = 1000
[attention]
kind = "gqa"
heads = 8
kv_heads = 2
head_dim = 32
[ffn]
kind = "moe"
gated = true
experts = 8
top_k = 2
expert_intermediate = 512
[precision]
weights = "bf16"
"""


def write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", shipped_names("models"))
def test_shipped_models_load_and_match_published_totals(name):
    m = load_model(name)
    total = param_counts(m)["params_total"]
    # every shipped model names its published total (model card), and lts's count is within 2%
    assert m.params_published > 0, f"{name}: no params_published"
    assert abs(total / m.params_published - 1) < 0.02, (name, total, m.params_published)


@pytest.mark.parametrize("name", shipped_names("topologies"))
def test_shipped_topologies_load(name):
    t = load_topology(name)
    assert t.gpus >= t.gpus_per_node >= 1
    assert t.links[-1].span_gpus >= t.gpus


def test_paper_models_are_the_advertised_sizes():
    assert abs(param_counts(load_model("moe1.6t"))["params_total"] / 1.6e12 - 1) < 0.02
    assert abs(param_counts(load_model("moe1.2t"))["params_total"] / 1.2e12 - 1) < 0.02


@pytest.mark.parametrize("old,new,message", [
    ('layers = 4\n', '', "m.toml: layers: missing (expected an integer)"),
    ('layers = 4', 'layers = "four"', "m.toml: layers: 'four' is not an integer"),
    ('layers = 4', 'layers = -4', "m.toml: layers: -4 must be > 0"),
    ('vocab = 1000', 'vocab = 1000\nflavour = "x"', "m.toml: flavour: unknown key"),
    ('kv_heads = 2', 'kv_heads = 3', "m.toml: attention.kv_heads: 3 does not divide attention.heads = 8"),
    ('kind = "gqa"', 'kind = "mqa"', "m.toml: attention.kind: 'mqa' is not one of 'gqa', 'mla'"),
    ('top_k = 2', 'top_k = 9', "m.toml: ffn.top_k: 9 must be <= 8"),
    ('weights = "bf16"', 'weights = "bf17"', "m.toml: precision.weights: 'bf17' is not a weight "
                                             "format lts knows (expected one of fp32, bf16, "),
    ('[ffn]', '[ffn]\nwidth = 3', "m.toml: ffn.width: unknown key"),
    ('expert_intermediate = 512', 'expert_intermediate = 512.5',
     "m.toml: ffn.expert_intermediate: 512.5 is not an integer"),
])
def test_bad_model_files_name_file_key_value(tmp_path, old, new, message):
    assert old in GOOD_MODEL
    p = write(tmp_path, GOOD_MODEL.replace(old, new, 1))
    with pytest.raises(SpecError) as e:
        load_model(str(p))
    assert str(e.value).startswith(f"{p}: " + message.split(": ", 1)[1]), str(e.value)
    assert "\n" not in str(e.value)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(SpecError, match=r"no such file"):
        load_model(str(tmp_path / "missing.toml"))
    p = write(tmp_path, "layers = [")
    with pytest.raises(SpecError, match=r"m.toml: invalid TOML"):
        load_model(str(p))
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SpecError):
        load_model(str(p))
    with pytest.raises(SpecError, match="no such file or shipped model"):
        load_model("no-such-model")


def test_topology_validation(tmp_path):
    good = load_topology("h100_dgx")
    text = open(good.path).read()
    p = write(tmp_path, text.replace("span_gpus = 8 ", "span_gpus = 100000 ", 1), "t.toml")
    with pytest.raises(SpecError, match=r"link\[1\].span_gpus: .* must be larger than the span"):
        load_topology(str(p))
    p = write(tmp_path, text.replace("[node]", "[node]\nracks = 2", 1), "t.toml")
    with pytest.raises(SpecError, match=r"node.racks: unknown key"):
        load_topology(str(p))
    for key, bad, message in (("collective_efficiency", "1.5", "must be <= 1.0"),
                              ("collective_efficiency", "0.0", "must be > 0"),
                              ("roofline_exponent", "0.5", "must be >= 1.0")):
        p = write(tmp_path, re.sub(rf"(?m)^{key} = \S+", f"{key} = {bad}", text), "t.toml")
        with pytest.raises(SpecError, match=rf"gpu.{key}: {bad} {message}$"):
            load_topology(str(p))


def test_engine_links_scale_link_efficiency_only():
    t = load_topology("h100_dgx")
    assert 0 < t.collective_efficiency < 1 and t.roofline_exponent >= 1
    for raw, eng in zip(t.links, t.engine_links):
        assert eng.efficiency == pytest.approx(raw.efficiency * t.collective_efficiency)
        assert (eng.bandwidth_bytes_s, eng.latency_s, eng.span_gpus) == \
            (raw.bandwidth_bytes_s, raw.latency_s, raw.span_gpus)


def test_dict_roundtrip_of_param_counts():
    import tomllib
    m = model_from_dict(tomllib.loads(GOOD_MODEL), "mem")
    c = param_counts(m)
    h, L = 256, 4
    att = h * (8 + 2 * 2) * 32 + 8 * 32 * h
    moe = 8 * 3 * h * 512 + h * 8
    assert c["params_total"] == L * (att + moe + 2 * h) + 2 * 1000 * h + h
    assert c["params_active"] == L * (att + 2 * 3 * h * 512 + h * 8 + 2 * h) + 2 * 1000 * h + h
