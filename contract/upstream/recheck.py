"""Whether a newer version's row was read at that version, or is an older version's row relabelled.

A table family has one file per TensorRT-LLM version (`trtllm_build_1.1.0`, `trtllm_build_1.2.1`).
Every row of a newer one carries a `recheck` against the version before it:

    "recheck": {"against": "1.1.0", "status": "unchanged", "read_at": "<commit or branch read>",
                "older_commit": "<what the older row was read at>", "note": "..."}

- `unchanged` / `changed`: re-read at `read_at`, a source of the newer version, and compared;
- `new`: read for the newer version (its own source), with nothing in the older table to compare;
- `not_reread`: no source of the newer version could be read; `note` says what was tried, and the
  row's citation stays `confirmed: false`.  Such a row is the older reading, labelled as such.

`unchecked_rows` lists the rows that cite the very file version the older table cites and say
nothing of it: the silent relabelling the tests refuse.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from contract.upstream.citation import Table, UpstreamTableError, load_table, table_names


class RecheckStatus(str, enum.Enum):
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    NEW = "new"
    NOT_REREAD = "not_reread"


@dataclass(frozen=True)
class Recheck:
    against: str  # the older version compared with
    status: RecheckStatus
    read_at: str  # the commit (or branch) read for the newer version; "" when not re-read
    older_commit: str  # what the older version's reading cited, when compared
    note: str


def recheck_of(table: Table, row: dict[str, Any]) -> Recheck | None:
    raw = row.get("recheck")
    if raw is None:
        return None
    try:
        return Recheck(
            raw["against"],
            RecheckStatus(raw["status"]),
            raw.get("read_at", ""),
            raw.get("older_commit", ""),
            raw.get("note", ""),
        )
    except (KeyError, ValueError) as e:
        raise UpstreamTableError(f"{table.name}: malformed recheck {raw!r} ({e})") from None


_VERSIONED = re.compile(r"^(?P<family>.+)_(?P<version>\d+\.\d+\.\d+(?:rc\d+)?)$")


def _version_key(version: str) -> tuple:
    main, _, rc = version.partition("rc")
    return tuple(int(p) for p in main.split(".")) + ((int(rc),) if rc else (10**6,))


def twin_pairs() -> list[tuple[str, str]]:
    """(older, newer) table names of one family, consecutive versions, among the versions an
    image pins (contract/upstream/data/trtllm_build_*.json): the versions this kit serves."""
    from contract.upstream.trtllm_build import supported_versions

    pinned = set(supported_versions())
    families: dict[str, list[str]] = {}
    for name in table_names():
        match = _VERSIONED.match(name)
        if match and match["version"] in pinned:
            families.setdefault(match["family"], []).append(match["version"])
    pairs = []
    for family, versions in sorted(families.items()):
        ordered = sorted(versions, key=_version_key)
        pairs += [(f"{family}_{a}", f"{family}_{b}") for a, b in zip(ordered, ordered[1:])]
    return pairs


def _file(table: Table, row: dict[str, Any]) -> tuple[str, str, str]:
    source = table.citation(row).source
    return source.repo, source.path, source.commit


def unchecked_rows(older: Table, newer: Table) -> list[str]:
    """Rows of `newer` citing a file version `older` cites, without a recheck saying either that
    it was re-read unchanged at a newer source or that it could not be re-read."""
    old_files = {(s.repo, s.path, s.commit) for s in older.sources.values() if s.commit}
    out = []
    for row in newer.rows:
        if _file(newer, row) not in old_files:
            continue
        check = recheck_of(newer, row)
        if (
            check is None
            or check.against != older.upstream_version
            or check.status not in (RecheckStatus.UNCHANGED, RecheckStatus.NOT_REREAD)
        ):
            out.append(str(row.get("id") or row.get("flag") or row.get("name") or row))
    return out


def not_reread(name: str) -> list[dict[str, Any]]:
    """The rows of table `name` that are an older version's reading, labelled as such."""
    table = load_table(name)
    return [row for row in table.rows if (c := recheck_of(table, row)) and c.status == RecheckStatus.NOT_REREAD]
