"""Every citation names the commit it was read at and what that commit is (contract/upstream/refs.json)."""

import subprocess
from pathlib import Path

import pytest

from contract.upstream.refs import CommitRecord, Refs, load_refs, problems, source_problems

MIRRORS = Path("/work/.mirror")
TRT = "NVIDIA/TensorRT-LLM"
REQS_1_1 = "000867d9b1ad62f3de1e54e111c094da492a5626"  # TensorRT-LLM requirements.txt, the 1.1 line


def test_every_source_of_every_table_is_held_to_the_record():
    assert problems() == []


def test_the_requirements_commit_is_the_1_1_line_and_cannot_be_cited_as_1_2_1():
    """The clash of issue 46: modelopt_hf_ptq_0.37.0 cited requirements.txt @000867d9 as v1.2.1
    while image_packages_25.12 cited it as v1.1.0 (tensorrt~=10.13.3, torch<=2.9.0: the 1.1 line)."""
    refs = load_refs()
    assert refs.commits[(TRT, REQS_1_1)].stands_for == ("v1.1.0",)
    (problem,) = source_problems(refs, "modelopt_hf_ptq_0.37.0", "trtllm_requirements", TRT, "v1.2.1", REQS_1_1)
    assert "stands for ['v1.1.0'], not v1.2.1" in problem
    assert source_problems(refs, "image_packages_25.12", "trtllm_requirements", TRT, "v1.1.0", REQS_1_1) == []


def test_a_commit_that_is_one_ref_cannot_be_cited_as_another():
    refs = Refs({("o/r", "r26.06"): "a" * 40}, {}, {})
    (problem,) = source_problems(refs, "t", "s", "o/r", "r26.07", "a" * 40)
    assert "that commit is o/r r26.06, not r26.07" in problem
    assert source_problems(refs, "t", "s", "o/r", "r26.06", "a" * 40) == []


def test_a_source_needs_a_full_commit_recorded_somewhere():
    refs = Refs({}, {("o/r", "b" * 40): CommitRecord("o/r", "b" * 40, "a commit", ("v1",))}, {})
    assert "names no full commit" in source_problems(refs, "t", "s", "o/r", "v1", "bbbbbbbb")[0]
    assert "recorded nowhere" in source_problems(refs, "t", "s", "o/r", "v1", "c" * 40)[0]
    assert source_problems(refs, "t", "s", "o/r", "v1", "b" * 40) == []


def test_the_gap_list_only_shrinks():
    refs = Refs({}, {}, {("t", "s"): "read in a wheel"})
    assert source_problems(refs, "t", "s", "o/r", "v1", "") == []
    assert (
        "listed in refs.json gaps but has a full commit now"
        in source_problems(refs, "t", "s", "o/r", "v1", "d" * 40)[0]
    )


def _mirror(repo: str) -> Path:
    return MIRRORS / repo.replace("/", "+") / "repo"


@pytest.mark.parametrize("repo_ref", sorted(load_refs().refs), ids=lambda k: f"{k[0]}@{k[1]}")
def test_each_recorded_ref_resolves_to_its_commit_in_the_mirror(repo_ref):
    repo, ref = repo_ref
    if not _mirror(repo).is_dir():
        pytest.skip(f"no mirror of {repo} on this machine")
    out = subprocess.run(
        ["git", "-C", str(_mirror(repo)), "rev-parse", f"{ref}^{{commit}}"], capture_output=True, text=True
    )
    if ref == "main" and out.returncode == 0 and out.stdout.strip() != load_refs().refs[repo_ref]:
        pytest.skip("main has moved since it was read")
    assert out.stdout.strip() == load_refs().refs[repo_ref]
