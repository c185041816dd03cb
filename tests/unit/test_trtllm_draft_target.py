"""Draft-target speculative decoding on the TensorRT-LLM engine flow
(build_engines/trtllm/draft_target.py): the target built with --speculative_decoding_mode
draft_tokens_external --max_draft_len N, the draft model converted with the same tool and flags
and built as a plain engine into <engine>/draft, every command accepted by the version's table;
each rule (rows draft_target_*, and our own) refused naming its fields; the command line and
build.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from build_engines.cli_options import make_spec
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineLimits, Precision, SpecError
from build_engines.trtllm.options import DraftTargetOptions
from build_engines.trtllm.lora import TrtLlmLora
from build_engines.trtllm.plan import BuildPaths, plan_steps
from build_engines.trtllm.options import KvCacheDtype, SpeculativeDecoding, TrtLlmServing
from contract.upstream.trtllm_build import supported_versions
from tests.unit.trtllm_fixtures import LLAMA_3_KV_HEADS, LLAMA_8B, info_of, llama_8b_checkpoint, trtllm_spec

LIMITS = EngineLimits(max_batch_size=8, max_input_len=1536, max_seq_len=2048, max_num_tokens=512)
SPECULATIVE = ("--speculative_decoding_mode", "--max_draft_len")


@pytest.fixture
def ckpt(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "llama8b")


@pytest.fixture
def draft(tmp_path) -> Path:
    """A smaller Llama with the target's vocabulary, saved in float16 (the target is bfloat16)."""
    return llama_8b_checkpoint(tmp_path / "draft", {**LLAMA_8B, "num_hidden_layers": 2, "torch_dtype": "float16"})


def dt_spec(ckpt: Path, draft: Path | None, version: str | None = None, precision=Precision.FP16,
            limits: EngineLimits = LIMITS, max_draft_len: int = 10, **options) -> BuildSpec:
    return trtllm_spec(ckpt, precision, limits=limits, version=version,
                       speculative_decoding=SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL,
                       draft_target=DraftTargetOptions(str(draft) if draft else "", max_draft_len), **options)


def flags(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(argv[2::2], argv[3::2]))


