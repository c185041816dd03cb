"""The GPU images' Python packages, installed here (issue 46): for each supported image (and each end
of an image whose table holds ranges), a lock of the project's virtualenv with every package the
image carries at the image's version, so the tests run on the fastapi/pydantic/protobuf/... the
image will run.  `make test-image IMAGE=<tag>` builds `.venv-image-<tag>` from it.

One source per version, never restated:
  - the image carries it (contract/upstream/data/image_packages_<release>.json): the table's version
    (a range row's `low` end for the `-low` environment, its version for `-high`);
  - the GPU image's install adds it with a pin (requirements/gpu-image*.txt `==`): that pin;
  - the GPU image's install adds it as a range, and the main lock's version fails the image's own
    packages: ADDED_AT_IMAGE (what pip's resolver picks for the Dockerfile's line, with the reason);
  - otherwise (the CPU engine: openvino, openvino-genai, openvino-tokenizers, tokenizers,
    transformers, torch, ...; test and docs tooling): requirements/lock.txt's version.  The GPU
    image has none of the CPU engine's packages; they run at the main lock's versions.

    python -m build_engines.images.image_env write         # (re)write requirements/image-<tag>.lock
    python -m build_engines.images.image_env pip-check .venv-image-25.12/bin/python
    python -m build_engines.images.image_env link-torch .venv-image-25.12 .venv-image-26.07-high
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from packaging.requirements import Requirement

from build_engines.images.resolver import CPU_LOCK_OMISSIONS, NO_DEPS_WAIVERS, ROOT
from contract.upstream.image_packages import ImagePackageSet, canonical, load_image_packages, supported_releases

MAIN_LOCK = ROOT / "requirements" / "lock.txt"
KIT_REQUIREMENTS = (ROOT / "requirements" / "gpu-image.txt", ROOT / "requirements" / "gpu-image-nodeps.txt")
LOCK_NAME = "image-{tag}.lock"
# What the image's Python is: the table's major.minor (3.12); the images run 3.12.3
# (compatibility matrix), this machine's nearest CPython with a shared libpython is what the
# Makefile finds (IMAGE_PYTHON).
# Packages the GPU image's install adds as ranges where the main lock's version is refused by the
# image's own packages: the version pip's resolver picks for docker/gpu.Dockerfile's line against
# that image (python -m build_engines.images.resolver check), keyed by environment tag.
ADDED_AT_IMAGE: dict[str, dict[str, tuple[str, str]]] = {
    "googleapis-common-protos": {
        tag: (version, "the main lock's 1.66.0 requires protobuf<6; " + why)
        for tag, version, why in (
            ("25.12", "1.75.0", "the resolver adds 1.75.0 for image 25.12 (protobuf 5.29.5)"),
            ("26.07-low", "1.75.0", "1.76.0 requires protobuf>=6.33.5: the newest that fits protobuf 6.33.2"),
            ("26.07-high", "1.76.0", "the resolver adds 1.76.0 for image 26.07 (protobuf 7.35.1)"),
        )
    },
}


class ImageEnvError(ValueError):
    pass


@dataclass(frozen=True)
class ImageEnvironment:
    tag: str  # "25.12" | "26.07-low" | "26.07-high"
    release: str  # "26.07"
    end: str  # "high" | "low": which end of a range row

    @property
    def lock_path(self) -> Path:
        return ROOT / "requirements" / LOCK_NAME.format(tag=self.tag)

    @property
    def packages(self) -> ImagePackageSet:
        return load_image_packages(self.release)


@dataclass(frozen=True)
class LockedPackage:
    name: str  # as the main lock writes it
    version: str
    source: str  # "image" | "image (low end)" | "kit pin <file>" | "kit add at image" | "main lock"


def image_environments() -> dict[str, ImageEnvironment]:
    """One environment per supported image; two (`-low`, `-high`) where its table holds ranges."""
    found: dict[str, ImageEnvironment] = {}
    for release in supported_releases():
        ends = load_image_packages(release).ends()
        for end in ends or ("high",):
            tag = f"{release}-{end}" if ends else release
            found[tag] = ImageEnvironment(tag, release, end)
    return found


def environment(tag: str) -> ImageEnvironment:
    environments = image_environments()
    if tag not in environments:
        raise ImageEnvError(f"no image environment {tag!r}: expected one of {sorted(environments)}")
    return environments[tag]


def read_lock(path: Path) -> dict[str, tuple[str, str]]:
    """canonical name -> (name as written, version) of a `name==version` requirements file."""
    pins: dict[str, tuple[str, str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise ImageEnvError(f"{path}: {raw!r} is not a name==version pin")
        pins[canonical(name.strip())] = (name.strip(), version.strip())
    return pins


def kit_requirements() -> dict[str, tuple[Requirement, Path]]:
    """The GPU image's additions (requirements/gpu-image*.txt): canonical name -> (requirement, file)."""
    found: dict[str, tuple[Requirement, Path]] = {}
    for path in KIT_REQUIREMENTS:
        for raw in path.read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if line:
                requirement = Requirement(line)
                found[canonical(requirement.name)] = (requirement, path)
    return found


