"""The PyTorch-backend part of the build spec (`--backend tensorrt_llm_pytorch`): no engine is
compiled; the build validates the Hugging Face checkpoint, optionally quantizes it with
ModelOpt into a Hugging Face checkpoint the LLM API loads, and renders the repository around
`tensorrt_llm_pytorch`.  Every rule is checked here, before any work, naming the fields:

- the TensorRT-LLM version must have an LLM-API table and a ModelOpt table (1.2.1: Triton
  26.04 - 26.07); 25.12 (1.1.0) is refused naming both;
- a checkpoint ModelOpt already quantized is served as it is: --precision auto, or the
  precision it has; another quantizer's checkpoint is refused;
- quantizing: fp8 / int4_awq, nvfp4 on Blackwell only (ModelOpt table rule nvfp4_blackwell),
  FP8 on Ada/Hopper or newer; calibration data is a dataset name hf_ptq.py knows (rule
  datasets: no local directories); an FP8 KV cache only together with quantized weights
  (rule kv_needs_weight_qformat).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from build_engines.checkpoint_quant import CheckpointQuantization
from build_engines.gpus import DEFAULT_GPU, FP8_MIN_SM, GpuTarget, known_gpu
from build_engines.pytorch.sampler import SamplerChoice, SamplerPlan, plan_sampler
from build_engines.pytorch.speculative import PyTorchSpecMode, PyTorchSpeculative, speculative_from_dict
from build_engines.trtllm.options import (
    GuidedDecodingBackend,
    KvCacheDtype,
    default_triton_release,
    default_trtllm_version,
)
from build_engines.trtllm.spec import gpu_problems, parallelism_problems
from contract.upstream.citation import UpstreamTableError
from contract.upstream.llmapi import SUPPORTED_VERSIONS as LLMAPI_VERSIONS
from contract.upstream.modelopt import ModelOptTable, modelopt_for_trtllm
from contract.upstream.trtllm_build import load_build_table, supported_versions

if TYPE_CHECKING:
    from build_engines.checkpoint import CheckpointInfo

QUANTIZED_PRECISIONS = ("fp8", "int4_awq", "nvfp4")
DTYPES = {"auto": "auto", "fp16": "float16", "bf16": "bfloat16"}  # LLM(dtype=...) of the 16-bit precisions


@dataclass(frozen=True)
class PyTorchServing:
    """What tensorrt_llm_pytorch gets besides the LLM's limits (contract/model_configs.py)."""

    kv_cache_free_gpu_mem_fraction: float = 0.9  # KvCacheConfig.free_gpu_memory_fraction
    enable_block_reuse: bool = True  # KvCacheConfig.enable_block_reuse
    enable_chunked_prefill: bool = True
    max_queue_size: int = 64
    queue_timeout_s: float = 60.0
    cancel_check_period_ms: int = 50
    # LLM(guided_decoding_backend=...): structured output by the executor's xgrammar decoder (the
    # LLM then loads its tokenizer: contract/upstream/data/llmapi_<version>.json llm.guided.tokenizer)
    guided_decoding_backend: GuidedDecodingBackend = GuidedDecodingBackend.XGRAMMAR


@dataclass(frozen=True)
class PyTorchOptions:
    trtllm_version: str = field(default_factory=default_trtllm_version)
    triton_release: str = field(default_factory=default_triton_release)
    tp_size: int = 1
    pp_size: int = 1
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    calib_dataset: str | None = None  # hf_ptq.py --dataset: a name it knows, or a local directory of that name
    calib_size: int = 512
    awq_block_size: int = 128
    gpu: GpuTarget = field(default_factory=lambda: known_gpu(DEFAULT_GPU))
    serving: PyTorchServing = field(default_factory=PyTorchServing)
    speculative: PyTorchSpeculative = field(default_factory=PyTorchSpeculative)  # build_engines/pytorch/speculative.py
    # LLM(sampler_type=...), picked by the fields the deployment must apply (build_engines/pytorch/sampler.py)
    sampler: SamplerChoice = SamplerChoice.AUTO
    sampling_fields: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.tp_size * self.pp_size

    @property
    def sampler_plan(self) -> SamplerPlan:
        return plan_sampler(
            self.trtllm_version, self.sampler, self.sampling_fields, self.speculative.mode != PyTorchSpecMode.NONE
        )


def pytorch_versions() -> list[str]:
    """TensorRT-LLM versions the PyTorch flow can target: an image pin, an LLM-API table and a ModelOpt table."""
    out = []
    for version in supported_versions():
        try:
            modelopt_for_trtllm(version)
        except UpstreamTableError:
            continue
        if version in LLMAPI_VERSIONS:
            out.append(version)
    return out


