"""The build spec's command-line options (shared by `plan` and `build`) and their
translation into one typed BuildSpec."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from build_engines.fidelity.options import EVALUATIONS, FidelityOptions
from build_engines.gpus import DEFAULT_GPU, GpuError, GpuTarget, detect_gpus, known_gpu
from build_engines.openvino.compress import MODES, SENSITIVITY_METRICS, Int4Recipe
from build_engines.openvino.numerics import NUMERICS_MODES, NumericsMode
from build_engines.openvino.numerics_decisions import DECISION_SOURCES
from build_engines.openvino.options import OpenVinoOptions
from build_engines.pytorch.speculative import PyTorchSpecMode, PyTorchSpeculative
from build_engines.spec import BuildSpec
from build_engines.spec_base import DEFAULT_PRECISION, EngineBackend, EngineLimits, Precision, SpecError
from build_engines.trtllm.eagle import parse_choices
from build_engines.trtllm.options import (
    DraftTargetOptions,
    EagleOptions,
    GuidedDecodingBackend,
    KvCacheDtype,
    LookaheadConfig,
    SchedulerPolicy,
    SpeculativeDecoding,
    TrtLlmOptions,
    TrtLlmServing,
)
from build_engines.trtllm.versions import TrtllmTargetError, resolve_target
from contract.model_configs import ACTIVATION_PRECISIONS, KV_CACHE_PRECISIONS
from contract.upstream.trtllm_build import supported_versions

_LIMITS = EngineLimits()
_OV = OpenVinoOptions()
_TRT = TrtLlmOptions()
_SERVING = TrtLlmServing()
_INT4 = Int4Recipe()


_SIZED = "A value given here always wins (build_engines/gpu/limits.py)."


def _choice(enum_cls) -> click.Choice:
    return click.Choice([m.value for m in enum_cls])


_OPTIONS = [
    click.option(
        "--checkpoint",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="HF Llama checkpoint dir (default: the embedded SmolLM2-135M-Instruct).",
    ),
    click.option(
        "--backend",
        type=click.Choice([m.value for m in EngineBackend] + ["gpu"]),
        default=EngineBackend.OPENVINO.value,
        show_default=True,
        help="gpu: TensorRT-LLM's PyTorch backend where the target image has it (the recommended path), "
        "else its engine flow (build_engines/gpu/path.py).",
    ),
    click.option(
        "--precision",
        type=_choice(Precision),
        default=None,
        help="openvino: int8 (default) | int4 | fp16; tensorrt_llm: fp16 (default) | bf16 | fp8 | int8_sq | "
        "int8_wo | int4_awq; tensorrt_llm_pytorch: auto (default: the checkpoint as it is) | fp16 | "
        "bf16 | fp8 | int4_awq | nvfp4 (ModelOpt)",
    ),
    click.option(
        "--max-batch-size",
        type=int,
        default=None,
        help=f"Requests in flight.  Default: openvino {_LIMITS.max_batch_size}; the GPU flows size it for the "
        "GPU (`plan` says why).  " + _SIZED,
    ),
    click.option(
        "--max-input-len",
        type=int,
        default=None,
        help=f"Prompt tokens.  Default: openvino {_LIMITS.max_input_len}; GPU: the longest prompt the engine "
        "takes.  " + _SIZED,
    ),
    click.option(
        "--max-seq-len",
        type=int,
        default=None,
        help=f"Prompt + generated tokens.  Default: openvino {_LIMITS.max_seq_len}; GPU: the model's "
        "context (within the KV cache).  " + _SIZED,
    ),
    click.option(
        "--max-num-tokens",
        type=int,
        default=None,
        help=f"Tokens per engine step (prefill chunk + decodes).  Default: openvino {_LIMITS.max_num_tokens}; "
        "GPU: upstream's default or trtllm-bench's.  " + _SIZED,
    ),
    click.option("--default-max-tokens", type=int, default=_LIMITS.default_max_tokens, show_default=True),
    # CPU engine
    click.option(
        "--kv-cache-size-gb",
        type=int,
        default=0,
        show_default=True,
        help="[openvino] fixed KV-cache pool in GB; 0: grows on demand (memory follows the load).",
    ),
    click.option(
        "--prefix-caching/--no-prefix-caching",
        default=_OV.enable_prefix_caching,
        show_default=True,
        help="[openvino] reuse the KV cache of shared prompt prefixes",
    ),
    click.option("--inference-threads", type=int, default=0, show_default=True, help="[openvino] 0 = all cores."),
    click.option(
        "--max-queue-size",
        type=int,
        default=_OV.max_queue_size,
        show_default=True,
        help="Requests waiting beyond the running batch; more are refused (UNAVAILABLE).",
    ),
    click.option(
        "--queue-timeout",
        "queue_timeout_s",
        type=float,
        default=_OV.queue_timeout_s,
        show_default=True,
        help="Fail a request with no first token after this many seconds (UNAVAILABLE; 0 = never).",
    ),
    click.option(
        "--stream-interval",
        type=int,
        default=_OV.stream_interval,
        show_default=True,
        help="[openvino] tokens per streamed response after the first; 0 = by batch size (1/2/4).",
    ),
    # CPU engine numerics (docs/precision.md, "Numerics")
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
        show_default=True,
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
    click.option(
        "--prompt-lookup/--no-prompt-lookup",
        default=_OV.prompt_lookup,
        show_default=True,
        help="[openvino] prompt-lookup (n-gram) speculative decoding; greedy answers equal plain "
        "decoding's with the default (unquantized) KV cache (measured); n > 1 and "
        "min_tokens are refused.",
    ),
    click.option(
        "--num-assistant-tokens",
        type=int,
        default=_OV.num_assistant_tokens,
        show_default=True,
        help="[openvino] prompt lookup / draft model: draft tokens per step (each step computes "
        "1 + this many tokens per request; 2-3 measured best on a 2-core host).",
    ),
    click.option(
        "--max-ngram-size",
        type=int,
        default=_OV.max_ngram_size,
        show_default=True,
        help="[openvino] prompt lookup: longest n-gram matched in the prompt.",
    ),
    click.option(
        "--draft-checkpoint",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
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
        show_default=True,
        help="[openvino] answer top_logprobs (a second compile of the IR scores those requests' tokens; "
        "off: its memory is saved and top_logprobs refused).",
    ),
    click.option(
        "--fuse-projections/--no-fuse-projections",
        default=_OV.fuse_projections,
        show_default=True,
        help="[openvino] fuse each layer's q/k/v and gate/up matmuls (exact, faster at one stream; "
        "LoRA adapters of those modules are rewritten for them at render time).",
    ),
    click.option(
        "--int4-group-size",
        type=int,
        default=_INT4.group_size,
        show_default=True,
        help="[openvino int4] weights per scale; must divide the hidden and MLP sizes.",
    ),
    click.option(
        "--int4-ratio",
        type=float,
        default=_INT4.ratio,
        show_default=True,
        help="[openvino int4] share of layers in int4; the most sensitive rest stays int8.",
    ),
    click.option("--int4-mode", type=click.Choice(MODES), default=_INT4.mode, show_default=True),
    click.option("--int4-awq/--no-int4-awq", default=_INT4.awq, show_default=True),
    click.option(
        "--int4-scale-estimation/--no-int4-scale-estimation", default=_INT4.scale_estimation, show_default=True
    ),
    click.option("--int4-gptq/--no-int4-gptq", default=_INT4.gptq, show_default=True),
    click.option(
        "--int4-sensitivity-metric",
        type=click.Choice(SENSITIVITY_METRICS),
        default=_INT4.sensitivity_metric,
        show_default=True,
    ),
    click.option(
        "--int4-calibration-samples",
        type=int,
        default=_INT4.calibration_samples,
        show_default=True,
        help="[openvino int4] windows of stdlib source text (never the evaluation text).",
    ),
    # Fidelity report and gate
    click.option(
        "--fidelity",
        "fidelity_evaluation",
        type=click.Choice(EVALUATIONS),
        default="quick",
        show_default=True,
        help="Measure the engine against the float32 checkpoint before publishing it: quick (every build), "
        "full (the whole measurement), off.",
    ),
    click.option(
        "--gate-max-mean-kld", type=float, default=None, help="Override the precision's gate (mean KLD, nats)."
    ),
    click.option("--gate-max-ppl-change", type=float, default=None, help="Override the gate: max PPL change, percent."),
    click.option("--gate-min-top1", type=float, default=None, help="Override the gate: min same-top-1 share, percent."),
    # TensorRT-LLM
    click.option(
        "--trtllm-version",
        type=click.Choice(supported_versions()),
        default=None,
        help="[tensorrt_llm] the TensorRT-LLM version to build for (its conformance table applies; default: "
        "TRTLLM_VERSION/TRITON_IMAGE of the environment or .env).",
    ),
    click.option(
        "--image",
        "triton_image",
        default=None,
        help="[tensorrt_llm] the Triton release (e.g. 25.12, 26.07) or its -trtllm-python-py3 image; "
        "implies the TensorRT-LLM version it ships.",
    ),
    click.option(
        "--tp",
        "tp_size",
        type=int,
        default=_TRT.tp_size,
        show_default=True,
        help="[tensorrt_llm] tensor parallel size.",
    ),
    click.option(
        "--pp",
        "pp_size",
        type=int,
        default=_TRT.pp_size,
        show_default=True,
        help="[tensorrt_llm] pipeline parallel size.",
    ),
    click.option(
        "--kv-cache-dtype",
        type=_choice(KvCacheDtype),
        default=_TRT.kv_cache_dtype.value,
        show_default=True,
        help="[tensorrt_llm] auto = the model's 16-bit dtype.",
    ),
    click.option(
        "--gpu",
        default=None,
        help=f"[tensorrt_llm] target GPU, e.g. H100-SXM, L40S, A100-80GB "
        f"(default: this host's, else {DEFAULT_GPU} for planning).",
    ),
    click.option("--gpu-count", type=int, default=None, help="[tensorrt_llm] GPUs on the host (default: TP x PP)."),
    click.option(
        "--gpu-sm", type=int, default=None, help="[tensorrt_llm] an unlisted GPU: compute capability x 10 (89)."
    ),
    click.option("--gpu-memory-gib", type=float, default=None, help="[tensorrt_llm] an unlisted GPU: memory per GPU."),
    click.option(
        "--calib-dataset",
        default=None,
        help="[tensorrt_llm] calibration data for fp8/int8_sq/int4_awq/quantized KV: HF dataset name or local dir.",
    ),
    click.option("--calib-size", type=int, default=_TRT.calib_size, show_default=True),
    click.option(
        "--paged-context-fmha/--no-paged-context-fmha",
        default=_TRT.use_paged_context_fmha,
        show_default=True,
        help="[tensorrt_llm] needed for KV-cache reuse and chunked context.",
    ),
    click.option(
        "--kv-cache-fraction",
        type=float,
        default=_SERVING.kv_cache_free_gpu_mem_fraction,
        show_default=True,
        help="[tensorrt_llm] kv_cache_free_gpu_mem_fraction.",
    ),
    click.option("--kv-cache-reuse/--no-kv-cache-reuse", default=_SERVING.enable_kv_cache_reuse, show_default=True),
    click.option("--chunked-context/--no-chunked-context", default=_SERVING.enable_chunked_context, show_default=True),
    click.option(
        "--scheduler-policy",
        type=_choice(SchedulerPolicy),
        default=_SERVING.batch_scheduler_policy.value,
        show_default=True,
    ),
    click.option("--max-queue-delay-us", type=int, default=_SERVING.max_queue_delay_microseconds, show_default=True),
    click.option(
        "--guided-decoding",
        type=_choice(GuidedDecodingBackend),
        default=_SERVING.guided_decoding_backend.value,
        show_default=True,
        help="[tensorrt_llm, tensorrt_llm_pytorch] guided_decoding_backend: structured "
        "output (JSON schema, regex, EBNF grammar) by the executor's xgrammar "
        "decoder; none: refused.",
    ),
    click.option(
        "--speculative-decoding",
        type=_choice(SpeculativeDecoding),
        default=SpeculativeDecoding.NONE.value,
        show_default=True,
        help="[tensorrt_llm] lookahead_decoding: the engine drafts and verifies its own "
        "n-grams (no draft model); eagle: EAGLE-1 heads (--eagle-model-dir) built "
        "into the engine; draft_tokens_external: a draft model's engine "
        "(--draft-checkpoint, --max-draft-len) and tensorrt_llm_bls's draft loop; "
        "the other upstream modes are not wired.",
    ),
    click.option(
        "--eagle-model-dir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
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
    click.option(
        "--lookahead",
        "lookahead",
        default=None,
        metavar="W,N,G",
        help="[tensorrt_llm lookahead] window, n-gram and verification-set sizes (upstream default 4,3,4); "
        "the engine's --max_draft_len follows from them.",
    ),
    click.option(
        "--pt-speculative-decoding",
        type=_choice(PyTorchSpecMode),
        default=PyTorchSpecMode.NONE.value,
        show_default=True,
        help="[tensorrt_llm_pytorch] the LLM API's speculative_config: ngram (prompt "
        "lookup), draft_target (--speculative-model-dir: a draft model with the "
        "target's tokenizer) or eagle3 (--speculative-model-dir: Eagle3 heads).",
    ),
    click.option(
        "--max-draft-len",
        type=int,
        default=None,
        help=f"[tensorrt_llm_pytorch speculative] draft tokens per step (default "
        f"{PyTorchSpeculative().max_draft_len}); [tensorrt_llm draft_tokens_external] the target "
        f"engine's --max_draft_len, the most num_draft_tokens a request may ask for (default "
        f"{DraftTargetOptions().max_draft_len}).",
    ),
    click.option(
        "--max-matching-ngram-size",
        type=int,
        default=PyTorchSpeculative().max_matching_ngram_size,
        show_default=True,
        help="[tensorrt_llm_pytorch ngram] longest n-gram matched in the prompt.",
    ),
    click.option(
        "--speculative-model-dir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="[tensorrt_llm_pytorch draft_target/eagle3] the draft model or the Eagle3 heads checkpoint.",
    ),
    click.option(
        "--sampler",
        type=click.Choice(["auto", "torch", "trtllm"]),
        default="auto",
        show_default=True,
        help="[tensorrt_llm_pytorch] LLM(sampler_type=...): torch (TorchSampler, upstream's default), trtllm "
        "(TRTLLMSampler: applies penalties, bad words and seeds at 1.2.1; no speculative decoding, no "
        "top_logprobs), auto: the one that applies every --sampling-fields field (docs/pytorch-backend.md).",
    ),
    click.option(
        "--sampling-fields",
        default="",
        metavar="F1,F2",
        help="[tensorrt_llm_pytorch] sampling fields the deployment must apply (repetition_penalty, "
        "presence_penalty, frequency_penalty, seed, bad_words, ...); --sampler auto picks the sampler by them.",
    ),
]


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
    return LookaheadConfig(w, n, g)


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
    options = EagleOptions(str(model_dir.resolve()) if model_dir else "", choices=parsed)
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
    options = DraftTargetOptions(str(draft_checkpoint.resolve()) if draft_checkpoint else "")
    return options if max_draft_len is None else dataclasses.replace(options, max_draft_len=max_draft_len)


def spec_options(f):
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def resolve_gpu(
    name: str | None, count: int | None, sm: int | None, memory_gib: float | None, world_size: int, detect=detect_gpus
) -> GpuTarget:
    """--gpu-sm/--gpu-memory-gib, else --gpu, else this host's GPUs, else the planning default."""
    if (sm is None) != (memory_gib is None):
        raise GpuError("give both --gpu-sm and --gpu-memory-gib for an unlisted GPU")
    if sm is not None:
        assert memory_gib is not None  # both or neither, checked above
        return GpuTarget(name or f"SM{sm}", sm, memory_gib, count or world_size)
    if name is not None:
        return known_gpu(name, count or world_size)
    detected = detect()
    if detected is not None:
        return GpuTarget(detected.name, detected.sm, detected.memory_gib, count or detected.count)
    return known_gpu(DEFAULT_GPU, count or world_size)


