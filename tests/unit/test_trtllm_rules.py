"""Upstream's implicit rules, as the planner applies them: every rule of every supported
version's table is implemented and each one changes the effective engine (or refuses the
spec) exactly as its cited upstream lines do."""

import dataclasses
from pathlib import Path

import pytest

from build_engines.trtllm import rules as R
from build_engines.gpus import GpuTarget, known_gpu
from build_engines.spec_base import EngineLimits, Precision, SpecError
from build_engines.trtllm.rules import effective_config, kv_head_problems, kv_heads_per_gpu
from build_engines.trtllm.options import KvCacheDtype, TrtLlmPlugins, TrtLlmServing
from build_engines.trtllm.spec import effective
from contract.upstream.trtllm_build import load_build_table, supported_versions
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec

WHOLE_PROMPTS = EngineLimits(max_num_tokens=1536)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return llama_8b_checkpoint(tmp_path_factory.mktemp("llama8b"))


def eff(ckpt, precision=Precision.FP16, limits=WHOLE_PROMPTS, **options):
    spec = trtllm_spec(ckpt, precision, limits=limits, **options)
    return effective(spec.precision.value, spec.trtllm, spec.limits)


def overridden(config) -> dict[str, tuple[bool, bool, str]]:
    return {o.setting: (o.requested, o.effective, o.rule.id) for o in config.overrides}


@pytest.mark.parametrize("version", supported_versions())
def test_every_rule_of_the_table_is_implemented_and_nothing_else(version):
    assert set(load_build_table(version).rules) == R.RULE_IDS


def test_item_1_int8_kv_turns_paged_context_fmha_chunking_and_reuse_off(ckpt):
    config = eff(ckpt, kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="c")
    assert overridden(config) == {
        "use_paged_context_fmha": (True, False, R.INT8_KV_NO_PAGED),
        "enable_chunked_context": (True, False, R.CHUNKED_NEEDS_PAGED),
        "enable_kv_cache_reuse": (True, False, R.REUSE_NEEDS_PAGED)}
    assert config.max_prompt_len == 1536 and not config.refusals


def test_item_1_refused_at_plan_time_naming_the_fields_and_the_fix(ckpt):
    """The issue's command: fp16, int8 KV, max_num_tokens 512 < max_input_len 1536."""
    spec = trtllm_spec(ckpt, limits=EngineLimits(), kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="cnn_dailymail")
    with pytest.raises(SpecError) as e:
        spec.validate(info_of(ckpt))
    message = str(e.value)
    for part in ("'max_num_tokens' (512) < 'max_input_len' (1536)", "kv_cache_dtype 'int8'",
                 "int8 KV cache turns paged context FMHA off", "tensorrt_llm/builder.py L1164-1169",
                 "the executor turns chunked context off", "min(max_seq_len - 1, max_num_tokens) = 512",
                 "fix: raise --max-num-tokens to >= 1536", "--precision fp8 --kv-cache-dtype fp8"):
        assert part in message, part


