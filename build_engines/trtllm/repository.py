"""The GPU engine step of the model repository: the C++ `tensorrt_llm` model and the
`engine_relay` Python model in front of it (the ensemble's engine step).

The `tensorrt_llm` config declares exactly the inputs/outputs NVIDIA's config.pbtxt declares
at the spec's TensorRT-LLM version (triton_backend/all_models/inflight_batcher_llm/tensorrt_llm,
recorded in contract/upstream/data/triton_models_<version>.json), so NVIDIA's own clients of the
engine model work, and our relay's requests use a subset of it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from build_engines.render import RenderedModel, python_model_config
from build_engines.spec import BuildSpec
from build_engines.trtllm.draft_target import DRAFT_ENGINE_SUBDIR
from build_engines.trtllm.eagle import serving_parameters as eagle_serving_parameters
from build_engines.trtllm.launch import gpu_device_ids
from build_engines.trtllm.lora import TrtLlmLora, cache_parameters
from build_engines.trtllm.options import GuidedDecodingBackend, SpeculativeDecoding
from build_engines.trtllm.spec import effective
from build_engines.trtllm.xgrammar_info import INFO_FILE, write_tokenizer_info
from contract import names
from contract.model_configs import EngineRelayParameters, TensorRtLlmParameters
from contract.model_parameters import to_parameters
from contract.tensors import BLS_INPUTS, ENGINE_INPUTS, ENGINE_OUTPUTS, ENSEMBLE_OUTPUTS
from contract.upstream.triton_models import TensorDecl, load_models

TRTLLM_BACKEND = "tensorrtllm"  # /opt/tritonserver/backends/tensorrtllm in the NGC image


def tensorrt_llm_parameters(engine_dir: Path, spec: BuildSpec) -> TensorRtLlmParameters:
    """The serving parameters the engine really honours: chunked context and KV-cache reuse as
    upstream's rules leave them (off without paged context FMHA), not as requested."""
    s, eff = spec.trtllm.serving, effective(spec.precision.value, spec.trtllm, spec.limits)
    guided = s.guided_decoding_backend.parameter
    return TensorRtLlmParameters(
        gpt_model_path=engine_dir,
        kv_cache_free_gpu_mem_fraction=spec.trtllm.engine_kv_cache_fraction,
        enable_kv_cache_reuse=eff.enable_kv_cache_reuse,
        enable_chunked_context=eff.enable_chunked_context,
        batch_scheduler_policy=s.batch_scheduler_policy.value,
        cancellation_check_period_ms=s.cancellation_check_period_ms,
        guided_decoding_backend=guided,
        xgrammar_tokenizer_info_path=str(engine_dir / INFO_FILE) if guided else "",
    )


# The dtype templates of NVIDIA's config (fill_template.py variables), as this kit fills them.
TEMPLATED_DTYPES = {
    "${logits_datatype}": "TYPE_FP32",
    "${prompt_embedding_table_data_type}": "TYPE_FP16",
    "${encoder_input_features_data_type}": "TYPE_FP16",
}


def nvidia_io(decl: TensorDecl, cls: type):
    """One input/output of NVIDIA's tensorrt_llm config.pbtxt, exactly as declared there
    (contract/upstream/data/triton_models_<version>.json): names, dtypes, dims, reshape,
    ragged batching and optionality are the C++ backend's contract, not ours to change."""
    dtype = TEMPLATED_DTYPES.get(decl.data_type, decl.data_type)
    msg = cls(name=decl.name, data_type=mc.DataType.Value(dtype), dims=list(decl.dims))
    if cls is mc.ModelInput:
        msg.optional = decl.optional
        msg.allow_ragged_batch = decl.allow_ragged_batch
        if decl.reshape is not None:
            msg.reshape.SetInParent()
            msg.reshape.shape.extend(decl.reshape)
    return msg


def tensorrt_llm_config(engine_dir: Path, spec: BuildSpec) -> mc.ModelConfig:
    limits, serving = spec.limits, spec.trtllm.serving
    config = mc.ModelConfig(name=names.TRTLLM_ENGINE, backend=TRTLLM_BACKEND, max_batch_size=limits.max_batch_size)
    config.model_transaction_policy.decoupled = True  # streaming: one response per generated step
    batching = config.dynamic_batching
    batching.preferred_batch_size.append(limits.max_batch_size)
    batching.max_queue_delay_microseconds = serving.max_queue_delay_microseconds
    batching.default_queue_policy.max_queue_size = serving.max_queue_size
    nvidia = load_models(spec.trtllm.trtllm_version)[names.TRTLLM_ENGINE]
    config.input.extend(nvidia_io(t, mc.ModelInput) for t in nvidia.inputs)
    config.output.extend(nvidia_io(t, mc.ModelOutput) for t in dict((t.name, t) for t in nvidia.outputs).values())
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)  # the executor owns the GPUs
    for key, value in to_parameters(tensorrt_llm_parameters(engine_dir, spec)).items():
        config.parameters[key].string_value = value
    for key, value in (speculative_parameters(spec) | cache_parameters(spec.trtllm.lora, engine_dir)).items():
        config.parameters[key].string_value = value
    place_on_gpus(config, spec)
    return config


def place_on_gpus(config: mc.ModelConfig, spec: BuildSpec) -> None:
    """Orchestrator mode (several TensorRT-LLM models on several GPUs): the model's GPUs, one
    set for its one instance (build_engines/trtllm/launch.py gpu_device_ids)."""
    t = spec.trtllm
    ids = gpu_device_ids(t.world_size, 2 if t.has_draft_engine else 1)
    if ids:
        config.parameters["gpu_device_ids"].string_value = ids