def without(argv: tuple[str, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    """`argv` less the named flags and their values."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in names:
            skip = True
        else:
            out.append(token)
    return tuple(out)


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("precision, options, script", [
    (Precision.FP16, {}, "/examples/models/core/llama/convert_checkpoint.py"),
    (Precision.FP8, {"calib_dataset": "cnn_dailymail"}, "/examples/quantization/quantize.py"),
])
def test_the_plan_builds_the_target_and_a_plain_draft_engine(ckpt, draft, tmp_path, version, precision, options,
                                                             script):
    spec = dt_spec(ckpt, draft, version, precision, max_draft_len=6, **options)
    spec.validate(info_of(ckpt))
    paths = BuildPaths(tmp_path / "tllm", tmp_path / "engine", Path("/examples"))
    steps = plan_steps(spec, info_of(ckpt), paths)  # every argv checked against the version's table
    convert, build, draft_convert, draft_build = (s.argv for s in steps[:4])
    assert [s.argv for s in steps[4:]] == [(), ()]
    assert convert[1] == draft_convert[1] == script  # the same tool, the same flags
    assert flags(convert)["--model_dir"] == str(ckpt) and flags(convert)["--output_dir"] == str(tmp_path / "tllm")
    assert flags(draft_convert)["--model_dir"] == str(draft)
    assert flags(draft_convert)["--output_dir"] == str(tmp_path / "tllm.draft")
    assert without(draft_convert, ("--model_dir", "--output_dir", "--dtype")) == without(
        convert, ("--model_dir", "--output_dir", "--dtype"))
    if precision == Precision.FP8:  # not 16-bit: each model keeps its own dtype
        assert (flags(convert)["--dtype"], flags(draft_convert)["--dtype"]) == ("bfloat16", "float16")
    # the target verifies up to 6 draft tokens; the draft is a plain engine in <engine>/draft
    assert build[build.index("--speculative_decoding_mode") + 1] == "draft_tokens_external"
    assert build[build.index("--max_draft_len") + 1] == "6"
    assert build[build.index("--use_paged_context_fmha") + 1] == "enable"
    assert not set(SPECULATIVE) & set(draft_build)
    assert (draft_build[draft_build.index("--checkpoint_dir") + 1], draft_build[draft_build.index("--output_dir") + 1]) \
        == (str(tmp_path / "tllm.draft"), str(tmp_path / "engine" / "draft"))
    paths_flags = ("--checkpoint_dir", "--output_dir")
    assert without(draft_build, paths_flags) == without(build, paths_flags + SPECULATIVE)  # same switches and limits
    assert "max_seq_len 2054 and max_num_tokens 512" in steps[1].title  # 2048 + 6; max(512, 8 * 7)
    assert "draft model" in steps[2].title and "<engine>/draft" in steps[3].title
    assert "tensorrt_llm, tensorrt_llm_draft," in steps[-1].title


def test_without_draft_target_the_plan_has_no_draft_steps(ckpt, tmp_path):
    spec = trtllm_spec(ckpt, limits=LIMITS)
    steps = plan_steps(spec, info_of(ckpt), BuildPaths(tmp_path / "c", tmp_path / "e", Path("/x")))
    assert len(steps) == 4 and "tensorrt_llm_draft" not in steps[-1].title
    assert not set(SPECULATIVE) & set(steps[1].argv)


@pytest.mark.parametrize("changes, message", [
    ({"precision": Precision.INT8_WO}, r"'precision' 'int8_wo': draft-target builds \(draft and target\) are "
                                       r"float16, bfloat16, fp8 \(row draft_target_support_matrix\)"),
    ({"precision": Precision.INT4_AWQ, "calib_dataset": "c"}, r"'precision' 'int4_awq': draft-target builds"),
    ({"use_paged_context_fmha": False, "serving": TrtLlmServing(enable_kv_cache_reuse=False,
                                                                enable_chunked_context=False)},
     r"'use_paged_context_fmha' must be on with speculative_decoding draft_tokens_external: .*"
     r"\(row draft_target_requirements\) \(--paged-context-fmha\)"),
    ({"serving": TrtLlmServing(enable_kv_cache_reuse=False)},
     r"'enable_kv_cache_reuse' must be on .* \(--kv-cache-reuse\)"),
    ({"kv_cache_dtype": KvCacheDtype.INT8, "calib_dataset": "c"},
     r"'use_paged_context_fmha' must be on .* \(upstream turns it off: .*int8 KV cache"),
    ({"max_draft_len": 0}, r"'max_draft_len' 0 must be >= 1"),
    # without chunked context the executor takes prompts up to max_num_tokens only (the draft
    # loop re-sends the whole sequence as the prompt); with it, up to max_seq_len - 1 (LIMITS)
    ({"serving": TrtLlmServing(enable_chunked_context=False)},
     r"'max_num_tokens' 512 must be >= 'max_seq_len' - 1 = 2047 .* chunked context off: .* re-sends the prompt and "
     r"every token so far .*limit.max_input_len\); turn chunked context on or raise max_num_tokens"),
    ({"lora": TrtLlmLora("/adapters", ("sql",), ("attn_q",), 8)},
     r"'lora' adapters with speculative_decoding draft_tokens_external"),
])
def test_each_rule_is_refused_naming_its_fields(ckpt, draft, changes, message):
    changes = dict(changes)
    spec = dt_spec(ckpt, draft, precision=changes.pop("precision", Precision.FP16), **changes)
    with pytest.raises(SpecError, match=message):
        spec.validate(info_of(ckpt))


def test_the_draft_must_be_a_llama_checkpoint_with_the_targets_vocabulary_and_shape(ckpt, tmp_path):
    def refused(draft: Path | None, message: str, **options) -> None:
        with pytest.raises(SpecError, match=message):
            dt_spec(ckpt, draft, **options).validate(info_of(ckpt))

    refused(None, r"'draft_checkpoint' is required with speculative_decoding draft_tokens_external")
    (tmp_path / "empty").mkdir()
    refused(tmp_path / "empty", r"'draft_checkpoint' .*empty must be a Hugging Face Llama checkpoint \(config.json")
    other = llama_8b_checkpoint(tmp_path / "other", {**LLAMA_8B, "vocab_size": 32000})
    refused(other, r"vocab_size 32000 differs from the target's 128256; .* must share its vocabulary")
    short = llama_8b_checkpoint(tmp_path / "short", {**LLAMA_8B, "max_position_embeddings": 1024})
    refused(short, r"'max_seq_len' 2048 exceeds the draft's max_position_embeddings 1024")
    three_kv = llama_8b_checkpoint(tmp_path / "three", LLAMA_3_KV_HEADS)  # the target's 8 KV heads split over TP 2
    refused(three_kv, r"'draft_checkpoint' .*three: 'tp_size' 2 must divide them or be a multiple of them .*: the "
                      r"checkpoint has 3 KV heads", tp_size=2)


def test_the_command_line_and_build_json(ckpt, draft):
    common = dict(backend="tensorrt_llm", precision="bf16", max_batch_size=8, max_input_len=1536, max_seq_len=2048,
                  max_num_tokens=512, default_max_tokens=64, kv_cache_size_gb=None, prefix_caching=False,
                  inference_threads=0, gpu="H100-SXM")
    spec = make_spec(ckpt, **common, speculative_decoding="draft_tokens_external", draft_checkpoint=draft,
                     max_draft_len=6)
    assert spec.trtllm.draft_target == DraftTargetOptions(str(draft.resolve()), 6)
    assert spec.openvino.draft_checkpoint == ""  # --draft-checkpoint means the TensorRT-LLM draft here
    spec.validate(info_of(ckpt))
    assert BuildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).trtllm.draft_target == spec.trtllm.draft_target
    default = make_spec(ckpt, **common, speculative_decoding="draft_tokens_external", draft_checkpoint=draft)
    assert default.trtllm.draft_target.max_draft_len == 10
    for flags_ in ({"draft_checkpoint": draft}, {"max_draft_len": 6}):
        with pytest.raises(SpecError, match="'draft_checkpoint' and 'max_draft_len' on --backend tensorrt_llm need "
                                            "'speculative_decoding' draft_tokens_external"):
            make_spec(ckpt, **common, **flags_)
    cpu = {**common, "backend": "openvino", "precision": None, "gpu": None}
    assert make_spec(ckpt, **cpu, draft_checkpoint=draft).openvino.draft_checkpoint == str(draft.resolve())
    with pytest.raises(SpecError, match="'max_draft_len'.* configure --backend tensorrt_llm_pytorch"):
        make_spec(ckpt, **cpu, max_draft_len=6)
    pytorch = {**common, "backend": "tensorrt_llm_pytorch", "precision": None, "triton_image": "26.07"}
    assert make_spec(ckpt, **pytorch, pt_speculative_decoding="ngram").pytorch.speculative.max_draft_len == 4
    with pytest.raises(SpecError, match="'draft_checkpoint' configures --backend openvino or tensorrt_llm"):
        make_spec(ckpt, **pytorch, draft_checkpoint=draft)


def test_plan_prints_the_four_commands(ckpt, draft):
    from build_engines.cli import main

    result = CliRunner().invoke(main, [
        "plan", "--checkpoint", str(ckpt), "--backend", "tensorrt_llm", "--gpu", "H100-SXM", "--image", "25.12",
        "--max-input-len", "2047", "--speculative-decoding", "draft_tokens_external",
        "--draft-checkpoint", str(draft), "--max-draft-len", "4"])
    assert result.exit_code == 0, result.output
    assert "--speculative_decoding_mode draft_tokens_external --max_draft_len 4" in result.output
    assert f"--model_dir {draft.resolve()}" in result.output
    assert "/draft --max_batch_size" in result.output  # the draft engine's --output_dir


def test_the_capacity_plan_counts_both_engines_as_each_takes_its_memory(ckpt, draft):
    """Each engine is rendered with half the fraction and takes it of what is free when it loads:
    the target is planned as loading second, after the draft's weights, reserve and pool."""
    from build_engines.gpu.capacity import GIB, RUNTIME_RESERVE_GIB, estimate, weight_bytes

    spec = dt_spec(ckpt, draft)
    plain = trtllm_spec(ckpt, limits=LIMITS)
    f = spec.trtllm.engine_kv_cache_fraction
    assert f == plain.trtllm.engine_kv_cache_fraction / 2
    m, target = spec.trtllm.gpu.memory_gib, weight_bytes(info_of(ckpt), "fp16") / GIB
    drafted = weight_bytes(info_of(draft), "fp16") / GIB
    cap = estimate(info_of(ckpt), spec)
    draft_first = (m - drafted - RUNTIME_RESERVE_GIB) * f
    assert cap.draft_weights_gib_per_gpu == pytest.approx(drafted)
    assert cap.kv_pool_gib_per_gpu == pytest.approx((m - drafted - RUNTIME_RESERVE_GIB - draft_first - target
                                                     - RUNTIME_RESERVE_GIB) * f)
    assert cap.kv_pool_gib_per_gpu < estimate(info_of(ckpt), plain).kv_pool_gib_per_gpu / 2  # the old plan's figure
    line = next(x for x in cap.lines(spec) if x.startswith("KV cache:"))
    assert f"kv_cache_free_gpu_mem_fraction={f:g} of what is free when it loads, planned as loading second" in line
    assert "calculateFreeMemBytes" in line


def test_an_unreadable_draft_leaves_no_capacity_figure(ckpt, tmp_path):
    """The draft's weights share the GPUs: without its checkpoint there is no honest estimate."""
    from build_engines.gpu.capacity import CapacityError, estimate

    with pytest.raises(CapacityError, match="the draft engine's weights share the GPUs"):
        estimate(info_of(ckpt), dt_spec(ckpt, tmp_path / "missing"))


def test_a_multi_gpu_draft_target_plan_says_how_it_is_served(ckpt, draft):
    """Issue 33 item 4: both engines are built with the target's TP, so both need every rank;
    the plan says the server runs in upstream's orchestrator mode (NVIDIA's draft-target
    README: `--multi-model` is necessary if TP mode is used), and on one GPU it does not."""
    from build_engines.cli import main

    args = ["plan", "--checkpoint", str(ckpt), "--backend", "tensorrt_llm", "--gpu", "H100-SXM", "--image", "25.12",
            "--speculative-decoding", "draft_tokens_external", "--draft-checkpoint", str(draft)]
    result = CliRunner().invoke(main, args + ["--tp", "2"])
    assert result.exit_code == 0, result.output
    serve = [line for line in result.output.splitlines() if line.startswith("serve:")]
    assert len(serve) == 1 and "orchestrator mode" in serve[0] and "TRTLLM_ORCHESTRATOR=1" in serve[0], serve
    assert "examples/draft_target_model/README.md" in serve[0]
    single = CliRunner().invoke(main, args)
    assert single.exit_code == 0 and "orchestrator" not in single.output
