"""`make gpu-check`: one check of a GPU host, run inside the kit's GPU image (the Makefile builds
the image first and passes how long that took).

For the flow the image takes (build_engines/gpu/path.py: the PyTorch backend on 26.04 - 26.07,
the engine flow on 25.12 - 26.02) and each precision - fp16, and fp8 (weights and KV cache) on
Hopper or newer - it runs the GPU-marked tests of that flow's file with pytest: they build the
default model at that precision, serve it with `serving gpu-up`, and run the stream == whole,
stop, cancellation, NVIDIA-clients and bad-input suites and a short benchmark against it.  The
report (bench/gpu_check_report.py) has the versions, the GPU, pass/fail per test and the numbers.

Each precision gets its budget from the time plan (bench/gpu_check_plan.py: 15 minutes on one
H100 for both images); a run past it is stopped, with everything it started, and reported as
failed.  fp8 calibrates on data made here first (build_engines/calibration_data.py): no model hub
is asked for anything.  The host side (driver check, image builds, the merged report) is
bench/gpu_check_host.py.
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

from bench.gpu_check_plan import HOST_STEPS_S, RUN_BUDGET_S
from bench.gpu_check_report import GpuCheckReport, PrecisionRun, read_junit, write
from build_engines.calibration_data import check_calibration_dataset, write_calibration_dataset

PRECISION_ENV = "KIT_GPU_PRECISION"  # the precision the GPU tests build (default fp16)
CALIB_ENV = "KIT_GPU_CALIB_DATASET"  # fp8's calibration data: the local directory made here, or a name
BENCH_OUT_ENV = "KIT_GPU_BENCH_OUT"  # where the benchmark test writes its numbers
DEFAULT_CALIB_DATASET = "cnn_dailymail"  # what the GPU test files fall back to when run alone (needs the hub)
FP8_CHECK_MIN_SM = 90  # fp8 is checked on Hopper or newer (issue 33; the kit builds fp8 from SM 8.9)
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


def make_calibration(out: Path) -> dict:
    """fp8's calibration data, made in this image from its own Python's texts, and read back."""
    t0 = time.monotonic()
    made = write_calibration_dataset(out.resolve() / "calibration")
    check_calibration_dataset(made.directory)
    return made.describe() | {"duration_s": round(time.monotonic() - t0, 1)}


def run_budgets(backend: str, wanted: list[str], budget_s: float | None) -> list[float]:
    """Each precision's budget: the time plan's, or an explicit total split evenly."""
    if budget_s is None:
        return [RUN_BUDGET_S[(backend, p)] for p in wanted]
    return [budget_s / len(wanted)] * len(wanted)


def check(
    out: Path, budget_s: float | None, image_build_s: float | None, calib_dataset: str | None, cwd: Path
) -> GpuCheckReport:
    from build_engines.gpu.path import choose_gpu_backend
    from build_engines.gpus import detect_gpus

    started, t0 = datetime.datetime.now().isoformat(timespec="seconds"), time.monotonic()
    gpu = detect_gpus()
    if gpu is None:
        raise click.ClickException("no NVIDIA GPU here (nvidia-smi): run `make gpu-check` on a GPU host")
    backend, why = choose_gpu_backend({})
    wanted, not_run = precisions(gpu.sm)
    calibration = make_calibration(out) if calib_dataset is None else {"directory": calib_dataset, "given": True}
    results = []
    runs = check_runs(backend.value, wanted, out, str(calibration["directory"]))
    budgets = run_budgets(backend.value, wanted, budget_s)
    for run, share in zip(runs, budgets):
        click.echo(f"gpu-check: {run.precision} on {backend.value} (up to {share:.0f} s): {' '.join(run.argv)}")
        results.append(run_one(run, share, cwd))
    return GpuCheckReport(
        started,
        versions(),
        {"describe": gpu.describe(), "name": gpu.name, "sm": gpu.sm, "memory_gib": gpu.memory_gib, "count": gpu.count},
        f"{backend.value}: {why}",
        sum(budgets) + HOST_STEPS_S["calibration"],
        image_build_s,
        tuple(results),
        tuple(not_run),
        round(time.monotonic() - t0, 1),
        calibration,
    )


@click.command()
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/gpu-check"), show_default=True
)
@click.option("--budget-s", type=float, default=None, help="A total for the precisions (default: the time plan's).")
@click.option("--image-build-s", type=float, default=None, help="How long `docker compose build` took (the host).")
@click.option(
    "--calib-dataset",
    default=None,
    help="fp8's calibration data (default: made here, build_engines/calibration_data.py); a dataset name needs "
    "the network, a local directory must be laid out as calibration_data.py lays it out.",
)
def main(out: Path, budget_s: float | None, image_build_s: float | None, calib_dataset: str | None) -> None:
    """Build, serve and check the default model on this GPU; write report.json and report.md."""
    report = check(out, budget_s, image_build_s, calib_dataset, Path.cwd())
    json_path, md_path = write(report, out)
    click.echo(md_path.read_text())
    click.echo(f"wrote {json_path} and {md_path}")
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
