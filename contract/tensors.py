"""The one table of tensor names, dtypes and shapes of every hop of the pipeline.

The config renderer, the Triton models and the client all read these tables; no other
module spells a tensor name.  Names and dtypes of the ensemble and of the engine step are
the ones of NVIDIA's tensorrtllm_backend (`inflight_batcher_llm/ensemble` and
`tensorrt_llm/config.pbtxt`), so existing clients, perf_analyzer input files and
genai-perf's `--backend tensorrtllm` work unchanged.  Tensors we add are marked `extra`.

Dims exclude the batch dimension: every model has `max_batch_size > 0`, so a client sends
shape `[n, *dims]`: n prompts in one request (NVIDIA's `--batch-inputs`), usually 1.
"""

from __future__ import annotations

import dataclasses

from contract import sampling_fields
from contract.tensor_spec import DType, TensorSpec
from contract.tensor_spec import scalar as _scalar

# OpenAI's bound on top_logprobs (chat completions: 0-20), the largest the contract carries.
MAX_TOP_LOGPROBS = 20


def _sampling(name: str) -> TensorSpec:
    """A sampling field's ensemble input (contract/sampling_fields.py), where NVIDIA's contract places it."""
    f = sampling_fields.BY_NAME[name]
    return _scalar(f.name, f.dtype, f.doc, extra=not f.nvidia)


def _engine_sampling(f: sampling_fields.SamplingField) -> TensorSpec:
    return _scalar(f.engine_name, f.dtype, f.doc, extra=not f.nvidia)


# Sampling fields of ours (not in NVIDIA's contract), after NVIDIA's inputs.
_OUR_SAMPLING = tuple(_sampling(f.name) for f in sampling_fields.FIELDS if not f.nvidia)


# TensorRT-LLM's stop protocol (tensorrt_llm/config.pbtxt input "stop"; the backend handles
# it before anything else and cancels the requests registered under the stop request's OWN
# Triton request id, then answers it with one empty final response: contract/upstream/data/
# trtllm_backend_semantics_*.json rows stop.*).  Triton's ensemble gives every step the
# ensemble request's id (core ensemble_scheduler.cc, r24.10 L977) but passes a client's
# cancellation only to steps not yet scheduled (L1346-1349), so a client that abandons an
# ensemble stream sends `stop` to the ensemble under the same id: preprocessing forwards it
# and the engine step (every engine model, and the relays in front of `tensorrt_llm`)
# cancels that id's request.  tensorrt_llm_bls takes it too.
STOP = _scalar("stop", DType.BOOL, "cancel the running request that has this request's id")


