"""GPU engine limits sized for the GPU (both TensorRT-LLM flows; the CPU engine keeps its own).

Each limit starts from upstream's default at the spec's TensorRT-LLM version
(build_engines/gpu/limit_table.py) and is sized from what the plan already knows - the GPU's
memory, the model's context and the KV-cache budget (build_engines/gpu/capacity.py) - the way
trtllm-bench derives its build settings:

- max_seq_len: the model's context, as trtllm-build and the LLM API deduce it when unset
  (row build.max_seq_len), lowered only to what the KV cache holds, so one full sequence fits;
- max_batch_size: trtllm-bench's rounding of the requests of the design shape
  (capacity.DESIGN_INPUT_LEN + DESIGN_OUTPUT_LEN tokens) the KV cache holds, never above
  upstream's default (row bench.tuning; trtllm-bench takes total memory x 0.95 where the plan
  takes the serving fraction it renders);
- max_num_tokens: upstream's default, or trtllm-bench's value for that batch where higher;
- max_input_len: the longest prompt the executor takes (backend-semantics row limit.max_input_len):
  max_seq_len - 1 with chunked context, else min(max_seq_len - 1, max_num_tokens).

A limit given on the command line always wins; the plan says of each why it has its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from build_engines.checkpoint import CheckpointError, CheckpointInfo, inspect_checkpoint
from build_engines.gpu.capacity import (
    DESIGN_INPUT_LEN,
    DESIGN_OUTPUT_LEN,
    CapacityError,
    estimate,
    pytorch_capacity_spec,
    pytorch_draft,
)
from build_engines.gpu.limit_table import UpstreamLimits, limit_versions, upstream_limits
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend

ORDER = ("max_seq_len", "max_batch_size", "max_num_tokens", "max_input_len")  # each may use those before it
DESIGN = f"{DESIGN_INPUT_LEN} + {DESIGN_OUTPUT_LEN} tokens"


@dataclass(frozen=True)
class SizingFacts:
    upstream: UpstreamLimits
    context: int  # the longest sequence the model (and a draft model) supports, as upstream deduces it
    context_why: str
    kv_tokens: int | None  # tokens the KV cache holds; None when the weights do not fit
    pp_size: int
    chunked_context: bool  # effective: a prompt longer than max_num_tokens is prefilled in chunks
    batch_bound: tuple[int, str] | None  # an upstream bound on max_batch_size, and where it comes from


@dataclass(frozen=True)
class SizedLimit:
    name: str
    value: int  # what the spec has
    sized: int  # what sizing chooses
    why: str

    def line(self) -> str:
        if self.value == self.sized:
            return f"limit {self.name} {self.value}: {self.why}"
        return f"limit {self.name} {self.value}: given (sizing would choose {self.sized}: {self.why})"


def model_context(info: CheckpointInfo, deduction: dict) -> tuple[int, str]:
    """trtllm-build's deduction of max_seq_len (row build.max_seq_len), within max_position_embeddings."""
    config = json.loads((Path(info.path) / "config.json").read_text())
    rope = config.get("rope_scaling") or {}
    kind = rope.get("type", rope.get("rope_type"))
    mpe = info.max_position_embeddings
    why = f"max_position_embeddings {mpe}"
    if not rope or kind in deduction["unscaled_rope_types"] or float(rope.get("factor", 1.0)) == 1.0:
        return mpe, why + (f", which rope {kind} scales no further" if rope else "")
    return mpe, (
        why + f"; upstream would multiply it by rope {kind}'s factor {rope.get('factor')}, this kit keeps "
        "max_seq_len within max_position_embeddings"
    )


def _context(spec: BuildSpec, info: CheckpointInfo, up: UpstreamLimits) -> tuple[int, str]:
    context, why = model_context(info, up.seq_len_deduction)
    if spec.backend == EngineBackend.TENSORRT_LLM and spec.trtllm.has_draft_engine:
        from build_engines.trtllm.draft_target import read_draft

        try:
            draft = read_draft(spec.trtllm.draft_target)
        except CheckpointError:
            return context, why  # validation names the draft's problem
        if draft.max_position_embeddings < context:
            return (
                draft.max_position_embeddings,
                f"the draft model's max_position_embeddings {draft.max_position_embeddings}",
            )
    return context, why


def _kv_tokens(spec: BuildSpec, info: CheckpointInfo) -> int | None:
    try:
        draft = None
        if spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH:
            from build_engines.pytorch.spec import served_format

            draft = pytorch_draft(spec)
            spec = pytorch_capacity_spec(spec, *served_format(spec.precision.value, spec.pytorch, info))
        return estimate(info, spec, draft).kv_tokens
    except (CapacityError, KeyError, ValueError):
        return None


def _engine_facts(spec: BuildSpec) -> tuple[bool, tuple[int, str] | None]:
    from build_engines.trtllm.options import SpeculativeDecoding
    from build_engines.trtllm.rules import EAGLE_LIMITS
    from build_engines.trtllm.spec import effective
    from contract.upstream.trtllm_build import load_build_table

    t = spec.trtllm
    try:
        chunked = effective(spec.precision.value, t, spec.limits).enable_chunked_context
    except KeyError:  # a precision this flow lacks: validation names it
        chunked = t.serving.enable_chunked_context
    bound = None
    if t.speculative_decoding == SpeculativeDecoding.EAGLE:
        rule = load_build_table(t.trtllm_version).required_rule(EAGLE_LIMITS)
        bound = (rule.params["max_batch_size"], f"trtllm-build refuses more for EAGLE (row {EAGLE_LIMITS})")
    return chunked, bound


