"""The CPU engine's (`--backend openvino`) build options: their command-line declarations, the
OpenVinoOptions they make (from_options), and what another backend refuses of them.  The options
every backend reads (limits, queue, fidelity) are build_engines/cli_options.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from build_engines.openvino.compress import MODES, SENSITIVITY_METRICS, Int4Recipe
from build_engines.openvino.numerics import NUMERICS_MODES, NumericsMode
from build_engines.openvino.numerics_decisions import DECISION_SOURCES
from build_engines.openvino.options import OpenVinoOptions
from build_engines.option_lists import EXISTING_DIR, Option
from build_engines.spec_base import EngineBackend, SpecError
from contract.model_configs import ACTIVATION_PRECISIONS, KV_CACHE_PRECISIONS

_OV = OpenVinoOptions()
_INT4 = Int4Recipe()


def _int4_option(field: str, **declaration: Any) -> Option:
    """--int4-FIELD (an on/off pair for a yes-or-no field): the int4 recipe's field, its default the recipe's."""
    flag = "int4-" + field.replace("_", "-")
    default = getattr(_INT4, field)
    flags = f"--{flag}/--no-{flag}" if isinstance(default, bool) else f"--{flag}"
    return click.option(flags, default=default, **declaration)


OPTIONS: list[Option] = [
    click.option(
        "--kv-cache-size-gb",
        type=int,
        default=0,
        help="[openvino] fixed KV-cache pool in GB; 0: grows on demand (memory follows the load).",
    ),
    click.option(
        "--prefix-caching/--no-prefix-caching",
        default=_OV.enable_prefix_caching,
        help="[openvino] reuse the KV cache of shared prompt prefixes",
    ),
    click.option("--inference-threads", type=int, default=0, help="[openvino] 0 = all cores."),
    click.option(
        "--stream-interval",
        type=int,
        default=_OV.stream_interval,
        help="[openvino] tokens per streamed response after the first; 0 = by batch size (1/2/4).",
    ),
    # numerics (docs/precision.md, "Numerics")
    click.option(
        "--numerics",
        type=click.Choice(NUMERICS_MODES),
        default=None,
        help="[openvino] fast (default): the fastest setting the build measures within the precision's "
        "fidelity gate; exact: f32 activations and KV cache, no dynamic quantization (greedy answers "
        "independent of batching, the prefix cache and speculative decoding); custom: the "
        "--activation-precision / --dynamic-quantization-group-size given (implied by either).  A fast "
        "build's engine also serves exact without a rebuild; `plan` shows the measured table.",
    ),
    click.option(
        "--numerics-decision",
        type=click.Choice(DECISION_SOURCES),
        default=_OV.numerics_decision,
        help="[openvino] where fast's choice comes from: auto, a decision recorded for this kind of host "
        "(CPU instruction set, cores), model, precision and engine version when one matches (the build "
        "still measures its fidelity here), else the whole speed sweep; measure: always the sweep.",
    ),
    click.option(
        "--activation-precision",
        type=click.Choice(ACTIVATION_PRECISIONS),
        default=None,
        help="[openvino] INFERENCE_PRECISION_HINT (numerics custom): f32 is exact on every host; bf16/f16 "
        "are faster where the CPU computes them natively, at a measured KLD cost, "
        "and their greedy answers change with the batch (`plan` says so).",
    ),
    click.option(
        "--kv-cache-precision",
        type=click.Choice(KV_CACHE_PRECISIONS),
        default=None,
        help="[openvino] KV_CACHE_PRECISION (default: the activation precision, unquantized, whose "
        "greedy answers do not change with the batch, the prefix cache or speculative decoding; "
        "u8 takes a quarter of f32's memory, and its answers do change).",
    ),
    click.option(
        "--dynamic-quantization-group-size",
        type=int,
        default=None,
        help="[openvino] (numerics custom) quantize activations to int8 in groups of N before matmuls with "
        "compressed weights (OpenVINO's default on VNNI hosts: 32); 0 = off.  "
        "Greedy answers then change with the batch, the prefix cache and "
        "speculative decoding (measured; `plan` says so).",
    ),
    # speculative decoding: prompt lookup or a draft model (--draft-checkpoint: tensorrt_llm's draft model too)
    click.option(
        "--prompt-lookup/--no-prompt-lookup",
        default=_OV.prompt_lookup,
        help="[openvino] prompt-lookup (n-gram) speculative decoding; greedy answers equal plain "
        "decoding's with the default (unquantized) KV cache (measured); n > 1 and "
        "min_tokens are refused.",
    ),
    click.option(
        "--num-assistant-tokens",
        type=int,
        default=_OV.num_assistant_tokens,
        help="[openvino] prompt lookup / draft model: draft tokens per step (each step computes "
        "1 + this many tokens per request; 2-3 measured best on a 2-core host).",
    ),
    click.option(
        "--max-ngram-size",
        type=int,
        default=_OV.max_ngram_size,
        help="[openvino] prompt lookup: longest n-gram matched in the prompt.",
    ),
    click.option(
        "--draft-checkpoint",
        type=EXISTING_DIR,
        default=None,
        help="[openvino] draft-model speculative decoding: a smaller HF checkpoint with the same tokenizer "
        "(num_assistant_tokens drafts per step); n > 1 is then refused.  [tensorrt_llm "
        "draft_tokens_external] the draft model (a smaller HF Llama checkpoint with the target's "
        "vocabulary), built into <engine>/draft.",
    ),
    click.option(
        "--top-logprobs/--no-top-logprobs",
        "top_logprobs",
        default=_OV.top_logprobs,
        help="[openvino] answer top_logprobs (a second compile of the IR scores those requests' tokens; "
        "off: its memory is saved and top_logprobs refused).",
    ),
    click.option(
        "--fuse-projections/--no-fuse-projections",
        default=_OV.fuse_projections,
        help="[openvino] fuse each layer's q/k/v and gate/up matmuls (exact, faster at one stream; "
        "LoRA adapters of those modules are rewritten for them at render time).",
    ),
    # int4 weights (--precision int4): a field of the recipe each
    _int4_option(
        "group_size", type=int, help="[openvino int4] weights per scale; must divide the hidden and MLP sizes."
    ),
    _int4_option(
        "ratio", type=float, help="[openvino int4] share of layers in int4; the most sensitive rest stays int8."
    ),
    _int4_option("mode", type=click.Choice(MODES)),
    _int4_option("awq"),
    _int4_option("scale_estimation"),
    _int4_option("gptq"),
    _int4_option("sensitivity_metric", type=click.Choice(SENSITIVITY_METRICS)),
    _int4_option(
        "calibration_samples",
        type=int,
        help="[openvino int4] windows of stdlib source text (never the evaluation text).",
    ),
]


def from_options(
    *,
    kv_cache_size_gb: int,
    prefix_caching: bool,
    inference_threads: int,
    max_queue_size: int,
    queue_timeout_s: float,
    stream_interval: int,
    numerics: str | None,
    numerics_decision: str,
    activation_precision: str | None,
    kv_cache_precision: str | None,
    dynamic_quantization_group_size: int | None,
    prompt_lookup: bool,
    num_assistant_tokens: int,
    max_ngram_size: int,
    draft_checkpoint: Path | None,
    top_logprobs: bool,
    fuse_projections: bool,
    int4_mode: str,
    int4_group_size: int,
    int4_ratio: float,
    int4_sensitivity_metric: str,
    int4_awq: bool,
    int4_scale_estimation: bool,
    int4_gptq: bool,
    int4_calibration_samples: int,
    **_others: Any,
) -> OpenVinoOptions:
    """The spec's `openvino` section from the build options (make_spec's keywords)."""
    return OpenVinoOptions(
        kv_cache_size_gb=kv_cache_size_gb,
        enable_prefix_caching=prefix_caching,
        inference_threads=inference_threads,
        max_queue_size=max_queue_size,
        queue_timeout_s=queue_timeout_s,
        stream_interval=stream_interval,
        activation_precision=activation_precision or _OV.activation_precision,
        kv_cache_precision=kv_cache_precision or "",
        dynamic_quantization_group_size=_OV.dynamic_quantization_group_size
        if dynamic_quantization_group_size is None
        else dynamic_quantization_group_size,
        int4=Int4Recipe(
            mode=int4_mode,
            group_size=int4_group_size,
            ratio=int4_ratio,
            sensitivity_metric=int4_sensitivity_metric,
            awq=int4_awq,
            scale_estimation=int4_scale_estimation,
            gptq=int4_gptq,
            calibration_samples=int4_calibration_samples,
        ),
        prompt_lookup=prompt_lookup,
        num_assistant_tokens=num_assistant_tokens,
        max_ngram_size=max_ngram_size,
        draft_checkpoint=str(draft_checkpoint.resolve()) if draft_checkpoint else "",
        top_logprobs=top_logprobs,
        fuse_projections=fuse_projections,
        numerics=numerics_mode(numerics, activation_precision, dynamic_quantization_group_size),
        numerics_decision=numerics_decision,
    )


def refuse_elsewhere(
    backend: EngineBackend,
    *,
    draft_checkpoint: Path | None,
    numerics: str | None,
    activation_precision: str | None,
    dynamic_quantization_group_size: int | None,
    **_others: Any,
) -> None:
    """What another backend refuses of these options: a draft model on tensorrt_llm_pytorch (which
    names its own option), and on any backend a numerics mode that the precisions given contradict."""
    if backend == EngineBackend.TENSORRT_LLM_PYTORCH and draft_checkpoint is not None:
        raise SpecError(
            "'draft_checkpoint' configures --backend openvino or tensorrt_llm; on "
            "tensorrt_llm_pytorch use --pt-speculative-decoding draft_target --speculative-model-dir DIR"
        )
    if backend != EngineBackend.OPENVINO:  # on openvino: from_options
        numerics_mode(numerics, activation_precision, dynamic_quantization_group_size)


def numerics_mode(numerics: str | None, activation_precision: str | None, dq_group_size: int | None) -> str:
    """--numerics, or custom where a precision or group is given by hand (fast otherwise)."""
    hand_set = activation_precision is not None or dq_group_size is not None
    if hand_set and numerics not in (None, NumericsMode.CUSTOM.value):
        raise SpecError(
            f"'numerics' {numerics} chooses the activation precision and dynamic quantization itself: leave out "
            "--activation-precision and --dynamic-quantization-group-size, or use --numerics custom"
        )
    return NumericsMode.CUSTOM.value if hand_set else (numerics or NumericsMode.FAST.value)
