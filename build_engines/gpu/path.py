"""`--backend gpu` (what `make build-engine` asks for on a GPU): which TensorRT-LLM flow a GPU
build takes.

New deployments belong on TensorRT-LLM's PyTorch backend on the newest supported image: upstream
removed the TensorRT-engine backend, trtllm-build, convert_checkpoint.py and the Triton C++
backend's templates from main in July 2026 (PRs #15763, #15907, #16369, #16612; deprecated since
PR #11723), and NVIDIA's Triton guide now leads with the LLM-API model.  So `gpu` picks
tensorrt_llm_pytorch wherever the target image has it (TensorRT-LLM 1.2.1: Triton 26.04 -
26.07), and the engine flow where it does not (25.12 - 26.02: TensorRT-LLM 1.1.0) or where the
spec asks for what only the engine flow builds (INT8 SmoothQuant / weight-only weights, an INT8 KV
cache, lookahead / EAGLE-1 / draft_tokens_external decoding, engine switches).
"""

from __future__ import annotations

from build_engines.spec_base import ALLOWED_PRECISIONS, EngineBackend, Precision, SpecError
from build_engines.trtllm.cli_options import engine_only
from build_engines.trtllm.versions import TrtllmTargetError, resolve_target

GPU = "gpu"  # the --backend value resolved here
# make_spec keywords that only the PyTorch flow takes, and their "not set" values
PYTORCH_ONLY = {"pt_speculative_decoding": "none", "speculative_model_dir": None}


def _engine_only(options: dict) -> list[str]:
    """What in `options` (make_spec keywords) only the engine flow builds."""
    found = engine_only(options)
    precision = options.get("precision")
    if precision and Precision(precision) not in ALLOWED_PRECISIONS[EngineBackend.TENSORRT_LLM_PYTORCH]:
        found.append(f"--precision {precision}")
    if options.get("kv_cache_dtype") == "int8":
        found.append("--kv-cache-dtype int8")
    if options.get("draft_checkpoint") is not None:
        found.append("--draft-checkpoint")
    return found


def _pytorch_only(options: dict) -> list[str]:
    found = [key for key, unset in PYTORCH_ONLY.items() if options.get(key, unset) != unset]
    precision = options.get("precision")
    if precision and Precision(precision) not in ALLOWED_PRECISIONS[EngineBackend.TENSORRT_LLM]:
        found.append(f"--precision {precision}")
    return found


def choose_gpu_backend(options: dict) -> tuple[EngineBackend, str]:
    """The flow for `--backend gpu` and the reason, from the other make_spec keywords."""
    from build_engines.pytorch.spec import pytorch_releases, pytorch_versions

    try:
        target = resolve_target(options.get("triton_image"), options.get("trtllm_version"))
    except TrtllmTargetError as e:
        raise SpecError(str(e)) from None
    engine_only, pytorch_only = _engine_only(options), _pytorch_only(options)
    where = f"Triton {target.release} (TensorRT-LLM {target.version})"
    if engine_only and pytorch_only:
        raise SpecError(
            f"--backend gpu: {engine_only} need the engine flow, {pytorch_only} the PyTorch backend; "
            "choose --backend tensorrt_llm or tensorrt_llm_pytorch"
        )
    if pytorch_only:
        return EngineBackend.TENSORRT_LLM_PYTORCH, f"{pytorch_only} configure the PyTorch backend"
    if engine_only:
        return EngineBackend.TENSORRT_LLM, f"{engine_only} only the TensorRT-engine flow builds"
    if target.version in pytorch_versions():
        return EngineBackend.TENSORRT_LLM_PYTORCH, (
            f"{where} has TensorRT-LLM's PyTorch backend, the recommended path for new deployments (upstream "
            "removed the TensorRT-engine flow from main in July 2026)"
        )
    return EngineBackend.TENSORRT_LLM, (
        f"{where} has no PyTorch-backend support in this kit (Triton {', '.join(pytorch_releases())} do): its "
        "TensorRT-engine flow; give --image 26.07 for the recommended path"
    )


def resolve_backend(options: dict) -> tuple[dict, str]:
    """`options` with `backend` resolved when it is `gpu`, and the line saying why ("" otherwise)."""
    if options.get("backend") != GPU:
        return options, ""
    backend, why = choose_gpu_backend(options)
    return {**options, "backend": backend.value}, f"backend: {backend.value} (--backend gpu: {why})"