def test_fp8_kv_keeps_paged_context_fmha_only_with_fp8_weights(ckpt):
    fp16 = eff(ckpt, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c")
    assert overridden(fp16)["use_paged_context_fmha"] == (True, False, R.FP8_KV_PAGED_NEEDS_FP8_WEIGHTS)
    assert not fp16.enable_chunked_context and not fp16.enable_kv_cache_reuse
    fp8 = eff(ckpt, Precision.FP8, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c")
    assert fp8.use_paged_context_fmha and fp8.use_fp8_context_fmha and fp8.enable_chunked_context
    assert fp8.overrides == ()  # FP8 context FMHA was asked for: the builder keeps it


def test_fp8_context_fmha_needs_an_fp8_kv_cache_with_paged_context_fmha(ckpt):
    """Item 4: FP8 weights with a 16-bit KV cache get no FP8 context FMHA."""
    config = eff(ckpt, Precision.FP8, calib_dataset="c")
    assert overridden(config) == {"use_fp8_context_fmha": (True, False, R.FP8_CTX_WITH_PAGED_NEEDS_FP8_KV)}
    assert config.use_paged_context_fmha and config.enable_chunked_context


def test_fp8_kv_turns_fp8_context_fmha_on(ckpt):
    table = load_build_table("1.1.0")
    spec = trtllm_spec(ckpt, Precision.FP8, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c")
    # weights that are FP8 in the builder's eyes, but whose FP8 context FMHA we did not ask for
    config = effective_config(table, "w4a8_awq", spec.trtllm, 2048, 512, 512)
    assert overridden(config) == {"use_fp8_context_fmha": (False, True, R.FP8_KV_ENABLES_FP8_CTX)}


def test_fp8_context_fmha_needs_fp8_weights(ckpt):
    table = load_build_table("1.1.0")
    spec = trtllm_spec(ckpt, Precision.FP8, calib_dataset="c")
    serving = TrtLlmServing(enable_kv_cache_reuse=False, enable_chunked_context=False)
    options = dataclasses.replace(spec.trtllm, use_paged_context_fmha=False, serving=serving)
    no_paged = effective_config(table, "fp8", options, 2048, 512, 512)
    assert no_paged.use_fp8_context_fmha  # FP8 weights without paged context FMHA: the builder leaves it on
    # the planner asks for it only with FP8 weights; the builder turns it off for any other weights
    not_fp8 = R._State("int8_sq", "auto", 90, 1, {"reduce_fusion": False, "context_fmha": True,
                                                   "use_paged_context_fmha": True, "use_fp8_context_fmha": True,
                                                   "enable_chunked_context": True, "enable_kv_cache_reuse": True})
    R._builder_rules(table, not_fp8)
    assert [(o.setting, o.rule.id) for o in not_fp8.overrides] == [("use_fp8_context_fmha", R.FP8_CTX_NEEDS_FP8_WEIGHTS)]


def test_fp8_context_fmha_below_sm_89(ckpt):
    table = load_build_table("1.1.0")
    spec = trtllm_spec(ckpt, Precision.FP8, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c",
                       gpu=GpuTarget("A100", 80, 80, 1))  # the spec refuses FP8 there; the rule still holds
    config = effective_config(table, "fp8", spec.trtllm, 2048, 512, 512)
    assert overridden(config)["use_fp8_context_fmha"] == (True, False, R.FP8_CTX_MIN_SM)
    assert overridden(config)["use_paged_context_fmha"] == (True, False, R.FP8_CTX_MIN_SM)


def test_context_fmha_off_turns_both_variants_off(ckpt):
    config = eff(ckpt, Precision.FP8, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c",
                 plugins=TrtLlmPlugins(context_fmha=False))
    assert {k: v[2] for k, v in overridden(config).items()} == {
        "use_fp8_context_fmha": R.CONTEXT_FMHA_OFF, "use_paged_context_fmha": R.CONTEXT_FMHA_OFF,
        "enable_chunked_context": R.CHUNKED_NEEDS_PAGED, "enable_kv_cache_reuse": R.REUSE_NEEDS_PAGED}


def test_reduce_fusion_needs_tensor_parallelism(ckpt):
    """The spec refuses it with TP 1 (our error names the field); the builder would drop it."""
    table = load_build_table("1.1.0")
    spec = trtllm_spec(ckpt, plugins=TrtLlmPlugins(reduce_fusion=True))
    config = effective_config(table, "full_prec", spec.trtllm, 2048, 512, 512)
    assert overridden(config) == {"reduce_fusion": (True, False, R.REDUCE_FUSION_NEEDS_TP)}
    assert eff(ckpt, tp_size=2, plugins=TrtLlmPlugins(reduce_fusion=True)).reduce_fusion


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("precision,kv,message", [
    (Precision.INT8_WO, KvCacheDtype.AUTO, r"'precision' 'int8_wo': 'gpu' B200 is SM 10.0: TensorRT-LLM .* refuses"),
    (Precision.INT4_AWQ, KvCacheDtype.AUTO, r"'precision' 'int4_awq': 'gpu' B200 is SM 10.0"),
    (Precision.INT8_SQ, KvCacheDtype.AUTO, r"'precision' 'int8_sq': .*SmoothQuant"),
    (Precision.FP16, KvCacheDtype.INT8, r"'kv_cache_dtype' 'int8': 'gpu' B200 is SM 10.0.*fix: use --kv-cache-dtype fp8"),
])
def test_item_3_b200_refuses_integer_quantization(ckpt, version, precision, kv, message):
    spec = trtllm_spec(ckpt, precision, "B200", limits=WHOLE_PROMPTS, version=version, kv_cache_dtype=kv,
                       calib_dataset="c")
    with pytest.raises(SpecError, match=message):
        spec.validate(info_of(ckpt))


@pytest.mark.parametrize("gpu,precision,kv", [
    ("B200", Precision.FP8, KvCacheDtype.FP8), ("B200", Precision.BF16, KvCacheDtype.AUTO),
    ("RTX-PRO-6000", Precision.INT8_WO, KvCacheDtype.AUTO),  # SM 12.0: outside the SM 10.x rule
    ("H100-SXM", Precision.INT8_SQ, KvCacheDtype.INT8),
])
def test_what_b200_and_others_accept(ckpt, gpu, precision, kv):
    trtllm_spec(ckpt, precision, gpu, limits=WHOLE_PROMPTS, kv_cache_dtype=kv, calib_dataset="c").validate(info_of(ckpt))


def test_b200_is_a_known_sm_100_gpu():
    assert known_gpu("B200").sm == 100 and known_gpu("GB200").sm == 100


@pytest.mark.parametrize("kv_heads,tp,per_gpu", [(8, 1, 8), (8, 2, 4), (8, 8, 1), (3, 3, 1), (3, 6, 1), (1, 4, 1),
                                                 (8, 16, 1)])
def test_item_5_kv_heads_per_gpu(kv_heads, tp, per_gpu):
    assert kv_heads_per_gpu(kv_heads, tp) == per_gpu
    assert kv_head_problems(load_build_table("1.1.0"), kv_heads, tp) == []


def test_tp_that_neither_divides_nor_multiplies_the_kv_heads_is_refused():
    with pytest.raises(ValueError):
        kv_heads_per_gpu(3, 4)
    assert "must divide them or be a multiple of them" in kv_head_problems(load_build_table("1.1.0"), 3, 4)[0]


def test_a_rule_missing_from_a_versions_table_is_not_applied(ckpt):
    table = load_build_table("1.1.0")
    without = dataclasses.replace(table, rules={k: v for k, v in table.rules.items() if k != R.INT8_KV_NO_PAGED})
    spec = trtllm_spec(ckpt, kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="c")
    assert effective_config(without, "full_prec", spec.trtllm, 2048, 512, 1536).use_paged_context_fmha
    no_dup = dataclasses.replace(table, rules={k: v for k, v in table.rules.items() if k != R.KV_HEAD_DUPLICATION})
    assert "must divide them:" in kv_head_problems(no_dup, 3, 6)[0]


def test_rendered_serving_parameters_are_the_effective_ones(ckpt):
    from build_engines.trtllm.repository import tensorrt_llm_parameters

    spec = trtllm_spec(ckpt, limits=WHOLE_PROMPTS, kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="c",
                       serving=TrtLlmServing(enable_kv_cache_reuse=True, enable_chunked_context=True))
    params = tensorrt_llm_parameters(Path("/e"), spec)
    assert (params.enable_chunked_context, params.enable_kv_cache_reuse) == (False, False)
