"""Where `make build-engine` builds a TensorRT-LLM engine (standard library only: it runs
before anything is installed).

1. Here, if TensorRT-LLM imports (we are inside the kit's GPU image);
2. else in the compose `builder` service (same image), if Docker Compose and a running
   Docker engine are available;
3. else nowhere: say what is missing and how to build the CPU engine instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

CONTAINER_MODELS = Path("/models")


@dataclass(frozen=True)
class Where:
    kind: str  # "local" | "compose" | "none"
    argv: tuple[str, ...] = ()
    message: str = ""


def _ok(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compose_command(run_ok: Callable[[Sequence[str]], bool] = _ok, which=shutil.which) -> tuple[str, ...] | None:
    if which("docker") and run_ok(["docker", "compose", "version"]):
        return ("docker", "compose")
    if which("docker-compose"):
        return ("docker-compose",)
    return None


def decide(
    build_args: Sequence[str],
    model: Path | None,
    *,
    trtllm_ok: bool,
    compose: tuple[str, ...] | None,
    engine_ok: bool,
    python: str = sys.executable,
) -> Where:
    """`build_args` may name the backend (`--backend tensorrt_llm_pytorch`); else the engine flow's."""
    backend = () if "--backend" in build_args else ("--backend", "tensorrt_llm")
    if trtllm_ok:
        checkpoint = ["--checkpoint", str(model)] if model else []
        return Where("local", (python, "-m", "build_engines", "build", *backend, *checkpoint, *build_args))
    if compose and engine_ok:
        mount, checkpoint = [], []
        if model:
            inside = CONTAINER_MODELS / model.name
            mount, checkpoint = ["-v", f"{model.resolve()}:{inside}:ro"], ["--checkpoint", str(inside)]
        return Where(
            "compose",
            (
                *compose,
                "--profile",
                "build",
                "run",
                "--rm",
                *mount,
                "builder",
                "build",
                *backend,
                *checkpoint,
                *build_args,
            ),
        )
    missing = "TensorRT-LLM is not importable here" + (
        ", and Docker Compose is not installed" if not compose else ", and no Docker engine is running"
    )
    return Where(
        "none",
        message=(
            f"cannot build a TensorRT-LLM engine on this machine: {missing}.\n"
            "  - on a GPU host: install Docker with the NVIDIA Container Toolkit, then rerun this command "
            "(it runs in the compose `builder` service, image from .env);\n"
            "  - or build the CPU engine here: make build-engine BACKEND=openvino [MODEL=...] "
            "[PRECISION=int8|int4|fp16]"
        ),
    )


def main(argv: Sequence[str]) -> int:
    model = Path(argv[0]) if argv and argv[0] else None
    trtllm_ok = _ok([sys.executable, "-m", "build_engines.trtllm.probe"])
    compose = None if trtllm_ok else compose_command()
    where = decide(
        argv[1:], model, trtllm_ok=trtllm_ok, compose=compose, engine_ok=bool(compose) and _ok(["docker", "info"])
    )
    if where.kind == "none":
        print(where.message, file=sys.stderr)
        return 2
    print(
        f"building {'here' if where.kind == 'local' else 'in the compose builder service'}: {' '.join(where.argv)}",
        file=sys.stderr,
    )
    return subprocess.call(list(where.argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
