"""Read a Hugging Face checkpoint directory: architecture facts, sizes, content hash."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

LLAMA_FAMILY = ("LlamaForCausalLM", "MistralForCausalLM")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# What the tokenizer and the generation defaults need; copied into every engine dir so the
# engine dir alone serves (the model repository depends on nothing else).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
    "config.json",
    "tokenizer.model",
)


class CheckpointError(ValueError):
    pass


@dataclass(frozen=True)
class CheckpointInfo:
    path: str
    architecture: str
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    dtype: str
    tie_word_embeddings: bool

    @property
    def num_parameters(self) -> int:
        """Parameter count of a Llama decoder (no biases), from the shapes alone."""
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        q = self.num_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h
        embeddings = v * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + embeddings + h

    def kv_cache_bytes_per_token(self, bytes_per_element: float) -> float:
        """K and V for every layer: 2 * layers * kv_heads * head_dim * element size."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_element

    def to_dict(self) -> dict:
        return asdict(self) | {"num_parameters": self.num_parameters}


def inspect_checkpoint(path: Path) -> CheckpointInfo:
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{path} is not a Hugging Face checkpoint: config.json is missing")
    config = json.loads(config_path.read_text())
    archs = config.get("architectures") or []
    arch = archs[0] if archs else config.get("model_type", "?")
    if arch not in LLAMA_FAMILY:
        raise CheckpointError(
            f"{path}: architecture {arch!r} is not a Llama-family model; supported: {list(LLAMA_FAMILY)}"
        )
    try:
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        info = CheckpointInfo(
            path=str(path.resolve()),
            architecture=arch,
            num_layers=int(config["num_hidden_layers"]),
            hidden_size=hidden,
            intermediate_size=int(config["intermediate_size"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            vocab_size=int(config["vocab_size"]),
            max_position_embeddings=int(config.get("max_position_embeddings", 2048)),
            dtype=str(config.get("torch_dtype") or config.get("dtype") or "float32"),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        )
    except KeyError as e:
        raise CheckpointError(f"{config_path}: missing field {e.args[0]!r}") from None
    if info.num_heads % info.num_kv_heads:
        raise CheckpointError(
            f"{config_path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {info.num_kv_heads}"
        )
    if not any(p.suffix in WEIGHT_SUFFIXES for p in path.iterdir()):
        raise CheckpointError(f"{path}: no weight files (*.safetensors or *.bin)")
    return info


def copy_tokenizer_files(checkpoint: Path, engine_dir: Path) -> list[str]:
    copied = []
    for name in TOKENIZER_FILES:
        if (checkpoint / name).is_file():
            shutil.copyfile(checkpoint / name, engine_dir / name)
            copied.append(name)
    if "tokenizer.json" not in copied and "tokenizer.model" not in copied:
        raise CheckpointError(f"{checkpoint}: no tokenizer.json or tokenizer.model")
    return copied


def checkpoint_weight_bytes(info: CheckpointInfo) -> int:
    return info.num_parameters * _DTYPE_BYTES.get(info.dtype, 2)


def checkpoint_hash(path: Path) -> str:
    """sha256 over config.json, tokenizer files and weights, in name order."""
    digest = hashlib.sha256()
    names = sorted(p.name for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    for name in names:
        digest.update(name.encode() + b"\0")
        with open(path / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()
