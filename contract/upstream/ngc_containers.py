"""The NGC Triton containers' host requirements (`data/ngc_containers.json`) as typed objects.

- `driver` rows: the CUDA version of a trtllm-python-py3 release and the CUDA driver it needs,
  from the server's release compatibility matrix, with any datacenter forward-compatibility
  branches the matrix lists (none at r26.07 / r25.12: rule `no_forward_compat_branches`);
- the `entrypoint` row: where NVIDIA's entrypoint and its entrypoint.d scripts live in the image.

Standard library only: `make gpu-check` reads it on the host before anything is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table

TABLE = "ngc_containers"
_VERSION = re.compile(r"^\d+(\.\d+)*$")


def driver_tuple(version: str) -> tuple[int, ...]:
    """'590.44.01' -> (590, 44, 1); a driver version nvidia-smi prints, or the matrix's."""
    version = version.strip()
    if not _VERSION.match(version):
        raise ValueError(f"{version!r} is not a driver version (expected digits and dots, e.g. 590.44.01)")
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class DriverRequirement:
    release: str
    image: str
    cuda_version: str
    min_driver: str
    forward_compat_branches: tuple[str, ...]  # datacenter driver branches the matrix allows (R535 -> "535")
    citation: Citation

    def problem(self, driver: str) -> str | None:
        """Why `driver` cannot run this image, or None."""
        found = driver_tuple(driver)
        if found >= driver_tuple(self.min_driver):
            return None
        if str(found[0]) in self.forward_compat_branches:
            return None
        allowed = ", ".join("R" + b for b in self.forward_compat_branches)
        branches = (
            f" or a datacenter forward-compatibility branch ({allowed})"
            if allowed
            else " (the matrix lists no forward-compatibility branch)"
        )
        return (
            f"{self.image} needs NVIDIA driver >= {self.min_driver} (CUDA {self.cuda_version}){branches}; "
            f"this host has driver {driver} [{self.citation.source.repo}@{self.citation.source.ref}:"
            f"{self.citation.source.path} L{self.citation.lines}]"
        )


@dataclass(frozen=True)
class Entrypoint:
    path: str  # /opt/nvidia/nvidia_entrypoint.sh
    entrypoint_d: str
    citation: Citation


@dataclass(frozen=True)
class NgcContainers:
    drivers: dict[str, DriverRequirement]  # by release
    entrypoint: Entrypoint
    table: Table

    def driver(self, release: str) -> DriverRequirement:
        if release not in self.drivers:
            raise UpstreamTableError(
                f"{TABLE}: no driver requirement for Triton {release!r}; read for {sorted(self.drivers)}"
            )
        return self.drivers[release]


@lru_cache(maxsize=None)
def load_ngc_containers() -> NgcContainers:
    table = load_table(TABLE)
    kinds: dict[str, list[dict]] = {}
    for row in table.rows:
        kinds.setdefault(row["kind"], []).append(row)
    unknown = set(kinds) - {"driver", "entrypoint", "rule"}
    if unknown:
        raise UpstreamTableError(f"{TABLE}: unknown row kinds {sorted(unknown)}")
    drivers = {
        r["release"]: DriverRequirement(
            r["release"],
            r["image"],
            r["cuda_version"],
            r["min_driver"],
            tuple(r.get("forward_compat_branches", ())),
            table.citation(r),
        )
        for r in kinds["driver"]
    }
    for requirement in drivers.values():
        driver_tuple(requirement.min_driver)  # a malformed row fails at load
    (entry,) = kinds["entrypoint"]
    return NgcContainers(drivers, Entrypoint(entry["path"], entry["entrypoint_d"], table.citation(entry)), table)
