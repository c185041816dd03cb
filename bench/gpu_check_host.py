"""`make gpu-check` on the host: the driver check, each image's build and its check, one report.

    make gpu-check                     # the recommended path first, then the engine flow
    make gpu-check GPU_IMAGE=26.07     # one image (every setting derived from the release)
    make gpu-check-dry-run             # every step that needs no GPU, here (CI runs it)

1. Which images: GPU_IMAGE, else build_engines/images/gpu_images.py's check order - the PyTorch
   backend on the newest supported image (26.07), then the engine flow on the newest image that
   has it and whose package set the resolver test replays (25.12).  Each image's TRITON_IMAGE,
   TRTLLM_VERSION, KIT_GPU_IMAGE and MODELOPT_EXAMPLES_REF come from that table and are passed
   to docker compose in the environment (which wins over .env): no hand edits.
2. The driver, up front on the host: `nvidia-smi --query-gpu=driver_version,name,memory.total`
   against every image's requirement (contract/upstream/data/ngc_containers.json, the server's
   compatibility matrix); one too old fails the check before any build, naming the driver found,
   the driver needed and the image.
3. Per image: the build context (every COPY source of docker/gpu.Dockerfile is in the context,
   every build arg resolves from the table), `docker compose build builder` (timed apart from
   the 15-minute budget), then the check in the image through NVIDIA's entrypoint
   (/opt/nvidia/nvidia_entrypoint.sh runs its entrypoint.d scripts, then `python3 -m
   bench.gpu_check`), offline (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1: fp8 calibrates on data
   the check makes, build_engines/calibration_data.py).
4. The report (bench/gpu_check_summary.py): each step of the time plan (bench/gpu_check_plan.py)
   with its budget and its actual time, and each image's own report.

`--dry-run` executes here every step that needs no GPU - the driver check's logic against a
fixture (`--nvidia-smi-output`), the build context and build args, the calibration data (made
and read back) - prints the exact commands the GPU steps would run, and writes the report with
those steps marked not run.  It needs no Docker engine (no daemon is asked anything).

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bench.gpu_check_plan import BUDGET_S, PlannedStep, plan_text, time_plan
from bench.gpu_check_summary import HostReport, Status, StepResult, write
from build_engines.calibration_data import CalibrationDataError, check_calibration_dataset, write_calibration_dataset
from build_engines.images.gpu_images import GpuImage, GpuImageError, check_order, gpu_image
from contract.upstream.ngc_containers import load_ngc_containers

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = "docker/gpu.Dockerfile"
COMPOSE_FILE = "docker-compose.yml"
SERVICE = "builder"
NVIDIA_SMI = ("nvidia-smi", "--query-gpu=driver_version,name,memory.total", "--format=csv,noheader,nounits")
# The dry run's GPU: an H100 on the R590 driver 26.07 needs (what `--nvidia-smi-output` replaces).
DRY_RUN_GPUS = "590.48.01, NVIDIA H100 80GB HBM3, 81559"
# Offline, with a datasets cache in the container's own /tmp: offline, datasets falls back to any
# cached dataset of the same name and config, so a cache from elsewhere must not be seen.
OFFLINE_ENV = (
    "HF_HUB_OFFLINE=1",
    "HF_DATASETS_OFFLINE=1",
    "TRANSFORMERS_OFFLINE=1",
    "HF_DATASETS_CACHE=/tmp/gpu-check-datasets",
)
OUT_MOUNT = "/gpu-check"  # where the report directory is mounted in the container
RUN_SLACK_S = 120
# Not in the check (it needs the hub, and two more fp8 builds): what the local calibration costs.
CALIBRATION_COST = (
    "the accuracy cost of fp8 calibrated on the kit's local data instead of cnn_dailymail: needs the hub; on a "
    "GPU host that reaches it, GPU_IMAGE=25.12: docker compose --profile build run --rm -v $PWD:/workspace -e "
    "PYTHONPATH=/workspace --entrypoint /opt/nvidia/nvidia_entrypoint.sh builder python3 -m pytest "
    "tests/integration/test_gpu_fidelity.py -k calibration (build/fidelity-gpu/calibration.json)"
)  # the container's start and stop, beyond its steps' budgets


class HostCheckError(RuntimeError):
    pass


# --- the driver ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostGpu:
    driver: str
    name: str
    memory_mib: int

    def to_dict(self) -> dict:
        return {"driver": self.driver, "name": self.name, "memory_mib": self.memory_mib}


def parse_nvidia_smi(text: str) -> list[HostGpu]:
    """`nvidia-smi --query-gpu=driver_version,name,memory.total --format=csv,noheader[,nounits]`."""
    gpus = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            raise HostCheckError(f"nvidia-smi printed {line!r}: expected 'driver_version, name, memory.total'")
        memory = re.match(r"^(\d+)", parts[2])
        if not memory:
            raise HostCheckError(f"nvidia-smi printed memory.total {parts[2]!r}: expected MiB")
        gpus.append(HostGpu(parts[0], parts[1], int(memory.group(1))))
    return gpus


def query_gpus() -> str:
    try:
        result = subprocess.run(NVIDIA_SMI, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HostCheckError(f"no nvidia-smi on this host ({e}): run `make gpu-check` on a GPU host") from None
    if result.returncode != 0 or not result.stdout.strip():
        raise HostCheckError(f"nvidia-smi failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout


def driver_problems(gpus: list[HostGpu], images: Sequence[GpuImage]) -> list[str]:
    """Every image the host's driver cannot run, named with the driver found and the one needed."""
    if not gpus:
        return ["nvidia-smi lists no GPU"]
    drivers = sorted({g.driver for g in gpus})
    problems = []
    for image in images:
        for driver in drivers:
            if problem := image.driver.problem(driver):
                problems.append(f"GPU_IMAGE={image.release}: {problem}")
    return problems


