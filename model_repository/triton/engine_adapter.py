"""The Triton side of every engine model that serves the engine contract itself
(openvino_llm, tensorrt_llm_pytorch): one request's responses as a ResponseSink, and the
per-request flow of execute() - `stop` by request id, parsing, refusals, the n prompts of a
batched request answered through one SharedChannel.  Engine models differ only in the engine
they hand the rows to.  Imported only inside the Python-backend stub."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Protocol

import numpy as np
import triton_python_backend_utils as pb_utils

from contract import features, telemetry
from contract.tensors import (
    ENGINE_CORE_INPUTS,
    ENGINE_INPUTS,
    ENGINE_OUTPUTS,
    PROMPT_LOGPROB_OUTPUTS,
    TOP_LOGPROB_OUTPUTS,
    by_name,
)
from model_repository.engine_step.alternatives import Scorer
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.engine_step.prompt_logprobs import PromptLogprobs, score_prompt
from model_repository.engine_step.runner import FailCode, ResponseSink
from model_repository.triton import tracing, triton_io
from model_repository.triton.response_channel import SendPump, SharedChannel

CORE_NAMES = frozenset(t.name for t in ENGINE_CORE_INPUTS)
# What these engines send (of ENGINE_OUTPUTS): no logits, no perf metrics; the top-k
# alternatives only to requests that ask for them (top_logprobs).
SENT_OUTPUTS = tuple(
    by_name(ENGINE_OUTPUTS)[n]
    for n in (
        "output_ids",
        "sequence_length",
        "cum_log_probs",
        "output_log_probs",
        "batch_index",
        "sequence_index",
        "detokenize_params",
    )
)
TOP_OUTPUTS = tuple(by_name(ENGINE_OUTPUTS)[n] for n in TOP_LOGPROB_OUTPUTS)
PROMPT_OUTPUTS = tuple(by_name(ENGINE_OUTPUTS)[n] for n in PROMPT_LOGPROB_OUTPUTS)


class TritonSink:
    """Sends one prompt's responses (the engines' ResponseSink): one channel row per sequence
    (num_return_sequences), each response tagged with its batch_index and sequence_index."""

    def __init__(self, channels, detokenize_params, batch_index):
        self._channels = list(channels)
        self._echo = triton_io.text_array(detokenize_params)
        self._batch_index = np.array([[batch_index]], dtype=np.int32)
        self.prompt: PromptLogprobs | None = None  # sent with the first response (prompt_logprobs)

    def is_cancelled(self):
        return self._channels[0].is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None):
        n = len(ids)
        tensors = (
            []
            if top is None
            else triton_io.output_tensors(
                {"output_top_ids": top.ids[None, None], "output_top_log_probs": top.log_probs[None, None]}, TOP_OUTPUTS
            )
        )
        if self.prompt is not None:
            prompt, self.prompt = self.prompt, None
            tensors += triton_io.output_tensors(
                {
                    "prompt_ids": prompt.ids[None],
                    "prompt_log_probs": prompt.log_probs[None],
                    "prompt_top_ids": prompt.top.ids[None],
                    "prompt_top_log_probs": prompt.top.log_probs[None],
                },
                PROMPT_OUTPUTS,
            )
        tensors += triton_io.output_tensors(
            {
                "output_ids": np.asarray(ids, dtype=np.int32).reshape(1, 1, n),
                "sequence_length": np.array([[n]], dtype=np.int32),
                "cum_log_probs": np.array([[cum_log_prob]], dtype=np.float32),
                "output_log_probs": np.asarray(log_probs, dtype=np.float32).reshape(1, 1, n),
                "batch_index": self._batch_index,
                "sequence_index": np.array([[sequence]], dtype=np.int32),
                "detokenize_params": self._echo,
            },
            SENT_OUTPUTS,
        )
        self._channels[sequence].send(pb_utils.InferenceResponse(tensors), final=final)

    def fail(self, message, code=FailCode.INTERNAL):
        *others, last = self._channels
        for channel in others:  # ended without a word, so the error is the stream's final response
            channel.finish()
        triton_io.fail(last, message, code.value)


class Engine(Protocol):
    """What an engine model hands requests to (the CPU EngineRunner, the PyTorch LlmEngine)."""

    def submit(self, request: EngineInputs, sink: ResponseSink, request_id: str = "") -> None: ...

    def stop(self, request_id: str) -> None: ...  # TensorRT-LLM's cancel-by-request-id


def serve_requests(
    requests: Iterable,
    engine: Engine,
    engine_features: features.EngineFeatures,
    checks: Callable[[EngineInputs], list[str]],
    scorer: Scorer | None = None,
    pump: SendPump | None = None,
) -> None:
    """execute() of an engine model: each request answered or handed to `engine`, one sink per prompt;
    `scorer`: the engine's own (alternatives.Scorer), which answers prompt_logprobs."""
    for request in requests:
        channel = triton_io.response_channel(request, pump)
        if triton_io.is_stop(request):  # TensorRT-LLM's cancel-by-request-id, same reply
            triton_io.answer_stop(channel, request.request_id(), engine.stop)
            continue
        arrays = triton_io.read_inputs(request, ENGINE_INPUTS)
        try:
            rows = EngineInputs.rows({k: v for k, v in arrays.items() if k in CORE_NAMES})
            options = GenerationOptions.from_arrays(arrays)
            rows = [dataclasses.replace(row, options=options) for row in rows]
        except ValueError as e:
            triton_io.fail(channel, str(e), "INVALID_ARG")
            continue
        problems = triton_io.parameter_problems(request)
        problems += [
            f"'{name}' {reason}"
            for name, reason in features.refusals(arrays, engine_features, features.ENGINE_INPUT_FEATURES)
        ]
        problems += [p for row in rows for p in row.option_problems() + checks(row)]
        if problems:
            triton_io.fail(channel, "; ".join(dict.fromkeys(problems)), "INVALID_ARG")
            _refused(request, "; ".join(dict.fromkeys(problems)))
            continue
        n = options.num_return_sequences
        shared = SharedChannel(channel, len(rows) * n)
        for index, row in enumerate(rows):
            sink = TritonSink([shared.row() for _ in range(n)], row.detokenize_params, index)
            if row.options.scores_prompt and not _score(sink, row, scorer):
                continue
            attributes: dict[str, Any] = {
                telemetry.PROMPT_TOKENS: row.input_lengths,
                "llm.max_tokens": row.request_output_len,
                telemetry.STREAM: row.streaming,
            }
            span = tracing.start(request, "llm.generate", "engine", **attributes)  # model_repository/triton/tracing.py
            engine.submit(row, tracing.TracedSink(sink, span, n) if span.is_recording() else sink, request.request_id())


def _score(sink: TritonSink, row: EngineInputs, scorer: Scorer | None) -> bool:
    """The prompt's log probs onto `sink` (its first response carries them); false: the request failed."""
    if scorer is None:  # the engine's features refuse it first (INVALID_ARG): a bug if reached
        sink.fail("'prompt_logprobs': this engine computes no prompt log probs", FailCode.INTERNAL)
        return False
    try:
        sink.prompt = score_prompt(scorer, row.input_ids, row.options.prompt_logprobs)
    except Exception as e:  # this request fails alone
        triton_io.logger().log_error(f"scoring the prompt failed: {e}")
        sink.fail(f"computing prompt_logprobs failed: {e}")
        return False
    return True


def _refused(request, message: str) -> None:
    """A refused request's span and log line (the request id leads the line)."""
    span = tracing.start(request, "llm.generate", "engine")
    telemetry.set_error(span, "INVALID_ARG", message)
    span.end()
    triton_io.logger().log_verbose(tracing.log_line(request, f"refused: {message}"))
