"""The ensemble's request as a typed object, parsed and checked from raw input arrays: the
entry of the ensemble and of the BLS, where each field's range is checked once, by its rule
in contract/params.py; the hops after it trust the typed value.

Every problem raises `InvalidParameter` naming the field; the preprocessing adapter turns
it into an INVALID_ARG error for that request alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from contract import params, sampling_fields
from contract.chat_message import CHAT_ROLES, ChatMessage
from contract.features import INPUT_FEATURES
from contract.params import InvalidParameter
from contract.sampling_fields import SentSampling
from contract.tensors import PREPROCESSING_INPUTS, DType, by_name

_SPECS = by_name(PREPROCESSING_INPUTS)
_WORD_INPUTS = ("stop_words", "bad_words", "embedding_bias_words")


@dataclass(frozen=True, kw_only=True)
class GenerateRequest(SentSampling):
    """The sampling fields (top_k ... seed, None when not sent) are SentSampling's (contract/sampling_fields.py)."""

    text: str | None
    messages: tuple[ChatMessage, ...] | None
    max_tokens: int | None = None
    stream: bool = False
    stop_words: tuple[str, ...] = ()
    bad_words: tuple[str, ...] = ()
    exclude_input_in_output: bool = True
    end_id: int | None = None
    pad_id: int | None = None
    return_log_probs: bool = False
    skip_special_tokens: bool = True
    stop: bool = False  # a stop request: cancel the running request with the same request id
    length_penalty: float | None = None  # beam search only: no effect with one beam
    embedding_bias_words: tuple[str, ...] = ()
    embedding_bias_weights: tuple[float, ...] = ()
    # Inputs that ask the engine for a feature (contract/features.py), as sent: the
    # preprocessor refuses those the engine lacks; the engine step reads them itself.
    feature_inputs: tuple[tuple[str, Any], ...] = ()


def _batch_of_one(name: str, array: np.ndarray) -> np.ndarray:
    if array.ndim == 0:
        return array.reshape(1)
    if array.shape[0] != 1:
        raise InvalidParameter(name, f"batch size {array.shape[0]}: send one prompt per request")
    return array[0]


def _decode_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidParameter(name, f"not valid UTF-8 ({e.reason} at byte {e.start})") from None


def _scalar(name: str, array: np.ndarray) -> Any:
    item = _batch_of_one(name, array).reshape(-1)
    if item.size != 1:
        raise InvalidParameter(name, f"expected one value, got {item.size}")
    value = item[0]
    dtype = _SPECS[name].dtype
    if dtype == DType.STRING:
        return _decode_text(name, value)
    if dtype == DType.BOOL:
        return bool(value)
    if dtype == DType.FP32:
        return float(value)
    return int(value)


def _strings(name: str, array: np.ndarray) -> tuple[str, ...]:
    items = _batch_of_one(name, array).reshape(-1)
    words = tuple(_decode_text(name, v) for v in items)
    while words and not words[-1]:
        # Trailing empty words are NVIDIA's padding: one empty word for "none"
        # (tools/inflight_batcher_llm/end_to_end_test.py: contract/upstream/data/nvidia_clients.json)
        # and the padding of ragged rows in a [batch, n] tensor; its preprocessing skips empty words
        # (row stop_words_token_sequences).  An empty word before a real one is no padding: refused.
        words = words[:-1]
    params.check_words(name, list(words))
    return words


def _messages(raw: str) -> tuple[ChatMessage, ...]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InvalidParameter("messages", f"not valid JSON ({e.msg})") from None
    if not isinstance(data, list) or not data:
        raise InvalidParameter("messages", "expected a non-empty JSON list of {role, content} objects")
    out = []
    for i, m in enumerate(data):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in CHAT_ROLES:
            raise InvalidParameter(
                "messages", f"entry {i} must be {{role: one of {list(CHAT_ROLES)}, content: string}}"
            )
        out.append(ChatMessage(role=m["role"], content=m["content"]))
    return tuple(out)


_NUMERIC = ("max_tokens", *sampling_fields.NAMES)  # checked by their rules (contract/params.py)


def split_rows(arrays: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """A request of n prompts ([n, ...] tensors, NVIDIA's batched requests) -> n requests of one."""
    sizes = {name: (np.asarray(a).shape[0] if np.asarray(a).ndim else 1) for name, a in arrays.items()}
    n = max(sizes.values(), default=1)
    for name, size in sizes.items():
        if size != n:
            raise InvalidParameter(name, f"batch size {size}, but other inputs of the request have {n}")
    return [
        {name: np.asarray(a)[i : i + 1] if np.asarray(a).ndim else a for name, a in arrays.items()} for i in range(n)
    ]


def parse_generate_requests(arrays: Mapping[str, np.ndarray]) -> list[GenerateRequest]:
    return [parse_generate_request(row) for row in split_rows(arrays)]


def parse_generate_request(arrays: Mapping[str, np.ndarray]) -> GenerateRequest:
    """`arrays` maps input names to what the client sent for one prompt (absent inputs omitted)."""
    unknown = sorted(set(arrays) - set(_SPECS))
    if unknown:
        raise InvalidParameter(unknown[0], f"unknown input; allowed: {sorted(_SPECS)}")
    values: dict[str, Any] = {}
    features = tuple((name, _batch_of_one(name, np.asarray(a))) for name, a in arrays.items() if name in INPUT_FEATURES)
    for name, array in arrays.items():
        if name in _WORD_INPUTS:
            values[name] = _strings(name, array)
        elif name == "embedding_bias_weights":
            values[name] = tuple(float(w) for w in _batch_of_one(name, np.asarray(array)).reshape(-1))
        elif _SPECS[name].is_scalar and name not in INPUT_FEATURES:
            values[name] = _scalar(name, array)
    if values.get("stop"):
        return GenerateRequest(text=None, messages=None, stop=True)  # nothing else is read, as upstream
    for name in _NUMERIC:
        if name in values:
            params.check(name, values[name])

    text, messages = values.pop("text_input", None), values.pop("messages", None)
    if messages is not None and text:
        raise InvalidParameter("messages", "send either text_input or messages, not both")
    if messages is not None:
        parsed_messages = _messages(messages)
    elif text is None or not text.strip():
        raise InvalidParameter("text_input", "the prompt is empty")
    else:
        parsed_messages = None
    min_tokens, max_tokens = values.get("min_tokens"), values.get("max_tokens")
    if min_tokens is not None and max_tokens is not None:
        params.check_min_tokens(min_tokens, max_tokens)
    if values.get("embedding_bias_words") and len(values["embedding_bias_words"]) != len(
        values.get("embedding_bias_weights", ())
    ):
        raise InvalidParameter("embedding_bias_weights", "needs one weight per entry of embedding_bias_words")
    for compat in ("return_num_input_tokens", "return_num_output_tokens"):
        values.pop(compat, None)
    return GenerateRequest(
        text=None if parsed_messages else text, messages=parsed_messages, feature_inputs=features, **values
    )
