"""Draft-target speculative decoding on the TensorRT-LLM engine flow
(`--speculative-decoding draft_tokens_external`): the target engine is built with
`--speculative_decoding_mode draft_tokens_external --max_draft_len N`, a second, smaller
checkpoint with the same vocabulary is built as a plain engine into <engine>/draft, and the
repository gets a `tensorrt_llm_draft` model beside `tensorrt_llm`.  The loop that asks the
draft for tokens and the target to verify them is the BLS's
(model_repository/engines/relay/draft_target.py), as in NVIDIA's tensorrt_llm_bls.

Every upstream fact is a row of contract/upstream/data/trtllm_build_<version>.json (none
confirmed at the tags): draft_target_support_matrix (FP16 / BF16 / FP8 for draft and target,
paged KV cache, tensor parallelism), draft_target_requirements (paged context FMHA and KV-cache
reuse on; the target's --speculative_decoding_mode and --max_draft_len) and
draft_target_bls_loop (the BLS re-sends the prompt and every token so far to both models, one
prompt, never streamed).  Beam search is not supported with it (upstream's README); the kit
always builds --max_beam_width 1, so there is nothing to refuse.  Our own rules: the draft
shares the target's vocab_size (the target verifies the draft's token ids as they are: row
draft_target_bls_loop), an executor input limit of max_seq_len - 1 (the re-sent sequence grows
to the whole answer: chunked context on, or max_num_tokens >= max_seq_len - 1), and no LoRA (the
draft engine is not built with the adapters).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from build_engines.checkpoint import CheckpointError, CheckpointInfo, inspect_checkpoint
from build_engines.trtllm.options import DraftTargetOptions
from build_engines.trtllm.rules import (
    DRAFT_TARGET_BLS_LOOP,
    DRAFT_TARGET_MATRIX,
    DRAFT_TARGET_REQUIREMENTS,
    EffectiveConfig,
    checkpoint_parallelism_problems,
)
from contract.upstream.trtllm_build import TrtllmBuildTable

if TYPE_CHECKING:
    from build_engines.spec_base import EngineLimits
    from build_engines.trtllm.options import TrtLlmOptions

DRAFT_ENGINE_SUBDIR = "draft"  # the draft engine, inside the target's engine directory
_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp8": "fp8"}  # our precision -> the support matrix's name
_FLAGS = {"use_paged_context_fmha": "--paged-context-fmha", "enable_kv_cache_reuse": "--kv-cache-reuse"}


def read_draft(d: DraftTargetOptions) -> CheckpointInfo:
    """The draft checkpoint's facts (CheckpointError naming 'draft_checkpoint' when it has none)."""
    if not d.draft_checkpoint:
        raise CheckpointError(
            "'draft_checkpoint' is required with speculative_decoding draft_tokens_external "
            "(a smaller Hugging Face Llama checkpoint with the target's vocabulary)"
        )
    try:
        return inspect_checkpoint(Path(d.draft_checkpoint))
    except (CheckpointError, OSError) as e:
        raise CheckpointError(
            f"'draft_checkpoint' {d.draft_checkpoint} must be a Hugging Face Llama checkpoint "
            f"(config.json and *.safetensors / *.bin weights): {e}"
        ) from None


def draft_target_problems(
    table: TrtllmBuildTable,
    o: "TrtLlmOptions",
    precision: str,
    limits: "EngineLimits",
    info: CheckpointInfo | None,
    eff: EffectiveConfig,
) -> list[str]:
    """Every rule a draft-target build breaks, each naming its fields (`eff`: the target's
    effective configuration, whose switches the draft engine shares)."""
    d, errors = o.draft_target, []
    matrix, requirements = (
        table.required_rule(DRAFT_TARGET_MATRIX).params,
        table.required_rule(DRAFT_TARGET_REQUIREMENTS).params,
    )
    try:
        draft = read_draft(d)
    except CheckpointError as e:
        errors.append(str(e))
    else:
        where = f"'draft_checkpoint' {d.draft_checkpoint}"
        if info is not None and draft.vocab_size != info.vocab_size:
            errors.append(
                f"{where}: vocab_size {draft.vocab_size} differs from the target's {info.vocab_size}; the "
                f"target verifies the draft's token ids as they are (row {DRAFT_TARGET_BLS_LOOP}), so the "
                "draft must share its vocabulary"
            )
        if limits.max_seq_len > draft.max_position_embeddings:
            errors.append(
                f"{where}: 'max_seq_len' {limits.max_seq_len} exceeds the draft's max_position_embeddings "
                f"{draft.max_position_embeddings} (the draft engine is built with the target's limits)"
            )
        errors += [f"{where}: {p}" for p in checkpoint_parallelism_problems(table, draft, o.tp_size, o.pp_size)]
    if _DTYPES.get(precision) not in matrix["dtypes"]:
        errors.append(
            f"'precision' {precision!r}: draft-target builds (draft and target) are "
            f"{', '.join(matrix['dtypes'])} (row {DRAFT_TARGET_MATRIX}); use fp16, bf16 or fp8"
        )
    for setting in requirements["requires"]:
        if not getattr(eff, setting):
            override = eff.override(setting)
            why = f" (upstream turns it off: {override.rule.describe()})" if override else f" ({_FLAGS[setting]})"
            errors.append(
                f"'{setting}' must be on with speculative_decoding draft_tokens_external: the draft loop "
                f"reuses the KV cache of the re-sent sequence (row {DRAFT_TARGET_REQUIREMENTS}){why}"
            )
    if d.max_draft_len < 1:
        errors.append(f"'max_draft_len' {d.max_draft_len} must be >= 1 (the target's --max_draft_len)")
    if not eff.enable_chunked_context and limits.max_num_tokens < limits.max_seq_len - 1:
        # The executor's input limit is max_seq_len - 1 with chunked context, else
        # min(max_seq_len - 1, max_num_tokens) (backend semantics row limit.max_input_len).
        errors.append(
            f"'max_num_tokens' {limits.max_num_tokens} must be >= 'max_seq_len' - 1 = "
            f"{limits.max_seq_len - 1} with speculative_decoding draft_tokens_external and chunked context "
            "off: the BLS's draft loop re-sends the prompt and every token so far as the input_ids of each "
            f"draft and target call (row {DRAFT_TARGET_BLS_LOOP}), which the executor refuses past that "
            "(backend semantics row limit.max_input_len); turn chunked context on or raise max_num_tokens"
        )
    if o.lora.enabled:
        errors.append(
            "'lora' adapters with speculative_decoding draft_tokens_external: the draft engine is built "
            "without them, so the draft loop cannot serve an adapter; build one or the other"
        )
    return errors