# --- the build context -------------------------------------------------------------------------------


def _logical_lines(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        if not current and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        out.append((current + line).strip())
        current = ""
    return [line for line in out if line]


def _ignored(path: str, patterns: list[str]) -> bool:
    top = path.strip("/").split("/")[0]
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in path.split("/")):
                return True
        elif fnmatch.fnmatch(top, pattern) or fnmatch.fnmatch(path.strip("/"), pattern):
            return True
    return False


def _gpu_image_block(compose_text: str) -> str:
    match = re.search(r"^x-gpu-image:.*?(?=^\S)", compose_text, re.S | re.M)
    if not match:
        raise HostCheckError(f"{COMPOSE_FILE} has no x-gpu-image block")
    return match.group(0)


def _resolve(value: str, env: dict[str, str]) -> tuple[str, str]:
    """('${VAR:-default}', env) -> (VAR, value compose gives it)."""
    match = re.fullmatch(r"\$\{(\w+):-([^}]*)\}", value.strip())
    if not match:
        return "", value.strip()
    name, default = match.groups()
    return name, env.get(name) or default


def build_context_problems(image: GpuImage, root: Path = ROOT) -> tuple[list[str], dict[str, str]]:
    """What `docker compose build builder` would trip on, found without a Docker engine: COPY
    sources missing from (or ignored by) the context, build args that do not resolve to the
    table's values, and a builder service that skips NVIDIA's entrypoint.  Also the build args."""
    problems: list[str] = []
    env = image.compose_env()
    block = _gpu_image_block((root / COMPOSE_FILE).read_text())
    dockerfile = re.search(r"^\s+dockerfile:\s*(\S+)", block, re.M)
    context = re.search(r"^\s+context:\s*(\S+)", block, re.M)
    if not dockerfile or dockerfile.group(1) != DOCKERFILE or not context:
        return [f"{COMPOSE_FILE} x-gpu-image does not build {DOCKERFILE}"], {}
    context_dir = (root / context.group(1)).resolve()
    args_block = re.search(r"^    args:\n((?:      .*\n)+)", block, re.M)
    compose_args = dict(re.findall(r"^\s+(\w+):\s*(\S+)\s*$", args_block.group(1) if args_block else "", re.M))
    resolved = {}
    for arg, value in compose_args.items():
        variable, resolved[arg] = _resolve(value, env)
        if variable in env and resolved[arg] != env[variable]:
            problems.append(f"build arg {arg} resolves to {resolved[arg]!r}, the table says {env[variable]!r}")
    tag = re.search(r"^\s+image:\s*(\S+)", block, re.M)
    if not tag or _resolve(tag.group(1), env)[1] != image.kit_image:
        problems.append(
            f"{COMPOSE_FILE} x-gpu-image tags the image {tag.group(1) if tag else None}, not {image.kit_image}"
        )
    ignore_file = context_dir / ".dockerignore"
    patterns = [
        p.strip()
        for p in (ignore_file.read_text().splitlines() if ignore_file.is_file() else [])
        if p.strip() and not p.startswith("#")
    ]
    for line in _logical_lines((root / DOCKERFILE).read_text()):
        word, _, rest = line.partition(" ")
        if word.upper() == "ARG":
            name, has_default, _ = rest.strip().partition("=")
            if not has_default and not resolved.get(name):
                problems.append(f"{DOCKERFILE} ARG {name} has no default and the compose build args give it none")
        elif word.upper() == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            if any(p.startswith("--from") for p in shlex.split(rest)):
                continue
            for source in parts[:-1]:
                if not (context_dir / source).exists():
                    problems.append(f"{DOCKERFILE} COPY {source}: not in the build context {context_dir}")
                elif _ignored(source, patterns):
                    problems.append(f"{DOCKERFILE} COPY {source}: excluded by .dockerignore")
    entrypoint = load_ngc_containers().entrypoint.path
    service = re.search(rf"^  {SERVICE}:\n(.*?)(?=^  \S|\Z)", (root / COMPOSE_FILE).read_text(), re.S | re.M)
    service_entry = re.search(r"^\s+entrypoint:\s*(.+)$", service.group(1), re.M) if service else None
    if service_entry and entrypoint not in service_entry.group(1):
        problems.append(f"the compose {SERVICE} service's entrypoint {service_entry.group(1)} skips {entrypoint}")
    return problems, resolved


