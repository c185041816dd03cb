"""The engine-build conformance tables: what they say about the images and the tools, and the
checks the planner runs against them."""

from pathlib import Path

import pytest

from build_engines.trtllm.plan import CONVERT_SCRIPT, QUANTIZE_SCRIPT, TRTLLM_BUILD
from contract.upstream.citation import UpstreamTableError
from contract.upstream.trtllm_build import FlagType, load_build_table, supported_versions, version_of_release

MIRROR = Path("/work/.mirror/triton-inference-server+tensorrtllm_backend/repo")


def test_both_supported_versions_have_a_table():
    assert supported_versions() == ["1.1.0", "1.2.1"]
    with pytest.raises(UpstreamTableError, match=r"TensorRT-LLM '1.3.0' has no conformance table; supported"):
        load_build_table("1.3.0")


@pytest.mark.parametrize("release,version,tensorrt,ref", [
    ("25.12", "1.1.0", "10.13.3.9", "release/1.1"), ("26.01", "1.1.0", "10.13.3.9", "release/1.1"),
    ("26.02", "1.1.0", "10.13.3.9", "release/1.1"), ("26.04", "1.2.1", "10.14.1.48", "release/1.2.1"),
    ("26.07", "1.2.1", "10.14.1.48", "release/1.2.1"),
])
def test_image_pins(release, version, tensorrt, ref):
    pin = load_build_table(version).image(release)
    assert version_of_release(release) == version
    assert (pin.tensorrt_version, pin.trtllm_ref) == (tensorrt, ref)
    assert pin.image == f"nvcr.io/nvidia/tritonserver:{release}-trtllm-python-py3"
    # read at the branch itself: confirmed, citing the tensorrtllm_backend Dockerfile of that release
    assert pin.citation.confirmed and pin.citation.source.ref == f"r{release}"
    assert pin.citation.source.path == "dockerfile/Dockerfile.triton.trt_llm_backend"


def test_pinned_submodules_are_the_commits_named_in_the_brief():
    assert load_build_table("1.1.0").image("25.12").trtllm_commit.startswith("9bab773cb5d3")
    assert load_build_table("1.2.1").image("26.07").trtllm_commit.startswith("ca88df0a4005")
    assert load_build_table("1.2.1").newest_image.release == "26.07"


def test_26_03_is_not_supported():
    """tensorrtllm_backend r26.03 builds TensorRT-LLM 1.2.0rc8: no table, so no plan for it."""
    with pytest.raises(UpstreamTableError, match="'26.03' is not supported"):
        version_of_release("26.03")


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no tensorrtllm_backend mirror on this machine")
@pytest.mark.parametrize("version", ["1.1.0", "1.2.1"])
def test_image_rows_match_the_mirror(version):
    import subprocess

    for pin in load_build_table(version).images:
        cite = pin.citation
        text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{cite.source.commit}:{cite.source.path}"],
                              capture_output=True, text=True, check=True).stdout.split("\n")
        first, last = (int(n) for n in cite.lines.split("-"))
        block = "\n".join(text[first - 1:last])
        assert f"TENSORRTLLM_VER={version}" in block and f"TRT_VER={pin.tensorrt_version}" in block


@pytest.mark.parametrize("version", ["1.1.0", "1.2.1"])
def test_tools_and_their_scripts(version):
    table = load_build_table(version)
    assert set(table.tools) == {TRTLLM_BUILD, "quantize", "convert_checkpoint", "convert_eagle"}
    assert table.tools["quantize"].source.path.endswith(str(QUANTIZE_SCRIPT))
    assert table.tools["convert_checkpoint"].source.path.endswith(str(CONVERT_SCRIPT))


@pytest.mark.parametrize("version", ["1.1.0", "1.2.1"])
def test_flags_we_depend_on(version):
    table = load_build_table(version)
    choice = {f.flag: f.values for f in table.flags.values() if f.type == FlagType.CHOICE and f.tool == TRTLLM_BUILD}
    assert choice["--use_paged_context_fmha"] == choice["--use_fp8_context_fmha"] == ("enable", "disable")
    assert "auto" in choice["--gemm_plugin"] and "auto" in choice["--gpt_attention_plugin"]
    assert choice["--kv_cache_type"] == ("continuous", "paged", "disabled")
    assert table.flags[(TRTLLM_BUILD, "--tokens_per_block")].default == "32"
    assert table.flags[("quantize", "--qformat")].values == ("nvfp4", "fp8", "int8_sq", "int4_awq", "w4a8_awq",
                                                            "int8_wo", "int4_wo", "full_prec")
    assert table.flags[("quantize", "--kv_cache_dtype")].values == ("int8", "fp8")
    assert table.flags[("convert_checkpoint", "--use_weight_only")].type == FlagType.FLAG
    # the flags the kit emits are also used with those values by tensorrtllm_backend's docs at the tag
    used = table.flags[(TRTLLM_BUILD, "--kv_cache_type")].used_at_tag
    assert used is not None and used.confirmed and used.source.repo == "triton-inference-server/tensorrtllm_backend"


def test_check_argv_names_each_problem():
    table = load_build_table("1.1.0")
    assert table.check_argv(TRTLLM_BUILD, ["--max_num_tokens", "512", "--use_paged_context_fmha", "disable"]) == []
    assert table.check_argv("convert_checkpoint", ["--use_weight_only", "--weight_only_precision", "int8"]) == []
    assert table.check_argv(TRTLLM_BUILD, ["--max_num_tokens", "many", "--paged_context_fmha", "on",
                                           "--use_fp8_context_fmha", "on"]) == [
        "trtllm-build --max_num_tokens takes an integer, got 'many'",
        "trtllm-build --paged_context_fmha is not a flag of TensorRT-LLM 1.1.0",
        "trtllm-build --use_fp8_context_fmha accepts ['enable', 'disable'], got 'on'"]
    assert table.check_argv("quantize", ["--qformat"]) == ["quantize --qformat needs a value"]
    assert table.check_argv("mpirun", []) == ["'mpirun' is not a tool of TensorRT-LLM 1.1.0; tools: "
                                              "['convert_checkpoint', 'convert_eagle', 'quantize', 'trtllm-build']"]


@pytest.mark.parametrize("version", ["1.1.0", "1.2.1"])
def test_every_upstream_row_says_where_it_was_read(version):
    """Rows that cite NVIDIA/TensorRT-LLM could not be read at the tag: each says which commit instead."""
    table = load_build_table(version)
    for row in table.table.rows:
        cite = table.table.citation(row)
        if cite.source.repo == "NVIDIA/TensorRT-LLM":
            assert not cite.confirmed and cite.source.commit[:12] in cite.note and cite.source.ref == f"v{version}"
            assert "not confirmed at the tag" in cite.note
        assert cite.lines and all(part.isdigit() for part in cite.lines.split("-"))
