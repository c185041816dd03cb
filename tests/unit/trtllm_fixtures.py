"""A Llama-3.1-8B-shaped checkpoint directory (config.json + an empty weights file) and
TensorRT-LLM specs for it: enough for spec, plan and repository tests, no weights."""

from __future__ import annotations

import json
from pathlib import Path

from build_engines.checkpoint import inspect_checkpoint
from build_engines.gpus import known_gpu
from build_engines.spec import BuildSpec, EngineBackend, Precision
from build_engines.trtllm_spec import TrtLlmOptions

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def llama_8b_checkpoint(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(LLAMA_8B))
    (directory / "model.safetensors").write_bytes(b"")
    return directory


def trtllm_spec(checkpoint: Path, precision: Precision = Precision.FP16, gpu_name: str = "H100-SXM",
                **options) -> BuildSpec:
    world = options.get("tp_size", 1) * options.get("pp_size", 1)
    options.setdefault("gpu", known_gpu(gpu_name, world))
    return BuildSpec(checkpoint, backend=EngineBackend.TENSORRT_LLM, precision=precision, trtllm=TrtLlmOptions(**options))


def info_of(checkpoint: Path):
    return inspect_checkpoint(checkpoint)
