"""The build spec's base types, below every engine's options: the error a bad spec raises, the
engine backends, the precisions, and the engine limits."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass


class SpecError(ValueError):
    pass


class EngineBackend(str, enum.Enum):
    OPENVINO = "openvino"  # the CPU engine
    TENSORRT_LLM = "tensorrt_llm"  # the GPU engine
    TENSORRT_LLM_PYTORCH = "tensorrt_llm_pytorch"  # TensorRT-LLM's PyTorch backend: no engine compile


class Precision(str, enum.Enum):
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8_SQ = "int8_sq"
    INT8_WO = "int8_wo"
    INT4_AWQ = "int4_awq"
    INT8 = "int8"  # OpenVINO weight compression, per-channel int8
    INT4 = "int4"  # OpenVINO weight compression, group-wise int4
    NVFP4 = "nvfp4"  # ModelOpt NVFP4 (PyTorch backend, Blackwell)
    AUTO = "auto"  # PyTorch backend: the checkpoint as it is (its dtype, or its ModelOpt quantization)


ALLOWED_PRECISIONS: dict[EngineBackend, tuple[Precision, ...]] = {
    EngineBackend.OPENVINO: (Precision.INT8, Precision.INT4, Precision.FP16),
    EngineBackend.TENSORRT_LLM: (
        Precision.FP16,
        Precision.BF16,
        Precision.FP8,
        Precision.INT8_SQ,
        Precision.INT8_WO,
        Precision.INT4_AWQ,
    ),
    EngineBackend.TENSORRT_LLM_PYTORCH: (
        Precision.AUTO,
        Precision.FP16,
        Precision.BF16,
        Precision.FP8,
        Precision.INT4_AWQ,
        Precision.NVFP4,
    ),
}
DEFAULT_PRECISION = {
    EngineBackend.OPENVINO: Precision.INT8,
    EngineBackend.TENSORRT_LLM: Precision.FP16,
    EngineBackend.TENSORRT_LLM_PYTORCH: Precision.AUTO,
}


@dataclass(frozen=True)
class EngineLimits:
    """The engine's limits.  These defaults are the CPU engine's; the GPU flows size every limit not
    given for their GPU, from upstream's defaults (build_engines/gpu/limits.py)."""

    max_batch_size: int = 32  # requests in flight at once
    max_input_len: int = 1536  # prompt tokens
    max_seq_len: int = 2048  # prompt + generated tokens
    max_num_tokens: int = 512  # tokens processed per engine step (prefill chunks + decodes)
    default_max_tokens: int = 256  # max_tokens of a request that does not say

    def validate(self, max_position_embeddings: int | None = None) -> None:
        errors = [f"'{n}' must be >= 1, got {v}" for n, v in asdict(self).items() if v < 1]
        if self.max_input_len >= self.max_seq_len:
            errors.append(f"'max_input_len' ({self.max_input_len}) must be < 'max_seq_len' ({self.max_seq_len})")
        if self.default_max_tokens > self.max_seq_len:
            errors.append(
                f"'default_max_tokens' ({self.default_max_tokens}) must be <= 'max_seq_len' ({self.max_seq_len})"
            )
        if max_position_embeddings is not None and self.max_seq_len > max_position_embeddings:
            errors.append(
                f"'max_seq_len' ({self.max_seq_len}) exceeds the checkpoint's max_position_embeddings "
                f"({max_position_embeddings})"
            )
        if errors:
            raise SpecError("; ".join(errors))
