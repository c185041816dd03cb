"""The Python package set of an NGC Triton TensorRT-LLM image (`data/image_packages_<release>.json`)
as typed objects: which version of each package that matters to the kit's install the image
carries, which packages it does not carry, and how each fact was found.

The images cannot be pulled here, so the set is reconstructed from upstream's recipes (server
`build.py`, tensorrtllm_backend's `Dockerfile.triton.trt_llm_backend`, the wheels' requirements):
a row is `read` where an upstream file pins the version, `inferred` where upstream only bounds it
(then `bound` says how, and the version is the newest release inside the bound on the image's
cutoff date, found with pip's `--uploaded-prior-to`).  Only the packages of the kit's install
closure are listed; a package the resolver wants that the table does not know is an error of
the check (build_engines/images/resolver.py), not a silent pass.

    pkgs = load_image_packages("25.12")
    pkgs.constraints()        # ['annotated-doc==0.0.4', ...] the image's pins, as `-c` lines
    pkgs.version("protobuf")  # '5.29.5'

Where no file read bounds a version, the row is a range: `version` is its high end and `low` its
low end, each saying where it came from; `ends()` names the two, and `version(name, "low")` reads one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table, table_names

TABLE_PREFIX = "image_packages_"
LATER_IMAGES_TABLE = "trtllm_images_later"
BASES = ("read", "inferred")
ENDS = ("low", "high")  # the two ends of a range row; "high" is the row's own version


def canonical(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class ImagePackage:
    name: str  # canonical
    version: str
    basis: str  # "read" | "inferred"
    bound: str  # the upstream bound an inferred version lies in ("" for read rows)
    how: str  # how the version was found
    citation: Citation
    low: str | None = None  # a range row's low end (version is the high end); None: one version
    low_how: str = ""
    low_citation: Citation | None = None


@dataclass(frozen=True)
class AbsentPackage:
    name: str  # canonical
    how: str  # why the image is known not to carry it
    citation: Citation


@dataclass(frozen=True)
class ImagePackageSet:
    release: str  # "25.12"
    image: str
    python_version: str  # "3.12"
    platform: str  # "linux_x86_64"
    glibc: str  # "2.39": the newest manylinux tag the image's wheels may carry
    triton_version: str
    trtllm_version: str
    cutoff: str  # ISO date: releases after it cannot be in the image
    packages: dict[str, ImagePackage]
    absent: dict[str, AbsentPackage]
    table: Table

    def version(self, name: str, end: str = "high") -> str | None:
        """The image's version of `name`; for a range row, its `end` ("low" | "high")."""
        if end not in ENDS:
            raise ValueError(f"end must be one of {ENDS}, not {end!r}")
        row = self.packages.get(canonical(name))
        if row is None:
            return None
        return row.low if end == "low" and row.low is not None else row.version

    def ends(self) -> tuple[str, ...]:
        """("low", "high") where some row is a range, () where every version is one value."""
        return ENDS if any(row.low is not None for row in self.packages.values()) else ()

    def knows(self, name: str) -> bool:
        return canonical(name) in self.packages or canonical(name) in self.absent

    def constraints(self) -> list[str]:
        """The image's packages as pip constraint lines, as `pip list --format=freeze` gives them."""
        return [f"{row.name}=={row.version}" for row in sorted(self.packages.values(), key=lambda r: r.name)]


@dataclass(frozen=True)
class LaterImage:
    release: str
    trtllm_version: str | None  # None: not readable
    engine_backend: str  # "yes" | "no" | "unknown"
    summary: str
    citation: Citation


def supported_releases() -> list[str]:
    return sorted(name[len(TABLE_PREFIX) :] for name in table_names() if name.startswith(TABLE_PREFIX))


def _rows(table: Table, kind: str) -> list[dict[str, Any]]:
    return [row for row in table.rows if row.get("kind") == kind]


@lru_cache(maxsize=None)
def load_image_packages(release: str) -> ImagePackageSet:
    if release not in supported_releases():
        raise UpstreamTableError(f"no package table for image {release!r}; have {supported_releases()}")
    table = load_table(TABLE_PREFIX + release)
    unknown = {row.get("kind") for row in table.rows} - {"image", "package", "absent"}
    if unknown:
        raise UpstreamTableError(f"{table.name}: unknown row kinds {sorted(unknown, key=str)}")
    (image,) = _rows(table, "image")
    packages: dict[str, ImagePackage] = {}
    for row in _rows(table, "package"):
        name = canonical(row["name"])
        if row["basis"] not in BASES or name in packages:
            raise UpstreamTableError(f"{table.name}: bad or repeated package row {row!r}")
        if row["basis"] == "inferred" and not row.get("bound"):
            raise UpstreamTableError(f"{table.name}: inferred row {name} must say the bound it was inferred in")
        low = row.get("low")
        if low is not None and not (isinstance(low, dict) and low.get("version") and low.get("how")):
            raise UpstreamTableError(f"{table.name}: {name}'s low end must give its version, how and cite")
        packages[name] = ImagePackage(
            name,
            row["version"],
            row["basis"],
            row.get("bound", ""),
            row["how"],
            table.citation(row),
            low["version"] if low else None,
            low["how"] if low else "",
            table.citation(low) if low else None,
        )
    absent = {
        canonical(row["name"]): AbsentPackage(canonical(row["name"]), row["how"], table.citation(row))
        for row in _rows(table, "absent")
    }
    both = set(packages) & set(absent)
    if both:
        raise UpstreamTableError(f"{table.name}: {sorted(both)} listed as present and absent")
    return ImagePackageSet(
        release=image["release"],
        image=image["image"],
        python_version=image["python"],
        platform=image["platform"],
        glibc=image["glibc"],
        triton_version=image["triton_version"],
        trtllm_version=image["trtllm_version"],
        cutoff=image["cutoff"],
        packages=packages,
        absent=absent,
        table=table,
    )


@lru_cache(maxsize=None)
def later_images() -> tuple[LaterImage, ...]:
    """The images after the newest supported one, with what could (not) be read about them."""
    table = load_table(LATER_IMAGES_TABLE)
    return tuple(
        LaterImage(
            row["release"], row.get("trtllm_version"), row["engine_backend"], row["summary"], table.citation(row)
        )
        for row in table.rows
    )
