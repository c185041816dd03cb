"""Which transformers class loads a checkpoint's tokenizer: resolved by AutoTokenizer itself when
the repository is rendered, then imported alone by the preprocessing stub.

AutoTokenizer's own import (transformers 5.5.4: the auto classes pull in the model configurations,
generation, torch._dynamo and sklearn) cost the stub 6.5 CPU-s of each server start and restart
on the default model; the class it picks, imported alone, 2.7 CPU-s (2026-12-03, 2-core EPYC).
The same transformers version with the same files picks the same class, and AutoTokenizer then
calls that class's from_pretrained (its `_from_auto` flag only reaches the Hub's user agent), so
the stub imports the recorded class where its transformers is the version that resolved it, and
asks AutoTokenizer everywhere else (another version, as under a GPU image's packages, or nothing
recorded).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path

from contract.model_configs import PreprocessingParameters

# The files AutoTokenizer reads to pick the class: a change to any of them resolves again.
CHOOSING_FILES = ("tokenizer_config.json", "config.json", "tokenizer.json")


@dataclass(frozen=True)
class TokenizerClass:
    transformers_version: str = ""  # the version that resolved it; "" nothing resolved
    path: str = ""  # module.Class

    @classmethod
    def recorded_in(cls, params: PreprocessingParameters) -> TokenizerClass:
        return cls(params.tokenizer_class_transformers, params.tokenizer_class)

    @property
    def known(self) -> bool:
        return bool(self.transformers_version and self.path)


def resolve(directory: Path) -> TokenizerClass:
    """AutoTokenizer's class for `directory`; none where it loads no tokenizer there (no such files
    at render time, as for a path inside a container; the stub's AutoTokenizer then says why) or
    picks one outside transformers (remote code)."""
    stamps = tuple((directory / f).stat().st_mtime_ns if (directory / f).exists() else 0 for f in CHOOSING_FILES)
    return _resolve(str(directory), stamps)


@functools.lru_cache(maxsize=64)
def _resolve(directory: str, _stamps: tuple[int, ...]) -> TokenizerClass:
    if not Path(directory, "tokenizer_config.json").is_file():
        return TokenizerClass()
    import transformers
    from transformers import AutoTokenizer

    try:
        cls = type(AutoTokenizer.from_pretrained(directory))
    except (OSError, ValueError):  # AutoTokenizer's own refusals: the stub's AutoTokenizer raises them
        return TokenizerClass()
    if not cls.__module__.startswith("transformers."):
        return TokenizerClass()
    return TokenizerClass(transformers.__version__, f"{cls.__module__}.{cls.__qualname__}")


def load_tokenizer(directory: Path, recorded: TokenizerClass = TokenizerClass()):
    """The tokenizer AutoTokenizer would load from `directory`, by the recorded class where this
    transformers is the version that recorded it."""
    import transformers  # a lazy module: this imports none of its classes

    if recorded.known and recorded.transformers_version == transformers.__version__:
        module, _, name = recorded.path.rpartition(".")
        return getattr(importlib.import_module(module), name).from_pretrained(str(directory))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory))