def make_spec(
    checkpoint: Path,
    backend: str,
    precision: str | None,
    max_batch_size: int | None,
    max_input_len: int | None,
    max_seq_len: int | None,
    max_num_tokens: int | None,
    default_max_tokens: int,
    kv_cache_size_gb: int,
    prefix_caching: bool,
    inference_threads: int,
    max_queue_size: int = _OV.max_queue_size,
    queue_timeout_s: float = _OV.queue_timeout_s,
    stream_interval: int = _OV.stream_interval,
    tp_size: int = 1,
    pp_size: int = 1,
    kv_cache_dtype: str = "auto",
    gpu: str | None = None,
    gpu_count: int | None = None,
    gpu_sm: int | None = None,
    gpu_memory_gib: float | None = None,
    calib_dataset: str | None = None,
    calib_size: int = _TRT.calib_size,
    paged_context_fmha: bool = True,
    kv_cache_fraction: float = _SERVING.kv_cache_free_gpu_mem_fraction,
    kv_cache_reuse: bool = True,
    chunked_context: bool = True,
    scheduler_policy: str = _SERVING.batch_scheduler_policy.value,
    max_queue_delay_us: int = 0,
    speculative_decoding: str = "none",
    lookahead: str | None = None,
    eagle_model_dir: Path | None = None,
    eagle_tree: str | None = None,
    eagle_choices: str | None = None,
    guided_decoding: str = _SERVING.guided_decoding_backend.value,
    trtllm_version: str | None = None,
    triton_image: str | None = None,
    detect=detect_gpus,
    numerics: str | None = None,
    numerics_decision: str = _OV.numerics_decision,
    activation_precision: str | None = None,
    kv_cache_precision: str | None = None,
    dynamic_quantization_group_size: int | None = None,
    int4_group_size: int = _INT4.group_size,
    int4_ratio: float = _INT4.ratio,
    int4_mode: str = _INT4.mode,
    int4_awq: bool = _INT4.awq,
    int4_scale_estimation: bool = _INT4.scale_estimation,
    int4_gptq: bool = _INT4.gptq,
    int4_sensitivity_metric: str = _INT4.sensitivity_metric,
    int4_calibration_samples: int = _INT4.calibration_samples,
    fidelity_evaluation: str = "quick",
    gate_max_mean_kld: float | None = None,
    gate_max_ppl_change: float | None = None,
    gate_min_top1: float | None = None,
    prompt_lookup: bool = _OV.prompt_lookup,
    num_assistant_tokens: int = _OV.num_assistant_tokens,
    max_ngram_size: int = _OV.max_ngram_size,
    draft_checkpoint: Path | None = None,
    pt_speculative_decoding: str = PyTorchSpecMode.NONE.value,
    max_draft_len: int | None = None,
    max_matching_ngram_size: int = PyTorchSpeculative().max_matching_ngram_size,
    speculative_model_dir: Path | None = None,
    top_logprobs: bool = _OV.top_logprobs,
    fuse_projections: bool = _OV.fuse_projections,
    sampler: str = "auto",
    sampling_fields: str = "",
) -> BuildSpec:
    engine_backend = EngineBackend(backend)
    given = {
        "max_batch_size": max_batch_size,
        "max_input_len": max_input_len,
        "max_seq_len": max_seq_len,
        "max_num_tokens": max_num_tokens,
    }
    trtllm = TrtLlmOptions()
    if engine_backend == EngineBackend.TENSORRT_LLM:
        try:
            target = resolve_target(triton_image, trtllm_version)
        except TrtllmTargetError as e:
            raise SpecError(str(e)) from None
        trtllm = TrtLlmOptions(
            trtllm_version=target.version,
            triton_release=target.release,
            tp_size=tp_size,
            pp_size=pp_size,
            kv_cache_dtype=KvCacheDtype(kv_cache_dtype),
            use_paged_context_fmha=paged_context_fmha,
            calib_dataset=calib_dataset,
            calib_size=calib_size,
            gpu=resolve_gpu(gpu, gpu_count, gpu_sm, gpu_memory_gib, tp_size * pp_size, detect),
            speculative_decoding=SpeculativeDecoding(speculative_decoding),
            lookahead=lookahead_config(lookahead, SpeculativeDecoding(speculative_decoding)),
            eagle=eagle_options(SpeculativeDecoding(speculative_decoding), eagle_model_dir, eagle_tree, eagle_choices),
            draft_target=draft_target_options(
                SpeculativeDecoding(speculative_decoding), draft_checkpoint, max_draft_len
            ),
            serving=TrtLlmServing(
                kv_cache_free_gpu_mem_fraction=kv_cache_fraction,
                enable_kv_cache_reuse=kv_cache_reuse,
                enable_chunked_context=chunked_context,
                batch_scheduler_policy=SchedulerPolicy(scheduler_policy),
                max_queue_delay_microseconds=max_queue_delay_us,
                max_queue_size=max_queue_size,
                queue_timeout_s=queue_timeout_s,
                guided_decoding_backend=GuidedDecodingBackend(guided_decoding),
            ),
        )
    pytorch = None
    if engine_backend == EngineBackend.TENSORRT_LLM_PYTORCH:  # build_engines/pytorch/cli_options.py
        from build_engines.pytorch.cli_options import pytorch_options

        pytorch = pytorch_options(
            triton_image=triton_image,
            trtllm_version=trtllm_version,
            tp_size=tp_size,
            pp_size=pp_size,
            kv_cache_dtype=kv_cache_dtype,
            calib_dataset=calib_dataset,
            calib_size=calib_size,
            gpu=resolve_gpu(gpu, gpu_count, gpu_sm, gpu_memory_gib, tp_size * pp_size, detect),
            kv_cache_fraction=kv_cache_fraction,
            kv_cache_reuse=kv_cache_reuse,
            chunked_context=chunked_context,
            max_queue_size=max_queue_size,
            queue_timeout_s=queue_timeout_s,
            paged_context_fmha=paged_context_fmha,
            scheduler_policy=scheduler_policy,
            max_queue_delay_us=max_queue_delay_us,
            speculative_decoding=speculative_decoding,
            lookahead=lookahead,
            guided_decoding=guided_decoding,
            eagle_model_dir=eagle_model_dir,
            eagle_tree=eagle_tree,
            eagle_choices=eagle_choices,
            speculative=PyTorchSpeculative(
                PyTorchSpecMode(pt_speculative_decoding),
                PyTorchSpeculative().max_draft_len if max_draft_len is None else max_draft_len,
                max_matching_ngram_size,
                str(speculative_model_dir.resolve()) if speculative_model_dir else "",
            ),
            sampler=sampler,
            sampling_fields=sampling_fields,
        )
        if draft_checkpoint is not None:
            raise SpecError(
                "'draft_checkpoint' configures --backend openvino or tensorrt_llm; on "
                "tensorrt_llm_pytorch use --pt-speculative-decoding draft_target --speculative-model-dir DIR"
            )
    elif sampler != "auto" or sampling_fields:
        raise SpecError("'sampler' and 'sampling_fields' configure --backend tensorrt_llm_pytorch")
    elif (
        pt_speculative_decoding != PyTorchSpecMode.NONE.value
        or speculative_model_dir is not None
        or (max_draft_len is not None and engine_backend != EngineBackend.TENSORRT_LLM)
        or max_matching_ngram_size != PyTorchSpeculative().max_matching_ngram_size
    ):
        raise SpecError(
            "'pt_speculative_decoding', 'max_draft_len', 'max_matching_ngram_size' and "
            "'speculative_model_dir' configure --backend tensorrt_llm_pytorch; on tensorrt_llm use "
            "--speculative-decoding lookahead_decoding --lookahead W,N,G, --speculative-decoding eagle "
            "--eagle-model-dir DIR or --speculative-decoding draft_tokens_external --draft-checkpoint DIR "
            "[--max-draft-len N]"
        )
    if engine_backend == EngineBackend.OPENVINO and (eagle_model_dir or eagle_tree or eagle_choices):
        raise SpecError("'eagle_model_dir', 'eagle_tree' and 'eagle_choices' configure --backend tensorrt_llm")
    spec = BuildSpec(
        checkpoint=checkpoint.resolve(),
        backend=engine_backend,
        precision=Precision(precision) if precision else DEFAULT_PRECISION[engine_backend],
        limits=replace_given(_LIMITS, given, default_max_tokens=default_max_tokens),
        openvino=OpenVinoOptions(
            kv_cache_size_gb,
            prefix_caching,
            inference_threads,
            max_queue_size,
            queue_timeout_s,
            stream_interval,
            activation_precision or _OV.activation_precision,
            kv_cache_precision or "",
            _OV.dynamic_quantization_group_size
            if dynamic_quantization_group_size is None
            else dynamic_quantization_group_size,
            Int4Recipe(
                int4_mode,
                int4_group_size,
                int4_ratio,
                int4_sensitivity_metric,
                int4_awq,
                int4_scale_estimation,
                int4_gptq,
                int4_calibration_samples,
            ),
            prompt_lookup,
            num_assistant_tokens,
            max_ngram_size,
            str(draft_checkpoint.resolve()) if draft_checkpoint and engine_backend == EngineBackend.OPENVINO else "",
            top_logprobs,
            fuse_projections,
            numerics_mode(numerics, activation_precision, dynamic_quantization_group_size),
            numerics_decision,
        ),
        trtllm=trtllm,
        fidelity=FidelityOptions(fidelity_evaluation, gate_max_mean_kld, gate_max_ppl_change, gate_min_top1),
    )
    spec = dataclasses.replace(spec, pytorch=pytorch) if pytorch else spec
    if engine_backend == EngineBackend.OPENVINO:
        return spec  # the CPU engine keeps its own defaults
    from build_engines.gpu.limits import sized_spec

    return sized_spec(spec, given)


def numerics_mode(numerics: str | None, activation_precision: str | None, dq_group_size: int | None) -> str:
    """--numerics, or custom where a precision or group is given by hand (fast otherwise)."""
    hand_set = activation_precision is not None or dq_group_size is not None
    if hand_set and numerics not in (None, NumericsMode.CUSTOM.value):
        raise SpecError(
            f"'numerics' {numerics} chooses the activation precision and dynamic quantization itself: leave out "
            "--activation-precision and --dynamic-quantization-group-size, or use --numerics custom"
        )
    return NumericsMode.CUSTOM.value if hand_set else (numerics or NumericsMode.FAST.value)


def replace_given(limits: EngineLimits, given: dict[str, int | None], **others: int) -> EngineLimits:
    """`limits` with the values given (None: not given)."""
    return dataclasses.replace(limits, **{k: v for k, v in given.items() if v is not None}, **others)
