"""The one table of tensor names, dtypes and shapes of every hop of the pipeline.

The config renderer, the Triton models and the client all read these tables; no other
module spells a tensor name.  Names and dtypes of the ensemble and of the engine step are
the ones of NVIDIA's tensorrtllm_backend (`inflight_batcher_llm/ensemble` and
`tensorrt_llm/config.pbtxt`), so existing clients, perf_analyzer input files and
genai-perf's `--backend tensorrtllm` work unchanged.  Tensors we add are marked `extra`.

Dims exclude the batch dimension: every model has `max_batch_size > 0`, so a client sends
shape `[1, *dims]` (one prompt per request).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

import numpy as np


class DType(enum.Enum):
    """Triton data types we use, with their numpy equivalents."""

    BOOL = ("TYPE_BOOL", "BOOL", np.bool_)
    INT32 = ("TYPE_INT32", "INT32", np.int32)
    INT64 = ("TYPE_INT64", "INT64", np.int64)
    UINT64 = ("TYPE_UINT64", "UINT64", np.uint64)
    FP32 = ("TYPE_FP32", "FP32", np.float32)
    STRING = ("TYPE_STRING", "BYTES", np.object_)

    def __init__(self, config_name: str, wire_name: str, numpy_type: type) -> None:
        self.config_name = config_name  # as written in config.pbtxt
        self.wire_name = wire_name  # as sent by tritonclient (InferInput datatype)
        self.numpy_type = numpy_type


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: DType
    dims: tuple[int, ...]
    optional: bool = False
    extra: bool = False  # not part of NVIDIA's contract; ours
    doc: str = ""

    @property
    def is_scalar(self) -> bool:
        return self.dims == (1,)


def _scalar(name: str, dtype: DType, doc: str, *, optional: bool = True, extra: bool = False) -> TensorSpec:
    return TensorSpec(name, dtype, (1,), optional=optional, extra=extra, doc=doc)


# TensorRT-LLM's stop protocol (tensorrt_llm/config.pbtxt input "stop"; the backend handles
# it before anything else and cancels the requests registered under the stop request's OWN
# Triton request id, then answers it with one empty final response: contract/upstream/data/
# trtllm_backend_semantics_*.json rows stop.*).  Triton's ensemble gives every step the
# ensemble request's id (core ensemble_scheduler.cc, r24.10 L977) but passes a client's
# cancellation only to steps not yet scheduled (L1346-1349), so a client that abandons an
# ensemble stream sends `stop` to the ensemble under the same id: preprocessing forwards it
# and the engine step (every engine model, and the relays in front of `tensorrt_llm`)
# cancels that id's request.  llm_bls takes it too.
STOP = _scalar("stop", DType.BOOL, "cancel the running request that has this request's id")


# --- ensemble: the outside contract -------------------------------------------------------
ENSEMBLE_INPUTS: tuple[TensorSpec, ...] = (
    # NVIDIA declares text_input required; we accept `messages` instead, so preprocessing
    # checks that exactly one of the two is present.
    _scalar("text_input", DType.STRING, "prompt text (UTF-8)"),
    _scalar("messages", DType.STRING, "chat messages as a JSON list of {role, content}", extra=True),
    _scalar("max_tokens", DType.INT32, "maximum number of generated tokens"),
    _scalar("stream", DType.BOOL, "stream one response per generated step"),
    TensorSpec("stop_words", DType.STRING, (-1,), optional=True, doc="stop strings (output is cut before them)"),
    TensorSpec("bad_words", DType.STRING, (-1,), optional=True, doc="words that must not be generated"),
    _scalar("exclude_input_in_output", DType.BOOL, "false echoes the prompt before the output"),
    _scalar("end_id", DType.INT32, "end-of-sequence token id (default: checkpoint eos ids)"),
    _scalar("pad_id", DType.INT32, "padding token id"),
    _scalar("top_k", DType.INT32, "top-k sampling; 1 = greedy"),
    _scalar("top_p", DType.FP32, "nucleus sampling, in (0, 1]"),
    _scalar("temperature", DType.FP32, "sampling temperature; 0 = greedy"),
    _scalar("repetition_penalty", DType.FP32, "repetition penalty, > 0"),
    _scalar("presence_penalty", DType.FP32, "presence penalty"),
    _scalar("frequency_penalty", DType.FP32, "frequency penalty"),
    _scalar("min_tokens", DType.INT32, "minimum number of generated tokens"),
    _scalar("seed", DType.UINT64, "sampling seed"),
    _scalar("return_log_probs", DType.BOOL, "return per-token log probabilities"),
    _scalar("return_num_input_tokens", DType.BOOL, "kept for compatibility; counts are always returned"),
    _scalar("return_num_output_tokens", DType.BOOL, "kept for compatibility; counts are always returned"),
    _scalar("skip_special_tokens", DType.BOOL, "drop special tokens from the text (default true)", extra=True),
    dataclasses.replace(STOP, extra=True),  # NVIDIA's ensemble has none; their BLS and engine do
)

ENSEMBLE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("text_output", DType.STRING, (-1,), doc="text delta (stream) or whole text"),
    TensorSpec("cum_log_probs", DType.FP32, (-1,), doc="cumulative log probability"),
    TensorSpec("output_log_probs", DType.FP32, (-1, -1), doc="log probability of each new token"),
    TensorSpec("num_input_tokens", DType.INT32, (1,), doc="prompt length in tokens"),
    TensorSpec("num_output_tokens", DType.INT32, (1,), doc="tokens generated so far"),
    TensorSpec("finish_reason", DType.STRING, (1,), extra=True, doc="'' while running, then stop|length"),
    TensorSpec("output_ids", DType.INT32, (-1, -1), extra=True,
               doc="[beam, tokens] the engine's new token ids, before stop strings are cut"),
)

# --- engine step: the TensorRT-LLM backend contract ---------------------------------------
# Postprocessing needs per-request settings (stop strings, max_tokens, end ids, the
# incremental detokenizer's identity).  Triton's ensemble rejects a step whose inputs come
# both from a decoupled model (the engine) and from elsewhere ("receives inputs originated
# from different decoupled models"), so preprocessing cannot hand them to postprocessing
# directly: the engine step takes them as one opaque JSON tensor and returns it, unchanged,
# with every response.  This is the one tensor we add to TensorRT-LLM's engine contract.
DETOKENIZE_PARAMS = TensorSpec("detokenize_params", DType.STRING, (1,), optional=True, extra=True,
                               doc="JSON of PostprocessParams, echoed by the engine")

# Names/dtypes from tensorrt_llm/config.pbtxt; the CPU engine implements exactly these.
ENGINE_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("input_ids", DType.INT32, (-1,), optional=True, doc="prompt token ids"),
    _scalar("input_lengths", DType.INT32, "number of prompt tokens", optional=False),
    _scalar("request_output_len", DType.INT32, "maximum new tokens", optional=False),
    _scalar("end_id", DType.INT32, "end-of-sequence id; -1 disables"),
    _scalar("pad_id", DType.INT32, "padding id"),
    TensorSpec("stop_words_list", DType.INT32, (2, -1), optional=True,
               doc="[flat ids, cumulative end offsets padded with -1]"),
    TensorSpec("bad_words_list", DType.INT32, (2, -1), optional=True, doc="same layout as stop_words_list"),
    _scalar("runtime_top_k", DType.INT32, "top-k; 0 or 1 with top_p 0 = greedy"),
    _scalar("runtime_top_p", DType.FP32, "top-p"),
    _scalar("temperature", DType.FP32, "temperature"),
    _scalar("repetition_penalty", DType.FP32, "repetition penalty"),
    _scalar("presence_penalty", DType.FP32, "presence penalty"),
    _scalar("frequency_penalty", DType.FP32, "frequency penalty"),
    _scalar("min_tokens", DType.INT32, "minimum new tokens"),
    _scalar("seed", DType.UINT64, "sampling seed"),
    _scalar("return_log_probs", DType.BOOL, "compute log probabilities"),
    _scalar("exclude_input_in_output", DType.BOOL, "output only new tokens"),
    _scalar("streaming", DType.BOOL, "one response per step"),
    STOP,
    DETOKENIZE_PARAMS,
)

ENGINE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("output_ids", DType.INT32, (-1, -1), doc="[beam, tokens] new tokens of this response"),
    TensorSpec("sequence_length", DType.INT32, (-1,), doc="[beam] number of tokens in output_ids"),
    TensorSpec("cum_log_probs", DType.FP32, (-1,), doc="[beam]"),
    TensorSpec("output_log_probs", DType.FP32, (-1, -1), doc="[beam, tokens]"),
    DETOKENIZE_PARAMS,
)

# The C++ `tensorrt_llm` model cannot echo detokenize_params: it takes the engine contract
# without it (plus `stop`), and the `engine_relay` Python model in front of it adds the echo.
TRTLLM_INPUTS: tuple[TensorSpec, ...] = tuple(t for t in ENGINE_INPUTS if t is not DETOKENIZE_PARAMS)
TRTLLM_OUTPUTS: tuple[TensorSpec, ...] = tuple(t for t in ENGINE_OUTPUTS if t is not DETOKENIZE_PARAMS)

# --- preprocessing / postprocessing -------------------------------------------------------
PREPROCESSING_INPUTS = ENSEMBLE_INPUTS

# Preprocessing resolves every engine input (defaults from the checkpoint applied), so the
# engine never guesses.
PREPROCESSING_OUTPUTS: tuple[TensorSpec, ...] = tuple(
    TensorSpec(t.name, t.dtype, t.dims, optional=False, extra=t.extra, doc=t.doc) for t in ENGINE_INPUTS
)

POSTPROCESSING_INPUTS: tuple[TensorSpec, ...] = (
    ENGINE_OUTPUTS[0],  # output_ids
    ENGINE_OUTPUTS[1],  # sequence_length
    TensorSpec(DETOKENIZE_PARAMS.name, DType.STRING, (1,), extra=True, doc=DETOKENIZE_PARAMS.doc),
)

POSTPROCESSING_OUTPUTS: tuple[TensorSpec, ...] = (
    ENSEMBLE_OUTPUTS[0],  # text_output
    ENSEMBLE_OUTPUTS[3],  # num_input_tokens
    ENSEMBLE_OUTPUTS[4],  # num_output_tokens
    ENSEMBLE_OUTPUTS[5],  # finish_reason
)


# Engine outputs the client receives as they are (output_ids also feeds postprocessing);
# the other ensemble outputs come from postprocessing.
ENGINE_TO_CLIENT: tuple[str, ...] = ("cum_log_probs", "output_log_probs", "output_ids")


def by_name(specs: tuple[TensorSpec, ...]) -> dict[str, TensorSpec]:
    return {s.name: s for s in specs}
