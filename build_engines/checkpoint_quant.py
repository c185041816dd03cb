"""What quantization a Hugging Face checkpoint already carries, as ModelOpt's export writes it
(upstream table modelopt_hf_ptq_<version>.json rules export_files, hf_quant_config_fields,
config_quantization_config): hf_quant_config.json, or config.json's quantization_config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

HF_QUANT_CONFIG = "hf_quant_config.json"
MODELOPT = "modelopt"


@dataclass(frozen=True)
class CheckpointQuantization:
    method: str  # "modelopt", or another quantizer's quant_method (refused by the PyTorch flow)
    quant_algo: str | None  # e.g. FP8, W4A16_AWQ, NVFP4 (None: weights not quantized)
    kv_cache_quant_algo: str | None  # e.g. FP8
    source: str  # the file that says so

    @property
    def is_modelopt(self) -> bool:
        return self.method == MODELOPT

    def describe(self) -> str:
        kv = f", KV cache {self.kv_cache_quant_algo}" if self.kv_cache_quant_algo else ""
        return f"{self.method} {self.quant_algo or 'unquantized weights'}{kv} ({self.source})"


def _kv_algo(scheme) -> str | None:
    """config.json's kv_cache_scheme: {'num_bits': 8, 'type': 'float'} is FP8, a string names itself."""
    if isinstance(scheme, dict):
        return "FP8" if scheme.get("type") == "float" and scheme.get("num_bits") == 8 else json.dumps(scheme)
    return scheme or None


def read_quantization(checkpoint: Path) -> CheckpointQuantization | None:
    """The checkpoint's quantization, or None for plain 16/32-bit weights."""
    hf_quant = checkpoint / HF_QUANT_CONFIG
    if hf_quant.is_file():
        data = json.loads(hf_quant.read_text())
        section = data.get("quantization") or {}
        producer = (data.get("producer") or {}).get("name", MODELOPT)
        return CheckpointQuantization(
            producer, section.get("quant_algo"), section.get("kv_cache_quant_algo"), HF_QUANT_CONFIG
        )
    config = json.loads((checkpoint / "config.json").read_text())
    qc = config.get("quantization_config")
    if not qc:
        return None
    method = str(qc.get("quant_method", "unknown"))
    return CheckpointQuantization(
        method, qc.get("quant_algo"), _kv_algo(qc.get("kv_cache_scheme")), "config.json quantization_config"
    )
