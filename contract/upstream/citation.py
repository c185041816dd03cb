"""Where an upstream fact comes from, and the common shape of every upstream table file.

A table file (`contract/upstream/data/<name>.json`) is one JSON object:

    {"title": "...", "upstream_version": "1.1.0",
     "sources": {"<key>": {"repo": "NVIDIA/TensorRT-LLM", "ref": "v1.1.0", "path": "...",
                           "commit": "<the commit actually read, when it is not `ref` itself>"}},
     "rows": [{..., "cite": {"source": "<key>", "lines": "120-135"}}, ...]}

`sources` names each upstream file once; a row's `cite` points at one of them (with lines,
and `confirmed: false` plus a `note` where the fact could not be checked at that ref, e.g.
when the file could only be read at another commit than the pinned tag).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Source:
    repo: str  # owner/name on GitHub
    ref: str  # the tag or branch the fact is claimed for
    path: str
    commit: str = ""  # the commit actually read, where it is not `ref` itself (then say so in rows)

    def url(self, lines: str = "") -> str:
        anchor = ""
        if lines:
            first, _, last = lines.partition("-")
            anchor = f"#L{first}" + (f"-L{last}" if last else "")
        return f"https://github.com/{self.repo}/blob/{self.commit or self.ref}/{self.path}{anchor}"


@dataclass(frozen=True)
class Citation:
    source: Source
    lines: str = ""  # "120-135" or "120"
    confirmed: bool = True  # False: not confirmed at this exact ref (see note)
    note: str = ""

    def __str__(self) -> str:
        where = f"{self.source.repo}@{self.source.ref}:{self.source.path}" + (f" L{self.lines}" if self.lines else "")
        return where if self.confirmed else f"{where} (unconfirmed: {self.note})"


class UpstreamTableError(ValueError):
    pass


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    upstream_version: str
    sources: dict[str, Source]
    rows: tuple[dict[str, Any], ...]

    def citation(self, row: dict[str, Any]) -> Citation:
        cite = row.get("cite")
        if not isinstance(cite, dict) or cite.get("source") not in self.sources:
            raise UpstreamTableError(f"{self.name}: row {row!r} has no citation of a known source")
        return Citation(
            self.sources[cite["source"]],
            str(cite.get("lines", "")),
            bool(cite.get("confirmed", True)),
            str(cite.get("note", "")),
        )


@lru_cache(maxsize=None)
def load_table(name: str) -> Table:
    """Load `data/<name>.json`; every row must cite one of the file's sources."""
    path = DATA_DIR / f"{name}.json"
    raw = json.loads(path.read_text())
    try:
        sources = {key: Source(**value) for key, value in raw["sources"].items()}
        table = Table(name, raw["title"], raw["upstream_version"], sources, tuple(raw["rows"]))
    except (KeyError, TypeError) as e:
        raise UpstreamTableError(f"{path}: not an upstream table ({e})") from e
    for row in table.rows:
        table.citation(row)
    return table


def table_names() -> list[str]:
    return sorted(p.stem for p in DATA_DIR.glob("*.json"))
