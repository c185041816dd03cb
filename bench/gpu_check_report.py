"""The report of `make gpu-check` (bench/gpu_check.py): one JSON file and one markdown file with
the versions, the GPU, each precision's pass/fail (from pytest's JUnit XML) and benchmark
numbers, the time spent and whether it stayed within the budget.  Standard library only."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SuiteCounts:
    passed: int = 0
    failed: int = 0  # failures and errors
    skipped: int = 0
    failures: tuple[str, ...] = ()  # the test ids that failed or erred

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0


def read_junit(path: Path) -> SuiteCounts:
    """pytest's --junitxml file: the counts and the failing tests' ids (classname::name)."""
    if not path.is_file():
        return SuiteCounts(failures=(f"no JUnit report at {path}: pytest did not finish",))
    passed = failed = skipped = 0
    failures = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if kinds & {"failure", "error"}:
            failed += 1
            failures.append(name)
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed += 1
    return SuiteCounts(passed, failed, skipped, tuple(failures))


@dataclass(frozen=True)
class PrecisionRun:
    precision: str
    backend: str  # tensorrt_llm | tensorrt_llm_pytorch
    returncode: int
    duration_s: float
    tests: SuiteCounts
    bench: dict = field(default_factory=dict)  # {"levels": [ThroughputResult dicts]} from the benchmark test
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.tests.ok


@dataclass(frozen=True)
class GpuCheckReport:
    started: str
    versions: dict
    gpu: dict
    backend_choice: str  # why this flow (build_engines/gpu/path.py)
    budget_s: float
    image_build_s: float | None
    runs: tuple[PrecisionRun, ...]
    not_run: tuple[str, ...] = ()  # precisions left out, and why
    total_s: float = 0.0
    calibration: dict = field(default_factory=dict)  # fp8's calibration data (build_engines/calibration_data.py)

    @property
    def within_budget(self) -> bool:
        return self.total_s <= self.budget_s

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.ok for r in self.runs) and not self.not_run and self.within_budget

    def to_dict(self) -> dict:
        data = asdict(self)
        data |= {"ok": self.ok, "within_budget": self.within_budget}
        for run, obj in zip(data["runs"], self.runs):
            run["ok"] = obj.ok
        return data


def _level(row: dict) -> str:
    return (
        f"c{row['concurrency']}: {row['output_tokens_per_s']:.1f} output tok/s, TTFT p50 "
        f"{row['ttft_p50_s'] * 1000:.1f} ms, ITL p50 {row['itl_p50_s'] * 1000:.2f} ms"
    )


def markdown(report: GpuCheckReport) -> str:
    verdict = "PASS" if report.ok else "FAIL"
    lines = [
        f"# GPU check: {verdict}",
        "",
        f"- started {report.started}; {report.total_s:.0f} s of a {report.budget_s:.0f} s budget"
        + ("" if report.within_budget else " (over budget)")
        + (
            f"; image build {report.image_build_s:.0f} s (not in the budget)"
            if report.image_build_s is not None
            else ""
        ),
        f"- GPU: {report.gpu.get('describe', report.gpu)}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items())),
        f"- flow: {report.backend_choice}",
        "- fp8 calibration data: "
        + (
            f"{report.calibration.get('rows', '?')} rows made here at {report.calibration.get('directory')} "
            f"({report.calibration.get('sha256', '')}), not cnn_dailymail: its accuracy cost is not measured"
            if report.calibration and not report.calibration.get("given")
            else f"{report.calibration.get('directory', 'none')} (given)"
        ),
        "",
        "| precision | backend | result | passed | failed | skipped | time | benchmark |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in report.runs:
        bench = "; ".join(_level(row) for row in run.bench.get("levels", [])) or "none"
        lines.append(
            f"| {run.precision} | {run.backend} | {'pass' if run.ok else 'FAIL'} | {run.tests.passed} | "
            f"{run.tests.failed} | {run.tests.skipped} | {run.duration_s:.0f} s | {bench} |"
        )
    for item in report.not_run:
        lines.append(f"\nnot run: {item}")
    for run in (r for r in report.runs if not r.ok):
        lines += ["", f"## {run.precision}: what failed", ""] + [f"- `{name}`" for name in run.tests.failures]
        if run.log_tail:
            lines += ["", "```", run.log_tail, "```"]
    return "\n".join(lines) + "\n"


def write(report: GpuCheckReport, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "report.json", out / "report.md"
    json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path
