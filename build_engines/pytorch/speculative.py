"""Speculative decoding on the PyTorch backend (`--backend tensorrt_llm_pytorch`): the LLM API's
`speculative_config` (TorchLlmArgs), rendered as the `extra_llm_api_options` YAML mapping.

Modes, as TensorRT-LLM's llm_args.py declares them (decoding_type of each config class):
- ``ngram``: NGramDecodingConfig (prompt lookup: drafts copied from earlier n-grams; no second model);
- ``draft_target``: DraftTargetDecodingConfig (a smaller draft model sharing the target's tokenizer);
- ``eagle3``: EagleDecodingConfig with an Eagle3 heads checkpoint (speculative_model_dir).

Every fact relied on is in SPEC_CITATIONS with where it was read.  None was read at the pinned
tag v1.2.1 (the index holds llm_args.py only at commits of unidentified version), so every
citation is confirmed=False; the field names are the ones common to the versions read.
Nothing here ran on a GPU.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.upstream.citation import Citation, Source

if TYPE_CHECKING:
    from build_engines.checkpoint import CheckpointInfo


class PyTorchSpecMode(str, enum.Enum):
    NONE = "none"
    NGRAM = "ngram"
    DRAFT_TARGET = "draft_target"
    EAGLE3 = "eagle3"


# decoding_type of each mode's config class (the key DecodingBaseConfig.from_dict dispatches on).
DECODING_TYPE = {
    PyTorchSpecMode.NGRAM: "NGram",
    PyTorchSpecMode.DRAFT_TARGET: "Draft_Target",
    PyTorchSpecMode.EAGLE3: "Eagle",
}
# The tensorrt_llm.llmapi class of each decoding_type (the serving model builds it by name).
CONFIG_CLASS = {
    "NGram": "NGramDecodingConfig",
    "Draft_Target": "DraftTargetDecodingConfig",
    "Eagle": "EagleDecodingConfig",
}
NGRAM_DEFAULT_MATCHING = 2  # NGramDecodingConfig.max_matching_ngram_size default (newest commit read)
MAX_DRAFT_LEN_LIMIT = 32  # our own ceiling: a longer draft only wastes verification compute

_LLM_ARGS = Source(
    "NVIDIA/TensorRT-LLM", "v1.2.1", "tensorrt_llm/llmapi/llm_args.py", "fcd3f31682808ae56118ae43c1d7864a3a945e6f"
)
_NOT_AT_TAG = (
    "read through the text index at commits of unidentified version (the llmapi table's llm_args_py "
    "source); not stored at v1.2.1; lines not computed"
)
_EXAMPLES = Source("NVIDIA/TensorRT-LLM", "v1.2.1", "docs/source/features/speculative-decoding.md", "")
SPEC_CITATIONS = {
    "NGramDecodingConfig: decoding_type 'NGram', max_draft_len, max_matching_ngram_size (PositiveInt, default 2), "
    "is_keep_all / is_use_oldest / is_public_pool (default True)": Citation(_LLM_ARGS, "", False, _NOT_AT_TAG),
    "DraftTargetDecodingConfig: decoding_type 'Draft_Target', max_draft_len, speculative_model_dir (the draft "
    "model)": Citation(_LLM_ARGS, "", False, _NOT_AT_TAG),
    "EagleDecodingConfig: decoding_type 'Eagle', max_draft_len, speculative_model_dir (Eagle3 heads), "
    "eagle3_one_model (default True)": Citation(_LLM_ARGS, "", False, _NOT_AT_TAG),
    "speculative_config is a TorchLlmArgs field given in extra_llm_api_options YAML": Citation(
        _EXAMPLES, "", False, "documented upstream for trtllm-serve; not read at v1.2.1"
    ),
    "a draft model must share the target's tokenizer (draft tokens are verified id for id)": Citation(
        _EXAMPLES, "", False, "stated upstream for draft/target; not read at v1.2.1"
    ),
}


@dataclass(frozen=True)
class PyTorchSpeculative:
    mode: PyTorchSpecMode = PyTorchSpecMode.NONE
    max_draft_len: int = 4
    max_matching_ngram_size: int = NGRAM_DEFAULT_MATCHING  # ngram only
    model_dir: str = ""  # draft_target: the draft checkpoint; eagle3: the Eagle3 heads checkpoint
    eagle3_one_model: bool = True  # eagle3 only

    def problems(self, info: "CheckpointInfo | None" = None) -> list[str]:
        m = self.mode
        if m == PyTorchSpecMode.NONE:
            if self.model_dir:
                return ["'speculative_model_dir' needs 'speculative_decoding' draft_target or eagle3"]
            return []
        errors = []
        if not 1 <= self.max_draft_len <= MAX_DRAFT_LEN_LIMIT:
            errors.append(
                f"'max_draft_len' must be in [1, {MAX_DRAFT_LEN_LIMIT}] for speculative_decoding "
                f"{m.value}, got {self.max_draft_len}"
            )
        if m == PyTorchSpecMode.NGRAM:
            if self.max_matching_ngram_size < 1:
                errors.append(
                    f"'max_matching_ngram_size' must be >= 1 (PositiveInt), got {self.max_matching_ngram_size}"
                )
            if self.model_dir:
                errors.append(
                    "'speculative_model_dir': ngram drafts from the prompt, it takes no model; "
                    "allowed with draft_target or eagle3"
                )
            return errors
        if self.max_matching_ngram_size != NGRAM_DEFAULT_MATCHING:
            errors.append(f"'max_matching_ngram_size' applies to speculative_decoding ngram only, not {m.value}")
        if not self.model_dir:
            what = (
                "the draft model's Hugging Face checkpoint"
                if m == PyTorchSpecMode.DRAFT_TARGET
                else "the Eagle3 heads checkpoint"
            )
            errors.append(f"'speculative_model_dir' is required for speculative_decoding {m.value}: {what}")
            return errors
        config = Path(self.model_dir) / "config.json"
        if not config.is_file():
            errors.append(f"'speculative_model_dir' {self.model_dir} is not a Hugging Face checkpoint (no config.json)")
        elif info is not None:
            vocab = json.loads(config.read_text()).get("vocab_size")
            if m == PyTorchSpecMode.DRAFT_TARGET and vocab != info.vocab_size:
                errors.append(
                    f"'speculative_model_dir' {self.model_dir}: vocab_size {vocab} differs from the target's "
                    f"{info.vocab_size}; a draft model must share the target's tokenizer"
                )
        return errors

    def llm_api_options(self) -> dict[str, Any]:
        """The extra_llm_api_options mapping (empty without speculative decoding)."""
        if self.mode == PyTorchSpecMode.NONE:
            return {}
        cfg: dict[str, Any] = {"decoding_type": DECODING_TYPE[self.mode], "max_draft_len": self.max_draft_len}
        if self.mode == PyTorchSpecMode.NGRAM:
            cfg.update(
                max_matching_ngram_size=self.max_matching_ngram_size,
                is_keep_all=True,
                is_use_oldest=True,
                is_public_pool=True,
            )
        else:
            cfg["speculative_model_dir"] = self.model_dir
            if self.mode == PyTorchSpecMode.EAGLE3:
                cfg["eagle3_one_model"] = self.eagle3_one_model
        return {"speculative_config": cfg}

    def describe(self) -> str:
        """The plan report line."""
        if self.mode == PyTorchSpecMode.NONE:
            return "speculative decoding: none"
        extra = (
            f", max_matching_ngram_size {self.max_matching_ngram_size}"
            if self.mode == PyTorchSpecMode.NGRAM
            else f", model {self.model_dir}"
        )
        return (
            f"speculative decoding: {self.mode.value} ({DECODING_TYPE[self.mode]}DecodingConfig, max_draft_len "
            f"{self.max_draft_len}{extra}) -> extra_llm_api_options speculative_config"
        )


def speculative_from_dict(data: dict | None) -> PyTorchSpeculative:
    if not data:
        return PyTorchSpeculative()
    d = dict(data)
    d["mode"] = PyTorchSpecMode(d["mode"])
    return PyTorchSpeculative(**d)
