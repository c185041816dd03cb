"""The prompt's log probs (input prompt_logprobs; issue 47): scored by the same scorer as the
generated tokens' alternatives, so a prompt token and the same token generated after the same
prefix get one number; the front's bodies (echo with logprobs, max_tokens 0, vLLM's
prompt_logprobs) as OpenAI's legacy completions and vLLM shape them, and as lm-eval parses them."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from client.types import GenerationResult, PromptLogprobs
from contract import features
from model_repository.engine_step.alternatives import AlternativesSink
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.engine_step.prompt_logprobs import score_prompt
from openai_front.errors import ApiError
from openai_front.prompt_logprobs import legacy, shape_choice, vllm_entries
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.translate import chat_input, completion_input, completion_prompt_shape

VOCAB = 16


def _logits(prefix) -> np.ndarray:
    """A causal 'model': the logits after a prefix depend on the whole prefix."""
    return np.random.default_rng(abs(hash(tuple(prefix))) % 2**32).normal(0, 3, VOCAB)


class CausalScorer:
    def __init__(self):
        self.open = 0

    def start(self, prompt):
        scorer, seq = self, list(prompt)
        scorer.open += 1

        class Scoring:
            def extend(self, ids):
                rows = []
                for t in ids:
                    rows.append(_logits(seq))
                    seq.append(int(t))
                return np.asarray(rows)

            def close(self):
                scorer.open -= 1

        return Scoring()


def _log_softmax(row):
    return row - np.log(np.exp(row - row.max()).sum()) - row.max()


def test_prompt_scored_in_chunks_as_whole_and_the_first_token_has_none():
    scorer = CausalScorer()
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    whole = score_prompt(scorer, prompt, k=2)
    chunked = score_prompt(scorer, prompt, k=2, chunk=3)
    assert scorer.open == 0
    assert whole.ids.tolist() == prompt and math.isnan(whole.log_probs[0])
    np.testing.assert_allclose(whole.log_probs[1:], chunked.log_probs[1:])
    assert whole.top.ids.shape == (8, 2) and whole.top.ids[0].tolist() == [-1, -1]
    for i in range(1, len(prompt)):  # the log-softmax of the logits after prompt[:i], at prompt[i]
        expected = _log_softmax(_logits(prompt[:i]))
        assert whole.log_probs[i] == pytest.approx(expected[prompt[i]], abs=1e-5)
        assert whole.top.ids[i, 0] == int(np.argmax(expected))
    assert score_prompt(scorer, prompt, k=0).top.ids.shape == (8, 0)


def test_a_prompt_token_and_the_same_token_generated_get_one_number():
    """Echo-scoring "prompt + t" and generating t after "prompt" with top_logprobs: the same log prob."""
    scorer, prompt, t = CausalScorer(), [7, 2, 2, 5], 11
    scored = score_prompt(scorer, prompt + [t], k=1)
    sent = []
    sink = SimpleNamespace(is_cancelled=lambda: False, send=lambda *a, **kw: sent.append((a, kw)), fail=None)
    AlternativesSink(sink, scorer, prompt, k=1).send([t], [-9.0], -9.0, True)
    (ids, own, _cum, _final, _seq), _ = sent[0]
    assert own[0] == pytest.approx(float(scored.log_probs[-1]), abs=1e-6)


def test_engine_options_and_features():
    options = GenerationOptions.from_arrays({"prompt_logprobs": np.array([[0]], dtype=np.int32)})
    assert options.scores_prompt and not GenerationOptions().scores_prompt
    with pytest.raises(ValueError, match="prompt_logprobs"):
        GenerationOptions.from_arrays({"prompt_logprobs": np.array([[21]], dtype=np.int32)})
    row = EngineInputs((1, 2), 2, 4, options=GenerationOptions(num_return_sequences=2, prompt_logprobs=0))
    assert any("prompt_logprobs" in p for p in row.option_problems())
    # an engine without the scorer refuses 0 (the prompt tokens' own log probs) by name, not -1
    refused = features.refusals({"prompt_logprobs": np.array([[0]])}, features.CPU_ENGINE)
    assert [name for name, _ in refused] == ["prompt_logprobs"]
    assert not features.refusals({"prompt_logprobs": np.array([[-1]])}, features.CPU_ENGINE)
    assert not features.refusals({"prompt_logprobs": np.array([[3]])}, features.with_top_logprobs(features.CPU_ENGINE))
    assert features.Feature.PROMPT_LOG_PROBS not in features.TRTLLM_ENGINE.features


def test_front_maps_echo_logprobs_and_max_tokens_zero():
    req = CompletionRequest(model="m", prompt="x", echo=True, logprobs=1, max_tokens=0)
    _, sampling = completion_input(req)
    # the engine generates one token, which the answer leaves out; no generated log probs asked
    assert (sampling.max_tokens, sampling.prompt_logprobs, sampling.return_log_probs) == (1, 1, False)
    assert completion_prompt_shape(req).prompt_only
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x", prompt_logprobs=3, logprobs=1, echo=True))
    assert sampling.prompt_logprobs == 3  # the larger of the two asks
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x"))
    assert sampling.prompt_logprobs is None and completion_prompt_shape(CompletionRequest(model="m", prompt="x")) is None
    for bad, param in (
        (dict(max_tokens=0), "max_tokens"),  # no echo: nothing to answer
        (dict(echo=True, logprobs=1, stream=True), "stream"),
        (dict(prompt_logprobs=21), "prompt_logprobs"),
        (dict(prompt_logprobs=-1), "prompt_logprobs"),  # vLLM's "every token": refused
        (dict(prompt_logprobs=0, n=2), "n"),
    ):
        with pytest.raises(ApiError) as e:
            completion_input(CompletionRequest(model="m", prompt="x", **bad))
        assert e.value.status == 400 and e.value.param == param, bad
    _, sampling = chat_input(ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                                                   prompt_logprobs=0))
    assert sampling.prompt_logprobs == 0
    with pytest.raises(ApiError) as e:
        chat_input(ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=0))
    assert e.value.param == "max_tokens"


class Texts:
    """TokenTexts' interface over a fixed table."""

    table = {0: "The", 1: " cat", 2: " sat", 3: " dog", 4: "."}

    def entry(self, token_id):
        return self.table[token_id], list(self.table[token_id].encode())

    def completion(self, ids, log_probs, offset=0, tops=()):
        tokens = [self.table[i] for i in ids]
        offsets = [offset + sum(len(t) for t in tokens[:j]) for j in range(len(tokens))]
        top = [{self.table[t]: a for t, a in tops[j]} | {tokens[j]: log_probs[j]} for j in range(len(tops))]
        return {"tokens": tokens, "token_logprobs": list(log_probs), "text_offset": offsets,
                "top_logprobs": top or None}