# --- ensemble and BLS: the outside contract ------------------------------------------------
# Every input and output NVIDIA's `ensemble` and `tensorrt_llm_bls` declare (TensorRT-LLM 1.1.0
# and 1.2.1 declare the same: contract/upstream/data/triton_models_<version>.json; a unit test
# holds these tables to them), in NVIDIA's order, then ours (`extra`).  Each input is either
# honoured or refused with INVALID_ARG naming it and the engine (contract/features.py).
ENSEMBLE_INPUTS: tuple[TensorSpec, ...] = (
    # NVIDIA declares text_input and max_tokens required; we accept `messages` instead of
    # text_input and default max_tokens, so both are optional here (a superset).
    _scalar("text_input", DType.STRING, "prompt text (UTF-8); a batch of prompts is [n, 1]"),
    _scalar("decoder_text_input", DType.STRING, "encoder-decoder models only (refused: Llama is decoder-only)"),
    _scalar("max_tokens", DType.INT32, "maximum number of generated tokens"),
    _scalar("num_return_sequences", DType.INT32, "independent samples per prompt (responses carry sequence_index)"),
    TensorSpec("bad_words", DType.STRING, (-1,), optional=True, doc="words that must not be generated"),
    TensorSpec("stop_words", DType.STRING, (-1,), optional=True, doc="stop strings (output is cut before them)"),
    _scalar("exclude_input_in_output", DType.BOOL, "false echoes the prompt before a non-streamed output"),
    _scalar("end_id", DType.INT32, "end-of-sequence token id (default: checkpoint eos ids)"),
    _scalar("pad_id", DType.INT32, "padding token id"),
    _sampling("top_k"),
    _sampling("top_p"),
    _sampling("temperature"),
    _scalar("length_penalty", DType.FP32, "beam search length penalty (no effect with one beam)"),
    _sampling("repetition_penalty"),
    _sampling("min_tokens"),
    _sampling("presence_penalty"),
    _sampling("frequency_penalty"),
    _sampling("seed"),
    _scalar("return_log_probs", DType.BOOL, "return per-token log probabilities"),
    _scalar("return_context_logits", DType.BOOL, "return the prompt's logits (engines built to gather them)"),
    _scalar(
        "return_generation_logits", DType.BOOL, "return the generated tokens' logits (engines built to gather them)"
    ),
    _scalar("return_perf_metrics", DType.BOOL, "return the engine's KV-cache and timing metrics"),
    _scalar("return_num_input_tokens", DType.BOOL, "kept for compatibility; counts are always returned"),
    _scalar("return_num_output_tokens", DType.BOOL, "kept for compatibility; counts are always returned"),
    _scalar("beam_width", DType.INT32, "beams (1 is supported)"),
    _scalar("stream", DType.BOOL, "stream one response per generated step"),
    TensorSpec(
        "prompt_embedding_table", DType.FP16, (-1, -1), optional=True, doc="p-tuning table (engines built for it)"
    ),
    _scalar("prompt_table_extra_id", DType.UINT64, "p-tuning extra id (engines built for it)"),
    _scalar("prompt_vocab_size", DType.INT32, "p-tuning vocabulary size (engines built for it)"),
    TensorSpec("embedding_bias_words", DType.STRING, (-1,), optional=True, doc="words whose logits get a bias"),
    TensorSpec("embedding_bias_weights", DType.FP32, (-1,), optional=True, doc="the bias of each word"),
    _scalar("lora_task_id", DType.UINT64, "LoRA adapter id (engines built with LoRA)"),
    TensorSpec("lora_weights", DType.FP16, (-1, -1), optional=True, doc="LoRA weights (engines built with LoRA)"),
    TensorSpec("lora_config", DType.INT32, (-1, 3), optional=True, doc="LoRA config (engines built with LoRA)"),
    _scalar("guided_decoding_guide_type", DType.STRING, "json | json_schema | regex | ebnf_grammar (guided decoding)"),
    _scalar("guided_decoding_guide", DType.STRING, "the schema, regex or grammar (guided decoding)"),
    # ours
    *_OUR_SAMPLING,
    _scalar("messages", DType.STRING, "chat messages as a JSON list of {role, content}", extra=True),
    _scalar("skip_special_tokens", DType.BOOL, "drop special tokens from the text (default true)", extra=True),
    _scalar(
        "priority",
        DType.FP32,
        "admission order when the engine is full: [0, 1], higher first, 0.5 default "
        "(TensorRT-LLM's executor scale; the CPU engine honours it)",
        extra=True,
    ),
    _scalar(
        "top_logprobs",
        DType.INT32,
        f"0-{MAX_TOP_LOGPROBS}: the most likely tokens at each generated "
        "position, with their log probs (output_top_ids / output_top_log_probs); needs return_log_probs",
        extra=True,
    ),
    _scalar(
        "prompt_logprobs",
        DType.INT32,
        f"-1 or nothing: none; 0-{MAX_TOP_LOGPROBS}: the log prob of each prompt token given the ones "
        "before it, and that many most likely tokens at each prompt position (prompt_ids, prompt_log_probs, "
        "prompt_top_ids, prompt_top_log_probs, in the first response); one sequence",
        extra=True,
    ),
    dataclasses.replace(STOP, extra=True),  # NVIDIA's ensemble has none; their BLS and engine do
)

