"""Start tritonserver on a TensorRT-LLM model repository: one MPI rank per GPU (engine flow,
leader mode), one orchestrator that spawns the workers of several TensorRT-LLM models (engine
flow with a draft engine on more than one GPU), or one tritonserver whose LLM starts its own
GPU workers (PyTorch backend).

The world size comes from the engine's build.json (TP x PP), never from a flag.  In leader mode
rank 0 serves the whole repository on the network ports; ranks > 0 load the repository's
TensorRT-LLM models (they are the engines' other GPUs) with the network off, and every rank gets
its own Python-backend shared-memory prefix.  Leader mode serves one TensorRT-LLM model only
(build_engines/trtllm/launch.py): with draft-target decoding on more than one GPU the server runs
in upstream's orchestrator mode.  Unlike NVIDIA's launch_triton_server.py (which starts mpirun
and returns), the launcher stays in the foreground, forwards SIGINT/SIGTERM to the child, and
exits with the child's status - what a container's PID 1 must do.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from build_engines.render import read_config
from build_engines.trtllm.launch import CUDA_POOL_OFF, ORCHESTRATOR_ENV, ORCHESTRATOR_FLAGS, uses_orchestrator
from contract import names
from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import PyTorchEngineParameters, TensorRtLlmParameters
from contract.security import restricted_api_flags
from contract.telemetry import TraceSettings
from serving.trace_config import trace_args

NGC_TRITONSERVER = "/opt/tritonserver/bin/tritonserver"
ENGINE_PATH_KEY = "gpt_model_path"
assert ENGINE_PATH_KEY in TensorRtLlmParameters.__dataclass_fields__
PYTORCH_DIR_KEY = "engine_dir"
assert PYTORCH_DIR_KEY in PyTorchEngineParameters.__dataclass_fields__


class LaunchError(RuntimeError):
    pass


@dataclass(frozen=True)
class GpuServerSettings:
    repository: Path
    host: str = "0.0.0.0"  # inside a container; publish ports to choose exposure
    http_port: int = names.DEFAULT_HTTP_PORT
    grpc_port: int = names.DEFAULT_GRPC_PORT
    metrics_port: int = names.DEFAULT_METRICS_PORT
    exit_timeout_s: int = 30
    log_verbose: int = 0
    tritonserver: str = NGC_TRITONSERVER
    mpirun: str = "mpirun"
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    admin_key: str | None = field(default=None, repr=False)  # None: random, admin APIs locked
    # GPUs whose CUDA memory pool an orchestrator turns off; None: CUDA_VISIBLE_DEVICES, else nvidia-smi
    visible_gpus: int | None = None


def engine_dir_of(repository: Path) -> Path:
    pytorch = repository / names.PYTORCH_ENGINE / "config.pbtxt"
    if pytorch.is_file():  # the PyTorch-backend layout: tensorrt_llm_pytorch names its directory
        return Path(read_config(pytorch).parameters[PYTORCH_DIR_KEY].string_value)
    config_file = repository / names.TRTLLM_ENGINE / "config.pbtxt"
    if not config_file.is_file():
        raise LaunchError(
            f"{repository} has no {names.TRTLLM_ENGINE}/config.pbtxt: render a TensorRT-LLM repository "
            "first (python -m build_engines build --backend tensorrt_llm ...)"
        )
    params = read_config(config_file).parameters
    if ENGINE_PATH_KEY not in params:
        raise LaunchError(f"{config_file} has no '{ENGINE_PATH_KEY}' parameter")
    return Path(params[ENGINE_PATH_KEY].string_value)


def world_size(record: BuildRecord) -> int:
    """How many tritonserver ranks serve the build: one per GPU for a TensorRT engine; one for
    the PyTorch backend, whose LLM starts its TP x PP GPU workers itself through mpi4py
    (NVIDIA's documented llmapi workflow: upstream llmapi table rows triton.mpi_world,
    doc.llmapi_workflow; model_repository/engines/pytorch/mpi_world.py)."""
    if record.backend == "tensorrt_llm_pytorch":
        return 1
    trtllm = record.spec.get("trtllm")
    if record.backend != "tensorrt_llm" or trtllm is None:
        raise LaunchError(f"build.json describes a {record.backend!r} engine, not a TensorRT-LLM one")
    return int(trtllm["tp_size"]) * int(trtllm["pp_size"])


TRTLLM_BACKEND = "tensorrtllm"  # the C++ backend's name in config.pbtxt


def trtllm_models(repository: Path) -> list[str]:
    """The repository's models served by the C++ tensorrt_llm backend (tensorrt_llm, tensorrt_llm_draft)."""
    configs = sorted(repository.glob("*/config.pbtxt"))
    return [c.parent.name for c in configs if read_config(c).backend == TRTLLM_BACKEND] or [names.TRTLLM_ENGINE]


