"""The TensorRT engine flow's (`--backend tensorrt_llm`) own build options: their command-line
declarations, the TrtLlmOptions they make together with the options both GPU flows read
(from_options), and what another backend refuses of them: tensorrt_llm_pytorch all of them (it
compiles no engine, so `--backend gpu` takes this flow for any one: build_engines/gpu/path.py),
openvino the EAGLE heads.  The GPU flows' shared options are build_engines/cli_options.py's;
--draft-checkpoint is declared with the CPU engine's and --max-draft-len with the PyTorch
backend's, whose help texts say what they mean here."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import click

from build_engines.option_lists import EXISTING_DIR, Option, declared, enum_option, given_flags
from build_engines.spec_base import EngineBackend, SpecError
from build_engines.trtllm.eagle import parse_choices
from build_engines.trtllm.options import (
    DraftTargetOptions,
    EagleOptions,
    GpuFlowFields,
    GpuServingFields,
    LookaheadConfig,
    SchedulerPolicy,
    SpeculativeDecoding,
    TrtLlmOptions,
    TrtLlmServing,
)

_TRT = TrtLlmOptions()
_SERVING = TrtLlmServing()

OPTIONS: list[Option] = [
    click.option(
        "--paged-context-fmha/--no-paged-context-fmha",
        default=_TRT.use_paged_context_fmha,
        help="[tensorrt_llm] needed for KV-cache reuse and chunked context.",
    ),
    enum_option("--scheduler-policy", default=_SERVING.batch_scheduler_policy),
    click.option("--max-queue-delay-us", type=int, default=_SERVING.max_queue_delay_microseconds),
    enum_option(
        "--speculative-decoding",
        default=SpeculativeDecoding.NONE,
        help="[tensorrt_llm] lookahead_decoding: the engine drafts and verifies its own "
        "n-grams (no draft model); eagle: EAGLE-1 heads (--eagle-model-dir) built "
        "into the engine; draft_tokens_external: a draft model's engine "
        "(--draft-checkpoint, --max-draft-len) and tensorrt_llm_bls's draft loop; "
        "the other upstream modes are not wired.",
    ),
    click.option(
        "--lookahead",
        "lookahead",
        default=None,
        metavar="W,N,G",
        help="[tensorrt_llm lookahead] window, n-gram and verification-set sizes (upstream default 4,3,4); "
        "the engine's --max_draft_len follows from them.",
    ),
    click.option(
        "--eagle-model-dir",
        type=EXISTING_DIR,
        default=None,
        help="[tensorrt_llm eagle] the EAGLE-1 heads checkpoint (Hugging Face Llama format).",
    ),
    click.option(
        "--eagle-tree",
        default=None,
        metavar="MAX_DRAFT_LEN,LAYERS,NON_LEAVES",
        help="[tensorrt_llm eagle] max_draft_len, num_eagle_layers, max_non_leaves_per_layer "
        "(the converter's defaults 63,4,10).",
    ),
    click.option(
        "--eagle-choices",
        default=None,
        metavar="JSON",
        help="[tensorrt_llm eagle] the draft tree, e.g. '[[0],[0,0],[1]]' (its depth = num_eagle_layers); "
        "default: the backend's mc_sim_7b_63.",
    ),
]
_PARAMS = declared(OPTIONS)


def engine_only(options: Mapping[str, Any]) -> list[str]:
    """The flags of this flow's own options that `options` (make_spec keywords) set."""
    return given_flags(_PARAMS, options)


