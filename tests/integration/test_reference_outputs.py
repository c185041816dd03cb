"""Exact tokens and fidelity of the served engine.

1. The ensemble equals the same OpenVINO engine driven directly (same numerics properties).
2. Against Hugging Face transformers (float32 checkpoint), 128-token greedy answers:
   - where the answers part ways, each side's token is in the other's top 5 (vLLM's check);
   - teacher-forced on the reference's answers (every one of their tokens), the engine's top-1
     agrees with the reference's on at least the share measured for its precision, minus margin;
   - answers stay equal for at least as many tokens, on average, as measured for its precision.
   The limits per precision come from docs/examples/fidelity/ (see LIMITS).
"""

from __future__ import annotations

import numpy as np
import pytest

from build_engines.fidelity.texts import GREEDY_PROMPTS
from client import ChatMessage, SamplingParams
from tests.integration.direct_engine import EOS, direct_pipeline, greedy, served_parameters

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPTS = list(GREEDY_PROMPTS[:6])  # the first of the fidelity report's greedy prompts
MAX_TOKENS = 128

# Per weight precision: (min teacher-forced top-1 agreement %, min mean first differing token).
# Measured on the default model (docs/examples/fidelity/README.md): top-1 on the evaluation text
# int8 ~97%, int4 (float zero point, group 32) ~98%, fp16 ~99.4% (u8 KV cache); greedy answers
# part after ~20-24 (int8), ~26 (int4) and ~45 (fp16) tokens on average over 48-64 tokens, where
# most answers run out first.  Limits sit below those with room for prompt-to-prompt spread; the
# int4 limits are int8's because the default int4 recipe measured at least as close on this model.
LIMITS = {"int8": (90.0, 6.0), "int4": (90.0, 6.0), "fp16": (97.0, 15.0)}


@pytest.fixture(scope="module")
def prompt_ids(default_checkpoint):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_checkpoint))
    return {p: tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"] for p in PROMPTS}


@pytest.fixture(scope="module")
def engine_params(repository):
    return served_parameters(repository)


@pytest.fixture(scope="module")
def served(client):
    """Greedy token ids through the whole ensemble, one request at a time."""
    out = {}
    for p in PROMPTS:
        result = client.generate([ChatMessage("user", p)], SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
        out[p] = result.token_ids
    return out


@pytest.fixture(scope="module")
def direct(default_engine, prompt_ids, engine_params):
    """The same IR driven in this process by OpenVINO GenAI, same scheduler settings and numerics."""
    pipe = direct_pipeline(default_engine, engine_params)
    return {p: greedy(pipe, 0, ids, MAX_TOKENS) for p, ids in prompt_ids.items()}


def test_ensemble_equals_the_engine_driven_directly(served, direct):
    for p in PROMPTS:
        assert served[p] == direct[p], p


@pytest.fixture(scope="module")
def reference(default_checkpoint, prompt_ids):
    """The float32 checkpoint's greedy answers and its logits along them (teacher forcing)."""
    import torch

    from build_engines.fidelity.reference import TorchReference

    ref = TorchReference(default_checkpoint)
    answers = {p: ref.greedy(ids, MAX_TOKENS, {EOS}) for p, ids in prompt_ids.items()}
    with torch.no_grad():
        logits = {p: ref.logits(prompt_ids[p] + answers[p], len(prompt_ids[p])) for p in PROMPTS}
    return answers, logits, ref


@pytest.fixture(scope="module")
def engine_scorer(default_engine, engine_params):
    from build_engines.fidelity.openvino_engine import OpenVinoScorer
    from model_repository.engines.openvino.openvino_backend import engine_properties

    return OpenVinoScorer(default_engine, engine_properties(engine_params), chunk=engine_params.max_num_batched_tokens)


def test_agrees_with_transformers_fp32(served, prompt_ids, reference, engine_scorer, default_engine):
    from build_engines.fidelity.metrics import first_difference
    from contract.build_record import BuildRecord

    precision = BuildRecord.read(default_engine).spec["precision"]
    min_top1, min_first_difference = LIMITS[precision]
    answers, ref_logits, _ = reference
    agree = total = 0
    depths = []
    for p, ids in prompt_ids.items():
        ref, ours = answers[p], served[p]
        # Teacher-forced: the engine predicts every token of the reference's answer.
        engine_logits = engine_scorer.logits(ids + ref, len(ids))
        agree += int((engine_logits.argmax(-1) == ref_logits[p].argmax(-1)).sum())
        total += len(ref)
        n = first_difference(ref, ours)
        depths.append(len(ref) if n is None else n)
        if n is None or n >= min(len(ref), len(ours)):
            continue
        assert ours[n] in np.argsort(ref_logits[p][n])[-5:], f"{p!r}: our token {ours[n]} at {n} not in the reference's top 5"
        assert ref[n] in np.argsort(engine_logits[n])[-5:], f"{p!r}: the reference's token {ref[n]} at {n} not in our top 5"
    top1 = 100.0 * agree / total
    assert total > 16 * len(PROMPTS), f"only {total} reference tokens compared"
    assert top1 >= min_top1, f"{precision}: teacher-forced top-1 agreement {top1:.1f}% < {min_top1}% over {total} tokens"
    assert np.mean(depths) >= min_first_difference, \
        f"{precision}: greedy answers part after {np.mean(depths):.1f} tokens on average (< {min_first_difference}): {depths}"
