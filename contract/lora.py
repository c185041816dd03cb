"""LoRA adapters served beside the CPU engine: a directory of PEFT adapters, one subdirectory
each (adapter_config.json + adapter_model.safetensors), found at render time and handed to the
engine model as one JSON parameter.  Requests pick one with NVIDIA's `lora_task_id` input;
the OpenAI front lists and selects them as `<model>:<adapter>`.

Task ids are the adapters' places in name order, from 1 (0: the base model); adding an adapter
renumbers those after it, so clients that pin ids should pin names through the front.

Scale: PEFT multiplies B·A by lora_alpha / r (lora_alpha / sqrt(r) with use_rslora); OpenVINO
GenAI multiplies by the AdapterConfig alpha and reads no adapter_config.json, so alpha carries
PEFT's scale (measured: alpha 1 halved the effect of an r=8, lora_alpha=16 adapter)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
SEPARATOR = ":"  # OpenAI model id: "<served model>:<adapter name>"
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class LoraError(ValueError):
    pass


@dataclass(frozen=True)
class LoraAdapter:
    name: str
    task_id: int
    weights: str  # the adapter_model.safetensors file
    alpha: float  # PEFT's scale: lora_alpha / r


def discover(lora_dir: Path) -> list[LoraAdapter]:
    """Every PEFT adapter under `lora_dir`, in name order; LoraError naming what is wrong."""
    if not lora_dir.is_dir():
        raise LoraError(f"'lora_dir' {lora_dir} is not a directory")
    adapters = [
        read_adapter(sub, task_id)
        for task_id, sub in enumerate(sorted(p for p in lora_dir.iterdir() if p.is_dir()), start=1)
    ]
    if not adapters:
        raise LoraError(f"'lora_dir' {lora_dir} holds no adapter subdirectory")
    return adapters


def read_adapter(directory: Path, task_id: int) -> LoraAdapter:
    """One PEFT adapter directory; LoraError naming what is wrong."""
    if not _NAME.match(directory.name):
        raise LoraError(f"'lora_dir': adapter name {directory.name!r} must match {_NAME.pattern}")
    config_file, weights = directory / ADAPTER_CONFIG, directory / ADAPTER_WEIGHTS
    if not config_file.is_file() or not weights.is_file():
        raise LoraError(f"'lora_dir': {directory} needs {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS} (a PEFT adapter)")
    config = json.loads(config_file.read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise LoraError(f"'lora_dir': {directory.name} is a {config['peft_type']} adapter; only LORA is served")
    r, lora_alpha = int(config["r"]), float(config.get("lora_alpha", config["r"]))
    scale = lora_alpha / (math.sqrt(r) if config.get("use_rslora") else r)
    return LoraAdapter(directory.name, task_id, str(weights.resolve()), scale)


def request_problems(task_id: int, served: dict[int, str]) -> list[str]:
    """An unknown `lora_task_id` (0 is the base model), naming the served ones."""
    if task_id == 0 or task_id in served:
        return []
    listing = ", ".join(f"{i} ({name})" for i, name in sorted(served.items())) or "none"
    return [f"'lora_task_id' {task_id} is not a served LoRA adapter; served: {listing}; 0 is the base model"]


def to_parameter(adapters: list[LoraAdapter]) -> str:
    return json.dumps([asdict(a) for a in adapters])


def from_parameter(value: str) -> list[LoraAdapter]:
    return [LoraAdapter(**a) for a in json.loads(value)] if value else []


def served_to_parameter(served: dict[str, int]) -> str:
    """Adapter name -> lora_task_id, as preprocessing's `lora_adapters` parameter."""
    return json.dumps(served) if served else ""


def served_from_parameter(value: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in json.loads(value).items()} if value else {}
