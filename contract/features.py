"""Which request inputs ask an engine for a feature, and which features each engine has.

NVIDIA's ensemble and BLS declare inputs for features a given deployment may not have
(beam search, LoRA, guided decoding, prompt tables, logits, ...).  We declare every one of
them (contract/tensors.py) and never ignore one: a request that sends such an input with a
value that asks for something (a non-neutral value) is refused with INVALID_ARG naming the
input and the engine, unless the engine has the feature.  Neutral values (beam_width 1,
return_context_logits false, an empty word list, ...) are accepted everywhere, so NVIDIA's
clients, which always send some of them, work unchanged.

The same goes for request parameters (Triton's HTTP `generate` turns unknown JSON keys into
parameters): only the keys listed here are accepted.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from contract import sampling_fields
from contract.sampling_fields import SamplingFeature
from contract.upstream.sampling_support import EnginePath, sampling_support
from contract.upstream.sampling_support import supported_versions as sampling_versions
from contract.upstream.trtllm_build import supported_versions as pinned_versions


class Feature(str, enum.Enum):
    BEAM_SEARCH = "beam search"
    MULTIPLE_SEQUENCES = "more than one sequence per prompt"
    CONTEXT_LOGITS = "context logits"
    GENERATION_LOGITS = "generation logits"
    PERF_METRICS = "per-request perf metrics"
    EMBEDDING_BIAS = "logit bias (embedding_bias)"
    BAD_WORDS = "bad words"
    PROMPT_TABLE = "prompt tables (p-tuning)"
    LORA = "LoRA adapters"
    LORA_WEIGHTS = "LoRA weights sent with a request (lora_weights / lora_config)"
    GUIDED_DECODING = "guided decoding"
    ENCODER_DECODER = "encoder-decoder models"
    MULTIMODAL = "image and video inputs"
    DRAFT_MODEL = "draft-model speculative decoding"
    DRAFT_LOGITS = "draft logits (use_draft_logits: engines built to gather generation logits)"
    PRIORITY = "request priorities"
    TOP_LOG_PROBS = "top-k log probabilities (top_logprobs)"
    PROMPT_LOG_PROBS = "the prompt's log probabilities (prompt_logprobs)"
    # (the sampling fields' features: contract/sampling_fields.py SamplingFeature)


# What an engine may have: a feature, or a sampling field's (contract/sampling_fields.py).
AnyFeature = Feature | SamplingFeature


def _flat(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=object if isinstance(value, (str, bytes)) else None).reshape(-1)


def _absent(value: Any) -> bool:
    """Nothing in it: no elements, or only empty strings / zeros."""
    flat = _flat(value)
    return all((v in (b"", "") if isinstance(v, (bytes, str)) else not v) for v in flat.tolist())


def _no_words(value: Any) -> bool:
    """A TensorRT-LLM word list ([..., 2, n]: ids, then end offsets padded with -1) holding no word."""
    array = np.asarray(value)
    return array.size == 0 or bool((array.reshape(-1, 2, array.shape[-1])[:, 1, :] < 0).all())


def _no_prompt_logprobs(value: Any) -> bool:
    """prompt_logprobs asks for nothing when absent or negative (0 asks for the prompt tokens' own log probs)."""
    return all(v < 0 for v in _flat(value).tolist())


def _equals(expected: Any) -> Callable[[Any], bool]:
    return lambda value: all(v == expected for v in _flat(value).tolist())


def _equals_one_of(values: tuple) -> Callable[[Any], bool]:
    """True for values among `values` (none: nothing is neutral)."""
    return lambda value: bool(values) and all(v in values for v in _flat(value).tolist())


@dataclass(frozen=True)
class InputUse:
    feature: AnyFeature
    neutral: Callable[[Any], bool]  # true for the values that ask for nothing
    neutral_text: str  # those values, for messages


_ABSENT, _FALSE, _ONE = (_absent, "nothing (leave it out)"), (_absent, "false"), (_equals(1), "1")

# Ensemble / BLS input -> the feature a non-neutral value asks for.
INPUT_FEATURES: dict[str, InputUse] = {
    name: InputUse(feature, *neutral)
    for name, feature, neutral in (
        ("beam_width", Feature.BEAM_SEARCH, _ONE),
        ("num_return_sequences", Feature.MULTIPLE_SEQUENCES, _ONE),
        ("return_context_logits", Feature.CONTEXT_LOGITS, _FALSE),
        ("return_generation_logits", Feature.GENERATION_LOGITS, _FALSE),
        ("return_perf_metrics", Feature.PERF_METRICS, _FALSE),
        ("embedding_bias_words", Feature.EMBEDDING_BIAS, _ABSENT),
        ("embedding_bias_weights", Feature.EMBEDDING_BIAS, _ABSENT),
        ("bad_words", Feature.BAD_WORDS, _ABSENT),
        ("prompt_embedding_table", Feature.PROMPT_TABLE, _ABSENT),
        ("prompt_table_extra_id", Feature.PROMPT_TABLE, _ABSENT),
        ("prompt_vocab_size", Feature.PROMPT_TABLE, _ABSENT),
        ("lora_task_id", Feature.LORA, (lambda v: False, "nothing (leave it out)")),
        ("lora_weights", Feature.LORA_WEIGHTS, _ABSENT),
        ("lora_config", Feature.LORA_WEIGHTS, _ABSENT),
        ("guided_decoding_guide_type", Feature.GUIDED_DECODING, _ABSENT),
        ("guided_decoding_guide", Feature.GUIDED_DECODING, _ABSENT),
        ("decoder_text_input", Feature.ENCODER_DECODER, _ABSENT),
        ("image_input", Feature.MULTIMODAL, _ABSENT),
        ("image_bytes_input", Feature.MULTIMODAL, _ABSENT),
        ("image_url_input", Feature.MULTIMODAL, _ABSENT),
        ("image_sizes_input", Feature.MULTIMODAL, _ABSENT),
        ("video_bytes_input", Feature.MULTIMODAL, _ABSENT),
        ("num_draft_tokens", Feature.DRAFT_MODEL, _ABSENT),
        ("use_draft_logits", Feature.DRAFT_LOGITS, _FALSE),
        ("priority", Feature.PRIORITY, (lambda v: _absent(v) or _equals(0.5)(v), "0.5 or nothing")),
        ("top_logprobs", Feature.TOP_LOG_PROBS, (_absent, "0 or nothing")),
        ("prompt_logprobs", Feature.PROMPT_LOG_PROBS, (_no_prompt_logprobs, "-1 or nothing")),
    )
}

# The same inputs under the engine's names (what an engine model sees).
ENGINE_INPUT_FEATURES: dict[str, InputUse] = {
    "beam_width": INPUT_FEATURES["beam_width"],
    "num_return_sequences": INPUT_FEATURES["num_return_sequences"],
    "return_context_logits": INPUT_FEATURES["return_context_logits"],
    "return_generation_logits": INPUT_FEATURES["return_generation_logits"],
    "return_perf_metrics": INPUT_FEATURES["return_perf_metrics"],
    "embedding_bias": InputUse(Feature.EMBEDDING_BIAS, _absent, "an empty or all-zero bias"),
    "bad_words_list": InputUse(Feature.BAD_WORDS, _no_words, "an empty list"),
    "prompt_embedding_table": INPUT_FEATURES["prompt_embedding_table"],
    "prompt_vocab_size": INPUT_FEATURES["prompt_vocab_size"],
    "lora_task_id": INPUT_FEATURES["lora_task_id"],
    "lora_weights": INPUT_FEATURES["lora_weights"],
    "lora_config": INPUT_FEATURES["lora_config"],
    "guided_decoding_guide_type": INPUT_FEATURES["guided_decoding_guide_type"],
    "guided_decoding_guide": INPUT_FEATURES["guided_decoding_guide"],
    "priority": INPUT_FEATURES["priority"],
    "top_logprobs": INPUT_FEATURES["top_logprobs"],
    "prompt_logprobs": INPUT_FEATURES["prompt_logprobs"],
}

# Sampling fields a pinned TensorRT-LLM may accept and ignore (contract/upstream/sampling_support.py)
# -> the feature an engine needs to be sent a non-neutral value (bad_words: refused via INPUT_FEATURES).
SAMPLING_FIELD_FEATURES: dict[str, AnyFeature] = {
    **{f.name: f.feature for f in sampling_fields.FIELDS if f.feature is not None},
    "bad_words": Feature.BAD_WORDS,
}
SAMPLING_INPUT_FEATURES: dict[str, InputUse] = {
    f.name: InputUse(f.feature, _equals_one_of(f.neutral), f.neutral_text)
    for f in sampling_fields.FIELDS
    if f.feature is not None
}
SAMPLING_FEATURES = frozenset(SAMPLING_FIELD_FEATURES.values())


@dataclass(frozen=True)
class EngineFeatures:
    """What one deployed engine honours, and how messages name it."""

    label: str  # e.g. "the CPU engine (OpenVINO GenAI)"
    features: frozenset[AnyFeature]
    # Features this kind of engine has that the deployment withholds, and why (the refusal says it).
    withheld: tuple[tuple[AnyFeature, str], ...] = ()

    def to_parameter(self) -> str:
        return ",".join(sorted(f.name for f in self.features))

    def withheld_parameter(self) -> str:
        return json.dumps({f.name: why for f, why in self.withheld}) if self.withheld else ""

    @classmethod
    def from_parameter(cls, label: str, value: str, withheld: str = "") -> "EngineFeatures":
        names = [n for n in (v.strip() for v in value.split(",")) if n]
        notes = json.loads(withheld) if withheld else {}
        unknown = [n for n in [*names, *notes] if n not in _FEATURES_BY_NAME]
        if unknown:
            raise ValueError(f"'engine_features': unknown {unknown}; allowed: {sorted(_FEATURES_BY_NAME)}")
        return cls(
            label,
            frozenset(_FEATURES_BY_NAME[n] for n in names),
            tuple((_FEATURES_BY_NAME[n], str(why)) for n, why in notes.items()),
        )


_FEATURES_BY_NAME: dict[str, AnyFeature] = {**Feature.__members__, **SamplingFeature.__members__}


# The CPU engine: n samples per prompt (OpenVINO GenAI num_return_sequences, multinomial
# sampling) and guided decoding (StructuredOutputConfig: JSON schema, regex, EBNF grammar).
# Priorities: the runner admits waiting requests by priority with aging
# (model_repository/engine_step/admission.py) once max_num_seqs requests run.  Top-k log probs
# are added by with_top_logprobs where the deployment compiles the IR scorer
# (model_repository/engines/openvino/ir_scorer.py; OpenVINO GenAI computes one log prob per position).
# Penalties and seeds: GenerationConfig's three penalties and rng_seed
# (model_repository/engines/openvino/openvino_backend.py: the rows' cpu_engine); no bad words.
_CPU_SAMPLING = frozenset(f.feature for f in sampling_fields.FIELDS if f.feature is not None and f.cpu_engine)
CPU_ENGINE = EngineFeatures(
    "the CPU engine (OpenVINO GenAI)",
    frozenset({Feature.MULTIPLE_SEQUENCES, Feature.GUIDED_DECODING, Feature.PRIORITY}) | _CPU_SAMPLING,
)
# The same with prompt-lookup decoding on: OpenVINO GenAI 2026.4.1 refuses parallel sampling with
# assistant generation (generation_config.cpp: "Beam search and parallel sampling are not
# compatible with assistant generation"); guided decoding and log probs work (checked).  min_tokens,
# which it lets EOS cut short there, is refused by the engine model itself
# (model_repository/engines/openvino/openvino_backend.py: assisted_generation_problems).
CPU_ENGINE_PROMPT_LOOKUP = EngineFeatures(
    "the CPU engine (OpenVINO GenAI, prompt-lookup decoding)",
    frozenset({Feature.GUIDED_DECODING, Feature.PRIORITY}) | _CPU_SAMPLING,
)
# Draft-model speculative decoding: the same assistant-generation restriction.
CPU_ENGINE_DRAFT_MODEL = EngineFeatures(
    "the CPU engine (OpenVINO GenAI, draft-model speculative decoding)",
    frozenset({Feature.GUIDED_DECODING, Feature.PRIORITY}) | _CPU_SAMPLING,
)
# What the C++ tensorrt_llm backend honours for every engine this kit builds (the logits
# need engines built to gather them, LoRA a LoRA engine: neither of which the kit builds yet).
# n samples per prompt (rows input.num_return_sequences -> SamplingConfig.numReturnSequences,
# output.sequence_index, output.sequence_results: each sequence's results carry its index; the
# relays end each sample's stream with its own closing response) and log probs (rows
# input.return_log_probs, output.output_log_probs).  Guided decoding is added by
# with_guided_decoding where the renderer configures the backend's xgrammar decoder (the
# default: build_engines/trtllm/spec.GuidedDecodingBackend; rows guided.config,
# input.guided_decoding_guide_type).
# Priorities: TensorRT-LLM's executor has a per-request priority (executor.h Request
# `priority`, kDefaultPriority 0.5) but NVIDIA's Triton backend never sets it: its
# createRequestsFromInputTensors builds every executor::Request without one and declares no
# priority input (NVIDIA/TensorRT-LLM triton_backend/inflight_batcher_llm/src/utils.cc at
# c8c6df08bd0ead54cd47f7973e1e425c28a174cd, the v1.1.0 source of the semantics table; not
# confirmed at the tag itself).  Refused there rather than silently ignored.
# Top-k log probs: the backend returns output_log_probs of the chosen tokens only (row
# output.output_log_probs) and declares no input asking for alternatives: refused.
# Prompt log probs: the backend returns only raw context_logits ([1, prompt, vocab], row
# output.context_logits), and only from an engine built with gather_context_logits (row
# error.context_logits_not_built), which the kit does not build; the relays compute nothing from
# them: refused.  On the PyTorch backend, SamplingParams.prompt_logprobs gives top-k dicts from
# context_logits aligned one position off vLLM's and without the prompt token (llmapi row
# result.prompt_logprobs); not mapped yet: refused.
# Penalties, seed, bad words: as the engine rows of sampling_support_<version>.json say.
_TRTLLM_BASE = frozenset({Feature.MULTIPLE_SEQUENCES, Feature.PERF_METRICS, Feature.EMBEDDING_BIAS})


def _honoured(path: EnginePath, version: str, sampler: str | None = None) -> frozenset[AnyFeature]:
    table = sampling_support(version)
    return frozenset(f for field, f in SAMPLING_FIELD_FEATURES.items() if table.honoured(path, field, sampler))


def trtllm_engine(version: str) -> EngineFeatures:
    """The engine flow (C++ backend over the executor) of one TensorRT-LLM version."""
    return EngineFeatures(f"TensorRT-LLM {version} (engine flow)", _TRTLLM_BASE | _honoured(EnginePath.ENGINE, version))


# The repository renderer does not pass the version yet: what every pinned version honours.
# (A pinned version without a sampling table fails tests/unit/test_sampling_support.py, not the import.)
TRTLLM_ENGINE = EngineFeatures(
    "TensorRT-LLM (engine flow)",
    frozenset.intersection(*(trtllm_engine(v).features for v in pinned_versions() if v in sampling_versions())),
)
# What tensorrt_llm_pytorch maps onto the LLM API (model_repository/engines/pytorch/sampling.py):
# n samples (SamplingParams.n, one CompletionOutput each; greedy n > 1 refused as SamplingParams does). Guided
# decoding is added by
# with_guided_decoding where the LLM is built with guided_decoding_backend (the default; it then
# loads its tokenizer, which the executor's xgrammar decoder is built from: row
# llm.guided.tokenizer), LoRA by with_lora where adapters are rendered (LoraConfig +
# LoRARequest: row llm.lora).  Top-k log probs: SamplingParams.logprobs = k (rows
# result.logprobs, result.logprobs.top_k).  Logit bias, perf metrics, logits and beams exist in
# the LLM API but are not wired to our contract yet: refused (priorities too: whether the LLM API
# at the pinned versions takes one was not read).
# Penalties, seeds, bad words: as the deployment's sampler does at that version (rows pytorch.* of
# sampling_support_<version>.json: 1.2.1's TorchSampler accepts and ignores all five, so they are
# refused naming it; its TRTLLMSampler, which the plan picks for a deployment that needs them
# (build_engines/pytorch/sampler.py), applies them).  A sampler whose limits say it returns only
# the sampled token's log prob (limit top_logprobs) has no top-k log probabilities.
_PYTORCH_BASE = frozenset({Feature.MULTIPLE_SEQUENCES, Feature.TOP_LOG_PROBS})


def pytorch_engine(version: str, sampler: str | None = None) -> EngineFeatures:
    """tensorrt_llm_pytorch on one TensorRT-LLM version with `sampler` (default: the version's default), named."""
    table = sampling_support(version)
    sampler = sampler or table.default_sampler(EnginePath.PYTORCH)
    base = _PYTORCH_BASE
    info = table.samplers.get((EnginePath.PYTORCH, sampler))
    if info is not None and info.limit("top_logprobs") is not None:
        base = base - {Feature.TOP_LOG_PROBS}
    return EngineFeatures(
        f"TensorRT-LLM {version}'s PyTorch backend (LLM API, {sampler})",
        base | _honoured(EnginePath.PYTORCH, version, sampler),
    )


# The one version the PyTorch flow serves (= pytorch_spec.pytorch_versions(), held so by a test).
PYTORCH_VERSION = "1.2.1"
PYTORCH_ENGINE = pytorch_engine(PYTORCH_VERSION)


def with_draft_model(engine: EngineFeatures) -> EngineFeatures:
    """The engine flow with a draft engine (build_engines/trtllm/draft_target.py): the BLS's draft
    loop serves num_draft_tokens; draft logits stay refused (the draft is not built to gather
    generation logits)."""
    return EngineFeatures(engine.label, engine.features | {Feature.DRAFT_MODEL}, engine.withheld)


def with_guided_decoding(engine: EngineFeatures) -> EngineFeatures:
    """The same engine with its guided decoder configured (TensorRT-LLM: the tensorrt_llm
    model's guided_decoding_backend xgrammar and its tokenizer info)."""
    return EngineFeatures(engine.label, engine.features | {Feature.GUIDED_DECODING}, engine.withheld)


def with_lora(engine: EngineFeatures) -> EngineFeatures:
    """The same engine serving LoRA adapters (by lora_task_id; lora_weights / lora_config
    stay refused by the engine model: adapters are loaded at serve time)."""
    return EngineFeatures(engine.label, engine.features | {Feature.LORA}, engine.withheld)


SCORER_FEATURES = frozenset({Feature.TOP_LOG_PROBS, Feature.PROMPT_LOG_PROBS})


def with_top_logprobs(engine: EngineFeatures) -> EngineFeatures:
    """The same engine answering top_logprobs and prompt_logprobs (the CPU engine with its IR
    scorer compiled: model_repository/engine_step/alternatives.py, prompt_logprobs.py)."""
    return EngineFeatures(engine.label, engine.features | SCORER_FEATURES, engine.withheld)


def withhold(engine: EngineFeatures, feature: AnyFeature, why: str) -> EngineFeatures:
    """The same engine without `feature`, its refusals saying why."""
    return EngineFeatures(engine.label, engine.features - {feature}, (*engine.withheld, (feature, why)))


def refusals(
    values: Mapping[str, Any], engine: EngineFeatures, uses: Mapping[str, InputUse] = INPUT_FEATURES
) -> list[tuple[str, str]]:
    """(input, reason) for every input that asks `engine` for a feature it lacks."""
    out = []
    for name, value in values.items():
        use = uses.get(name)
        if use is None or use.feature in engine.features or use.neutral(value):
            continue
        why = dict(engine.withheld).get(use.feature)
        support = f"does not support here ({why})" if why else "does not support"
        out.append((name, f"asks for {use.feature.value}, which {engine.label} {support}; send {use.neutral_text}"))
    return out


# Request parameters (not tensors) a request may carry: key -> accepted values.
# TensorRT-LLM's backend reads `request_type` (contract/upstream/data/trtllm_backend_semantics
# rows input.request_type_parameter); only its default (no disaggregated serving) is served.
KNOWN_PARAMETERS: dict[str, tuple[Any, ...]] = {"request_type": ("context_and_generation",)}
# Free-form parameters: the W3C trace context a client sends (contract/telemetry.py).
TRACE_PARAMETERS = frozenset({"traceparent", "tracestate"})


def parameter_problems(parameters: Mapping[str, Any], inputs: Iterable[str] = ()) -> list[str]:
    out = []
    for key, value in parameters.items():
        if key in TRACE_PARAMETERS:
            continue
        allowed = KNOWN_PARAMETERS.get(key)
        if allowed is None:
            hint = (
                " (a request parameter, not an input: Triton's HTTP generate makes one of every JSON key that "
                "is not an input name)"
                if key not in set(inputs)
                else ""
            )
            out.append(f"request parameter '{key}' is not supported{hint}; supported: {sorted(KNOWN_PARAMETERS)}")
        elif value not in allowed:
            out.append(f"request parameter '{key}' = {value!r} is not supported; allowed: {list(allowed)}")
    return out