def pytorch_releases() -> list[str]:
    return [pin.release for v in pytorch_versions() for pin in load_build_table(v).images]


def effective_precision(
    precision: str, quant: CheckpointQuantization | None, table: ModelOptTable, checkpoint_dtype: str = "bfloat16"
) -> str:
    """The precision the LLM will run: the checkpoint's own when it is quantized, or its dtype (auto)."""
    if quant is None or not quant.quant_algo:
        if precision != "auto":
            return precision
        return "fp16" if checkpoint_dtype == "float16" else "bf16"  # float32 checkpoints run as bfloat16
    by_algo = {f.quant_algo: f.precision for f in table.formats.values()}
    return by_algo.get(quant.quant_algo, quant.quant_algo.lower())


def served_format(precision: str, o: PyTorchOptions, info: "CheckpointInfo") -> tuple[str, bool]:
    """(the precision the LLM runs, whether its KV cache is FP8): the checkpoint's own quantization
    where it has one (plan, memory arithmetic and limit sizing read it here alone)."""
    from pathlib import Path

    from build_engines.checkpoint_quant import read_quantization

    quant = read_quantization(Path(info.path))
    effective = effective_precision(precision, quant, modelopt_for_trtllm(o.trtllm_version), info.dtype)
    fp8_kv = o.kv_cache_dtype == KvCacheDtype.FP8 or (quant is not None and quant.kv_cache_quant_algo == "FP8")
    return effective, fp8_kv


def needs_quantization(precision: str, quant: CheckpointQuantization | None) -> bool:
    return precision in QUANTIZED_PRECISIONS and (quant is None or not quant.quant_algo)


def pytorch_problems(
    precision: str, o: PyTorchOptions, limits, info: "CheckpointInfo | None", quant: CheckpointQuantization | None
) -> list[str]:
    if o.trtllm_version not in pytorch_versions():
        where = (
            f"Triton {o.triton_release} ships TensorRT-LLM {o.trtllm_version}"
            if o.triton_release
            else f"TensorRT-LLM {o.trtllm_version!r}"
        )
        return [
            f"'backend' tensorrt_llm_pytorch needs TensorRT-LLM {' or '.join(pytorch_versions())} (Triton "
            f"{', '.join(pytorch_releases())}) - its LLM API and ModelOpt tables; {where}: give --image 26.07, or "
            "use --backend tensorrt_llm (the engine flow) on this image"
        ]
    table = modelopt_for_trtllm(o.trtllm_version)
    effective = effective_precision(precision, quant, table, info.dtype if info else "bfloat16")
    errors = parallelism_problems(o, info) + gpu_problems(effective, o)
    releases = [pin.release for pin in load_build_table(o.trtllm_version).images]
    if o.triton_release not in releases:
        errors.append(
            f"'triton_release' {o.triton_release!r} does not ship TensorRT-LLM {o.trtllm_version}; "
            f"releases that do: {releases}"
        )
    errors += _checkpoint_problems(precision, o, quant)
    if needs_quantization(precision, quant):
        errors += _quantize_problems(precision, o, info, table)
    elif o.kv_cache_dtype == KvCacheDtype.FP8 and not (quant and quant.kv_cache_quant_algo == "FP8"):
        rule = table.rule("kv_needs_weight_qformat")
        errors.append(
            f"'kv_cache_dtype' fp8 needs quantized weights: ModelOpt {table.version}'s hf_ptq.py quantizes "
            f"the KV cache only with them ({table.citation(rule)}); use --precision fp8"
        )
    errors += _gpu_format_problems(effective, o, table)
    s = o.serving
    if not 0 < s.kv_cache_free_gpu_mem_fraction <= 1:
        errors.append(f"'kv_cache_free_gpu_mem_fraction' must be in (0, 1], got {s.kv_cache_free_gpu_mem_fraction}")
    if s.max_queue_size < 0 or s.queue_timeout_s < 0 or s.cancel_check_period_ms < 1:
        errors.append("'max_queue_size' and 'queue_timeout_s' must be >= 0, 'cancel_check_period_ms' >= 1")
    errors += o.speculative.problems(info)
    errors += list(o.sampler_plan.problems)
    if o.speculative.mode != PyTorchSpecMode.NONE and o.speculative.max_draft_len >= limits.max_seq_len:
        errors.append(f"'max_draft_len' {o.speculative.max_draft_len} must be < 'max_seq_len' {limits.max_seq_len}")
    return errors


