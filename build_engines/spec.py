"""The typed build specification: what engine to build from which checkpoint, with which
limits.  Every invalid combination fails here, before any work, naming the fields."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from build_engines.checkpoint import CheckpointInfo
from build_engines.checkpoint_quant import read_quantization
from build_engines.fidelity.options import FidelityOptions, fidelity_options_from_dict
from build_engines.openvino.options import OpenVinoOptions, openvino_options_from_dict
from build_engines.openvino.precision import kv_bytes_per_element
from build_engines.pytorch.spec import PyTorchOptions, pytorch_options_from_dict, pytorch_problems
from build_engines.spec_base import ALLOWED_PRECISIONS, EngineBackend, EngineLimits, Precision, SpecError
from build_engines.trtllm.options import TrtLlmOptions, trtllm_options_from_dict
from build_engines.trtllm.spec import trtllm_problems


@dataclass(frozen=True)
class BuildSpec:
    checkpoint: Path
    backend: EngineBackend = EngineBackend.OPENVINO
    precision: Precision = Precision.INT8
    limits: EngineLimits = field(default_factory=EngineLimits)
    openvino: OpenVinoOptions = field(default_factory=OpenVinoOptions)
    trtllm: TrtLlmOptions = field(default_factory=TrtLlmOptions)
    pytorch: PyTorchOptions = field(default_factory=PyTorchOptions)
    fidelity: FidelityOptions = field(default_factory=FidelityOptions)

    def validate(self, info: CheckpointInfo | None = None) -> None:
        allowed = ALLOWED_PRECISIONS[self.backend]
        if self.precision not in allowed:
            raise SpecError(
                f"'precision' {self.precision.value!r} is not available for backend {self.backend.value!r}; "
                f"allowed: {[p.value for p in allowed]}"
            )
        self.limits.validate(info.max_position_embeddings if info else None)
        self.fidelity.validate()
        if self.backend == EngineBackend.OPENVINO:
            int4_dims = (info.hidden_size, info.intermediate_size) if info and self.precision == Precision.INT4 else ()
            self.openvino.validate(int4_dims)
            return
        if self.backend == EngineBackend.TENSORRT_LLM_PYTORCH:
            quant = read_quantization(Path(info.path)) if info else None
            problems = pytorch_problems(self.precision.value, self.pytorch, self.limits, info, quant)
        else:
            problems = trtllm_problems(self.precision.value, self.trtllm, self.limits, info)
        if problems:
            raise SpecError("; ".join(problems))

    def kv_cache_bound_gb(self, info: CheckpointInfo, kv_cache_precision: str = "") -> float:
        """The most KV cache the CPU engine can use: every sequence of the batch at full length
        (in the spec's KV cache precision, or the one given: the served one a fast build chose)."""
        per_token = info.kv_cache_bytes_per_token(self.kv_bytes_per_element(info, kv_cache_precision))
        return per_token * self.limits.max_batch_size * self.limits.max_seq_len / 1e9

    def kv_bytes_per_element(self, info: CheckpointInfo, kv_cache_precision: str = "") -> float:
        """The CPU KV cache's real element size (u8: 1 byte + its per-head scale and zero point)."""
        return kv_bytes_per_element(kv_cache_precision or self.openvino.kv_cache_precision, info.head_dim)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON; only the options section of its own backend is recorded."""
        data = _jsonable(asdict(self))
        for backend, section in OPTIONS_SECTION.items():
            if backend != self.backend:
                del data[section]
        return data

    def artifact_fields(self) -> dict[str, Any]:
        """What the built engine depends on.  An OpenVINO IR does not depend on the serving
        limits (batch, lengths, KV cache, queue): changing those needs no rebuild."""
        data = self.to_dict()
        data.pop("fidelity", None)  # how it was evaluated does not change the engine
        if self.backend == EngineBackend.OPENVINO:
            # The precisions change the engine's numerics, so its fidelity report: rebuild.
            ov = data["openvino"]
            numerics = {
                k: ov[k] for k in ("activation_precision", "kv_cache_precision", "dynamic_quantization_group_size")
            }
            if self.precision == Precision.INT4:
                numerics["int4"] = ov["int4"]
            return {k: data[k] for k in ("checkpoint", "backend", "precision")} | {
                "numerics": numerics,
                "fuse_projections": ov["fuse_projections"],
            }
        return data

    def builds_as(self, recorded: dict[str, Any]) -> bool:
        """Whether an engine built from `recorded` (its build.json spec) is the artifact this spec builds."""
        return BuildSpec.from_dict(recorded).artifact_fields() == self.artifact_fields()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BuildSpec":
        return cls(
            checkpoint=Path(data["checkpoint"]),
            backend=EngineBackend(data["backend"]),
            precision=Precision(data["precision"]),
            limits=EngineLimits(**data["limits"]),
            openvino=openvino_options_from_dict(data["openvino"]) if "openvino" in data else OpenVinoOptions(),
            trtllm=trtllm_options_from_dict(data["trtllm"]) if "trtllm" in data else TrtLlmOptions(),
            pytorch=pytorch_options_from_dict(data["pytorch"]) if "pytorch" in data else PyTorchOptions(),
            fidelity=fidelity_options_from_dict(data.get("fidelity", {})),
        )

    def with_checkpoint(self, path: Path) -> "BuildSpec":
        return replace(self, checkpoint=path)


OPTIONS_SECTION = {  # the spec section of each backend's options
    EngineBackend.OPENVINO: "openvino",
    EngineBackend.TENSORRT_LLM: "trtllm",
    EngineBackend.TENSORRT_LLM_PYTORCH: "pytorch",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value