# NVIDIA's BLS declares the ensemble's inputs and these (multimodal and draft-model inputs).
BLS_ONLY_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("image_input", DType.FP16, (-1, 3, -1, -1), optional=True, doc="multimodal engines only"),
    TensorSpec("image_bytes_input", DType.UINT8, (-1, -1, -1, -1), optional=True, doc="multimodal engines only"),
    _scalar("image_url_input", DType.STRING, "multimodal engines only"),
    TensorSpec("image_sizes_input", DType.INT64, (-1, 2), optional=True, doc="multimodal engines only"),
    TensorSpec("video_bytes_input", DType.UINT8, (-1, -1, -1, -1), optional=True, doc="multimodal engines only"),
    _scalar(
        "num_draft_tokens",
        DType.INT32,
        "draft tokens per round of draft-target speculative decoding (BLS, "
        "engines built with a draft; one prompt, not streamed)",
    ),
    _scalar("use_draft_logits", DType.BOOL, "accept drafts by their logits (refused: drafts are accepted by token)"),
)
BLS_INPUTS: tuple[TensorSpec, ...] = ENSEMBLE_INPUTS + BLS_ONLY_INPUTS


def _count(name: str, dtype: DType, doc: str) -> TensorSpec:
    return TensorSpec(name, dtype, (1,), doc=doc)


# Outputs of the engine step that reach the client as they are (NVIDIA's names; the perf
# metrics come only with return_perf_metrics, the logits only when asked and built for).
PERF_METRIC_OUTPUTS: tuple[TensorSpec, ...] = (
    _count("kv_cache_alloc_new_blocks", DType.INT32, "KV-cache blocks newly allocated"),
    _count("kv_cache_reused_blocks", DType.INT32, "KV-cache blocks reused"),
    _count("kv_cache_alloc_total_blocks", DType.INT32, "KV-cache blocks in all"),
    _count("arrival_time_ns", DType.INT64, "when the engine got the request"),
    _count("first_scheduled_time_ns", DType.INT64, "when it was first scheduled"),
    _count("first_token_time_ns", DType.INT64, "when its first token came"),
    _count("last_token_time_ns", DType.INT64, "when its last token came"),
    _count("acceptance_rate", DType.FP32, "speculative decoding: draft acceptance rate"),
    _count("total_accepted_draft_tokens", DType.INT32, "speculative decoding: accepted draft tokens"),
    _count("total_draft_tokens", DType.INT32, "speculative decoding: draft tokens"),
)
ENGINE_CLIENT_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("cum_log_probs", DType.FP32, (-1,), doc="[beam] cumulative log probability"),
    TensorSpec("output_log_probs", DType.FP32, (-1, -1), doc="[beam, tokens] log probability of each new token"),
    TensorSpec("context_logits", DType.FP32, (-1, -1), doc="[prompt tokens, vocab]"),
    TensorSpec("generation_logits", DType.FP32, (-1, -1, -1), doc="[beam, tokens, vocab]"),
    # ours: NVIDIA's C++ backend returns the chosen tokens' log probs only
    TensorSpec(
        "output_top_ids",
        DType.INT32,
        (-1, -1, -1),
        extra=True,
        doc="[beam, tokens, top_logprobs] the most likely tokens at each new token's position, most likely first",
    ),
    TensorSpec(
        "output_top_log_probs",
        DType.FP32,
        (-1, -1, -1),
        extra=True,
        doc="[beam, tokens, top_logprobs] their log probabilities (the raw model distribution)",
    ),
    # ours: the prompt's log probs (input prompt_logprobs), computed in the engine step rather than
    # shipped as context_logits ([prompt tokens, vocab] floats: 49,152 per token on the default model)
    TensorSpec("prompt_ids", DType.INT32, (-1,), extra=True, doc="[prompt tokens] the prompt as the engine got it"),
    TensorSpec(
        "prompt_log_probs",
        DType.FP32,
        (-1,),
        extra=True,
        doc="[prompt tokens] log prob of each prompt token given the ones before it (the raw model "
        "distribution); the first NaN (nothing predicts it)",
    ),
    TensorSpec(
        "prompt_top_ids",
        DType.INT32,
        (-1, -1),
        extra=True,
        doc="[prompt tokens, prompt_logprobs] the most likely tokens at each prompt position (first row -1)",
    ),
    TensorSpec(
        "prompt_top_log_probs",
        DType.FP32,
        (-1, -1),
        extra=True,
        doc="[prompt tokens, prompt_logprobs] their log probabilities (first row NaN)",
    ),
    _count("batch_index", DType.INT32, "which prompt of a batched request this response belongs to"),
    _count("sequence_index", DType.INT32, "which of num_return_sequences this response belongs to"),
) + PERF_METRIC_OUTPUTS