def rank_args(s: GpuServerSettings, rank: int) -> list[str]:
    args = [
        s.tritonserver,
        f"--model-repository={s.repository}",
        "--disable-auto-complete-config",
        f"--backend-config=python,shm-region-prefix-name=prefix{rank}_",
        f"--exit-timeout-secs={s.exit_timeout_s}",
        f"--log-verbose={s.log_verbose}",
    ]
    if rank == 0:
        return args + [
            f"--http-address={s.host}",
            f"--http-port={s.http_port}",
            f"--grpc-address={s.host}",
            f"--grpc-port={s.grpc_port}",
            f"--metrics-address={s.host}",
            f"--metrics-port={s.metrics_port}",
            "--allow-metrics=true",
            "--model-control-mode=none",
            "--strict-readiness=true",
            *restricted_api_flags(s.admin_key or secrets.token_urlsafe(24)),
            *trace_args(TraceSettings.from_env()),
            *s.extra_args,
        ]  # OTEL_* (docs/tracing.md)
    return args + [
        "--model-control-mode=explicit",
        *(f"--load-model={m}" for m in trtllm_models(s.repository)),
        "--allow-http=false",
        "--allow-grpc=false",
        "--allow-metrics=false",
    ]


def visible_gpu_count(s: GpuServerSettings, world: int, environ=os.environ, detect=None) -> int:
    if s.visible_gpus is not None:
        return s.visible_gpus
    if environ.get("CUDA_VISIBLE_DEVICES"):
        return len(environ["CUDA_VISIBLE_DEVICES"].split(","))
    from build_engines.gpus import detect_gpus

    found = (detect or detect_gpus)()
    return found.count if found else world


def orchestrator_command(s: GpuServerSettings, gpus: int) -> list[str]:
    """One MPI process: the orchestrator tritonserver, whose backend spawns every TensorRT-LLM
    model's workers (launch_triton_server.py --multi-model; build_engines/trtllm/launch.py)."""
    cmd = [s.mpirun, "--allow-run-as-root"]
    for name, value in ORCHESTRATOR_ENV.items():
        cmd += ["-x", f"{name}={value}"]  # exported to the rank, as the script's env= is
    return (
        cmd
        + ["-n", "1"]
        + rank_args(s, 0)
        + list(ORCHESTRATOR_FLAGS)
        + [CUDA_POOL_OFF.format(gpu=gpu) for gpu in range(gpus)]
    )


def launch_command(s: GpuServerSettings, world: int) -> list[str]:
    if world < 1:
        raise LaunchError(f"world size must be >= 1, got {world}")
    if world == 1:
        return rank_args(s, 0)
    if uses_orchestrator(world, len(trtllm_models(s.repository))):
        return orchestrator_command(s, visible_gpu_count(s, world))
    cmd = [s.mpirun, "--allow-run-as-root"]
    for rank in range(world):
        cmd += ["-n", "1"] + rank_args(s, rank) + ([":"] if rank < world - 1 else [])
    return cmd


def prepare(s: GpuServerSettings) -> list[str]:
    """The command for this repository, after refusing an engine built by other versions."""
    record = BuildRecord.read(engine_dir_of(s.repository))
    check_runtime(record)
    return launch_command(s, world_size(record))


def exit_status(returncode: int) -> int:
    """A child killed by signal N exits like a shell reports it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


WEDGED_EXIT = 75  # the server was stopped because an entry stopped answering (compose restarts it)


def supervise(
    cmd: Sequence[str],
    *,
    kill_after_s: float = 60.0,
    popen: Callable = subprocess.Popen,
    wedged: Callable[[], str | None] = lambda: None,
) -> int:
    """Run cmd in its own process group, forward SIGINT/SIGTERM to it, wait, and return its
    exit status.  If it outlives a forwarded signal by kill_after_s, the group is killed.
    `wedged()` (the canary's verdict, serving/canary.py) saying why stops the server the same
    way and returns WEDGED_EXIT, for the container's restart policy to start it again."""
    child = popen(list(cmd), start_new_session=True)
    forwarded: list[int] = []
    stopped_wedged = False

    def forward(signum, _frame):
        forwarded.append(signum)
        try:
            child.send_signal(signum)  # mpirun forwards SIGINT/SIGTERM to every rank
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    deadline = None
    try:
        while True:
            try:
                status = exit_status(child.wait(timeout=0.5))
                return WEDGED_EXIT if stopped_wedged else status
            except subprocess.TimeoutExpired:
                why = None if forwarded else wedged()
                if why:
                    print(
                        f"{why}: stopping tritonserver (the container's restart policy starts it again)",
                        file=sys.stderr,
                        flush=True,
                    )
                    stopped_wedged = True
                    forward(signal.SIGTERM, None)
                if forwarded and deadline is None:
                    deadline = time.monotonic() + kill_after_s
                if deadline is not None and time.monotonic() > deadline:
                    os.killpg(child.pid, signal.SIGKILL)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