def _pinned(requirement: Requirement) -> str | None:
    specs = list(requirement.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


def image_lock(env: ImageEnvironment) -> list[LockedPackage]:
    """Every package of the main lock, at the image's version where the image decides it."""
    image = env.packages
    kit = kit_requirements()
    locked = []
    for name, (written, main_version) in read_lock(MAIN_LOCK).items():
        row = image.packages.get(name)
        if row is not None:
            low = env.end == "low" and row.low is not None
            locked.append(
                LockedPackage(written, image.version(name, env.end) or "", "image (low end)" if low else "image")
            )
        elif name in kit and _pinned(kit[name][0]):
            locked.append(LockedPackage(written, _pinned(kit[name][0]) or "", f"kit pin {kit[name][1].name}"))
        elif name in ADDED_AT_IMAGE:
            locked.append(LockedPackage(written, ADDED_AT_IMAGE[name][env.tag][0], "kit add at image"))
        else:
            locked.append(LockedPackage(written, main_version, "main lock"))
    missing = sorted(set(image.packages) - set(read_lock(MAIN_LOCK)))
    if missing:
        raise ImageEnvError(f"image {env.release} carries {missing}, which requirements/lock.txt does not hold")
    return locked


def render_lock(env: ImageEnvironment) -> str:
    image = env.packages
    end = f", the {env.end} end of each range row" if image.ends() else ""
    header = [
        f"# The project's virtualenv with the Python packages of {image.image}{end}.",
        "# Generated by `python -m build_engines.images.image_env write`; do not edit (tests/unit/test_image_env.py",
        "# holds it equal).  Each line says where its version comes from: `image` (contract/upstream/data/",
        f"# image_packages_{env.release}.json), `kit pin` (requirements/gpu-image*.txt), `kit add at image`",
        "# (build_engines/images/image_env.py ADDED_AT_IMAGE) or `main lock` (requirements/lock.txt: the",
        "# CPU engine and the test tooling, which the GPU image does not carry).  Installed --no-deps by",
        f"# `make test-image IMAGE={env.tag}` under CPython {image.python_version} (the image runs "
        f"{image.python_version}.3).",
    ]
    width = max(len(f"{p.name}=={p.version}") for p in image_lock(env))
    body = [f"{p.name}=={p.version}".ljust(width) + f"  # {p.source}" for p in image_lock(env)]
    return "\n".join(header + body) + "\n"


# --- pip check, with the requirements left unmet on purpose --------------------------------------
PIP_CHECK_LINE = re.compile(
    r"^(?P<who>\S+) \S+ (?:requires (?P<missing>\S+), which is not installed|"
    r"has requirement (?P<req>.+?), but you have (?P<have>\S+) \S+)\.$"
)


# CPU_LOCK_OMISSIONS about the main lock's protobuf 4.25 only: every image has protobuf >= 5.
MAIN_LOCK_ONLY_OMISSIONS = ("opentelemetry-proto",)
# Requirements of main-lock packages the GPU images do not carry (the CPU engine's, the tests' tooling)
# on packages the image does carry, left unmet: the image's version is the one under test, and these
# packages meet it only beside the image, never in it (package -> requirement -> why it is harmless).
IMAGE_ENV_WAIVERS: dict[str, dict[str, str]] = {
    "huggingface-hub": {
        "click": "its CLI's typer wants click>=8.4; the library (tokenizer and checkpoint files, read offline) "
        "does not import click, and the kit's own CLIs run on the image's click"
    },
    "optimum-intel": {
        "requests": "the CPU engine's export, which no image environment runs (the engine is built once)"
    },
    "httpx2": {"idna": "the bench's HTTP client (bench/), not the kit's serving path; IDNA host names are not used"},
}


def unwaived_pip_check(output: str) -> list[str]:
    """The lines of an image environment's `pip check` output that no waiver explains (the CPU
    lock's omissions but those about its protobuf 4.25, and the GPU install's --no-deps waivers:
    tritonclient's [grpc] caps)."""
    waivers = {
        canonical(k): {canonical(n) for n in v}
        for k, v in CPU_LOCK_OMISSIONS.items()
        if k not in MAIN_LOCK_ONLY_OMISSIONS
    }
    for package, waived in (NO_DEPS_WAIVERS | IMAGE_ENV_WAIVERS).items():
        waivers.setdefault(canonical(package), set()).update(canonical(n) for n in waived)
    problems = []
    for line in output.splitlines():
        line = line.strip()
        if not line or line == "No broken requirements found.":
            continue
        match = PIP_CHECK_LINE.match(line)
        if not match:
            problems.append(line)
            continue
        dependency = match["missing"] or Requirement(match["req"]).name
        names = waivers.get(canonical(match["who"]), set())
        if not ("*" in names or canonical(dependency) in names):
            problems.append(line)
    return problems


@click.group()
def main() -> None:
    """The GPU images' package sets as locks of this project's virtualenv."""


@main.command()
@click.option("--check", is_flag=True, help="fail if a lock on disk differs, write nothing")
def write(check: bool) -> None:
    """Write requirements/image-<tag>.lock for every image environment."""
    stale = []
    for env in image_environments().values():
        text = render_lock(env)
        if check:
            if not env.lock_path.is_file() or env.lock_path.read_text() != text:
                stale.append(env.lock_path.name)
        else:
            env.lock_path.write_text(text)
            click.echo(f"wrote {env.lock_path.relative_to(ROOT)}")
    if stale:
        sys.exit(f"stale: {', '.join(stale)} (python -m build_engines.images.image_env write)")


@main.command("list")
def list_environments() -> None:
    """The image environments' tags."""
    click.echo(" ".join(image_environments()))


@main.command("pip-check")
@click.argument("python", type=click.Path(exists=True, dir_okay=False))
def pip_check(python: str) -> None:
    """Run PYTHON's `pip check`; fail on any broken requirement that is not waived."""
    done = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    problems = unwaived_pip_check(done.stdout + done.stderr)
    if problems:
        sys.exit("pip check: broken requirements:\n  " + "\n  ".join(problems))
    click.echo(f"pip check: consistent (waived: {done.stdout.strip() or 'nothing'})".replace("\n", "; "))


@main.command("link-torch")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("target", type=click.Path(exists=True, file_okay=False, path_type=Path))
def link_torch(source: Path, target: Path) -> None:
    """Link SOURCE's torch and what it requires (its CUDA wheels) into TARGET, another image
    environment of the same Python whose torch does not import yet (build_engines/images/shared_packages.py)."""
    from build_engines.images.shared_packages import link_missing, site_packages

    linked = link_missing(site_packages(source), site_packages(target), "torch")
    click.echo(f"linked from {source}: {', '.join(linked) or 'nothing (all installed)'}")


if __name__ == "__main__":
    main()