# The top-k alternatives (input top_logprobs), sent only to requests that ask for them.
TOP_LOGPROB_OUTPUTS: tuple[str, ...] = ("output_top_ids", "output_top_log_probs")
# The prompt's log probs (input prompt_logprobs), sent once, in a request's first response.
PROMPT_LOGPROB_OUTPUTS: tuple[str, ...] = ("prompt_ids", "prompt_log_probs", "prompt_top_ids", "prompt_top_log_probs")

ENSEMBLE_OUTPUTS: tuple[TensorSpec, ...] = (
    (
        # One UTF-8 string per response: 1-D on the wire ([1]), as NVIDIA's postprocessing sends
        # it (their clients read output[0].decode()).
        TensorSpec("text_output", DType.STRING, (-1,), doc="text delta (stream) or whole text", wire_shape=(1,)),
    )
    + ENGINE_CLIENT_OUTPUTS
    + (
        _count("num_input_tokens", DType.INT32, "prompt length in tokens"),
        _count("num_output_tokens", DType.INT32, "tokens generated so far"),
        TensorSpec("finish_reason", DType.STRING, (1,), extra=True, doc="'' while running, then stop|length"),
        TensorSpec(
            "output_ids",
            DType.INT32,
            (-1, -1),
            extra=True,
            doc="[beam, tokens] the engine's new token ids, before stop strings are cut",
        ),
    )
)

# --- engine step: the TensorRT-LLM backend contract ---------------------------------------
# Postprocessing needs per-request settings (stop strings, max_tokens, end ids, the
# incremental detokenizer's identity).  Triton's ensemble rejects a step whose inputs come
# both from a decoupled model (the engine) and from elsewhere ("receives inputs originated
# from different decoupled models"), so preprocessing cannot hand them to postprocessing
# directly: the engine step takes them as one opaque JSON tensor and returns it, unchanged,
# with every response.  This is the one tensor we add to TensorRT-LLM's engine contract.
DETOKENIZE_PARAMS = TensorSpec(
    "detokenize_params",
    DType.STRING,
    (1,),
    optional=True,
    extra=True,
    doc="JSON of PostprocessParams, echoed by the engine",
)

# What preprocessing computes for the engine (names/dtypes of tensorrt_llm/config.pbtxt);
# model_repository.engine_step.engine_inputs.EngineInputs mirrors it field by field.
ENGINE_CORE_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("input_ids", DType.INT32, (-1,), optional=True, doc="prompt token ids"),
    _scalar("input_lengths", DType.INT32, "number of prompt tokens", optional=False),
    _scalar("request_output_len", DType.INT32, "maximum new tokens", optional=False),
    _scalar("end_id", DType.INT32, "end-of-sequence id; -1 disables"),
    _scalar("pad_id", DType.INT32, "padding id"),
    TensorSpec(
        "stop_words_list", DType.INT32, (2, -1), optional=True, doc="[flat ids, cumulative end offsets padded with -1]"
    ),
    TensorSpec("bad_words_list", DType.INT32, (2, -1), optional=True, doc="same layout as stop_words_list"),
    TensorSpec("embedding_bias", DType.FP32, (-1,), optional=True, doc="[vocab] logit bias (empty: none)"),
    *(_engine_sampling(f) for f in sampling_fields.FIELDS),
    _scalar("return_log_probs", DType.BOOL, "compute log probabilities"),
    _scalar("exclude_input_in_output", DType.BOOL, "output only new tokens"),
    _scalar("streaming", DType.BOOL, "one response per step"),
    STOP,
    DETOKENIZE_PARAMS,
)

