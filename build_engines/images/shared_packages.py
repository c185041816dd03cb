"""Hard links of one virtualenv's installed distributions into another of the same Python: the
image environments (make image-venv) each need torch's PyPI build with its CUDA libraries (the
nvidia-* wheels, triton: ~4.5 GB with torch) only so that torch imports (transformers and
xgrammar import it in the CPU engine's stub), and every environment takes the same files (torch is
the main lock's 2.13.0 in each, its CUDA wheels pinned by torch itself).  A second environment links
the first one's files rather than installing them again: no second download, no second copy on
disk (a CI machine with little free space had run out during the tests).  pip sees them installed
(their .dist-info comes along) and a later `pip install` in either environment replaces files
rather than writing through the links."""

from __future__ import annotations

import os
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement

from contract.upstream.image_packages import canonical


def site_packages(venv: Path) -> Path:
    """The purelib folder of a virtualenv (lib/pythonX.Y/site-packages)."""
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    if len(found) != 1:
        raise FileNotFoundError(f"{venv}: expected one lib/python3.*/site-packages, found {found}")
    return found[0]


def _installed(site: Path) -> dict[str, Distribution]:
    return {canonical(d.metadata["Name"]): d for d in distributions(path=[str(site)])}


def _required(dist: Distribution, extras: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
    """What `dist` with `extras` requires, with the extras each requirement asks for (torch asks for
    cuda-toolkit[cublas,cudart,...]), on this machine (markers evaluated here)."""
    out = []
    for line in dist.requires or ():
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in {"", *extras}):
            out.append((canonical(requirement.name), frozenset(requirement.extras)))
    return out


def link_missing(source: Path, target: Path, root: str) -> list[str]:
    """Link `root` and what it requires, transitively, from `source` (a site-packages) into `target`
    where `target` lacks them; the names linked.  Files outside site-packages (console scripts)
    stay out."""
    if source.parent.name != target.parent.name:
        raise ValueError(f"{source} and {target} are not the same Python's site-packages")
    offered, have = _installed(source), _installed(target)
    wanted: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(canonical(root), frozenset())]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in offered:
            continue
        seen.add((name, extras))
        if name not in have:  # what the target has already is kept, what it requires still looked at
            wanted.add(name)
        todo += _required(offered[name], extras)
    for name in sorted(wanted):
        dist = offered[name]
        for file in dist.files or ():
            if ".." in Path(file).parts:
                continue
            src, dst = source / file, target / file
            if not src.is_file():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                os.link(src, dst)
    return sorted(wanted)
