"""EAGLE speculative decoding on the TensorRT-LLM engine flow (`--speculative-decoding eagle`):
the base checkpoint and an EAGLE-1 heads checkpoint are converted together by TensorRT-LLM's
examples/eagle/convert_checkpoint.py, trtllm-build compiles one engine with
`--speculative_decoding_mode eagle`, and the `tensorrt_llm` model may name a choices tree.

Every fact is a row of contract/upstream/data/trtllm_build_<version>.json (none confirmed at
the tags): the converter's flags (tool convert_eagle), eagle_support_matrix (FP16/BF16 only,
no pipeline parallelism), eagle_builder_limits (max_batch_size <= 512, max_draft_len <= 256,
paged context FMHA forced on), eagle_choices_tree and eagle_choices_parameter (the tree's
shape, and the braces format csvStrToVecVecInt parses).  EAGLE-2's dynamic tree has no
Triton parameter in these versions, and EAGLE-3 heads are the PyTorch backend's
(build_engines/pytorch/speculative.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from build_engines.trtllm.options import EagleOptions
from build_engines.trtllm.rules import EAGLE_LIMITS, EAGLE_MATRIX
from contract.upstream.trtllm_build import TrtllmBuildTable

CONVERT_SCRIPT = Path("eagle/convert_checkpoint.py")
TOOL = "convert_eagle"
_WEIGHTS = ("*.safetensors", "*.bin", "*.pth")  # ModelWeightsLoader.detect_format


def parse_choices(text: str | None) -> tuple[tuple[int, ...], ...]:
    """`--eagle-choices '[[0], [0, 0], [1]]'` (JSON); ValueError naming the field."""
    if not text:
        return ()
    try:
        value = json.loads(text)
        return tuple(tuple(int(i) for i in path) for path in value)
    except (ValueError, TypeError):
        raise ValueError(f"'eagle_choices' must be a JSON list of lists of integers, got {text!r}") from None


def choices_parameter(choices: tuple[tuple[int, ...], ...]) -> str:
    """The tree as the backend's eagle_choices parameter reads it (row eagle_choices_parameter)."""
    return ", ".join("{" + ", ".join(str(i) for i in path) + "}" for path in choices)


def tree_problems(e: EagleOptions) -> list[str]:
    """Row eagle_choices_tree: the deepest path is num_eagle_layers deep, no deeper; per level
    at most max_non_leaves_per_layer nodes have children."""
    if not e.choices:
        return []
    if any(not path or min(path) < 0 for path in e.choices):
        return ["'eagle_choices': every path must be a non-empty list of integers >= 0"]
    errors = []
    depth = max(len(path) for path in e.choices)
    if depth != e.num_eagle_layers:
        errors.append(
            f"'eagle_choices' are {depth} deep; they must be exactly 'num_eagle_layers' {e.num_eagle_layers} deep"
        )
    parents = {path[:-1] for path in e.choices if len(path) > 1}
    per_level = Counter(len(p) for p in parents)
    for level, count in sorted(per_level.items()):
        if count > e.max_non_leaves_per_layer:
            errors.append(
                f"'eagle_choices' have {count} non-leaf nodes at depth {level}; at most "
                f"'max_non_leaves_per_layer' {e.max_non_leaves_per_layer}"
            )
    return errors


def eagle_problems(
    table: TrtllmBuildTable, e: EagleOptions, precision: str, kv_cache_dtype: str, pp_size: int, max_batch_size: int
) -> list[str]:
    """Every upstream rule an EAGLE build breaks, each naming its fields."""
    matrix, limits = table.required_rule(EAGLE_MATRIX).params, table.required_rule(EAGLE_LIMITS).params
    errors = []
    heads = Path(e.heads_dir) if e.heads_dir else None
    if heads is None:
        errors.append("'eagle_model_dir' is required with speculative_decoding eagle (an EAGLE-1 heads checkpoint)")
    elif not (heads / "config.json").is_file() or not any(any(heads.glob(g)) for g in _WEIGHTS):
        errors.append(
            f"'eagle_model_dir' {heads} must be a Hugging Face checkpoint (config.json, read as a "
            "LlamaConfig, and *.safetensors / *.bin / *.pth weights)"
        )
    dtypes = {"fp16": "float16", "bf16": "bfloat16"}
    if dtypes.get(precision) not in matrix["dtypes"]:
        errors.append(
            f"'precision' {precision!r}: EAGLE engines are {' or '.join(matrix['dtypes'])} "
            "(row eagle_support_matrix); use fp16 or bf16"
        )
    if kv_cache_dtype != "auto":
        errors.append(
            f"'kv_cache_dtype' {kv_cache_dtype!r}: EAGLE engines keep the model dtype's KV cache "
            "(row eagle_support_matrix)"
        )
    if pp_size != matrix["pp_size"]:
        errors.append(f"'pp_size' {pp_size}: EAGLE does not support pipeline parallelism (row eagle_support_matrix)")
    if max_batch_size > limits["max_batch_size"]:
        errors.append(
            f"'max_batch_size' {max_batch_size}: EAGLE engines take at most {limits['max_batch_size']} "
            "(row eagle_builder_limits)"
        )
    if not 1 <= e.max_draft_len <= limits["max_draft_len"]:
        errors.append(
            f"'max_draft_len' {e.max_draft_len} must be in [1, {limits['max_draft_len']}] (row eagle_builder_limits)"
        )
    if e.num_eagle_layers < 1 or e.max_non_leaves_per_layer < 1:
        errors.append("'num_eagle_layers' and 'max_non_leaves_per_layer' must be >= 1")
    return errors + tree_problems(e)


def convert_argv(
    e: EagleOptions,
    examples_dir: Path,
    checkpoint: Path,
    output_dir: Path,
    dtype: str,
    tp_size: int,
    pp_size: int,
    workers: int,
) -> tuple[str, ...]:
    """examples/eagle/convert_checkpoint.py: the base model and its heads into one checkpoint."""
    return (
        "python3",
        str(examples_dir / CONVERT_SCRIPT),
        "--model_dir",
        str(checkpoint),
        "--eagle_model_dir",
        e.heads_dir,
        "--output_dir",
        str(output_dir),
        "--dtype",
        dtype,
        "--tp_size",
        str(tp_size),
        "--pp_size",
        str(pp_size),
        "--max_draft_len",
        str(e.max_draft_len),
        "--num_eagle_layers",
        str(e.num_eagle_layers),
        "--max_non_leaves_per_layer",
        str(e.max_non_leaves_per_layer),
        "--workers",
        str(workers),
    )


def serving_parameters(e: EagleOptions) -> dict[str, str]:
    """decoding_mode eagle (the backend would also detect it from the engine) and the tree, when given."""
    return {"decoding_mode": "eagle", **({"eagle_choices": choices_parameter(e.choices)} if e.choices else {})}