# Engine inputs the ensemble feeds straight from its own inputs, as NVIDIA's ensemble does
# (ensemble input -> engine input); preprocessing only checks them.
ENGINE_PASSTHROUGH: dict[str, str] = {
    "beam_width": "beam_width",
    "num_return_sequences": "num_return_sequences",
    "length_penalty": "len_penalty",
    "return_context_logits": "return_context_logits",
    "return_generation_logits": "return_generation_logits",
    "return_perf_metrics": "return_perf_metrics",
    "prompt_embedding_table": "prompt_embedding_table",
    "prompt_vocab_size": "prompt_vocab_size",
    "lora_task_id": "lora_task_id",
    "lora_weights": "lora_weights",
    "lora_config": "lora_config",
    "guided_decoding_guide_type": "guided_decoding_guide_type",
    "guided_decoding_guide": "guided_decoding_guide",
    "priority": "priority",
    "top_logprobs": "top_logprobs",
    "prompt_logprobs": "prompt_logprobs",
}
_ENSEMBLE_BY_NAME = {t.name: t for t in ENSEMBLE_INPUTS}
ENGINE_PASSTHROUGH_INPUTS: tuple[TensorSpec, ...] = tuple(
    dataclasses.replace(_ENSEMBLE_BY_NAME[outer], name=inner) for outer, inner in ENGINE_PASSTHROUGH.items()
)
ENGINE_INPUTS: tuple[TensorSpec, ...] = ENGINE_CORE_INPUTS + ENGINE_PASSTHROUGH_INPUTS

ENGINE_OUTPUTS: tuple[TensorSpec, ...] = (
    (
        TensorSpec("output_ids", DType.INT32, (-1, -1), doc="[beam, tokens] new tokens of this response"),
        TensorSpec("sequence_length", DType.INT32, (-1,), doc="[beam] number of tokens in output_ids"),
    )
    + ENGINE_CLIENT_OUTPUTS
    + (DETOKENIZE_PARAMS,)
)

# What the relays send to the C++ `tensorrt_llm` model and ask back from it (a subset of
# NVIDIA's declaration, which its config carries as it is): the engine contract without our
# own tensors: detokenize_params, which the C++ model cannot echo (the `engine_relay` in
# front adds it), and priority and top_logprobs, which it does not declare (refused there).
TRTLLM_INPUTS: tuple[TensorSpec, ...] = tuple(t for t in ENGINE_INPUTS if not t.extra)
TRTLLM_OUTPUTS: tuple[TensorSpec, ...] = tuple(t for t in ENGINE_OUTPUTS if not t.extra)

# --- preprocessing / postprocessing -------------------------------------------------------
# Preprocessing checks every input of the ensemble and of the BLS (the BLS hands it all it got).
PREPROCESSING_INPUTS = BLS_INPUTS

# Preprocessing resolves every core engine input (defaults applied), so the engine never guesses.
PREPROCESSING_OUTPUTS: tuple[TensorSpec, ...] = tuple(
    dataclasses.replace(t, optional=False) for t in ENGINE_CORE_INPUTS
)

# sequence_index: each of num_return_sequences samples is its own text stream (its own
# incremental detokenizer and stop-string state), keyed by (stream id, sequence_index).
POSTPROCESSING_INPUTS: tuple[TensorSpec, ...] = (
    ENGINE_OUTPUTS[0],  # output_ids
    ENGINE_OUTPUTS[1],  # sequence_length
    dataclasses.replace(DETOKENIZE_PARAMS, optional=False),
    dataclasses.replace(next(t for t in ENGINE_CLIENT_OUTPUTS if t.name == "sequence_index"), optional=True),
)

POSTPROCESSING_OUTPUTS: tuple[TensorSpec, ...] = tuple(
    t for t in ENSEMBLE_OUTPUTS if t.name in ("text_output", "num_input_tokens", "num_output_tokens", "finish_reason")
)

# Engine outputs the client receives as they are (output_ids also feeds postprocessing);
# the other ensemble outputs come from postprocessing.
ENGINE_TO_CLIENT: tuple[str, ...] = tuple(t.name for t in ENGINE_CLIENT_OUTPUTS) + ("output_ids",)


def by_name(specs: tuple[TensorSpec, ...]) -> dict[str, TensorSpec]:
    return {s.name: s for s in specs}