PROMPT = PromptLogprobs((0, 1, 2), (None, -2.0, -0.5), ((), ((3, -1.0), (1, -2.0)), ((2, -0.5), (4, -3.0))))


def _lm_eval_parse(choice, ctxlen):
    """lm-eval 0.4.13 LocalCompletionsAPI.parse_logprobs (lm_eval/models/openai_completions.py)."""
    lps = choice["logprobs"]["token_logprobs"][ctxlen:-1]
    tops = choice["logprobs"]["top_logprobs"][ctxlen:-1]
    return sum(lps), all(tok == max(top.values()) for tok, top in zip(lps, tops))


def test_echo_logprobs_body_as_openai_legacy_and_lm_eval_reads_it():
    shape = completion_prompt_shape(CompletionRequest(model="m", prompt="The cat sat", echo=True, logprobs=1,
                                                      max_tokens=1))
    result = GenerationResult("The cat sat.", "length", 3, 1, None, 0.1, token_ids=[4], log_probs=[-0.25],
                              top_logprobs=[((4, -0.25),)], prompt_logprobs=PROMPT)
    choice = shape_choice({"index": 0, "text": "The cat sat.", "logprobs": {}}, result, shape, Texts(), "The cat sat")
    lp = choice["logprobs"]
    assert lp["tokens"] == ["The", " cat", " sat", "."]
    assert lp["token_logprobs"] == [None, -2.0, -0.5, -0.25]
    assert lp["text_offset"] == [0, 3, 7, 11]
    # at most logprobs + 1 entries: the most likely one and the chosen one; the first null
    assert lp["top_logprobs"] == [None, {" dog": -1.0, " cat": -2.0}, {" sat": -0.5}, {".": -0.25}]
    # " cat sat" given "The": ctxlen 1 (lm-eval drops the generated token with [ctxlen:-1])
    assert _lm_eval_parse(choice, 1) == (-2.5, False)
    assert _lm_eval_parse(choice, 2) == (-0.5, True)


def test_max_tokens_zero_answers_the_prompt_alone_and_vllm_prompt_logprobs():
    shape = completion_prompt_shape(CompletionRequest(model="m", prompt="The cat sat", echo=True, logprobs=0,
                                                      max_tokens=0, prompt_logprobs=1))
    result = GenerationResult("The cat sat.", "length", 3, 1, None, 0.1, token_ids=[4], log_probs=[-0.25],
                              prompt_logprobs=PROMPT)
    choice = shape_choice({"index": 0, "text": "The cat sat.", "logprobs": None}, result, shape, Texts(), "The cat sat")
    assert choice["text"] == "The cat sat" and choice["finish_reason"] == "length"
    assert choice["logprobs"]["tokens"] == ["The", " cat", " sat"] and choice["logprobs"]["top_logprobs"] is None
    assert choice["prompt_logprobs"] == [
        None,
        {"3": {"logprob": -1.0, "rank": 1, "decoded_token": " dog"},
         "1": {"logprob": -2.0, "rank": 2, "decoded_token": " cat"}},
        {"2": {"logprob": -0.5, "rank": 1, "decoded_token": " sat"}},
    ]
    assert legacy(Texts(), PROMPT, 0)["top_logprobs"][1] == {" cat": -2.0}
    assert vllm_entries(Texts(), PromptLogprobs((0, 4), (None, -7.0), ((), ((2, -0.1),))), 1)[1]["4"]["rank"] is None