def draft_relay(spec: BuildSpec) -> tuple[str, int]:
    """tensorrt_llm_bls's draft model and max_draft_len (none without draft-target decoding)."""
    return (names.TRTLLM_DRAFT, spec.trtllm.draft_target.max_draft_len) if spec.trtllm.has_draft_engine else ("", 0)


def draft_model_config(engine_dir: Path, spec: BuildSpec) -> mc.ModelConfig:
    """tensorrt_llm_draft: NVIDIA's tensorrt_llm config under the draft's name, on the draft
    engine (<engine>/draft), as their Triton workflow makes it (a copy of tensorrt_llm renamed:
    row draft_target_requirements); without the target's speculative decoding, LoRA and
    guided decoding (the draft loop sends the draft neither adapters nor guides)."""
    t = spec.trtllm
    serving = dataclasses.replace(
        t.serving,
        guided_decoding_backend=GuidedDecodingBackend.NONE,
        kv_cache_free_gpu_mem_fraction=t.engine_kv_cache_fraction,
    )
    plain = dataclasses.replace(t, speculative_decoding=SpeculativeDecoding.NONE, lora=TrtLlmLora(), serving=serving)
    config = tensorrt_llm_config(engine_dir / DRAFT_ENGINE_SUBDIR, dataclasses.replace(spec, trtllm=plain))
    config.name = names.TRTLLM_DRAFT
    place_on_gpus(config, spec)  # the target's placement: the draft shares its GPUs
    return config


def speculative_parameters(spec: BuildSpec) -> dict[str, str]:
    """The tensorrt_llm model's speculative-decoding parameters (trtllm_spec.LOOKAHEAD_CITATIONS);
    none without speculative decoding, so the backend's defaults stand."""
    t = spec.trtllm
    if t.speculative_decoding == SpeculativeDecoding.EAGLE:
        return eagle_serving_parameters(t.eagle)
    if t.speculative_decoding != SpeculativeDecoding.LOOKAHEAD:
        return {}
    return {
        "decoding_mode": "lookahead",
        "lookahead_window_size": str(t.lookahead.window_size),
        "lookahead_ngram_size": str(t.lookahead.ngram_size),
        "lookahead_verification_set_size": str(t.lookahead.verification_set_size),
    }


def _relaying_model(
    name: str,
    inputs,
    outputs,
    engine_dir: Path,
    target_model: str,
    max_batch_size: int,
    decoupled: bool,
    first_token_timeout_s: float,
    draft: tuple[str, int] = ("", 0),
) -> RenderedModel:
    # In front of TensorRT-LLM the relays keep the promises the CPU engine keeps itself: a
    # first-token timeout and the llm_* metrics (the C++ backend has neither).
    trtllm = target_model == names.TRTLLM_ENGINE
    params = EngineRelayParameters(
        target_model=target_model,
        engine_dir=engine_dir,
        first_token_timeout_s=first_token_timeout_s if trtllm else 0.0,
        record_metrics=trtllm,  # each request passes one of them
        draft_model=draft[0],
        max_draft_len=draft[1],
    )
    config = python_model_config(
        name,
        inputs,
        outputs,
        max_batch_size=max_batch_size,
        parameters=to_parameters(params),
        decoupled=decoupled,
        dynamic_batching=False,
    )
    return RenderedModel(config, f"model_repository.models.{name}.model")


def relay_model(
    engine_dir: Path, target_model: str, max_batch_size: int, decoupled: bool = True, first_token_timeout_s: float = 0.0
) -> RenderedModel:
    """The ensemble's engine step in front of `target_model` (echoes detokenize_params).  Not
    decoupled: one response per request (NVIDIA's decoupled_mode false), so the ensemble is
    not decoupled either and unary infer() works, while the engine behind it stays decoupled."""
    return _relaying_model(
        names.ENGINE_RELAY,
        ENGINE_INPUTS,
        ENGINE_OUTPUTS,
        engine_dir,
        target_model,
        max_batch_size,
        decoupled,
        first_token_timeout_s,
    )


def bls_model(
    engine_dir: Path,
    target_model: str,
    max_batch_size: int,
    decoupled: bool = True,
    first_token_timeout_s: float = 0.0,
    draft: tuple[str, int] = ("", 0),
) -> RenderedModel:
    """tensorrt_llm_bls: NVIDIA's BLS contract as one model whose client cancellation reaches the
    engine; `draft`: its draft model and max_draft_len (draft_relay)."""
    return _relaying_model(
        names.LLM_BLS,
        BLS_INPUTS,
        ENSEMBLE_OUTPUTS,
        engine_dir,
        target_model,
        max_batch_size,
        decoupled,
        first_token_timeout_s,
        draft,
    )


def trtllm_engine_models(
    engine_dir: Path, spec: BuildSpec, tokenizer_dir: Path, decoupled: bool = True
) -> list[RenderedModel]:
    """The ensemble's engine step (the relay) and the model it relays to; with guided decoding,
    the xgrammar tokenizer info it names is written beside the engine (from `tokenizer_dir`)."""
    if spec.trtllm.serving.guided_decoding_backend.parameter:
        write_tokenizer_info(tokenizer_dir, engine_dir / INFO_FILE)
    models = [
        relay_model(
            engine_dir, names.TRTLLM_ENGINE, spec.limits.max_batch_size, decoupled, spec.trtllm.serving.queue_timeout_s
        ),
        RenderedModel(tensorrt_llm_config(engine_dir, spec), None),
    ]
    if spec.trtllm.has_draft_engine:
        models.append(RenderedModel(draft_model_config(engine_dir, spec), None))
    return models
