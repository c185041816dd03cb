"""The PyTorch-backend repository: `tensorrt_llm_pytorch` as the ensemble's engine step (it
echoes detokenize_params itself, like the CPU engine), tensorrt_llm_bls targeting it, and the
same preprocessing, postprocessing and ensemble as every other layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from build_engines.checkpoint_quant import read_quantization
from build_engines.render import RenderedModel, python_model_config
from build_engines.spec import BuildSpec
from build_engines.spec_base import Precision
from contract import lora, names
from contract.lora import LoraAdapter
from contract.model_configs import KvCacheDtype, PyTorchEngineParameters
from contract.model_parameters import to_parameters
from contract.tensors import ENGINE_INPUTS, ENGINE_OUTPUTS

MODEL_SUBDIR = "model"  # the Hugging Face checkpoint the LLM loads, inside the engine directory
ADAPTER = "model_repository.models.tensorrt_llm_pytorch.model"
DTYPE = {Precision.FP16: "float16", Precision.BF16: "bfloat16"}


def llm_dtype(spec: BuildSpec, model_dir: Path) -> str:
    """LLM(dtype=...): the precision's 16-bit dtype; for auto the checkpoint's, except that a
    float32 checkpoint runs as bfloat16 (the GPUs this kit targets, SM 8.0+, compute it)."""
    if spec.precision in DTYPE:
        return DTYPE[spec.precision]
    config = model_dir / "config.json"
    if not config.is_file():
        config = spec.checkpoint / "config.json"
    data = json.loads(config.read_text()) if config.is_file() else {}
    return "bfloat16" if (data.get("torch_dtype") or data.get("dtype")) == "float32" else "auto"


def pytorch_parameters(
    engine_dir: Path,
    spec: BuildSpec,
    model_dir: Path | None = None,
    adapters: Sequence[LoraAdapter] = (),
    lora_max_rank: int = 0,
) -> PyTorchEngineParameters:
    """The engine model's parameters; its KV-cache dtype is what the served checkpoint says."""
    model_dir = model_dir or engine_dir / MODEL_SUBDIR
    quant = read_quantization(model_dir) if (model_dir / "config.json").is_file() else None
    fp8_kv = (quant is not None and quant.kv_cache_quant_algo == "FP8") or spec.pytorch.kv_cache_dtype.value == "fp8"
    p, s, limits = spec.pytorch, spec.pytorch.serving, spec.limits
    return PyTorchEngineParameters(
        engine_dir=engine_dir,
        model_dir=model_dir,
        dtype=llm_dtype(spec, model_dir),
        max_batch_size=limits.max_batch_size,
        max_num_tokens=limits.max_num_tokens,
        max_seq_len=limits.max_seq_len,
        max_input_len=limits.max_input_len,
        tensor_parallel_size=p.tp_size,
        pipeline_parallel_size=p.pp_size,
        kv_cache_free_gpu_mem_fraction=s.kv_cache_free_gpu_mem_fraction,
        enable_block_reuse=s.enable_block_reuse,
        kv_cache_dtype=KvCacheDtype.FP8 if fp8_kv else KvCacheDtype.AUTO,
        enable_chunked_prefill=s.enable_chunked_prefill,
        max_queue_size=s.max_queue_size,
        queue_timeout_s=s.queue_timeout_s,
        cancel_check_period_ms=s.cancel_check_period_ms,
        speculative_config=json.dumps(p.speculative.llm_api_options().get("speculative_config", {}), sort_keys=True),
        guided_decoding_backend=s.guided_decoding_backend.parameter,
        lora_adapters=lora.to_parameter(list(adapters)) if adapters else "",
        lora_max_rank=lora_max_rank,
        sampler_type=p.sampler_plan.sampler,
    )


def pytorch_engine_model(
    engine_dir: Path, spec: BuildSpec, adapters: Sequence[LoraAdapter] = (), lora_max_rank: int = 0
) -> RenderedModel:
    params = pytorch_parameters(engine_dir, spec, adapters=adapters, lora_max_rank=lora_max_rank)
    config = python_model_config(
        names.PYTORCH_ENGINE,
        ENGINE_INPUTS,
        ENGINE_OUTPUTS,
        max_batch_size=spec.limits.max_batch_size,
        parameters=to_parameters(params),
        decoupled=True,
        dynamic_batching=False,
    )
    return RenderedModel(config, ADAPTER)
