"""Issue 33 item 6: each version's rules read at that version.  A newer version's table must not
be an older one relabelled: every row says where it was read for that version and whether it
changed since the older one, and a row that still cites the older version's commit says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.upstream.citation import load_table
from contract.upstream.recheck import RecheckStatus, recheck_of, twin_pairs, unchecked_rows
from contract.upstream.trtllm_build import load_build_table

PAIRS = twin_pairs()
MIRROR = Path("/work/.mirror/triton-inference-server+tensorrtllm_backend/repo")


def test_the_1_2_1_tables_have_their_1_1_0_twins():
    names = {(old, new) for old, new in PAIRS}
    for family in ("trtllm_build", "trtllm_backend_semantics", "triton_models", "nvidia_behaviours"):
        assert (f"{family}_1.1.0", f"{family}_1.2.1") in names


@pytest.mark.parametrize("older,newer", PAIRS)
def test_every_newer_row_says_where_it_was_read_and_whether_it_changed(older, newer):
    old, new = load_table(older), load_table(newer)
    missing = [row.get("id", row) for row in new.rows if recheck_of(new, row) is None]
    assert not missing, f"{newer}: {len(missing)} rows without a recheck against {old.upstream_version}: {missing[:5]}"
    for row in new.rows:
        check = recheck_of(new, row)
        assert check.against == old.upstream_version
        if check.status == RecheckStatus.NOT_REREAD:
            assert check.note and not new.citation(row).confirmed, row
        else:
            assert check.read_at, row  # the commit (or branch) read for this version


@pytest.mark.parametrize("older,newer", PAIRS)
def test_no_row_cites_the_older_versions_commit_without_saying_it_was_checked(older, newer):
    """A row citing the very file version the older table cites is either re-read at the newer
    version (unchanged / changed, naming the commit read) or says it was not, and why."""
    assert unchecked_rows(load_table(older), load_table(newer)) == []


@pytest.mark.parametrize("older,newer", PAIRS)
def test_a_recheck_names_a_source_of_the_newer_version(older, newer):
    old, new = load_table(older), load_table(newer)
    old_commits = {s.commit for s in old.sources.values() if s.commit}
    for row in new.rows:
        check = recheck_of(new, row)
        if check is not None and check.status in (RecheckStatus.UNCHANGED, RecheckStatus.CHANGED):
            assert check.read_at not in old_commits, row


def test_the_26_07_image_builds_the_backend_from_the_fork_at_the_pinned_commit():
    pin = load_build_table("1.2.1").image("26.07")
    assert pin.trtllm_commit.startswith("ca88df0a4005")
    assert pin.backend_repo == "triton-inference-server/TensorRT-LLM" and pin.backend_ref == "r26.07"
    assert pin.backend_citation is not None and pin.backend_citation.source.repo == "triton-inference-server/server"
    assert pin.backend_citation.source.ref == "r26.07" and pin.backend_citation.source.path == "build.py"


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no tensorrtllm_backend mirror on this machine")
def test_rows_rechecked_at_the_triton_branch_match_the_mirror():
    """Rows re-read in tensorrtllm_backend's docs at r26.07: the cited lines hold the same text at
    r25.12 (unchanged) or not (changed)."""
    import subprocess

    def text(commit, path):
        return subprocess.run(["git", "-C", str(MIRROR), "show", f"{commit}:{path}"], capture_output=True, text=True,
                              check=True).stdout.split("\n")

    for newer in ("trtllm_backend_semantics_1.2.1", "nvidia_behaviours_1.2.1"):
        table = load_table(newer)
        for row in table.rows:
            cite, check = table.citation(row), recheck_of(table, row)
            if cite.source.repo != "triton-inference-server/tensorrtllm_backend" or not check.read_at \
                    or check.status not in (RecheckStatus.UNCHANGED, RecheckStatus.CHANGED) or not cite.lines:
                continue
            first, _, last = cite.lines.partition("-")
            block = text(check.read_at, cite.source.path)[int(first) - 1:int(last or first)]
            old = "\n".join(text(check.older_commit, cite.source.path))
            assert ("\n".join(block) in old) == (check.status == RecheckStatus.UNCHANGED), row["id"]
