"""The build spec's command-line options (shared by `plan` and `build`) and their translation into
one typed BuildSpec.  Here: the options every backend reads (checkpoint, precision, limits, queue,
fidelity) and those both GPU flows read (target image, GPU, parallelism, calibration, KV cache,
guided decoding).  Each engine's own are in its folder's cli_options.py, with the from_options()
that makes its spec section and the refuse_elsewhere() that says what another backend refuses of
them; make_spec fills in the defaults, asks each engine what it refuses, and lets the backend's
engine make its section.  `--help` lists each engine's options under its own heading."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from build_engines.fidelity.options import EVALUATIONS, FidelityOptions
from build_engines.gpus import DEFAULT_GPU, GpuError, GpuTarget, detect_gpus, known_gpu
from build_engines.openvino import cli_options as openvino
from build_engines.openvino.options import OpenVinoOptions
from build_engines.option_lists import EXISTING_DIR, Option, apply, choice, declared, enum_option
from build_engines.pytorch import cli_options as pytorch
from build_engines.spec import OPTIONS_SECTION, BuildSpec
from build_engines.spec_base import DEFAULT_PRECISION, EngineBackend, EngineLimits, Precision, SpecError
from build_engines.trtllm import cli_options as trtllm
from build_engines.trtllm.options import (
    GpuFlowFields,
    GpuServingFields,
    GuidedDecodingBackend,
    KvCacheDtype,
    TrtLlmOptions,
    TrtLlmServing,
)
from build_engines.trtllm.versions import TrtllmTargetError, resolve_target
from contract.upstream.trtllm_build import supported_versions

_LIMITS = EngineLimits()
_OV = OpenVinoOptions()
_TRT = TrtLlmOptions()
_SERVING = TrtLlmServing()


# The engine limits, one option each (None: not given): what the limit is, and its default on the GPU
# flows, which size a limit not given (build_engines/gpu/limits.py); openvino's default is EngineLimits'.
_LIMIT_HELP = {
    "max_batch_size": ("Requests in flight", "the GPU flows size it for the GPU (`plan` says why)"),
    "max_input_len": ("Prompt tokens", "GPU: the longest prompt the engine takes"),
    "max_seq_len": ("Prompt + generated tokens", "GPU: the model's context (within the KV cache)"),
    "max_num_tokens": ("Tokens per engine step (prefill chunk + decodes)", "GPU: upstream's default or trtllm-bench's"),
}
_LIMIT_NAMES = tuple(_LIMIT_HELP)


def _limit_option(name: str) -> Option:
    """--max-...: an engine limit, None when not given (the engine's or the sizing's default)."""
    what, on_gpu = _LIMIT_HELP[name]
    return click.option(
        "--" + name.replace("_", "-"),
        type=int,
        default=None,
        help=f"{what}.  Default: openvino {getattr(_LIMITS, name)}; {on_gpu}.  "
        "A value given here always wins (build_engines/gpu/limits.py).",
    )


_COMMON: list[Option] = [
    click.option(
        "--checkpoint",
        type=EXISTING_DIR,
        default=None,
        help="HF Llama checkpoint dir (default: the embedded SmolLM2-135M-Instruct).",
    ),
    click.option(
        "--backend",
        type=click.Choice([m.value for m in EngineBackend] + ["gpu"]),
        default=EngineBackend.OPENVINO.value,
        help="gpu: TensorRT-LLM's PyTorch backend where the target image has it (the recommended path), "
        "else its engine flow (build_engines/gpu/path.py).",
    ),
    click.option(
        "--precision",
        type=choice(Precision),
        default=None,
        help="openvino: int8 (default) | int4 | fp16; tensorrt_llm: fp16 (default) | bf16 | fp8 | int8_sq | "
        "int8_wo | int4_awq; tensorrt_llm_pytorch: auto (default: the checkpoint as it is) | fp16 | "
        "bf16 | fp8 | int4_awq | nvfp4 (ModelOpt)",
    ),
    *(_limit_option(name) for name in _LIMIT_NAMES),
    click.option("--default-max-tokens", type=int, default=_LIMITS.default_max_tokens),
    click.option(
        "--max-queue-size",
        type=int,
        default=_OV.max_queue_size,
        help="Requests waiting beyond the running batch; more are refused (UNAVAILABLE).",
    ),
    click.option(
        "--queue-timeout",
        "queue_timeout_s",
        type=float,
        default=_OV.queue_timeout_s,
        help="Fail a request with no first token after this many seconds (UNAVAILABLE; 0 = never).",
    ),
    # Fidelity report and gate
    click.option(
        "--fidelity",
        "fidelity_evaluation",
        type=click.Choice(EVALUATIONS),
        default="quick",
        help="Measure the engine against the float32 checkpoint before publishing it: quick (every build), "
        "full (the whole measurement), off.",
    ),
    click.option(
        "--gate-max-mean-kld", type=float, default=None, help="Override the precision's gate (mean KLD, nats)."
    ),
    click.option("--gate-max-ppl-change", type=float, default=None, help="Override the gate: max PPL change, percent."),
    click.option("--gate-min-top1", type=float, default=None, help="Override the gate: min same-top-1 share, percent."),
]
_GPU: list[Option] = [
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
    click.option("--tp", "tp_size", type=int, default=_TRT.tp_size, help="[tensorrt_llm] tensor parallel size."),
    click.option("--pp", "pp_size", type=int, default=_TRT.pp_size, help="[tensorrt_llm] pipeline parallel size."),
    enum_option(
        "--kv-cache-dtype",
        default=_TRT.kv_cache_dtype,
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
    click.option("--calib-size", type=int, default=_TRT.calib_size),
    click.option(
        "--kv-cache-fraction",
        type=float,
        default=_SERVING.kv_cache_free_gpu_mem_fraction,
        help="[tensorrt_llm] kv_cache_free_gpu_mem_fraction.",
    ),
    click.option("--kv-cache-reuse/--no-kv-cache-reuse", default=_SERVING.enable_kv_cache_reuse),
    click.option("--chunked-context/--no-chunked-context", default=_SERVING.enable_chunked_context),
    enum_option(
        "--guided-decoding",
        default=_SERVING.guided_decoding_backend,
        help="[tensorrt_llm, tensorrt_llm_pytorch] guided_decoding_backend: structured "
        "output (JSON schema, regex, EBNF grammar) by the executor's xgrammar "
        "decoder; none: refused.",
    ),
]
# --help's headings after the common options: which backend reads each option
_SECTIONS: dict[str, list[Option]] = {
    "GPU options (tensorrt_llm and tensorrt_llm_pytorch)": _GPU,
    "openvino options (the CPU engine)": openvino.OPTIONS,
    "tensorrt_llm options (the TensorRT engine flow)": trtllm.OPTIONS,
    "tensorrt_llm_pytorch options (TensorRT-LLM's PyTorch backend)": pytorch.OPTIONS,
}
SPEC_OPTIONS = _COMMON + [option for options in _SECTIONS.values() for option in options]
_SECTION_OF = {param.name: title for title, options in _SECTIONS.items() for param in declared(options)}
# What make_spec fills in for an option not given (its own parameters aside): the command line's defaults.
_DEFAULTS: dict[str, Any] = {
    p.name: p.default for p in declared(SPEC_OPTIONS) if p.name not in ("checkpoint", "backend")
}
# Each backend's engine, in the order make_spec asks them what they refuse of each other's options
_ENGINES = {
    EngineBackend.TENSORRT_LLM_PYTORCH: pytorch,
    EngineBackend.TENSORRT_LLM: trtllm,
    EngineBackend.OPENVINO: openvino,
}


def spec_options(f):
    return apply(SPEC_OPTIONS, f)


class SpecCommand(click.Command):
    """`plan` and `build`: --help shows every option's default and lists each engine's options under
    its own heading."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["context_settings"] = {"show_default": True, **(kwargs.get("context_settings") or {})}
        super().__init__(*args, **kwargs)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {"Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(_SECTION_OF.get(param.name, "Options"), []).append(record)
        for title, records in sections.items():
            with formatter.section(title):
                formatter.write_dl(records)


def make_spec(checkpoint: Path, *, backend: str, detect=detect_gpus, **options: Any) -> BuildSpec:
    """The spec of the build options given by keyword (their click names, as `plan` and `build`
    pass them); an option left out takes its command-line default."""
    unknown = sorted(set(options) - set(_DEFAULTS))
    if unknown:
        raise TypeError(f"make_spec() got options it does not know: {unknown}")
    values = _DEFAULTS | options
    engine_backend = EngineBackend(backend)
    for engine in _ENGINES.values():
        engine.refuse_elsewhere(engine_backend, **values)
    given = {name: values[name] for name in _LIMIT_NAMES}
    spec = BuildSpec(
        checkpoint=checkpoint.resolve(),
        backend=engine_backend,
        precision=Precision(values["precision"]) if values["precision"] else DEFAULT_PRECISION[engine_backend],
        limits=replace_given(_LIMITS, given, default_max_tokens=values["default_max_tokens"]),
        fidelity=FidelityOptions(
            evaluation=values["fidelity_evaluation"],
            max_mean_kld=values["gate_max_mean_kld"],
            max_ppl_change_pct=values["gate_max_ppl_change"],
            min_same_top1_pct=values["gate_min_top1"],
        ),
        **{OPTIONS_SECTION[engine_backend]: _engine_options(engine_backend, values, detect)},
    )
    if engine_backend == EngineBackend.OPENVINO:
        return spec  # the CPU engine keeps its own defaults
    from build_engines.gpu.limits import sized_spec

    return sized_spec(spec, given)


def _engine_options(backend: EngineBackend, values: dict[str, Any], detect):
    """The backend's spec section, made by its engine (a GPU flow's with the fields both take)."""
    engine = _ENGINES[backend]
    if backend == EngineBackend.OPENVINO:
        return engine.from_options(**values)
    return engine.from_options(
        gpu_flow=gpu_flow_fields(detect=detect, **values), gpu_serving=gpu_serving_fields(**values), **values
    )


def gpu_flow_fields(
    *,
    triton_image: str | None,
    trtllm_version: str | None,
    tp_size: int,
    pp_size: int,
    kv_cache_dtype: str,
    calib_dataset: str | None,
    calib_size: int,
    gpu: str | None,
    gpu_count: int | None,
    gpu_sm: int | None,
    gpu_memory_gib: float | None,
    detect=detect_gpus,
    **_others: Any,
) -> GpuFlowFields:
    """The spec fields both GPU flows take from the options here: the target image, the GPU, parallelism."""
    try:
        target = resolve_target(triton_image, trtllm_version)
    except TrtllmTargetError as e:
        raise SpecError(str(e)) from None
    return GpuFlowFields(
        trtllm_version=target.version,
        triton_release=target.release,
        tp_size=tp_size,
        pp_size=pp_size,
        kv_cache_dtype=KvCacheDtype(kv_cache_dtype),
        calib_dataset=calib_dataset,
        calib_size=calib_size,
        gpu=resolve_gpu(gpu, gpu_count, gpu_sm, gpu_memory_gib, tp_size * pp_size, detect),
    )


def gpu_serving_fields(
    *, kv_cache_fraction: float, max_queue_size: int, queue_timeout_s: float, guided_decoding: str, **_others: Any
) -> GpuServingFields:
    """The serving fields both GPU flows take from the options here (by the same names)."""
    return GpuServingFields(
        kv_cache_free_gpu_mem_fraction=kv_cache_fraction,
        max_queue_size=max_queue_size,
        queue_timeout_s=queue_timeout_s,
        guided_decoding_backend=GuidedDecodingBackend(guided_decoding),
    )


def resolve_gpu(
    name: str | None, count: int | None, sm: int | None, memory_gib: float | None, world_size: int, detect=detect_gpus
) -> GpuTarget:
    """--gpu-sm/--gpu-memory-gib, else --gpu, else this host's GPUs, else the planning default."""
    if (sm is None) != (memory_gib is None):
        raise GpuError("give both --gpu-sm and --gpu-memory-gib for an unlisted GPU")
    if sm is not None:
        assert memory_gib is not None  # both or neither, checked above
        return GpuTarget(name=name or f"SM{sm}", sm=sm, memory_gib=memory_gib, count=count or world_size)
    if name is not None:
        return known_gpu(name, count or world_size)
    detected = detect()
    if detected is not None:
        return GpuTarget(
            name=detected.name, sm=detected.sm, memory_gib=detected.memory_gib, count=count or detected.count
        )
    return known_gpu(DEFAULT_GPU, count or world_size)


def replace_given(limits: EngineLimits, given: dict[str, int | None], **others: int) -> EngineLimits:
    """`limits` with the values given (None: not given)."""
    return dataclasses.replace(limits, **{k: v for k, v in given.items() if v is not None}, **others)