def _checkpoint_problems(precision: str, o: PyTorchOptions, quant: CheckpointQuantization | None) -> list[str]:
    if o.kv_cache_dtype == KvCacheDtype.INT8:
        return ["'kv_cache_dtype' int8: the PyTorch backend's KV cache is auto (the checkpoint's) or fp8"]
    if quant is None:
        return []
    if not quant.is_modelopt:
        return [
            f"'checkpoint' is quantized by {quant.method!r} ({quant.source}); the PyTorch flow serves ModelOpt "
            "checkpoints as they are, or quantizes 16-bit ones itself"
        ]
    table = modelopt_for_trtllm(o.trtllm_version)
    have = effective_precision("auto", quant, table)  # quantized: the checkpoint's own
    errors = []
    if precision not in ("auto", have):
        errors.append(
            f"'precision' {precision!r}: the checkpoint is already quantized by ModelOpt ({quant.describe()}, "
            f"= {have}); use --precision auto to serve it as it is"
        )
    if o.kv_cache_dtype == KvCacheDtype.FP8 and quant.kv_cache_quant_algo != "FP8":
        errors.append(
            f"'kv_cache_dtype' fp8: the checkpoint has no FP8 KV cache ({quant.describe()}); quantize the "
            "16-bit checkpoint with --precision fp8 --kv-cache-dtype fp8"
        )
    return errors


def calib_dataset_name(calib_dataset: str) -> str:
    """The name hf_ptq.py is given: the dataset's name, or a local directory's (run in its parent)."""
    return Path(calib_dataset).name if is_local_dataset(calib_dataset) else calib_dataset


def is_local_dataset(calib_dataset: str | None) -> bool:
    """A path (with a directory part), not a bare dataset name."""
    return bool(calib_dataset) and ("/" in str(calib_dataset) or str(calib_dataset).startswith("."))


def _quantize_problems(precision: str, o: PyTorchOptions, info, table: ModelOptTable) -> list[str]:
    errors = []
    datasets = table.rule("datasets")
    if not o.calib_dataset:
        errors.append(
            f"'calib_dataset' is required to quantize to {precision!r}: one of {datasets['names']} "
            "(ModelOpt streams it from the Hugging Face hub)"
        )
    elif calib_dataset_name(o.calib_dataset) not in datasets["names"]:
        local = table.rule("dataset_local_directory")
        errors.append(
            f"'calib_dataset' {o.calib_dataset!r}: hf_ptq.py of ModelOpt {table.version} takes only "
            f"{datasets['names']} ({table.citation(datasets)}), or a local directory named {local['dataset']!r} "
            f"laid out as that dataset ({table.citation(local)}; build_engines/calibration_data.py makes one)"
        )
    if o.calib_size < 1:
        errors.append(f"'calib_size' must be >= 1, got {o.calib_size}")
    if (
        precision == "int4_awq"
        and info is not None
        and (info.hidden_size % o.awq_block_size or info.intermediate_size % o.awq_block_size)
    ):
        errors.append(
            f"'awq_block_size' {o.awq_block_size} must divide hidden_size {info.hidden_size} "
            f"and intermediate_size {info.intermediate_size}"
        )
    return errors


def _gpu_format_problems(effective: str, o: PyTorchOptions, table: ModelOptTable) -> list[str]:
    """FP8 needs Ada/Hopper or newer (gpu_problems says it for --precision fp8 already); NVFP4 Blackwell."""
    gpu, errors = o.gpu, []
    if "NVFP4" in effective.upper() or effective == "nvfp4":
        rule = table.rule("nvfp4_blackwell")
        if gpu.sm < rule["min_sm"]:
            errors.append(
                f"NVFP4 weights need a Blackwell GPU (SM {rule['min_sm'] / 10:.1f}+, "
                f"{table.citation(rule)}); 'gpu' {gpu.name} is SM {gpu.sm / 10:.1f} ({gpu.architecture})"
            )
    elif "FP8" in effective.upper() and effective != "fp8" and gpu.sm < FP8_MIN_SM:
        errors.append(
            f"the checkpoint's {effective} weights need an Ada Lovelace (SM 8.9) or Hopper GPU or newer; "
            f"'gpu' {gpu.name} is SM {gpu.sm / 10:.1f}"
        )
    return errors


def pytorch_options_from_dict(data: dict) -> PyTorchOptions:
    d = dict(data)
    d["kv_cache_dtype"] = KvCacheDtype(d["kv_cache_dtype"])
    d["gpu"] = GpuTarget(**d["gpu"])
    serving = dict(d["serving"])
    if "guided_decoding_backend" in serving:  # older records lack it: this version's default
        serving["guided_decoding_backend"] = GuidedDecodingBackend(serving["guided_decoding_backend"])
    d["serving"] = PyTorchServing(**serving)
    d["speculative"] = speculative_from_dict(d.get("speculative"))
    d["sampler"] = SamplerChoice(d.get("sampler", SamplerChoice.AUTO.value))  # older records lack both
    d["sampling_fields"] = tuple(d.get("sampling_fields", ()))
    return PyTorchOptions(**d)
