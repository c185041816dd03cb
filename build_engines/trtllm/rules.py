"""The effective TensorRT-LLM engine: what we ask for, after upstream's implicit rules.

TensorRT-LLM's builder and executor silently change some settings (an int8 KV cache turns
paged context FMHA off, which turns chunked context and KV-cache reuse off, ...) and refuse
others late (SM 100-119 refuses integer quantization after calibration ran).  This module
applies those rules, as recorded with citations in the conformance table of the spec's
TensorRT-LLM version (contract/upstream/data/trtllm_build_<version>.json), so that the plan
shows and emits the configuration the engine will really have, and refuses at plan time what
upstream would refuse later.  The order of the rules follows tensorrt_llm/builder.py build().

A rule missing from a version's table is not applied; every rule id of a table is implemented
here (RULE_IDS), which the tests check for each supported version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contract.upstream.trtllm_build import BuildRule, TrtllmBuildTable

# Our TensorRT-LLM precision -> the weight format as quantize.py names it (--qformat); 16-bit
# weights are its full_prec.  The upstream rules are written in these names.
WEIGHT_FORMAT = {
    "fp16": "full_prec",
    "bf16": "full_prec",
    "fp8": "fp8",
    "int8_sq": "int8_sq",
    "int8_wo": "int8_wo",
    "int4_awq": "int4_awq",
}

if TYPE_CHECKING:
    from build_engines.checkpoint import CheckpointInfo
    from build_engines.trtllm.options import TrtLlmOptions

CONTEXT_FMHA_OFF = "context_fmha_off_disables_fmha_variants"
FP8_CTX_NEEDS_FP8_WEIGHTS = "fp8_context_fmha_needs_fp8_weights"
FP8_KV_PAGED_NEEDS_FP8_WEIGHTS = "fp8_kv_paged_context_fmha_needs_fp8_weights"
FP8_CTX_MIN_SM = "fp8_context_fmha_min_sm"
FP8_CTX_WITH_PAGED_NEEDS_FP8_KV = "fp8_context_fmha_with_paged_needs_fp8_kv"
FP8_KV_ENABLES_FP8_CTX = "fp8_kv_enables_fp8_context_fmha"
INT8_KV_NO_PAGED = "int8_kv_disables_paged_context_fmha"
SM100_NO_INT_QUANT = "sm100_refuses_integer_quantization"
SM100_NO_SMOOTHQUANT = "sm100_refuses_smoothquant"
REDUCE_FUSION_NEEDS_TP = "reduce_fusion_needs_tensor_parallelism"
CHUNKED_NEEDS_PAGED = "chunked_context_needs_paged_context_fmha"
REUSE_NEEDS_PAGED = "kv_cache_reuse_needs_paged_context_fmha"
PROMPT_NEEDS_CHUNKING = "context_longer_than_max_num_tokens_needs_chunking"
KV_HEAD_DUPLICATION = "kv_heads_duplicated_across_tensor_parallelism"
EAGLE_MATRIX, EAGLE_LIMITS = "eagle_support_matrix", "eagle_builder_limits"  # build_engines/trtllm/eagle.py
EAGLE_TREE, EAGLE_CHOICES_PARAMETER = "eagle_choices_tree", "eagle_choices_parameter"
SPECULATIVE_GROWS_LIMITS = "speculative_decoding_grows_limits"
DRAFT_TARGET_MATRIX, DRAFT_TARGET_REQUIREMENTS = "draft_target_support_matrix", "draft_target_requirements"
DRAFT_TARGET_BLS_LOOP = "draft_target_bls_loop"  # build_engines/trtllm/draft_target.py
RULE_IDS = frozenset(
    {
        CONTEXT_FMHA_OFF,
        FP8_CTX_NEEDS_FP8_WEIGHTS,
        FP8_KV_PAGED_NEEDS_FP8_WEIGHTS,
        FP8_CTX_MIN_SM,
        FP8_CTX_WITH_PAGED_NEEDS_FP8_KV,
        FP8_KV_ENABLES_FP8_CTX,
        INT8_KV_NO_PAGED,
        SM100_NO_INT_QUANT,
        SM100_NO_SMOOTHQUANT,
        REDUCE_FUSION_NEEDS_TP,
        CHUNKED_NEEDS_PAGED,
        REUSE_NEEDS_PAGED,
        PROMPT_NEEDS_CHUNKING,
        KV_HEAD_DUPLICATION,
        EAGLE_MATRIX,
        EAGLE_LIMITS,
        EAGLE_TREE,
        EAGLE_CHOICES_PARAMETER,
        SPECULATIVE_GROWS_LIMITS,
        DRAFT_TARGET_MATRIX,
        DRAFT_TARGET_REQUIREMENTS,
        DRAFT_TARGET_BLS_LOOP,
    }
)


def _switch(on: bool) -> str:
    return "enable" if on else "disable"


@dataclass(frozen=True)
class Override:
    setting: str  # the trtllm-build flag or tensorrt_llm model parameter
    requested: bool
    effective: bool
    rule: BuildRule

    def line(self) -> str:
        return f"{self.setting}: {_switch(self.requested)} -> {_switch(self.effective)}: {self.rule.describe()}"


@dataclass
class _State:
    """The settings the rules act on, as the builder sees them."""

    weights: str  # quantize.py --qformat name of the weights (full_prec for 16-bit)
    kv_cache_dtype: str  # auto | fp8 | int8
    sm: int
    tp_size: int
    settings: dict[str, bool]
    causes: dict[str, BuildRule] = field(default_factory=dict)  # setting -> the rule that turned it off
    overrides: list[Override] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def set(self, setting: str, value: bool, rule: BuildRule | None) -> None:
        if rule is None or self.settings[setting] == value:
            return
        self.overrides.append(Override(setting, self.settings[setting], value, rule))
        self.settings[setting] = value
        self.causes[setting] = rule


@dataclass(frozen=True)
class EffectiveConfig:
    version: str
    context_fmha: bool
    use_paged_context_fmha: bool
    use_fp8_context_fmha: bool
    reduce_fusion: bool
    enable_chunked_context: bool
    enable_kv_cache_reuse: bool
    max_prompt_len: int  # the longest prompt the engine accepts
    overrides: tuple[Override, ...]
    refusals: tuple[str, ...]  # each names its fields, the cited rule and the fix

    def override(self, setting: str) -> Override | None:
        return next((o for o in self.overrides if o.setting == setting), None)


def effective_config(
    table: TrtllmBuildTable,
    weights: str,
    options: "TrtLlmOptions",
    max_seq_len: int,
    max_num_tokens: int,
    max_input_len: int,
) -> EffectiveConfig:
    s = _State(
        weights=weights,
        kv_cache_dtype=options.kv_cache_dtype.value,
        sm=options.gpu.sm,
        tp_size=options.tp_size,
        settings={
            "reduce_fusion": options.plugins.reduce_fusion,
            "context_fmha": options.plugins.context_fmha,
            "use_paged_context_fmha": options.use_paged_context_fmha,
            # we ask for FP8 context FMHA exactly when the weights are FP8; the rules decide
            "use_fp8_context_fmha": weights == "fp8",
            "enable_chunked_context": options.serving.enable_chunked_context,
            "enable_kv_cache_reuse": options.serving.enable_kv_cache_reuse,
        },
    )
    _builder_rules(table, s)
    if options.speculative_decoding.value == "eagle":  # after the FMHA chain in builder.py (row eagle_builder_limits)
        s.set("use_paged_context_fmha", True, table.rule(EAGLE_LIMITS))
    _sm100_rules(table, s, options.gpu.name)
    _executor_rules(table, s)
    max_prompt = max_seq_len - 1
    if not s.settings["enable_chunked_context"]:
        max_prompt = min(max_seq_len - 1, max_num_tokens)
        if max_input_len > max_prompt and (rule := table.rule(PROMPT_NEEDS_CHUNKING)):
            s.refusals.append(_prompt_refusal(s, rule, max_num_tokens, max_input_len, max_seq_len))
    v = s.settings
    return EffectiveConfig(
        table.version,
        v["context_fmha"],
        v["use_paged_context_fmha"],
        v["use_fp8_context_fmha"],
        v["reduce_fusion"],
        v["enable_chunked_context"],
        v["enable_kv_cache_reuse"],
        max_prompt,
        tuple(s.overrides),
        tuple(s.refusals),
    )


def _builder_rules(table: TrtllmBuildTable, s: _State) -> None:
    """tensorrt_llm/builder.py build(): reduce_fusion, then the paged/FP8 context FMHA chain."""
    if s.tp_size == 1:
        s.set("reduce_fusion", False, table.rule(REDUCE_FUSION_NEEDS_TP))
    fp8_kv, fp8_weights = s.kv_cache_dtype == "fp8", _fp8_weights(table)
    if not s.settings["context_fmha"]:
        rule = table.rule(CONTEXT_FMHA_OFF)
        s.set("use_fp8_context_fmha", False, rule)
        s.set("use_paged_context_fmha", False, rule)
    elif fp8_weights is not None and s.weights not in fp8_weights:
        s.set("use_fp8_context_fmha", False, table.rule(FP8_CTX_NEEDS_FP8_WEIGHTS))
        if fp8_kv:
            s.set("use_paged_context_fmha", False, table.rule(FP8_KV_PAGED_NEEDS_FP8_WEIGHTS))
    elif (rule := table.rule(FP8_CTX_MIN_SM)) and s.sm < rule.params["min_sm"]:
        s.set("use_fp8_context_fmha", False, rule)
        if fp8_kv:
            s.set("use_paged_context_fmha", False, rule)
    elif s.settings["use_paged_context_fmha"]:
        if not fp8_kv:
            s.set("use_fp8_context_fmha", False, table.rule(FP8_CTX_WITH_PAGED_NEEDS_FP8_KV))
        else:
            s.set("use_fp8_context_fmha", True, table.rule(FP8_KV_ENABLES_FP8_CTX))
    rule = table.rule(INT8_KV_NO_PAGED)
    if rule and s.kv_cache_dtype in rule.params["kv_cache_dtypes"]:
        s.set("use_paged_context_fmha", False, rule)


def _fp8_weights(table: TrtllmBuildTable) -> list[str] | None:
    rule = table.rule(FP8_CTX_NEEDS_FP8_WEIGHTS) or table.rule(FP8_KV_PAGED_NEEDS_FP8_WEIGHTS)
    return rule.params["weights"] if rule else None


def _sm100_rules(table: TrtllmBuildTable, s: _State, gpu_name: str) -> None:
    for rule_id in (SM100_NO_INT_QUANT, SM100_NO_SMOOTHQUANT):
        rule = table.rule(rule_id)
        if rule is None or not rule.params["sm_min"] <= s.sm < rule.params["sm_max_exclusive"]:
            continue
        where = (
            f"'gpu' {gpu_name} is SM {s.sm / 10:.1f}: TensorRT-LLM {table.version} refuses this on "
            f"SM {rule.params['sm_min'] / 10:.1f}-{(rule.params['sm_max_exclusive'] - 1) / 10:.1f}"
        )
        if s.weights in rule.params["weights"]:
            s.refusals.append(
                f"'precision' {_precision_name(s.weights)!r}: {where} ({rule.describe()}); "
                "fix: use --precision fp8 (or fp16/bf16) on this GPU"
            )
        if s.kv_cache_dtype in rule.params.get("kv_cache_dtypes", ()):
            s.refusals.append(
                f"'kv_cache_dtype' {s.kv_cache_dtype!r}: {where} ({rule.describe()}); "
                "fix: use --kv-cache-dtype fp8 (or auto)"
            )


def _precision_name(weights: str) -> str:
    return next((p for p, w in WEIGHT_FORMAT.items() if w == weights), weights)


def _executor_rules(table: TrtllmBuildTable, s: _State) -> None:
    if not s.settings["use_paged_context_fmha"]:
        s.set("enable_chunked_context", False, table.rule(CHUNKED_NEEDS_PAGED))
        s.set("enable_kv_cache_reuse", False, table.rule(REUSE_NEEDS_PAGED))


def _prompt_refusal(s: _State, rule: BuildRule, max_num_tokens: int, max_input_len: int, max_seq_len: int) -> str:
    head = (
        f"'max_num_tokens' ({max_num_tokens}) < 'max_input_len' ({max_input_len}) with chunked context off "
        f"(kv_cache_dtype {s.kv_cache_dtype!r}, precision {_precision_name(s.weights)!r}): "
    )
    paged_off = s.causes.get("use_paged_context_fmha")
    if paged_off is not None:
        why = (
            f"upstream turns use_paged_context_fmha off ({paged_off.describe()}), so the executor turns chunked "
            f"context off ({s.causes['enable_chunked_context'].describe()})"
            if "enable_chunked_context" in s.causes
            else f"upstream turns use_paged_context_fmha off ({paged_off.describe()})"
        )
        keep = (
            "--kv-cache-dtype auto, or FP8 weights with an fp8 KV cache (--precision fp8 --kv-cache-dtype fp8)"
            if s.kv_cache_dtype != "auto"
            else "keep context FMHA enabled"
        )
        fix = (
            f"fix: raise --max-num-tokens to >= {max_input_len} (chunked context and KV-cache reuse stay off), "
            f"or keep paged context FMHA: {keep}"
        )
    else:
        why = "chunked context is off in the spec ('enable_chunked_context' false or 'use_paged_context_fmha' off)"
        fix = (
            f"fix: raise --max-num-tokens to >= {max_input_len}, or enable chunked context "
            "(--chunked-context with --paged-context-fmha)"
        )
    return (
        f"{head}{why}; then the longest prompt the engine accepts is min(max_seq_len - 1, max_num_tokens) = "
        f"{min(max_seq_len - 1, max_num_tokens)} ({rule.describe()}); {fix}"
    )


def kv_heads_per_gpu(num_kv_heads: int, tp_size: int) -> int:
    """KV heads each GPU holds: a share of them, or one (duplicated) head when tp_size is a multiple of them."""
    if num_kv_heads % tp_size == 0:
        return num_kv_heads // tp_size
    if tp_size % num_kv_heads == 0:
        return 1
    raise ValueError(f"'tp_size' {tp_size} neither divides nor is a multiple of {num_kv_heads} KV heads")


def kv_head_problems(table: TrtllmBuildTable, num_kv_heads: int, tp_size: int) -> list[str]:
    if num_kv_heads % tp_size == 0:
        return []
    rule = table.rule(KV_HEAD_DUPLICATION)
    if rule is not None and tp_size % num_kv_heads == 0:
        return []
    allowed = "divide them or be a multiple of them (KV heads are duplicated)" if rule else "divide them"
    return [
        f"'tp_size' {tp_size} must {allowed}: the checkpoint has {num_kv_heads} KV heads (num_key_value_heads)"
        + (f" [{rule.citation}]" if rule else "")
    ]


def checkpoint_parallelism_problems(
    table: TrtllmBuildTable, info: "CheckpointInfo", tp_size: int, pp_size: int
) -> list[str]:
    """TP/PP against a checkpoint's heads and layers (the target's, and a draft model's)."""
    errors = kv_head_problems(table, info.num_kv_heads, tp_size)
    if info.num_heads % tp_size:
        errors.append(f"'tp_size' {tp_size} must divide the checkpoint's {info.num_heads} attention heads")
    if pp_size > info.num_layers:
        errors.append(f"'pp_size' {pp_size} exceeds the checkpoint's {info.num_layers} layers")
    return errors