def from_options(
    *,
    gpu_flow: GpuFlowFields,
    gpu_serving: GpuServingFields,
    kv_cache_reuse: bool,
    chunked_context: bool,
    paged_context_fmha: bool,
    scheduler_policy: str,
    max_queue_delay_us: int,
    speculative_decoding: str,
    lookahead: str | None,
    eagle_model_dir: Path | None,
    eagle_tree: str | None,
    eagle_choices: str | None,
    draft_checkpoint: Path | None,
    max_draft_len: int | None,
    **_others: Any,
) -> TrtLlmOptions:
    """The spec's `trtllm` section from the build options (make_spec's keywords) and the fields
    both GPU flows take from the common ones."""
    mode = SpeculativeDecoding(speculative_decoding)
    return TrtLlmOptions(
        **gpu_flow,
        use_paged_context_fmha=paged_context_fmha,
        speculative_decoding=mode,
        lookahead=lookahead_config(lookahead, mode),
        eagle=eagle_options(mode, eagle_model_dir, eagle_tree, eagle_choices),
        draft_target=draft_target_options(mode, draft_checkpoint, max_draft_len),
        serving=TrtLlmServing(
            **gpu_serving,
            enable_kv_cache_reuse=kv_cache_reuse,
            enable_chunked_context=chunked_context,
            batch_scheduler_policy=SchedulerPolicy(scheduler_policy),
            max_queue_delay_microseconds=max_queue_delay_us,
        ),
    )


def refuse_elsewhere(backend: EngineBackend, **options: Any) -> None:
    """What another backend refuses of these options, naming them."""
    if backend == EngineBackend.TENSORRT_LLM_PYTORCH and (given := engine_only(options)):
        raise SpecError(f"{given} configure a compiled engine; --backend tensorrt_llm_pytorch compiles none")
    if backend == EngineBackend.OPENVINO and (
        options["eagle_model_dir"] or options["eagle_tree"] or options["eagle_choices"]
    ):
        raise SpecError("'eagle_model_dir', 'eagle_tree' and 'eagle_choices' configure --backend tensorrt_llm")


def lookahead_config(value: str | None, mode: SpeculativeDecoding) -> LookaheadConfig:
    """`--lookahead W,N,G`, or upstream's defaults; refused without lookahead decoding."""
    if value is None:
        return LookaheadConfig()
    if mode != SpeculativeDecoding.LOOKAHEAD:
        raise SpecError("'lookahead' needs 'speculative_decoding' lookahead_decoding")
    try:
        w, n, g = (int(v) for v in value.split(","))
    except ValueError:
        raise SpecError(
            f"'lookahead' must be three integers W,N,G (window, n-gram, verification set), got {value!r}"
        ) from None
    return LookaheadConfig(window_size=w, ngram_size=n, verification_set_size=g)


def eagle_options(
    mode: SpeculativeDecoding, model_dir: Path | None, tree: str | None, choices: str | None
) -> EagleOptions:
    """`--eagle-model-dir/--eagle-tree/--eagle-choices`, refused without eagle decoding."""
    if mode != SpeculativeDecoding.EAGLE:
        if model_dir is not None or tree is not None or choices is not None:
            raise SpecError("'eagle_model_dir', 'eagle_tree' and 'eagle_choices' need 'speculative_decoding' eagle")
        return EagleOptions()
    try:
        parsed = parse_choices(choices)
    except ValueError as e:
        raise SpecError(str(e)) from None
    options = EagleOptions(heads_dir=str(model_dir.resolve()) if model_dir else "", choices=parsed)
    if not tree:
        return options
    try:
        max_draft_len, layers, non_leaves = (int(v) for v in tree.split(","))
    except ValueError:
        raise SpecError(f"'eagle_tree' must be three integers MAX_DRAFT_LEN,LAYERS,NON_LEAVES, got {tree!r}") from None
    return dataclasses.replace(
        options, max_draft_len=max_draft_len, num_eagle_layers=layers, max_non_leaves_per_layer=non_leaves
    )


def draft_target_options(
    mode: SpeculativeDecoding, draft_checkpoint: Path | None, max_draft_len: int | None
) -> DraftTargetOptions:
    """`--draft-checkpoint/--max-draft-len` on --backend tensorrt_llm, refused without draft_tokens_external."""
    if mode != SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL:
        if draft_checkpoint is not None or max_draft_len is not None:
            raise SpecError(
                "'draft_checkpoint' and 'max_draft_len' on --backend tensorrt_llm need "
                "'speculative_decoding' draft_tokens_external"
            )
        return DraftTargetOptions()
    options = DraftTargetOptions(draft_checkpoint=str(draft_checkpoint.resolve()) if draft_checkpoint else "")
    return options if max_draft_len is None else dataclasses.replace(options, max_draft_len=max_draft_len)
