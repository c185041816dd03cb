"""A Llama-3.1-8B-shaped checkpoint directory (config.json + an empty weights file) and
TensorRT-LLM specs for it: enough for spec, plan and repository tests, no weights."""

from __future__ import annotations

import json
from pathlib import Path

from build_engines.checkpoint import inspect_checkpoint
from build_engines.gpus import known_gpu
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, EngineLimits, Precision
from build_engines.trtllm.options import TrtLlmOptions
from contract.upstream.trtllm_build import load_build_table

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


# 24 attention heads over 3 KV heads: TP 6 duplicates each KV head on 2 GPUs.
LLAMA_3_KV_HEADS = LLAMA_8B | {"hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 24,
                               "num_hidden_layers": 28, "num_key_value_heads": 3, "tie_word_embeddings": True}


def llama_8b_checkpoint(directory: Path, config: dict = LLAMA_8B) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "model.safetensors").write_bytes(b"")
    return directory


def trtllm_spec(checkpoint: Path, precision: Precision = Precision.FP16, gpu_name: str = "H100-SXM",
                limits: EngineLimits | None = None, version: str | None = None, **options) -> BuildSpec:
    """A TensorRT-LLM spec; `version` picks the TensorRT-LLM version (and its newest image),
    else the configured default applies (.env)."""
    world = options.get("tp_size", 1) * options.get("pp_size", 1)
    options.setdefault("gpu", known_gpu(gpu_name, world))
    if version is not None:
        options |= {"trtllm_version": version, "triton_release": load_build_table(version).newest_image.release}
    return BuildSpec(checkpoint, backend=EngineBackend.TENSORRT_LLM, precision=precision,
                     limits=limits or EngineLimits(), trtllm=TrtLlmOptions(**options))


def info_of(checkpoint: Path):
    return inspect_checkpoint(checkpoint)


def write_default_tokenizer(directory: Path) -> Path:
    """The default model's tokenizer files (read from the embedded GGUF, no weights) and a
    config.json naming its vocabulary: what an engine's tokenizer folder holds, for rendering
    (the xgrammar tokenizer info of guided decoding is made from it)."""
    from build_engines.default_model import _write_generation_config, locate_default_gguf
    from build_engines.gguf_tokenizer import read_gguf_tokenizer, save_hf_tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    spec = read_gguf_tokenizer(locate_default_gguf())
    save_hf_tokenizer(spec, directory)
    _write_generation_config(directory, eos_id=spec.eos_id, bos_id=spec.bos_id, pad_id=spec.pad_id)
    (directory / "config.json").write_text(json.dumps({"vocab_size": len(spec.tokens)}))
    return directory
