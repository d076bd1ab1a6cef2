"""The one KV seam (``lts.cost.kv``, issue 21): bytes per token and layer worked by hand, and the
cost tables, the two pools' transfer and the exact solver all taking theirs from it; a model
whose layers keep different bytes is costed kind by kind (tests/test_kind_shapes.py)."""
import pytest

from lts.cost import kv
from lts.cost.layouts import MODE_NONE
from lts.cost.tables import build_tables
from lts.search import disagg
from lts.search.exact import _Exact
from lts.search.problems import ServeProblem
from lts.specs import load_model, load_topology
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload

H100 = load_topology("h100_dgx")


def test_bytes_per_token_and_layer():
    # llama3.1-70b: K and V each kv_heads = 8 x head_dim = 128, bf16, in every one of 80 layers
    assert kv.layer_token_bytes(load_model("llama3.1-70b")) == [(8 * 128 * 2, 8 * 128 * 2)] * 80
    # deepseek-v3: one latent of kv_lora_rank 512 + rope 64 (V: its 512), bf16, 61 layers
    assert kv.layer_token_bytes(load_model("deepseek-v3")) == [(576 * 2, 512 * 2)] * 61


@pytest.mark.parametrize("name", ["llama3.1-70b", "deepseek-v3"])
def test_request_bytes_is_every_layers_tokens_stored_once(name):
    model = load_model(name)
    per_token = sum(k if kv.latent(model) else k + v for k, v in kv.layer_token_bytes(model))
    assert kv.request_bytes(model, 4000) == 4000 * per_token


@pytest.mark.parametrize("name", ["llama3.1-70b", "deepseek-v3"])
def test_the_tables_hold_what_the_seam_says(name):
    """One sequence, one GPU, no split: a layer's resident cache is the request's bytes over the
    layers."""
    model, ctx = load_model(name), 3000
    tab = build_tables(model, H100, Workload("decode", ctx), coarse_of(make_row())[None])
    held = tab.kv_layer_bytes[0, MODE_NONE, MODE_NONE]
    assert held * model.layers == kv.request_bytes(model, ctx)


def test_the_pools_transfer_what_the_seam_says():
    model = load_model("llama3.1-8b")
    p = ServeProblem(model, H100, 2000, 100, gpus=8)
    link = p.engine.topology(p.topo).links[0]
    want = kv.request_bytes(model, 2000) / 2 / (link.bandwidth_bytes_s * link.efficiency) \
        + link.latency_s
    assert disagg.transfer_s(p, 2, 2) == pytest.approx(want, rel=1e-12)


def test_windowed_layers_hold_min_context_window():
    """Two kinds (a window on every other layer): each layer holds its kind's tokens, and the
    tables' mean layer times the layers is the request's bytes."""
    from generators import synthetic_window
    model = synthetic_window()                              # window 512 on 4 of 8 layers
    k, v = kv.token_bytes(model)
    for ctx in (100, 512, 3000):
        assert kv.request_bytes(model, ctx) == (4 * ctx + 4 * min(ctx, 512)) * (k + v)
        tab = build_tables(model, H100, Workload("decode", ctx), coarse_of(make_row())[None])
        held = tab.kv_layer_bytes[0, MODE_NONE, MODE_NONE]
        assert held * model.layers == pytest.approx(kv.request_bytes(model, ctx), rel=1e-12)


def test_layers_that_keep_different_bytes_are_costed_per_kind(monkeypatch):
    """A layer kind that keeps other bytes per token lands in ``kv.layer_token_bytes``; the tables
    and the exact solver cost each kind at its own bytes (tests/test_kind_shapes.py); only
    ``token_bytes``, the one size of a uniform model, refuses it."""
    model = load_model("llama3.1-8b")
    assert kv.uniform(model)
    real = kv.layer_token_bytes
    monkeypatch.setattr(kv, "layer_token_bytes",
                        lambda m: real(m)[:-1] + [(1.0, 1.0)])
    assert not kv.uniform(model)
    _Exact(model, [1] * 12)
    with pytest.raises(ValueError, match="op tables"):
        kv.token_bytes(model)
