"""The pip install lines of an image recipe, read from the recipe itself (one source of truth):
docker/gpu.Dockerfile's RUN commands, and the Makefile's `venv` recipe that docker/cpu.Dockerfile
runs.  Each line becomes a `PipInstall` that image_resolver.py replays through pip's resolver.

Only the options the recipes use are understood; any other option is an error, so a new flag in
a recipe cannot be silently dropped from the check.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

IGNORED_FLAGS = {"--no-cache-dir", "--quiet", "-q"}  # no effect on what pip resolves
BOOLEAN_FLAGS = {"--no-deps", "--upgrade", "-U", "--no-build-isolation"}
IMPORT_CHECK = re.compile(r"""python3? -c ["']import ([\w., ]+)["']""")


class InstallLineError(ValueError):
    pass


@dataclass(frozen=True)
class PipInstall:
    requirements: tuple[str, ...]  # specifiers written on the line
    requirement_files: tuple[Path, ...]  # -r files, as paths in this repository
    constraint_files: tuple[Path, ...]  # -c files that are repository files
    image_constraints: bool  # -c names the base image's own package list
    no_deps: bool
    editable: bool  # -e <local project>: nothing to resolve from an index
    line: str  # the command as written, for messages

    def pip_args(self) -> list[str]:
        """The arguments to replay (without the image's constraints, which the caller supplies)."""
        args = ["--no-deps"] if self.no_deps else []
        for path in self.constraint_files:
            args += ["-c", str(path)]
        for path in self.requirement_files:
            args += ["-r", str(path)]
        return args + list(self.requirements)


def _logical_lines(text: str) -> list[str]:
    return re.sub(r"\\\n\s*", " ", text).splitlines()


@dataclass(frozen=True)
class ContextCopy:
    """A COPY or ADD that takes files from the build context (not `--from=<stage>`)."""

    instruction: str  # COPY or ADD
    flags: tuple[str, ...]
    sources: tuple[str, ...]
    destination: str


def context_copies(text: str) -> list[ContextCopy]:
    """Every COPY/ADD of a Dockerfile's text from the build context, in order: continuation lines
    joined, flags apart, the shell and the JSON form."""
    copies = []
    for line in _logical_lines(text):
        word, _, rest = line.strip().partition(" ")
        if word.upper() not in ("COPY", "ADD"):
            continue
        flags, rest = [], rest.strip()
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            flags.append(flag)
            rest = rest.strip()
        args = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
        if not any(f.startswith("--from") for f in flags):
            copies.append(ContextCopy(word.upper(), tuple(flags), tuple(args[:-1]), args[-1]))
    return copies


def _copy_map(copies: list[ContextCopy]) -> list[tuple[str, str]]:
    """(destination in the image, source in the repository) of each plain one-source COPY."""
    return [
        (c.destination.rstrip("/"), c.sources[0].rstrip("/"))
        for c in copies
        if c.instruction == "COPY" and not c.flags and len(c.sources) == 1
    ]


def _repo_path(path: str, copies: list[tuple[str, str]], repo: Path) -> Path:
    for dest, src in copies:
        if path == dest or path.startswith(dest + "/"):
            return repo / (src + path[len(dest) :])
    raise InstallLineError(f"{path} is not copied into the image from this repository before it is installed")


def parse_pip_install(command: str, resolve_path, image_constraint_names: set[str]) -> PipInstall | None:
    """One shell command -> PipInstall, or None if it is not a `pip install`."""
    words = shlex.split(command)
    if "pip" not in words or "install" not in words[words.index("pip") :]:
        return None
    args = words[words.index("install", words.index("pip")) + 1 :]
    reqs: list[str] = []
    files: list[Path] = []
    constraints: list[Path] = []
    flags: set[str] = set()
    image_constraints = editable = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in IGNORED_FLAGS:
            pass
        elif arg in BOOLEAN_FLAGS:
            flags.add(arg)
        elif arg in ("-c", "--constraint", "-r", "--requirement", "-e", "--editable"):
            i += 1
            if arg in ("-e", "--editable"):
                editable = True
            elif arg in ("-c", "--constraint") and args[i] in image_constraint_names:
                image_constraints = True
            else:
                (constraints if arg in ("-c", "--constraint") else files).append(resolve_path(args[i]))
        elif arg.startswith("-"):
            raise InstallLineError(f"pip option {arg!r} in {command!r} is not understood by the check")
        else:
            reqs.append(arg)
        i += 1
    return PipInstall(
        tuple(reqs),
        tuple(files),
        tuple(constraints),
        image_constraints,
        "--no-deps" in flags,
        editable,
        command.strip(),
    )


def dockerfile_installs(dockerfile: Path, repo: Path) -> list[PipInstall]:
    """Every `pip install` of the Dockerfile's RUN commands, in order."""
    text = dockerfile.read_text()
    lines = _logical_lines(text)
    copies = _copy_map(context_copies(text))
    base_lists = {m.group(1) for line in lines for m in [re.match(r"ARG BASE_PACKAGES=(\S+)", line)] if m}
    names = base_lists | {"${BASE_PACKAGES}", "$BASE_PACKAGES"}
    installs = []
    for line in lines:
        if line.startswith("RUN "):
            for command in line[4:].split("&&"):
                install = parse_pip_install(command, lambda p: _repo_path(p, copies, repo), names)
                if install:
                    installs.append(install)
    return installs


def dockerfile_import_check(dockerfile: Path) -> tuple[str, ...]:
    """The modules the Dockerfile imports after installing, to prove the install works."""
    for line in _logical_lines(dockerfile.read_text()):
        match = IMPORT_CHECK.search(line) if line.startswith("RUN ") else None
        if match:
            return tuple(m.strip() for m in match.group(1).split(","))
    return ()


def makefile_installs(makefile: Path, target: str, repo: Path) -> list[PipInstall]:
    """The `pip install` lines of one Makefile rule's recipe (variables left as written)."""
    lines = _logical_lines(makefile.read_text())
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{target}:")), None)
    if start is None:
        raise InstallLineError(f"{makefile} has no rule {target!r}")
    installs = []
    for line in lines[start + 1 :]:
        if line and not line.startswith("\t"):
            break
        command = line.strip().lstrip("@")
        for part in re.split(r"&&|\|\||;", command):
            if "-m pip install" in part:
                install = parse_pip_install(part.replace("$(PY)", "python"), lambda p: repo / p, set())
                if install:
                    installs.append(install)
    return installs
