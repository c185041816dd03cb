"""The steps and the `plan` output of the PyTorch-backend flow (no engine compile):

1. check the Hugging Face checkpoint (architecture, and any quantization it already carries);
2. quantize it with ModelOpt's hf_ptq.py into a Hugging Face checkpoint (fp8, int4_awq, nvfp4,
   optional FP8 KV cache), every flag checked against the ModelOpt table of the ModelOpt
   release the target TensorRT-LLM pins; or copy it into the engine directory as it is;
3. write build.json and move the directory into place;
4. render the repository around tensorrt_llm_pytorch.

The plan also prints the exact LLM(...) the engine model will create, how the server starts
on the GPUs, and the memory arithmetic.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo
from build_engines.checkpoint_quant import CheckpointQuantization, read_quantization
from build_engines.gpu.capacity import CapacityError, estimate, pytorch_capacity_spec, pytorch_draft
from build_engines.gpu.limits import limit_lines
from build_engines.pytorch.repository import MODEL_SUBDIR, pytorch_parameters
from build_engines.pytorch.spec import calib_dataset_name, is_local_dataset, needs_quantization, served_format
from build_engines.spec import BuildSpec
from build_engines.spec_base import Precision
from build_engines.trtllm.options import KvCacheDtype
from build_engines.trtllm.plan import ConformanceError, Step
from contract.upstream.citation import DATA_DIR
from contract.upstream.modelopt import TOOL, ModelOptTable, modelopt_for_trtllm
from contract.upstream.trtllm_build import load_build_table
from model_repository.engines.pytorch.llm_config import llm_kwargs

EXAMPLES_DIR_VARIABLE = "MODELOPT_EXAMPLES_DIR"  # docker/gpu.Dockerfile puts ModelOpt's examples here
DEFAULT_EXAMPLES_DIR = Path("/opt/modelopt/examples")


def examples_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(EXAMPLES_DIR_VARIABLE) or DEFAULT_EXAMPLES_DIR)


def quantize_step(spec: BuildSpec, table: ModelOptTable, out_dir: Path, examples: Path) -> Step:
    """hf_ptq.py for this spec, checked against the table (a flag it lacks is a bug of this kit)."""
    p, fmt = spec.pytorch, table.format(spec.precision.value)
    kv = table.kv_formats["fp8"]["kv_cache_qformat"] if p.kv_cache_dtype == KvCacheDtype.FP8 else "none"
    argv: tuple[str, ...] = (
        "python3",
        str(examples / table.tool_path.removeprefix("examples/")),
        "--pyt_ckpt_path",
        str(spec.checkpoint),
        "--qformat",
        fmt.qformat,
        "--kv_cache_qformat",
        kv,  # said even for none: it defaults to fp8 (rule kv_default_fp8)
        "--dataset",
        calib_dataset_name(str(p.calib_dataset)),
        "--calib_size",
        str(p.calib_size),
        "--batch_size",
        "0",
    )
    if spec.precision == Precision.INT4_AWQ:
        argv += ("--awq_block_size", str(p.awq_block_size))
    argv += ("--export_path", str(out_dir))
    problems = table.check_argv(argv[2:])
    if problems:
        raise ConformanceError(
            f"the plan for ModelOpt {table.version} is not what hf_ptq.py accepts: " + "; ".join(problems)
        )
    # A local dataset directory is loaded by its name from its parent (rule dataset_local_directory).
    local = is_local_dataset(p.calib_dataset)
    return Step(
        f"quantize to {fmt.qformat} (KV cache {kv}) with ModelOpt {table.version}'s hf_ptq.py, calibrated on "
        f"{p.calib_dataset}{' (local, run in its parent directory)' if local else ''}, into a Hugging Face checkpoint",
        argv,
        TOOL,
        cwd=str(Path(str(p.calib_dataset)).resolve().parent) if local else "",
    )


def pytorch_steps(
    spec: BuildSpec, info: CheckpointInfo, quant: CheckpointQuantization | None, staging: Path
) -> list[Step]:
    table = modelopt_for_trtllm(spec.pytorch.trtllm_version)
    what = quant.describe() if quant else f"{info.dtype} weights"
    steps = [Step(f"check the checkpoint ({info.architecture}, {what})", ())]
    if needs_quantization(spec.precision.value, quant):
        steps.append(quantize_step(spec, table, staging / MODEL_SUBDIR, examples_dir()))
    else:
        steps.append(
            Step(f"copy the checkpoint as it is (config, tokenizer, weights) into <engine>/{MODEL_SUBDIR}", ())
        )
    return steps + [
        Step("write build.json (spec, TensorRT-LLM and ModelOpt versions, checkpoint hash), move it into place", ()),
        Step(
            "render the Triton model repository (ensemble, preprocessing, tensorrt_llm_pytorch, postprocessing, "
            "tensorrt_llm_bls)",
            (),
        ),
    ]


def _kwargs_text(kwargs: dict) -> str:
    kv = kwargs.pop("kv_cache_config")
    parts = [f"{k}={v!r}" for k, v in kwargs.items()]
    return (
        "LLM("
        + ", ".join(parts + [f"kv_cache_config=KvCacheConfig({', '.join(f'{k}={v!r}' for k, v in kv.items())})"])
        + ")"
    )


def pytorch_plan_lines(spec: BuildSpec, info: CheckpointInfo, engine_dir: Path) -> list[str]:
    p = spec.pytorch
    quant = read_quantization(Path(info.path))
    table = modelopt_for_trtllm(p.trtllm_version)
    pin = load_build_table(p.trtllm_version).image(p.triton_release)
    effective, fp8_kv = served_format(spec.precision.value, p, info)
    lines = [
        f"target: {p.gpu.describe()}, TP={p.tp_size} PP={p.pp_size} -> {p.world_size} GPU worker(s), "
        f"precision {effective}, KV cache {'fp8' if fp8_kv else 'auto (16-bit)'}; no engine is compiled",
        f"image: {pin.image} (TensorRT-LLM {pin.trtllm_version}, ModelOpt {table.requirement}); upstream "
        f"tables: {_rel('llmapi_' + p.trtllm_version)}, {_rel('modelopt_hf_ptq_' + table.version)}",
    ]
    lines += limit_lines(spec, info)
    for n, step in enumerate(pytorch_steps(spec, info, quant, engine_dir.with_name(engine_dir.name + ".partial")), 1):
        lines.append(f"step {n}: {step.title}" + (f"\n    {step.command_line()}" if step.argv else ""))
    params = pytorch_parameters(engine_dir, spec, engine_dir / MODEL_SUBDIR)
    params = dataclasses.replace(params, kv_cache_dtype=type(params.kv_cache_dtype)("fp8" if fp8_kv else "auto"))
    lines.append(
        "engine model tensorrt_llm_pytorch: "
        + _kwargs_text(llm_kwargs(params, lambda **kv: kv, lambda name, **kv: {"class": name, **kv}))
    )
    lines.append(p.sampler_plan.describe())
    lines.append(p.speculative.describe())
    if p.speculative.llm_api_options():  # the same settings as trtllm-serve's extra_llm_api_options YAML
        lines.append(
            "extra_llm_api_options (YAML flow mapping): " + json.dumps(p.speculative.llm_api_options(), sort_keys=True)
        )
    lines.append(
        f"serve: python -m serving gpu-up starts one tritonserver; the LLM starts its {p.world_size} GPU "
        "worker(s) itself through mpi4py (NVIDIA's llmapi workflow: upstream rows triton.mpi_world, "
        "doc.llmapi_workflow)"
    )
    try:
        capacity_spec = pytorch_capacity_spec(spec, effective, fp8_kv)
        lines += estimate(info, capacity_spec, pytorch_draft(spec)).lines(capacity_spec)
    except CapacityError as e:
        lines.append(f"does not fit: {e}")
    except (KeyError, ValueError):
        lines.append(f"memory: no estimate for {effective} weights")
    return lines


def _rel(name: str) -> Path:
    return (DATA_DIR / f"{name}.json").relative_to(DATA_DIR.parents[2])