# --- the commands ----------------------------------------------------------------------------------------


def compose_prefix() -> tuple[str, ...]:
    from build_engines.dispatch import compose_command

    return compose_command() or ("docker", "compose")


def build_command(compose: Sequence[str]) -> tuple[str, ...]:
    return (*compose, "--profile", "build", "build", SERVICE)


def check_command(
    compose: Sequence[str], image: GpuImage, root: Path, out: Path, image_build_s: float | None, extra: Sequence[str]
) -> tuple[str, ...]:
    """`python3 -m bench.gpu_check` in the image, through NVIDIA's entrypoint, offline."""
    inside = Path(OUT_MOUNT) / image.release
    offline = [a for pair in (("-e", e) for e in OFFLINE_ENV) for a in pair]
    built = ("--image-build-s", f"{image_build_s:.0f}") if image_build_s is not None else ()
    return (
        *compose,
        "--profile",
        "build",
        "run",
        "--rm",
        "-v",
        f"{root.resolve()}:/workspace",
        "-v",
        f"{out.resolve()}:{OUT_MOUNT}",
        "-e",
        "PYTHONPATH=/workspace",
        *offline,
        "--entrypoint",
        load_ngc_containers().entrypoint.path,
        SERVICE,
        "python3",
        "-m",
        "bench.gpu_check",
        "--out",
        str(inside),
        *built,
        *extra,
    )


# --- the run -------------------------------------------------------------------------------------------------


def image_summary(image: GpuImage) -> dict:
    return {
        "release": image.release,
        "backend": image.backend.value,
        "why": image.why,
        "compose_env": image.compose_env(),
        "min_driver": image.driver.min_driver,
        "cuda_version": image.driver.cuda_version,
    }