def test_the_plan_says_which_builds_serve_prompt_logprobs(tmp_path):
    from build_engines.openvino.options import OpenVinoOptions
    from build_engines.plan_report import prompt_logprobs_line
    from build_engines.spec import BuildSpec

    exact = BuildSpec(checkpoint=tmp_path, openvino=OpenVinoOptions(numerics="exact"))
    assert ": served" in prompt_logprobs_line(exact, tmp_path)
    without = BuildSpec(checkpoint=tmp_path, openvino=OpenVinoOptions(numerics="exact", top_logprobs=False))
    assert "refused (built with --no-top-logprobs" in prompt_logprobs_line(without, tmp_path)


def test_an_engines_refusal_names_what_the_request_sent():
    from openai_front.prompt_logprobs import as_asked

    refused = ApiError(400, "Invalid 'prompt_logprobs': asks for the prompt's log probabilities ...",
                       param="prompt_logprobs")
    echo = completion_prompt_shape(CompletionRequest(model="m", prompt="x", echo=True, logprobs=1, max_tokens=0))
    named = as_asked(refused, echo)
    assert named.param == "echo" and named.message.startswith("Invalid 'echo' with 'logprobs': asks")
    vllm = completion_prompt_shape(CompletionRequest(model="m", prompt="x", prompt_logprobs=1))
    assert as_asked(refused, vllm) is refused


def test_the_relays_ask_their_target_for_the_prompt_outputs_only_when_asked():
    from contract.tensors import PROMPT_LOGPROB_OUTPUTS
    from model_repository.engines.relay.relay import requested_outputs

    assert set(PROMPT_LOGPROB_OUTPUTS) <= set(requested_outputs({"prompt_logprobs": np.array([[0]])}))
    assert not set(PROMPT_LOGPROB_OUTPUTS) & set(requested_outputs({"prompt_logprobs": np.array([[-1]])}))
    assert not set(PROMPT_LOGPROB_OUTPUTS) & set(requested_outputs({}))


def test_a_prompt_sent_as_token_ids_is_decoded_and_checked(tmp_path):
    """lm-evaluation-harness's default (tokenized_requests): `prompt: [[ids]]`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from openai_front.logprobs import TokenTexts
    from openai_front.translate import ResponseShaper

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "\u0120c": 2}, merges=[]))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.save(str(tmp_path / "tokenizer.json"))
    texts = TokenTexts(tmp_path)
    req = CompletionRequest(model="m", prompt=[[0, 2, 1]], echo=True, logprobs=1, max_tokens=0)
    prompt, sampling = completion_input(req, texts.decode)
    assert prompt == "a cb" and sampling.prompt_logprobs == 1
    assert completion_input(CompletionRequest(model="m", prompt=[0, 1]), texts.decode)[0] == "ab"
    for bad, param in (([[0, 9]], "prompt"), ([[0], [1]], "prompt")):
        with pytest.raises(ApiError) as e:
            completion_input(CompletionRequest(model="m", prompt=bad), texts.decode)
        assert e.value.param == param
    with pytest.raises(ApiError) as e:  # no tokenizer: refused by name
        completion_input(CompletionRequest(model="m", prompt=[0, 1]))
    assert e.value.param == "prompt"
    # the engine tokenized the text otherwise: the positions would not be the sent ids'
    shaper = ResponseShaper("m", chat=False)
    shaper.prompt, shaper.prompt_texts, shaper.prompt_ids = completion_prompt_shape(req), texts, [0, 2, 1]
    result = GenerationResult("a cb", "length", 2, 1, None, 0.1, token_ids=[1], log_probs=[-0.1],
                              prompt_logprobs=PromptLogprobs((0, 1), (None, -1.0), ((), ((1, -1.0),))))
    with pytest.raises(ApiError) as e:
        shaper.whole([result])
    assert e.value.param == "prompt" and "tokenizer" in e.value.message


def test_the_client_asks_for_the_prompt_outputs_only_with_prompt_logprobs():
    """A repository rendered before the prompt outputs existed still answers every other request."""
    from client.request_builder import requested_outputs
    from client.types import SamplingParams
    from contract.tensors import PROMPT_LOGPROB_OUTPUTS

    assert not {o.name() for o in requested_outputs()} & set(PROMPT_LOGPROB_OUTPUTS)
    assert set(PROMPT_LOGPROB_OUTPUTS) <= {o.name() for o in requested_outputs(SamplingParams(prompt_logprobs=0))}
