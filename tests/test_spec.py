"""Speculative decoding (lts.serving.spec, issue 24): the accepted-length formula by hand, the
verification step's physics, the closed loop with drafts, the exact serve search against brute
force with a draft, and the flags' refusals."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from lts.cost.model import evaluate
from lts.engines import ENGINES
from lts.search.methods import SEARCHERS
from lts.search.problems import ServeProblem
from lts.serving import serve
from lts.serving.spec import accepted_tokens, one_layer, speculation
from lts.specs import load_model, load_topology
from lts.specs.strategy import parse_strategy
from lts.specs.workload import Workload
from test_serve_exact import CASES, every_strategy
from test_validate import run

DSV3, H200 = load_model("deepseek-v3"), load_topology("h200_dgx")


def test_accepted_tokens_by_hand():
    """1 + a + ... + a^k (Leviathan et al. 2023): k = 1, a = 0.7: 1.7; k = 3, a = 0.9: 3.439."""
    assert accepted_tokens(1, 0.7) == pytest.approx(1.7)
    assert accepted_tokens(3, 0.9) == pytest.approx(1 + 0.9 + 0.81 + 0.729)
    assert accepted_tokens(3, 0.0) == 1.0 and accepted_tokens(3, 1.0) == 4.0


@given(st.integers(1, 16), st.floats(0, 1))
def test_accepted_tokens_lies_between_one_and_k_plus_one(k, a):
    assert 1.0 - 1e-12 <= accepted_tokens(k, a) <= k + 1 + 1e-12


def test_mtp_defaults_come_from_the_model_file():
    s = speculation(DSV3, "mtp")
    assert s.tokens == DSV3.mtp_layers == 1 and s.acceptance == 0.85
    assert s.accepted_length == pytest.approx(1.85)
    assert s.draft.layers == 1 and s.draft.ffn.kind == "moe" and s.draft.ffn.dense_layers == 0


def test_verification_reads_the_weights_and_kv_cache_once():
    """A step of 4 query tokens per sequence costs more than one token's and less than four
    steps': the weights and each sequence's KV cache are read once, the GEMMs see 4x the rows."""
    row = np.array([parse_strategy("tp=8,batch=32")])
    one, four = (evaluate(DSV3, H200, Workload("decode", 5000, tpot_slo_ms=1e9, query_tokens=q),
                          row).step_s[0] for q in (1, 4))
    assert one < four < 2 * one


def test_closed_loop_step_is_verification_plus_drafts():
    """The loop's decode step with a draft = the verification of k + 1 tokens + k draft steps
    (Megatron's sharding at the target's tp) + the engine's time per step; TPOT = step / E
    when no prefill shares the steps (osl 1: no; so a long osl and a batch that fits)."""
    spec = speculation(DSV3, "mtp", 3, 0.8)
    eng = ENGINES["vllm"].profile.for_gpu(H200)
    row = np.array([parse_strategy("tp=8,batch=16")])
    res = serve.serve(DSV3, H200, row, 1000, 2000, engine=eng, spec=spec)
    ev, draft = serve.Evaluator(DSV3, eng.topology(H200)), serve.Evaluator(spec.draft,
                                                                             eng.topology(H200))
    verify = ev(serve.decode_workload(1000, 2000, 0, 4), row).step_s[0]
    drafts = 3 * draft(serve.decode_workload(1000, 2000), serve.draft_rows(row)).step_s[0]
    assert res.decode_step_s[0] == pytest.approx(verify + drafts + eng.step_overhead_s)
    plain = serve.serve(DSV3, H200, row, 1000, 2000, engine=eng)
    # more tokens per step than the verification costs: faster per token, same requests held
    assert res.tpot_s[0] < plain.tpot_s[0] and res.valid[0]
    # the draft's weights and KV cache take memory: it holds no more requests than without
    assert res.kv_capacity[0] <= plain.kv_capacity[0]


def test_no_acceptance_only_costs():
    """Acceptance 0: one token a step, as without a draft, at the cost of verifying and
    drafting: never faster."""
    row = np.array([parse_strategy("tp=8,batch=16")])
    eng = ENGINES["sglang"].profile.for_gpu(H200)
    none = serve.serve(DSV3, H200, row, 1000, 500, engine=eng, spec=speculation(DSV3, "mtp", 2,
                                                                                0.0))
    plain = serve.serve(DSV3, H200, row, 1000, 500, engine=eng)
    assert none.tpot_s[0] > plain.tpot_s[0]


@pytest.mark.parametrize("case", ["moe-trtllm", "dense-generic"])
def test_serve_exact_with_a_draft_equals_brute_force(case):
    model, topo, isl, osl, tpot, ttft, engine, space = CASES[case]
    spec = speculation(model, "eagle", 2, 0.8)
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine,
                     spec=spec)
    res, score = every_strategy(p)
    assert res.valid.any()
    exact = SEARCHERS["exact"](p, 0, None, top=3)
    assert exact.best_score == pytest.approx(score.max(), rel=1e-12)


def test_eagle_head_is_one_layer_of_the_target():
    head = one_layer(load_model("llama3.1-70b"), "x")
    assert head.layers == 1 and head.hidden == 8192 and head.vocab == 128256


SERVE = ("estimate", "deepseek-v3", "h200_dgx", "--strategy", "tp=8,batch=16", "--phase", "serve")


@pytest.mark.parametrize("extra, message", [
    (("--spec", "eagle"), "eagle needs --acceptance A (per drafted token) or --accepted-length L"),
    (("--spec", "draft"), "'draft' is not one of mtp, eagle, draft:MODEL"),
    (("--spec", "medusa"), "'medusa' is not one of mtp, eagle, draft:MODEL"),
    (("--acceptance", "0.5"), "--acceptance: only with --spec"),
    (("--spec", "mtp", "--acceptance", "0.5", "--accepted-length", "1.5"),
     "give the acceptance per drafted token or the mean accepted length, not both"),
    (("--spec", "mtp", "--spec-tokens", "2", "--accepted-length", "3.5"),
     "accepted length 3.5: expected 1 to k + 1 = 3"),
    (("--spec", "draft:llama3.1-8b", "--acceptance", "0.7"),
     "vocabulary 128,256 is not the target's 129,280"),
])
def test_spec_flags_refuse(extra, message):
    r = run(*SERVE, *extra)
    assert r.exit_code == 2 and message in r.output, r.output


def test_mtp_on_a_model_without_mtp_layers_is_refused():
    r = run("estimate", "llama3.1-70b", "h100_dgx", "--strategy", "tp=8", "--phase", "serve",
            "--spec", "mtp")
    assert r.exit_code == 2
    assert "Llama-3.1-70B has no multi-token-prediction layers (mtp_layers 0)" in r.output


def test_spec_only_in_the_serve_phase():
    r = run("estimate", "deepseek-v3", "h200_dgx", "--strategy", "tp=8", "--spec", "mtp")
    assert r.exit_code == 2 and "--spec: only with --phase serve" in r.output


def test_estimate_and_search_report_the_speculation():
    d = json.loads(run(*SERVE, "--spec", "mtp", "--spec-tokens", "3", "--acceptance", "0.9",
                       "--json").output)
    assert d["speculation"] == {"method": "mtp", "draft": "the model's MTP layer", "tokens": 3,
                                "acceptance": 0.9, "accepted_length": pytest.approx(3.439)}
    r = run("search", "deepseek-v3", "h200_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "1000", "--osl", "1000", "--spec", "mtp", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["workload"]["speculation"]["accepted_length"] == \
        pytest.approx(1.85)


def test_a_bad_draft_model_is_one_line():
    r = run(*SERVE, "--spec", "draft:nosuch", "--acceptance", "0.7")
    assert r.exit_code == 2 and "draft:nosuch: no such file or shipped model" in r.output


def test_a_request_needs_a_whole_step_for_its_last_tokens():
    """osl 4 and 17 tokens a step: the 3 tokens after the first take one step, not 3/17 of one
    (TPOT = step / 3)."""
    r = run("estimate", "llama3.1-8b", "h100_dgx", "--phase", "serve", "--isl", "1000", "--osl",
            "4", "--strategy", "tp=1", "--concurrency", "1", "--spec", "eagle", "--spec-tokens",
            "16", "--acceptance", "1", "--json")
    d = json.loads(r.output)
    assert d["tpot_ms"] == pytest.approx(d["decode_step_ms"] / 3, rel=1e-9)


def test_two_pool_emit_and_sizing_carry_the_speculation():
    """The two pools' decode commands run the drafts the deployment was costed with, and the
    two-pool sizing's TPOT is the speculative one: below its decode pool's plain step (the
    pool's own tpot_ms, one token a step)."""
    r = run("search", "deepseek-v3", "h200_dgx", "--gpus", "16", "--phase", "serve", "--isl",
            "4000", "--osl", "1000", "--ttft-slo-ms", "2000", "--tpot-slo-ms", "30", "--spec",
            "mtp", "--spec-tokens", "3", "--acceptance", "0.8", "--emit", "sglang",
            "--request-rate", "20", "--json")
    d = json.loads(r.output)
    decode = [c["command"] for c in d["emit_disagg"]["commands"] if "decode" in c["role"]]
    assert decode and all("--speculative-algorithm NEXTN" in c for c in decode
                          if "sglang.launch_server" in c)
    # SGLang's prefill side runs the draft too (sglang 0.5.23 disaggregation/prefill.py)
    prefill = [c["command"] for c in d["emit_disagg"]["commands"] if "prefill" in c["role"]
               and "sglang.launch_server" in c["command"]]
    assert prefill and all("--speculative-algorithm NEXTN" in c for c in prefill)
    dep = d["sizing_disagg"]["deployment"]
    assert dep["tpot_ms"] < dep["decode"]["tpot_ms"]

def test_a_limit_names_what_set_it():
    """k set by the model's MTP layers (no --spec-tokens): the message says so, not as if the
    user had asked for 17 (issue 38 item 7); a --spec-tokens beyond the limit names the flag."""
    from dataclasses import replace
    from lts.serving.spec import speculation
    from lts.specs import load_model
    m = replace(load_model("deepseek-v3"), mtp_layers=17)
    with pytest.raises(ValueError) as e:
        speculation(m, "mtp", None, None, None)
    assert str(e.value) == ("17 drafted tokens from DeepSeek-V3's 17 MTP layers (one token "
                            "each): expected 1 to 16; give --spec-tokens N to draft fewer")
    with pytest.raises(ValueError, match=r"^20 drafted tokens from --spec-tokens: expected 1 "):
        speculation(m, "mtp", 20, None, None)
    assert speculation(m, "mtp", 4, None, None).tokens == 4
