"""Speculative decoding (issue 24): a draft proposes k tokens per running sequence, the target
verifies the k + 1 positions in one step and keeps the accepted prefix plus one token of its own.

Per step of n running sequences (Leviathan, Kalman, Matias 2023, arXiv 2211.17192, §3.1):

- **Tokens per step.** With each drafted token accepted with probability a (independently, the
  paper's i.i.d. assumption) the step yields E = (1 - a^(k+1)) / (1 - a) tokens per sequence
  (k + 1 at a = 1); or the measured mean accepted length L (1 <= L <= k + 1) when given.
- **Step time.** The target's decode step with k + 1 query tokens per sequence
  (``Workload.query_tokens``: the GEMMs and attention over k + 1 tokens, the weights and each
  sequence's KV cache read once) plus k sequential steps of the draft at one token per sequence.
- **TPOT** = step time / E; a request's osl - 1 tokens after the first take (osl - 1) / E steps.
- **Memory.** The draft's weights and its KV cache per request beside the target's.

The drafts (``Speculation.draft``):

- ``mtp``: the model's own multi-token-prediction layers (``ModelSpec.mtp_layers``: DeepSeek-V3,
  GLM-5, Qwen3.5, Nemotron 3 Super), each one decoder layer of the model's attention and FFN
  with its embedding and LM head (DeepSeek-V3 README_WEIGHTS.md); k passes of the module per
  step (SGLang and vLLM run one MTP layer recursively for k > 1). Default k: the model's MTP
  layers; default acceptance 0.85 (DeepSeek-V3 technical report, arXiv 2412.19437 §5.4.3: "the
  acceptance rate of the second token prediction ranges between 85% and 90%").
- ``eagle``: an EAGLE-3 head (Li et al. 2025, arXiv 2503.01840 §3: one decoder layer fed the
  target's hidden states), costed as one layer of the target's own attention and FFN shape with
  the target's LM head; its weights are not in the checkpoint. No default acceptance.
- ``draft:MODEL``: a separate draft model (a shipped name or file), k decode steps of it on the
  target's tp group. No default acceptance.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..specs import ModelSpec
from ..specs.errors import cut_quoted

METHODS = ("mtp", "eagle", "draft")
MTP_ACCEPTANCE = 0.85          # DeepSeek-V3 technical report §5.4.3 (module docstring)
MAX_SPEC_TOKENS = 16           # drafted tokens per step at most (engines' configs use 1-8)


@dataclass(frozen=True)
class Speculation:
    """A speculative-decoding setup: ``method``, ``tokens`` (k drafted per step), the
    ``acceptance`` per drafted token (None when ``accepted_length`` was given as measured), the
    mean tokens per step ``accepted_length`` (E), and the ``draft`` costed each pass."""
    method: str
    tokens: int
    acceptance: float | None
    accepted_length: float
    draft: ModelSpec
    draft_name: str
    draft_key: str = ""      # draft:MODEL's MODEL as given (its launch reference); "" otherwise


def tokens_per_step(spec, osl: int) -> float:
    """Tokens a decoding request gains per step: the mean accepted length, but no more than the
    osl - 1 tokens after its first (a request needs at least one step for them); 1 without a
    speculation."""
    if spec is None:
        return 1.0
    return float(min(spec.accepted_length, max(osl - 1, 1)))


def accepted_tokens(k: int, a: float) -> float:
    """Tokens a verification step yields per sequence: 1 + a + ... + a^k."""
    return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def one_layer(model: ModelSpec, name: str) -> ModelSpec:
    """One decoder layer of ``model``'s attention (full) and FFN (its MoE where it has one),
    with an embedding and LM head of its own: an MTP module or an EAGLE head as lts costs it."""
    return replace(model, name=name, layers=1, layer_types=(), mtp_layers=0, linear=None,
                   no_ffn=(), ffn=replace(model.ffn, dense_layers=0, moe_every=1),
                   params_published=0.0, active_params_published=0.0)


def speculation(model: ModelSpec, method: str, tokens: int | None = None,
                acceptance: float | None = None, accepted_length: float | None = None,
                draft_model: ModelSpec | None = None, draft_key: str = "") -> Speculation:
    """The setup the flags describe; ValueError with one line where they do not fit."""
    if method not in METHODS:
        raise ValueError(f"{cut_quoted(method)} is not one of mtp, eagle, draft:MODEL")
    if acceptance is not None and accepted_length is not None:
        raise ValueError("give the acceptance per drafted token or the mean accepted length, "
                         "not both")
    if method == "mtp":
        if not model.mtp_layers:
            raise ValueError(f"{model.name} has no multi-token-prediction layers (mtp_layers "
                             "0): use eagle or draft:MODEL")
        k = tokens or model.mtp_layers
        if acceptance is None and accepted_length is None:
            acceptance = MTP_ACCEPTANCE
        draft, name = one_layer(model, f"{model.name} MTP"), "the model's MTP layer"
    elif method == "eagle":
        k = tokens or 3
        draft, name = one_layer(model, f"{model.name} EAGLE head"), "an EAGLE-3 head"
    else:
        if draft_model is None:
            raise ValueError("draft needs a model: draft:MODEL")
        k = tokens or 3
        draft, name = draft_model, draft_model.name
    if method != "mtp" and acceptance is None and accepted_length is None:
        raise ValueError(f"{method} needs --acceptance A (per drafted token) or "
                         "--accepted-length L (measured mean tokens per step): lts has no "
                         "default for it")
    if not 1 <= k <= MAX_SPEC_TOKENS:
        # a limit message names what the user set: --spec-tokens, or the model's MTP layers
        # that set k when it is not given
        whose = "--spec-tokens" if tokens else f"{model.name}'s {k} MTP layers (one token each)"
        raise ValueError(f"{k} drafted tokens from {whose}: expected 1 to {MAX_SPEC_TOKENS}"
                         + ("" if tokens else "; give --spec-tokens N to draft fewer"))
    if acceptance is not None:
        if not 0.0 <= acceptance <= 1.0:
            raise ValueError(f"acceptance {acceptance:g}: expected 0 to 1")
        length = accepted_tokens(k, acceptance)
    else:
        if not 1.0 <= accepted_length <= k + 1:
            raise ValueError(f"accepted length {accepted_length:g}: expected 1 to k + 1 = {k + 1}")
        length = float(accepted_length)
    if method == "draft" and draft_model.vocab != model.vocab:
        raise ValueError(f"draft {draft_model.name}: vocabulary {draft_model.vocab:,} is not the "
                         f"target's {model.vocab:,}")
    return Speculation(method, int(k), acceptance, length, draft, name, draft_key)
