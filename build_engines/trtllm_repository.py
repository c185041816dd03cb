"""The GPU engine step of the model repository: the C++ `tensorrt_llm` model and the
`engine_relay` Python model in front of it (the ensemble's engine step).

The `tensorrt_llm` config mirrors the inputs/outputs NVIDIA declares for the engine
contract (TensorRT-LLM 1.1 triton_backend/all_models/inflight_batcher_llm/tensorrt_llm/
config.pbtxt): scalars are reshaped to [] and variable-length inputs allow ragged batches.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from build_engines.render import RenderedModel, io_message, python_model_config
from build_engines.spec import BuildSpec
from build_engines.trtllm_spec import effective
from contract import names
from contract.model_configs import EngineRelayParameters, TensorRtLlmParameters
from contract.model_parameters import to_parameters
from contract.tensors import BLS_INPUTS, ENGINE_INPUTS, ENGINE_OUTPUTS, ENSEMBLE_OUTPUTS, TRTLLM_INPUTS, TRTLLM_OUTPUTS

TRTLLM_BACKEND = "tensorrtllm"  # /opt/tritonserver/backends/tensorrtllm in the NGC image


def tensorrt_llm_parameters(engine_dir: Path, spec: BuildSpec) -> TensorRtLlmParameters:
    """The serving parameters the engine really honours: chunked context and KV-cache reuse as
    upstream's rules leave them (off without paged context FMHA), not as requested."""
    s, eff = spec.trtllm.serving, effective(spec.precision.value, spec.trtllm, spec.limits)
    return TensorRtLlmParameters(
        gpt_model_path=engine_dir,
        kv_cache_free_gpu_mem_fraction=s.kv_cache_free_gpu_mem_fraction,
        enable_kv_cache_reuse=eff.enable_kv_cache_reuse,
        enable_chunked_context=eff.enable_chunked_context,
        batch_scheduler_policy=s.batch_scheduler_policy.value,
        cancellation_check_period_ms=s.cancellation_check_period_ms,
    )


def tensorrt_llm_config(engine_dir: Path, spec: BuildSpec) -> mc.ModelConfig:
    limits, serving = spec.limits, spec.trtllm.serving
    config = mc.ModelConfig(name=names.TRTLLM_ENGINE, backend=TRTLLM_BACKEND, max_batch_size=limits.max_batch_size)
    config.model_transaction_policy.decoupled = True  # streaming: one response per generated step
    batching = config.dynamic_batching
    batching.preferred_batch_size.append(limits.max_batch_size)
    batching.max_queue_delay_microseconds = serving.max_queue_delay_microseconds
    batching.default_queue_policy.max_queue_size = serving.max_queue_size
    for spec_in in TRTLLM_INPUTS:
        tensor = io_message(spec_in, mc.ModelInput)
        if spec_in.is_scalar:
            tensor.reshape.SetInParent()  # shape [] per request, as the backend expects
        else:
            tensor.allow_ragged_batch = True
        config.input.append(tensor)
    config.output.extend(io_message(t, mc.ModelOutput) for t in TRTLLM_OUTPUTS)
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)  # the executor owns the GPUs
    for key, value in to_parameters(tensorrt_llm_parameters(engine_dir, spec)).items():
        config.parameters[key].string_value = value
    return config


def _relaying_model(name: str, inputs, outputs, engine_dir: Path, target_model: str,
                    max_batch_size: int, decoupled: bool, first_token_timeout_s: float) -> RenderedModel:
    # In front of TensorRT-LLM the relays keep the promises the CPU engine keeps itself: a
    # first-token timeout and the llm_* metrics (the C++ backend has neither).
    trtllm = target_model == names.TRTLLM_ENGINE
    params = EngineRelayParameters(target_model=target_model, engine_dir=engine_dir,
                                   first_token_timeout_s=first_token_timeout_s if trtllm else 0.0,
                                   record_metrics=trtllm)  # each request passes one of them
    config = python_model_config(name, inputs, outputs, max_batch_size=max_batch_size,
                                 parameters=to_parameters(params), decoupled=decoupled, dynamic_batching=False)
    return RenderedModel(config, f"model_repository.{name}.model")


def relay_model(engine_dir: Path, target_model: str, max_batch_size: int, decoupled: bool = True,
                first_token_timeout_s: float = 0.0) -> RenderedModel:
    """The ensemble's engine step in front of `target_model` (echoes detokenize_params).  Not
    decoupled: one response per request (NVIDIA's decoupled_mode false), so the ensemble is
    not decoupled either and unary infer() works, while the engine behind it stays decoupled."""
    return _relaying_model(names.ENGINE_RELAY, ENGINE_INPUTS, ENGINE_OUTPUTS, engine_dir, target_model, max_batch_size,
                           decoupled, first_token_timeout_s)


def bls_model(engine_dir: Path, target_model: str, max_batch_size: int, decoupled: bool = True,
              first_token_timeout_s: float = 0.0) -> RenderedModel:
    """tensorrt_llm_bls: NVIDIA's BLS contract as one model whose client cancellation reaches the engine."""
    return _relaying_model(names.LLM_BLS, BLS_INPUTS, ENSEMBLE_OUTPUTS, engine_dir, target_model, max_batch_size,
                           decoupled, first_token_timeout_s)


def trtllm_engine_models(engine_dir: Path, spec: BuildSpec, decoupled: bool = True) -> list[RenderedModel]:
    """The ensemble's engine step (the relay) and the model it relays to."""
    return [relay_model(engine_dir, names.TRTLLM_ENGINE, spec.limits.max_batch_size, decoupled,
                        spec.trtllm.serving.queue_timeout_s),
            RenderedModel(tensorrt_llm_config(engine_dir, spec), None)]
