"""What every cited commit is, recorded once (`contract/upstream/refs.json`), and the check that
holds every source of every upstream table to it.

    refs     (repo, ref) -> the commit that ref resolved to where it was fetched (`how` says so)
    commits  every other commit a source cites: what it is, and which refs a reading at it may
             stand for (`stands_for`), with the evidence
    gaps     sources that still lack a full commit, each with why; the list can only shrink

A source's `ref` is the ref its reading stands for and `commit` the commit read.  `problems()`
refuses a source without a full commit (unless listed in gaps), a commit cited under a ref it is
not (a commit that is ref A cited as ref B, or an unidentified commit cited for a ref its record
does not allow), a commit recorded nowhere, and a row claiming `confirmed` at a commit that is
not its ref's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from contract.upstream.citation import load_table, table_names

REFS_FILE = Path(__file__).parent / "refs.json"
FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class CommitRecord:
    repo: str
    commit: str
    what: str  # what the commit is
    stands_for: tuple[str, ...]  # the refs a reading at it may be cited for


@dataclass(frozen=True)
class Refs:
    refs: dict[tuple[str, str], str]  # (repo, ref) -> commit
    commits: dict[tuple[str, str], CommitRecord]  # (repo, commit) -> record
    gaps: dict[tuple[str, str], str]  # (table, source key) -> why it has no full commit

    def refs_at(self, repo: str, commit: str) -> list[str]:
        return sorted(ref for (r, ref), c in self.refs.items() if r == repo and c == commit)


def parse_refs(raw: dict) -> Refs:
    refs: dict[tuple[str, str], str] = {}
    for entry in raw["refs"]:
        key = (entry["repo"], entry["ref"])
        if key in refs:
            raise ValueError(f"refs.json: {key} recorded twice")
        refs[key] = entry["commit"]
    commits: dict[tuple[str, str], CommitRecord] = {}
    for entry in raw["commits"]:
        key = (entry["repo"], entry["commit"])
        if key in commits:
            raise ValueError(f"refs.json: commit {key} recorded twice")
        commits[key] = CommitRecord(entry["repo"], entry["commit"], entry["is"], tuple(entry["stands_for"]))
    gaps = {(g["table"], g["source"]): g["why"] for g in raw.get("gaps", [])}
    return Refs(refs, commits, gaps)


@lru_cache(maxsize=1)
def load_refs() -> Refs:
    return parse_refs(json.loads(REFS_FILE.read_text()))


def record_problems(refs: Refs) -> list[str]:
    """The record itself: full commits, and no commit both a ref's and an unidentified one."""
    out = [
        f"refs.json: {repo} {ref} -> {c!r} is not a full commit"
        for (repo, ref), c in refs.refs.items()
        if not FULL_COMMIT.match(c)
    ]
    out += [f"refs.json: {repo} {c!r} is not a full commit" for repo, c in refs.commits if not FULL_COMMIT.match(c)]
    out += [
        f"refs.json: {repo} {c[:12]} is recorded as {refs.refs_at(repo, c)} and as unidentified"
        for repo, c in refs.commits
        if refs.refs_at(repo, c)
    ]
    return out


def source_problems(refs: Refs, table: str, key: str, repo: str, ref: str, commit: str) -> list[str]:
    where = f"{table} source {key!r} ({repo} {ref} @{commit[:12] or '-'})"
    if (table, key) in refs.gaps:
        return [f"{where}: listed in refs.json gaps but has a full commit now"] if FULL_COMMIT.match(commit) else []
    if repo.count("/") != 1 or not ref:
        return [f"{where}: needs repo 'owner/name' and a ref"]
    if not FULL_COMMIT.match(commit):
        return [f"{where}: names no full commit (40 hex digits) it was read at"]
    identified = refs.refs_at(repo, commit)
    if identified:
        return [] if ref in identified else [f"{where}: that commit is {repo} {', '.join(identified)}, not {ref}"]
    record = refs.commits.get((repo, commit))
    if record is None:
        return [f"{where}: the commit is recorded nowhere in refs.json (say what it is)"]
    if ref not in record.stands_for:
        return [f"{where}: that commit is {record.what}; it stands for {list(record.stands_for)}, not {ref}"]
    return []


def problems(refs: Refs | None = None) -> list[str]:
    """Every source of every table in contract/upstream/data, held to refs.json."""
    refs = refs or load_refs()
    out = record_problems(refs)
    seen: set[tuple[str, str]] = set()
    for name in table_names():
        table = load_table(name)
        for key, s in table.sources.items():
            seen.add((name, key))
            out += source_problems(refs, name, key, s.repo, s.ref, s.commit)
        for row in table.rows:
            cite = table.citation(row)
            s = cite.source
            if cite.confirmed and FULL_COMMIT.match(s.commit) and refs.refs.get((s.repo, s.ref)) != s.commit:
                out.append(
                    f"{name}: a row citing {s.path} @{s.commit[:12]} claims confirmed, but that commit is "
                    f"not {s.repo} {s.ref}'s ({row.get('id') or row.get('name') or row.get('flag') or ''})"
                )
    out += [f"refs.json gap {t}/{k}: no such source" for t, k in refs.gaps if (t, k) not in seen]
    return out