def sizing_facts(spec: BuildSpec, info: CheckpointInfo) -> SizingFacts | None:
    """What sizing needs, for a GPU spec whose version has a limit table (None otherwise)."""
    if spec.backend == EngineBackend.OPENVINO:
        return None
    options = spec.trtllm if spec.backend == EngineBackend.TENSORRT_LLM else spec.pytorch
    if options.trtllm_version not in limit_versions():
        return None  # validation refuses the version, naming the supported ones
    up = upstream_limits(options.trtllm_version)
    context, why = _context(spec, info, up)
    if spec.backend == EngineBackend.TENSORRT_LLM:
        chunked, bound = _engine_facts(spec)
    else:
        chunked, bound = spec.pytorch.serving.enable_chunked_prefill, None
    return SizingFacts(up, context, why, _kv_tokens(spec, info), options.pp_size, chunked, bound)


def _seq_len(f: SizingFacts) -> tuple[int, str]:
    why = f"the model's context: {f.context_why}, as trtllm-build and the LLM API deduce max_seq_len when it is not set"
    if f.kv_tokens is not None and f.kv_tokens < f.context:
        return f.kv_tokens, f"{why}, lowered to the {f.kv_tokens:,} tokens the KV cache holds: one such sequence fits"
    return f.context, why


def _tuned(f: SizingFacts) -> tuple[float, int, int]:
    assert f.kv_tokens is not None  # callers size from the KV cache only where there is one
    requests = f.kv_tokens / (DESIGN_INPUT_LEN + DESIGN_OUTPUT_LEN)
    return (requests, *f.upstream.bench.tune(requests, DESIGN_INPUT_LEN, DESIGN_OUTPUT_LEN, f.pp_size))


def _batch(f: SizingFacts) -> tuple[int, str]:
    default = f.upstream.max_batch_size
    if f.kv_tokens is None:
        return default, f"upstream's default {default} (the weights do not fit: no KV cache to size from)"
    requests, tuned, _ = _tuned(f)
    value = min(default, tuned)
    why = (
        f"trtllm-bench's rounding of the {int(requests):,} requests of {DESIGN} the KV cache holds "
        f"({f.kv_tokens:,} tokens) is {tuned}; upstream's default is {default}"
    )
    if f.batch_bound and f.batch_bound[0] < value:
        value, why = f.batch_bound[0], f"{why}; at most {f.batch_bound[0]}: {f.batch_bound[1]}"
    return value, why


def _tokens(f: SizingFacts) -> tuple[int, str]:
    default = f.upstream.max_num_tokens
    if f.kv_tokens is None:
        return default, f"upstream's default {default}"
    _, batch, tuned = _tuned(f)
    if tuned > default:
        return tuned, f"trtllm-bench's {tuned} for a batch of {batch}, above upstream's default {default}"
    return default, f"upstream's default {default} (trtllm-bench's {tuned} for a batch of {batch} is not above it)"


def _input_len(f: SizingFacts, seq_len: int, num_tokens: int) -> tuple[int, str]:
    if f.chunked_context:
        return (
            seq_len - 1,
            "max_seq_len - 1: with chunked context the executor takes any prompt that leaves a "
            "token to generate (backend-semantics row limit.max_input_len)",
        )
    return (
        min(seq_len - 1, num_tokens),
        "min(max_seq_len - 1, max_num_tokens): chunked context is off, so a "
        "prompt must fit one engine step (row limit.max_input_len)",
    )


def size_limits(f: SizingFacts, choose: Callable[[str, int], int]) -> tuple[SizedLimit, ...]:
    """Each limit in ORDER: what sizing gives, and what `choose(name, sized)` keeps."""
    seq, seq_why = _seq_len(f)
    seq_value = choose("max_seq_len", seq)
    batch, batch_why = _batch(f)
    tokens, tokens_why = _tokens(f)
    tokens_value = choose("max_num_tokens", tokens)
    inp, inp_why = _input_len(f, seq_value, tokens_value)
    return (
        SizedLimit("max_seq_len", seq_value, seq, seq_why),
        SizedLimit("max_batch_size", choose("max_batch_size", batch), batch, batch_why),
        SizedLimit("max_num_tokens", tokens_value, tokens, tokens_why),
        SizedLimit("max_input_len", choose("max_input_len", inp), inp, inp_why),
    )


def sized_spec(spec: BuildSpec, given: dict[str, int | None]) -> BuildSpec:
    """`spec` with every limit not given sized for its GPU (a CPU spec, or a version without a
    limit table, keeps the limits it has)."""
    if all(given.get(name) is not None for name in ORDER):
        return spec
    facts = sizing_facts(spec, inspect_checkpoint(spec.checkpoint))
    if facts is None:
        return spec

    def choose(name: str, sized: int) -> int:
        value = given.get(name)
        return sized if value is None else value

    limits = size_limits(facts, choose)
    return replace(spec, limits=replace(spec.limits, **{limit.name: limit.value for limit in limits}))


def limit_lines(spec: BuildSpec, info: CheckpointInfo) -> list[str]:
    """The plan's account of the limits: upstream's defaults, then each value and why."""
    facts = sizing_facts(spec, info)
    if facts is None:
        return []
    up = facts.upstream
    head = (
        f"limits: TensorRT-LLM {up.version}'s defaults are max_batch_size {up.max_batch_size}, max_num_tokens "
        f"{up.max_num_tokens}, max_seq_len from the model; sized for this GPU as trtllm-bench does, for "
        f"requests of {DESIGN} ({up.file})"
    )
    return [head] + [limit.line() for limit in size_limits(facts, lambda name, _: getattr(spec.limits, name))]
