"""LoRA adapters on the TensorRT-LLM engine flow: the engine is built with the LoRA plugin for
the modules and rank the adapters need, each PEFT adapter is converted to TensorRT-LLM's
tensors into a prefetch directory named by task id, and the `tensorrt_llm` model loads them
at start (so requests send only `lora_task_id`).

Upstream facts this relies on (none confirmed at the pinned tags):
- trtllm-build's --lora_plugin, --lora_target_modules, --max_lora_rank (conformance table
  contract/upstream/data/trtllm_build_<version>.json; tensorrtllm_backend docs/lora.md,
  read at 05ceae03, builds with `--lora_plugin float16 --lora_target_modules attn_q attn_k
  attn_v --max_lora_rank 8`).
- examples/hf_lora_convert.py (NVIDIA/TensorRT-LLM, read at 05316d33): `-i <adapter dir>
  -o <out dir> --storage-type float32|float16|bfloat16` writes model.lora_weights.npy and
  model.lora_config.npy, folding PEFT's lora_alpha / r (lora_alpha / sqrt(r) with
  use_rslora) into the weights; its module names for Llama are HF_TO_TRTLLM below.  Those
  files are in the engine's dtype, and the backend's .npy loader cannot read bfloat16 ones
  (row lora.prefetch_dtypes): convert_argv refuses LoRA on bfloat16 engines.
- The backend's lora_prefetch_dir (model_instance_state.cc getPeftCacheConfigFromParams, read
  at c8c6df08; docs/lora.md): every subdirectory, named by its task id digits, holding those
  two files, is loaded into the LoRA cache when the model instance starts.  Cache pages:
  lora_cache_optimal_adapter_size (default 8) and lora_cache_max_adapter_size (default 64),
  which must hold the largest rank.

Task ids are ours (contract/lora.py: the adapters in name order from 1; 0 is the base model,
which the relays never send to TensorRT-LLM, where 0 would be a task id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from contract import lora
from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics

# hf_lora_convert.py hf_modules_to_trtllm_modules, the Llama entries (row lora.tensor_layout,
# the same in every supported version's table).
HF_TO_TRTLLM = {
    m["hf"].rsplit(".", 1)[-1]: m["trtllm"]
    for m in backend_semantics(SUPPORTED_VERSIONS[-1]).rule("lora.tensor_layout").extra["modules"]
}
CONVERT_SCRIPT = "hf_lora_convert.py"
PREFETCH_SUBDIR = "lora"  # <engine>/lora/<task id>/model.lora_{weights,config}.npy
DEFAULT_MAX_ADAPTER_SIZE = 64  # lora_cache_max_adapter_size's default (getPeftCacheConfigFromParams)


@dataclass(frozen=True)
class TrtLlmLora:
    """What the engine is built for: the adapters (their directory and names, in task-id
    order), the union of their target modules (TensorRT-LLM names) and their largest rank."""

    source_dir: str = ""
    adapters: tuple[str, ...] = ()
    target_modules: tuple[str, ...] = ()
    max_rank: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.adapters)

    @classmethod
    def from_dict(cls, data: dict) -> "TrtLlmLora":
        return cls(
            data.get("source_dir", ""),
            tuple(data.get("adapters", ())),
            tuple(data.get("target_modules", ())),
            int(data.get("max_rank", 0)),
        )


def lora_options(lora_dir: Path) -> TrtLlmLora:
    """The adapters under `lora_dir` (contract/lora.py discover) as what the engine needs;
    lora.LoraError naming a module TensorRT-LLM's converter does not map."""
    adapters = lora.discover(lora_dir)
    modules: set[str] = set()
    ranks = []
    for adapter in adapters:
        config = json.loads((Path(adapter.weights).parent / lora.ADAPTER_CONFIG).read_text())
        targets = config.get("target_modules") or []
        targets = [targets] if isinstance(targets, str) else list(targets)
        unknown = sorted(t for t in targets if t not in HF_TO_TRTLLM)
        if unknown or not targets:
            raise lora.LoraError(
                f"'lora_dir': adapter {adapter.name} targets {unknown or 'no modules'}; TensorRT-LLM's "
                f"converter maps {sorted(HF_TO_TRTLLM)}"
            )
        modules.update(HF_TO_TRTLLM[t] for t in targets)
        ranks.append(int(config["r"]))
    return TrtLlmLora(
        source_dir=str(lora_dir.resolve()),
        adapters=tuple(a.name for a in adapters),
        target_modules=tuple(sorted(modules)),
        max_rank=max(ranks),
    )


def build_flags(options: TrtLlmLora) -> tuple[str, ...]:
    """trtllm-build's LoRA flags (the plugin's dtype `auto`: the model's)."""
    return (
        "--lora_plugin",
        "auto",
        "--lora_target_modules",
        *options.target_modules,
        "--max_lora_rank",
        str(options.max_rank),
    )


def convert_argv(
    options: TrtLlmLora, examples_dir: Path, engine_dir: Path, dtype: str, version: str
) -> list[tuple[str, ...]]:
    """One hf_lora_convert.py run per adapter, into <engine>/lora/<task id>, stored in the
    engine's dtype; lora.LoraError when TensorRT-LLM `version` could not prefetch that dtype
    (row lora.prefetch_dtypes: its .npy loader knows no bfloat16, and a task must have the
    engine's dtype; read in upstream's source, not run on a GPU)."""
    allowed = backend_semantics(version).rule("lora.prefetch_dtypes").extra["prefetchable_model_dtypes"]
    if options.enabled and dtype not in allowed:
        raise lora.LoraError(
            f"'lora_dir': TensorRT-LLM {version} prefetches LoRA adapters from .npy files in the "
            f"engine's dtype, {dtype} here, which its loader cannot read (row lora.prefetch_dtypes); "
            f"it can for {' or '.join(allowed)} engines: build with --precision fp16"
        )
    source = Path(options.source_dir)
    return [
        (
            "python3",
            str(examples_dir / CONVERT_SCRIPT),
            "-i",
            str(source / name),
            "-o",
            str(engine_dir / PREFETCH_SUBDIR / str(task_id)),
            "--storage-type",
            dtype,
        )
        for task_id, name in enumerate(options.adapters, start=1)
    ]


def cache_parameters(options: TrtLlmLora, engine_dir: Path) -> dict[str, str]:
    """The tensorrt_llm model's LoRA parameters; none without adapters (an empty
    lora_prefetch_dir would still be read as a directory upstream)."""
    if not options.enabled:
        return {}
    return {
        "lora_prefetch_dir": str(engine_dir / PREFETCH_SUBDIR),
        "lora_cache_optimal_adapter_size": str(options.max_rank),
        "lora_cache_max_adapter_size": str(max(DEFAULT_MAX_ADAPTER_SIZE, options.max_rank)),
    }


def served(options: TrtLlmLora) -> dict[str, int]:
    """Adapter name -> lora_task_id (what preprocessing checks and the OpenAI front lists)."""
    return {name: task_id for task_id, name in enumerate(options.adapters, start=1)}