def _timed(argv: Sequence[str], env: dict[str, str], timeout_s: float | None, cwd: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    try:
        code = subprocess.run(list(argv), env=os.environ | env, cwd=cwd, timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:
        code = 124
    return code, round(time.monotonic() - t0, 1)


def _image_report(out: Path, release: str) -> dict:
    path = out / release / "report.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _run_results(
    plan: dict[str, PlannedStep], release: str, report: dict, code: int, total_s: float
) -> list[StepResult]:
    """The image's calibration and precision steps, from its report (bench/gpu_check_report.py)."""
    results = []
    calibration = report.get("calibration", {})
    results.append(
        StepResult(
            plan[f"{release}/calibration"],
            Status.PASS if calibration.get("rows") else Status.FAIL,
            calibration.get("duration_s"),
            f"{calibration.get('rows', 0)} rows, {calibration.get('sha256', '')}" if calibration else "no report",
        )
    )
    runs = {r["precision"]: r for r in report.get("runs", [])}
    for step_id in (s for s in plan if s.startswith(f"{release}/") and s.split("/")[1] in ("fp16", "fp8")):
        precision = step_id.split("/")[1]
        run = runs.get(precision)
        if run is None:
            why = next((n for n in report.get("not_run", []) if n.startswith(precision)), "")
            detail = why or (f"the check exited {code} after {total_s:.0f} s without it" if report else "no report")
            results.append(StepResult(plan[step_id], Status.NOT_RUN if why else Status.FAIL, None, detail))
            continue
        tests = run.get("tests", {})
        detail = f"{tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, {tests.get('skipped', 0)} skipped"
        results.append(
            StepResult(plan[step_id], Status.PASS if run.get("ok") else Status.FAIL, run.get("duration_s"), detail)
        )
    return results


def check_host(
    images: Sequence[GpuImage],
    out: Path,
    *,
    dry_run: bool,
    nvidia_smi_output: str | None = None,
    extra: Sequence[str] = (),
    not_run: Sequence[str] = (),
    root: Path = ROOT,
) -> HostReport:
    started = datetime.datetime.now().isoformat(timespec="seconds")
    plan_steps = time_plan([(i.release, i.backend.value) for i in images])
    plan = {s.id: s for s in plan_steps}
    print(plan_text(plan_steps), flush=True)
    results: list[StepResult] = []
    reports: dict = {}
    compose = ("docker", "compose") if dry_run else compose_prefix()

    def finish() -> HostReport:
        done = {r.step.id for r in results}
        rest = [
            StepResult(s, Status.NOT_RUN, None, "dry run: needs the GPU host" if dry_run else "an earlier step failed")
            for s in plan_steps
            if s.id not in done
        ]
        ordered = sorted(results + rest, key=lambda r: [s.id for s in plan_steps].index(r.step.id))
        return HostReport(
            started,
            dry_run,
            tuple(image_summary(i) for i in images),
            tuple(g.to_dict() for g in gpus),
            tuple(ordered),
            reports,
            (*not_run, CALIBRATION_COST),
            BUDGET_S,
        )

    # 1. the driver, before anything is built
    t0, gpus = time.monotonic(), []
    try:
        text = nvidia_smi_output if nvidia_smi_output is not None else (DRY_RUN_GPUS if dry_run else query_gpus())
        gpus = parse_nvidia_smi(text)
        problems = driver_problems(gpus, images)
    except HostCheckError as e:
        problems = [str(e)]
    where = " (fixture)" if dry_run or nvidia_smi_output is not None else ""
    found = ", ".join(f"{g.name} driver {g.driver}" for g in gpus) or "no GPU"
    results.append(
        StepResult(
            plan["driver"],
            Status.FAIL if problems else Status.PASS,
            round(time.monotonic() - t0, 1),
            "; ".join(problems) or f"{found}{where}: every image's driver is met",
            NVIDIA_SMI,
        )
    )
    if problems:
        for problem in problems:
            print(f"gpu-check: {problem}", file=sys.stderr)
        return finish()

    for image in images:
        env = image.compose_env()
        # 2. the build context and args, then the build (timed apart)
        t0 = time.monotonic()
        context, resolved = build_context_problems(image, root)
        argv = build_command(compose)
        if context:
            results.append(StepResult(plan[f"{image.release}/image"], Status.FAIL, None, "; ".join(context), argv))
            return finish()
        args = ", ".join(f"{k}={v}" for k, v in resolved.items())
        env_words = tuple(f"{k}={v}" for k, v in env.items())
        if dry_run:
            results.append(
                StepResult(
                    plan[f"{image.release}/image"],
                    Status.PASS,
                    round(time.monotonic() - t0, 1),
                    f"build context and args checked (no build in a dry run): {args}",
                    ("env", *env_words, *argv),
                )
            )
            results += _dry_run_image(image, plan, out, compose, root, extra)
            continue
        print(f"gpu-check: building {image.kit_image} ({args})", flush=True)
        code, built_s = _timed(argv, env, None, root)
        results.append(
            StepResult(
                plan[f"{image.release}/image"],
                Status.PASS if code == 0 else Status.FAIL,
                built_s,
                args if code == 0 else f"exit {code}",
                ("env", *env_words, *argv),
            )
        )
        if code != 0:
            return finish()
        # 3. the check in the image, through NVIDIA's entrypoint
        budget = sum(s.budget_s for s in plan_steps if s.release == image.release and s.in_budget)
        argv = check_command(compose, image, root, out, built_s, extra)
        print(
            f"gpu-check: {image.release} ({image.backend.value}), up to {budget:.0f} s: {shlex.join(argv)}", flush=True
        )
        code, run_s = _timed(argv, env, budget + RUN_SLACK_S, root)
        reports[image.release] = _image_report(out, image.release)
        image_results = _run_results(plan, image.release, reports[image.release], code, run_s)
        results += [
            StepResult(r.step, r.status, r.actual_s, r.detail, argv if i == 0 else ())
            for i, r in enumerate(image_results)
        ]
    return finish()


def _dry_run_image(
    image: GpuImage, plan: dict[str, PlannedStep], out: Path, compose: Sequence[str], root: Path, extra: Sequence[str]
) -> list[StepResult]:
    """The calibration data made and read back here; the GPU steps' commands, not run."""
    t0 = time.monotonic()
    try:
        made = write_calibration_dataset(out / "dry-run" / image.release / "calibration")
        check_calibration_dataset(made.directory)
        calibration = StepResult(
            plan[f"{image.release}/calibration"],
            Status.PASS,
            round(time.monotonic() - t0, 1),
            f"{made.rows} rows at {made.directory} ({made.sha256}); this Python's texts, not the image's",
        )
    except (CalibrationDataError, OSError) as e:
        calibration = StepResult(plan[f"{image.release}/calibration"], Status.FAIL, None, str(e))
    argv = check_command(compose, image, root, out, None, extra)
    env_words = tuple(f"{k}={v}" for k, v in image.compose_env().items())
    runs = [
        StepResult(s, Status.NOT_RUN, None, "dry run: needs the GPU host", ("env", *env_words, *argv) if n == 0 else ())
        for n, s in enumerate(s for s in plan.values() if s.release == image.release and s.needs_gpu)
    ]
    return [calibration, *runs]


def images_to_check(gpu_image_arg: str | None) -> tuple[list[GpuImage], list[str]]:
    """(the images, in order; the default images left out, and why)."""
    default = list(check_order())
    if not gpu_image_arg:
        return default, []
    chosen = gpu_image(gpu_image_arg)
    left = [
        f"{i.release} ({i.backend.value}): GPU_IMAGE={chosen.release} checks one image"
        for i in default
        if i.release != chosen.release
    ]
    return [chosen], left


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--image",
        default=os.environ.get("GPU_IMAGE") or None,
        help="one Triton release (26.07) or NGC image; default: the recommended path, then the engine flow",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check")
    parser.add_argument("--dry-run", action="store_true", help="every step that needs no GPU, here; no Docker engine")
    parser.add_argument(
        "--nvidia-smi-output",
        default=None,
        help="what nvidia-smi printed (text, or @file): the driver check's input instead of nvidia-smi",
    )
    parser.add_argument("--plan", action="store_true", help="print the time plan and exit")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    smi = args.nvidia_smi_output
    if smi is not None and smi.startswith("@"):
        smi = Path(smi[1:]).read_text()
    try:
        images, not_run = images_to_check(args.image)
    except GpuImageError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    if args.plan:
        print(plan_text(time_plan([(i.release, i.backend.value) for i in images])))
        return 0
    report = check_host(images, args.out, dry_run=args.dry_run, nvidia_smi_output=smi, extra=extra, not_run=not_run)
    json_path, md_path = write(report, args.out)
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
