"""The report of the whole `make gpu-check` (bench/gpu_check_host.py): each planned step with its
budget, its actual time and its status, the driver check, the commands run, and the report of
each image's check (bench/gpu_check_report.py) inside.  Standard library only."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.gpu_check_plan import BUDGET_S, PlannedStep


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class StepResult:
    step: PlannedStep
    status: Status
    actual_s: float | None = None
    detail: str = ""  # why it failed or was not run, or what it found
    command: tuple[str, ...] = ()  # the exact command (the dry run prints it)

    @property
    def over_budget(self) -> bool:
        return self.actual_s is not None and self.actual_s > self.step.budget_s


@dataclass(frozen=True)
class HostReport:
    started: str
    dry_run: bool
    images: tuple[dict, ...]  # per image: release, backend, why, compose settings, driver needed
    gpus: tuple[dict, ...]  # nvidia-smi's rows (or the dry run's fixture)
    steps: tuple[StepResult, ...]
    image_reports: dict = field(default_factory=dict)  # release -> that image's report.json
    not_run: tuple[str, ...] = ()  # images or checks left out, and why (named, not failed)
    budget_s: float = BUDGET_S

    @property
    def in_budget_actual_s(self) -> float:
        return sum(r.actual_s or 0.0 for r in self.steps if r.step.in_budget)

    @property
    def ok(self) -> bool:
        """Every step passed (a dry run: every step it executes), within the budget."""
        if self.dry_run:
            return all(r.status == Status.PASS for r in self.steps if not r.step.needs_gpu)
        return all(r.status == Status.PASS for r in self.steps) and self.in_budget_actual_s <= self.budget_s

    def to_dict(self) -> dict:
        data = asdict(self)
        data |= {"ok": self.ok, "in_budget_actual_s": round(self.in_budget_actual_s, 1)}
        for row, result in zip(data["steps"], self.steps):
            row["status"] = result.status.value
            row["over_budget"] = result.over_budget
        return data


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def markdown(report: HostReport) -> str:
    verdict = ("DRY RUN " if report.dry_run else "") + ("PASS" if report.ok else "FAIL")
    lines = [
        f"# GPU check: {verdict}",
        "",
        f"- started {report.started}; {report.in_budget_actual_s:.0f} s of a {report.budget_s:.0f} s budget "
        "(image pull/build timed apart)",
        "- GPUs: "
        + ("; ".join(f"{g['name']} ({g['memory_mib']} MiB, driver {g['driver']})" for g in report.gpus) or "none"),
    ]
    if report.dry_run:
        lines.append("- dry run: the GPU steps were not run; the driver check ran against a fixture")
    lines.append("- images, in check order:")
    for image in report.images:
        lines.append(
            f"  - {image['release']}: {image['backend']} ({image['why']}); driver >= {image['min_driver']} "
            f"(CUDA {image['cuda_version']}); " + ", ".join(f"{k}={v}" for k, v in image["compose_env"].items())
        )
    lines += ["", "| step | what | budget | actual | status | detail |", "| --- | --- | ---: | ---: | --- | --- |"]
    for r in report.steps:
        budget = f"{r.step.budget_s:.0f} s" + ("" if r.step.in_budget else " (apart)")
        actual = _seconds(r.actual_s) + (" (over)" if r.over_budget else "")
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.step.id} | {r.step.what} | {budget} | {actual} | {r.status.value} | {detail} |")
    for item in report.not_run:
        lines.append(f"\nnot run: {item}")
    commands = [r for r in report.steps if r.command]
    if commands:
        lines += ["", "## Commands", ""]
        lines += [f"- {r.step.id}: `{' '.join(r.command)}`" for r in commands]
    return "\n".join(lines) + "\n"


def write(report: HostReport, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "report.json", out / "report.md"
    json_path.write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path
