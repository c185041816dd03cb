"""`make gpu-check`: one check of a GPU host, run inside the kit's GPU image (the Makefile builds
the image first and passes how long that took).

For the flow the image takes (build_engines/gpu/path.py: the PyTorch backend on 26.04 - 26.07,
the engine flow on 25.12 - 26.02) and each precision - fp16, and fp8 (weights and KV cache) on
Hopper or newer - it runs the GPU-marked tests of that flow's file with pytest: they build the
default model at that precision, serve it with `serving gpu-up`, and run the stream == whole,
stop, cancellation, NVIDIA-clients and bad-input suites and a short benchmark against it.  The
report (bench/gpu_check_report.py) has the versions, the GPU, pass/fail per test and the numbers.

The budget (15 minutes on one H100) is split over the precisions still to run; a run past its
share is stopped, with everything it started, and reported as failed.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from bench.gpu_check_report import GpuCheckReport, PrecisionRun, read_junit, write

PRECISION_ENV = "KIT_GPU_PRECISION"  # the precision the GPU tests build (default fp16)
CALIB_ENV = "KIT_GPU_CALIB_DATASET"  # fp8's calibration data (a dataset name both quantizers know)
BENCH_OUT_ENV = "KIT_GPU_BENCH_OUT"  # where the benchmark test writes its numbers
DEFAULT_CALIB_DATASET = "cnn_dailymail"
FP8_CHECK_MIN_SM = 90  # fp8 is checked on Hopper or newer (issue 33; the kit builds fp8 from SM 8.9)
DEFAULT_BUDGET_S = 15 * 60
SUITE_FILES = {
    "tensorrt_llm": "tests/integration/test_gpu_pipeline.py",
    "tensorrt_llm_pytorch": "tests/integration/test_gpu_pytorch.py",
}
# The suites the check runs, by test name: stream == whole, stop (stop words and strings, the stop
# request), cancellation, bad input, NVIDIA's clients (tests/integration/test_nvidia_clients.py as
# the GPU files import them) and the short benchmark.
SUITES = (
    "stream_equals_whole",
    "stop_words",
    "stop_strings",
    "stops_within",
    "cancel",
    "bad_request",
    "echoes_the_prompt",
    "nvidia_name",
    "streaming_chunks",
    "exclude_input",
    "return_log_probs",
    "batch_inputs",
    "check_outputs",
    "docs_curl",
    "docs_generate_stream",
    "short_benchmark",
)


@dataclass(frozen=True)
class CheckRun:
    precision: str
    backend: str
    argv: tuple[str, ...]
    env: dict[str, str]  # added to the environment
    junit: Path
    bench_file: Path
    log: Path


def precisions(sm: int) -> tuple[list[str], list[str]]:
    """(the precisions to check, the ones left out with why) for a GPU of compute capability `sm`."""
    if sm >= FP8_CHECK_MIN_SM:
        return ["fp16", "fp8"], []
    return ["fp16"], [f"fp8: SM {sm / 10:.1f} is older than Hopper (SM {FP8_CHECK_MIN_SM / 10:.1f})"]


def check_runs(
    backend: str, wanted: list[str], out: Path, calib_dataset: str = DEFAULT_CALIB_DATASET, python: str = sys.executable
) -> list[CheckRun]:
    runs = []
    for precision in wanted:
        junit, bench, log = (out / f"{precision}-junit.xml", out / f"{precision}-bench.json", out / f"{precision}.log")
        argv = (
            python,
            "-m",
            "pytest",
            SUITE_FILES[backend],
            "-m",
            "gpu",
            "-k",
            " or ".join(SUITES),
            f"--junitxml={junit}",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rfE",
        )
        env = {PRECISION_ENV: precision, BENCH_OUT_ENV: str(bench), CALIB_ENV: calib_dataset}
        runs.append(CheckRun(precision, backend, argv, env, junit, bench, log))
    return runs


def _package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _nvidia_smi(query: str) -> str:
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip().splitlines()[0] if result.returncode == 0 and result.stdout.strip() else "unknown"


def versions(environ=os.environ) -> dict:
    server = Path("/opt/tritonserver/TRITON_VERSION")
    return {
        "tensorrt_llm": _package_version("tensorrt_llm"),
        "tensorrt": _package_version("tensorrt"),
        "nvidia-modelopt": _package_version("nvidia-modelopt"),
        "triton_image": environ.get("TRITON_IMAGE", "unset"),
        "tritonserver": server.read_text().strip() if server.is_file() else "unknown",
        "driver": _nvidia_smi("driver_version"),
        "python": sys.version.split()[0],
    }


def run_one(run: CheckRun, timeout_s: float, cwd: Path) -> PrecisionRun:
    """pytest for one precision, in its own process group (the server it starts dies with it)."""
    run.log.parent.mkdir(parents=True, exist_ok=True)
    for stale in (run.junit, run.bench_file):
        stale.unlink(missing_ok=True)
    t0 = time.monotonic()
    with open(run.log, "wb") as log:
        child = subprocess.Popen(
            run.argv, cwd=cwd, env=os.environ | run.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode = child.wait(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            returncode = -int(signal.SIGKILL)
            log.write(f"\ngpu-check: stopped after {timeout_s:.0f} s, this precision's share of the budget\n".encode())
    bench = run.bench_file.read_text() if run.bench_file.is_file() else ""
    tail = "\n".join(run.log.read_text(errors="replace").splitlines()[-30:]) if returncode else ""
    return PrecisionRun(
        run.precision,
        run.backend,
        returncode,
        round(time.monotonic() - t0, 1),
        read_junit(run.junit),
        json.loads(bench) if bench else {},
        tail,
    )


def check(out: Path, budget_s: float, image_build_s: float | None, calib_dataset: str, cwd: Path) -> GpuCheckReport:
    from build_engines.gpu.path import choose_gpu_backend
    from build_engines.gpus import detect_gpus

    started, t0 = datetime.datetime.now().isoformat(timespec="seconds"), time.monotonic()
    gpu = detect_gpus()
    if gpu is None:
        raise click.ClickException("no NVIDIA GPU here (nvidia-smi): run `make gpu-check` on a GPU host")
    backend, why = choose_gpu_backend({})
    wanted, not_run = precisions(gpu.sm)
    results = []
    runs = check_runs(backend.value, wanted, out, calib_dataset)
    for i, run in enumerate(runs):
        share = (budget_s - (time.monotonic() - t0)) / (len(runs) - i)
        click.echo(f"gpu-check: {run.precision} on {backend.value} (up to {share:.0f} s): {' '.join(run.argv)}")
        results.append(run_one(run, share, cwd))
    return GpuCheckReport(
        started,
        versions(),
        {"describe": gpu.describe(), "name": gpu.name, "sm": gpu.sm, "memory_gib": gpu.memory_gib, "count": gpu.count},
        f"{backend.value}: {why}",
        budget_s,
        image_build_s,
        tuple(results),
        tuple(not_run),
        round(time.monotonic() - t0, 1),
    )


@click.command()
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/gpu-check"), show_default=True
)
@click.option("--budget-s", type=float, default=DEFAULT_BUDGET_S, show_default=True)
@click.option("--image-build-s", type=float, default=None, help="How long `docker compose build` took (the Makefile).")
@click.option(
    "--calib-dataset",
    default=DEFAULT_CALIB_DATASET,
    show_default=True,
    help="fp8's calibration data: a dataset name both quantize.py and hf_ptq.py take (needs the network).",
)
def main(out: Path, budget_s: float, image_build_s: float | None, calib_dataset: str) -> None:
    """Build, serve and check the default model on this GPU; write report.json and report.md."""
    report = check(out, budget_s, image_build_s, calib_dataset, Path.cwd())
    json_path, md_path = write(report, out)
    click.echo(md_path.read_text())
    click.echo(f"wrote {json_path} and {md_path}")
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
