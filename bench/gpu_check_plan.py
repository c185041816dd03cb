"""The time plan of `make gpu-check`: every step, in order, with its budget on one H100.

The 15-minute budget covers what runs on the GPU host after the images exist; pulling and
building each image is timed apart (its size and the registry's speed are the host's, not the
kit's) and planned here only as an estimate.  The budgets are estimates for the default model
(SmolLM2-135M-Instruct) on one H100 SXM, not measurements: the report (bench/gpu_check_host.py)
puts each step's actual time beside its budget, and a run step is stopped at its budget.

fp8 is planned (H100 is Hopper); on an older GPU its step is reported as not run.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

BUDGET_S = 15 * 60  # one H100, everything but the image pulls and builds
PRECISIONS = ("fp16", "fp8")


@dataclass(frozen=True)
class PlannedStep:
    id: str  # "26.07/fp8", "driver", "26.07/image"
    release: str  # "" for the host's steps
    what: str
    budget_s: float
    in_budget: bool = True  # False: timed apart (image pull and build)
    needs_gpu: bool = True  # False: the dry run executes it here

    def describe(self) -> str:
        where = "timed apart, estimate" if not self.in_budget else "budget"
        gpu = "" if self.needs_gpu else ", runs in the dry run"
        return f"{self.id:<16} {self.budget_s:>5.0f} s ({where}{gpu})  {self.what}"


# What one precision's run takes, per flow: build (convert + compile, or prepare / quantize), server
# start, the suites and the short benchmark.  Estimates for the default model on one H100.
RUN_BUDGET_S = {
    ("tensorrt_llm_pytorch", "fp16"): 240.0,  # copy the checkpoint, LLM() load + warm-up ~90 s, suites ~150 s
    ("tensorrt_llm_pytorch", "fp8"): 255.0,  # + hf_ptq.py on 512 local samples ~30 s
    ("tensorrt_llm", "fp16"): 180.0,  # convert + trtllm-build ~70 s, server ~20 s, suites ~90 s
    ("tensorrt_llm", "fp8"): 210.0,  # quantize.py on 512 local samples ~30 s more
}
HOST_STEPS_S = {"driver": 5.0, "calibration": 5.0}
IMAGE_BUILD_ESTIMATE_S = 600.0  # pull (~14-16 GB) and the kit's layers; timed apart


def image_steps(release: str, backend: str, precisions: tuple[str, ...] = PRECISIONS) -> list[PlannedStep]:
    steps = [
        PlannedStep(
            f"{release}/image",
            release,
            f"docker compose build builder (GPU_IMAGE={release}: pull the NGC image, add the kit)",
            IMAGE_BUILD_ESTIMATE_S,
            in_budget=False,
            needs_gpu=False,
        ),
        PlannedStep(
            f"{release}/calibration",
            release,
            "make the fp8 calibration data in the image (build_engines/calibration_data.py)",
            HOST_STEPS_S["calibration"],
            needs_gpu=False,
        ),
    ]
    for precision in precisions:
        steps.append(
            PlannedStep(
                f"{release}/{precision}",
                release,
                f"{backend} {precision}: build, serve, the GPU suites and the short benchmark",
                RUN_BUDGET_S[(backend, precision)],
            )
        )
    return steps


def time_plan(images: list[tuple[str, str]]) -> tuple[PlannedStep, ...]:
    """The plan for (release, backend) pairs in check order, the host's driver check first."""
    steps = [
        PlannedStep(
            "driver",
            "",
            "nvidia-smi --query-gpu=driver_version,name,memory.total against each image's driver",
            HOST_STEPS_S["driver"],
            needs_gpu=False,
        )
    ]
    for release, backend in images:
        steps += image_steps(release, backend)
    return tuple(steps)


def in_budget_s(plan: tuple[PlannedStep, ...]) -> float:
    return sum(s.budget_s for s in plan if s.in_budget)


def plan_text(plan: tuple[PlannedStep, ...], budget_s: float = BUDGET_S) -> str:
    total = in_budget_s(plan)
    lines = ["time plan (one H100; image pull/build timed apart):"] + ["  " + s.describe() for s in plan]
    lines.append(f"  total {total:.0f} s of a {budget_s:.0f} s budget" + ("" if total <= budget_s else " (OVER)"))
    return "\n".join(lines)
