"""SamplingParams + prompt -> the ensemble's input tensors (names and dtypes from the
contract table), pre-checked by the functions the server calls (contract/params.py), so a bad
value is refused before it is sent, in the server's words."""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
from tritonclient.grpc import InferInput, InferRequestedOutput

from client.errors import InvalidRequestError
from client.types import ChatMessage, SamplingParams
from contract import params as rules
from contract.tensors import BLS_INPUTS, ENSEMBLE_OUTPUTS, PROMPT_LOGPROB_OUTPUTS, STOP, DType, by_name

_INPUTS = by_name(BLS_INPUTS)  # the ensemble's and the BLS's own (num_draft_tokens)

# SamplingParams field -> ensemble input name, where they differ.
_RENAMES = {"stop": "stop_words"}


def _tensor(name: str, value: Any) -> InferInput:
    spec = _INPUTS[name]
    if spec.dtype == DType.STRING:
        items = [value] if isinstance(value, str) else list(value)
        array = np.array([[s.encode("utf-8") for s in items]], dtype=np.object_)
    else:
        array = np.array([[value]], dtype=spec.dtype.numpy_type)
    tensor = InferInput(name, list(array.shape), spec.dtype.wire_name)
    tensor.set_data_from_numpy(array)
    return tensor


def build_inputs(prompt: str | Sequence[ChatMessage], sampling: SamplingParams, stream: bool) -> list[InferInput]:
    try:
        for name in rules.RULES:
            value = getattr(sampling, name, None)
            if value is not None:
                rules.check(name, value)
        rules.check("num_return_sequences", sampling.n, "n")
        rules.check_words("stop_words", list(sampling.stop))
        rules.check_words("bad_words", list(sampling.bad_words))
    except rules.InvalidParameter as e:
        raise InvalidRequestError(str(e)) from None

    if isinstance(prompt, str):
        if not prompt.strip():
            raise InvalidRequestError("invalid 'text_input': the prompt is empty")
        inputs = [_tensor("text_input", prompt)]
    else:
        messages = [{"role": m.role, "content": m.content} for m in prompt]
        inputs = [_tensor("messages", json.dumps(messages, ensure_ascii=False))]
    inputs.append(_tensor("stream", stream))
    sent = sampling.sent()  # the sampling fields set (contract/sampling_fields.py), each an input of its name
    top_p = rules.implied_top_p(sampling.temperature, sampling.top_k, sampling.top_p)
    if top_p is not None:
        sent["top_p"] = top_p
    for field_name in ("max_tokens", "skip_special_tokens", "priority", "lora_task_id", "num_draft_tokens"):
        value = getattr(sampling, field_name)
        if value is not None:
            sent[field_name] = value
    inputs += [_tensor(name, value) for name, value in sent.items()]
    if sampling.stop:
        inputs.append(_tensor(_RENAMES["stop"], sampling.stop))
    if sampling.bad_words:
        inputs.append(_tensor("bad_words", sampling.bad_words))
    if sampling.return_log_probs or sampling.top_logprobs:
        inputs.append(_tensor("return_log_probs", True))
    if sampling.top_logprobs:
        inputs.append(_tensor("top_logprobs", sampling.top_logprobs))
    if sampling.prompt_logprobs is not None:
        inputs.append(_tensor("prompt_logprobs", sampling.prompt_logprobs))
    if sampling.n != 1:
        inputs.append(_tensor("num_return_sequences", sampling.n))
    if sampling.guide is not None:
        inputs.append(_tensor("guided_decoding_guide_type", sampling.guide.type))
        if sampling.guide.guide:
            inputs.append(_tensor("guided_decoding_guide", sampling.guide.guide))
    return inputs


def stop_inputs() -> list[InferInput]:
    """A stop request to the ensemble or the BLS (sent under the request id to stop)."""
    return [_tensor(STOP.name, True)]


def requested_outputs(sampling: SamplingParams = SamplingParams()) -> list[InferRequestedOutput]:
    """The ensemble's outputs, the prompt's log probs only when asked (a repository rendered before
    they existed still answers every other request)."""
    skip = () if sampling.prompt_logprobs is not None else PROMPT_LOGPROB_OUTPUTS
    return [InferRequestedOutput(t.name) for t in ENSEMBLE_OUTPUTS if t.name not in skip]
