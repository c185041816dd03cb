"""Which of TensorRT-LLM's PyTorch-backend samplers a deployment runs (`--sampler`, `--sampling-fields`).

The sampler is one per LLM (TorchLlmArgs.sampler_type), so the plan picks it per deployment
from the sampling fields the deployment must apply, by the rows of
contract/upstream/data/sampling_support_<version>.json (each cited):

- `torch`: TorchSampler, upstream's default.  At 1.2.1 it accepts and ignores the penalties,
  bad words and a per-request seed (rows pytorch.*): requests with them are refused by name.
- `trtllm`: TRTLLMSampler, the executor's C++ decoder behind the PyTorch backend.  At 1.2.1 it
  applies them (rows pytorch.trtllm_sampler.*), at the costs its limits say (row
  sampler.TRTLLMSampler): no speculative decoding, only the sampled token's log prob (no
  top_logprobs), deprecated upstream after 1.2.1, a C++ decoder step with host copies per
  iteration.
- `auto` (the default): the default sampler when it applies every field in --sampling-fields,
  otherwise the first sampler of the version that applies them all; none: the plan fails
  naming the fields.

The choice is rendered as upstream's own argument, LLM(sampler_type='TorchSampler' |
'TRTLLMSampler'), the engine model's `sampler_type` parameter, and recorded in build.json (the
spec's `sampler` and `sampling_fields`, and the resolved name in the model config).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from contract.upstream.sampling_support import SAMPLING_FIELDS, EnginePath, sampling_support


class SamplerChoice(str, enum.Enum):
    AUTO = "auto"
    TORCH = "torch"
    TRTLLM = "trtllm"


# --sampler -> upstream's SamplerType name (TorchLlmArgs.sampler_type)
UPSTREAM_NAME = {SamplerChoice.TORCH: "TorchSampler", SamplerChoice.TRTLLM: "TRTLLMSampler"}


def parse_sampling_fields(text: str) -> tuple[str, ...]:
    """'repetition_penalty,seed' -> the fields, each one of SAMPLING_FIELDS (else a ValueError naming it)."""
    fields = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    unknown = [f for f in fields if f not in SAMPLING_FIELDS]
    if unknown:
        raise ValueError(f"'sampling_fields': unknown {unknown}; allowed: {list(SAMPLING_FIELDS)}")
    return fields


@dataclass(frozen=True)
class SamplerPlan:
    sampler: str  # upstream's name, what LLM(sampler_type=...) gets
    reason: str
    costs: tuple[str, ...]  # the chosen sampler's limits, as the table cites them
    problems: tuple[str, ...]  # non-empty: the deployment cannot be planned

    def describe(self) -> str:
        lines = [f"sampler: {self.sampler} ({self.reason})"]
        lines += [f"    cost: {c}" for c in self.costs]
        return "\n".join(lines)


def plan_sampler(
    version: str, choice: SamplerChoice, fields: tuple[str, ...], speculative: bool = False
) -> SamplerPlan:
    table = sampling_support(version)
    path = EnginePath.PYTORCH
    default = table.default_sampler(path)
    if choice == SamplerChoice.AUTO:
        able = table.samplers_honouring(path, fields)
        if speculative:  # a limit 'speculative' rules a sampler out (TRTLLMSampler at 1.2.1)
            able = [s for s in able if _limit(table, s, "speculative") is None]
        if not able:
            return SamplerPlan(default, "no sampler applies them", (), (_none_applies(version, fields, speculative),))
        sampler = able[0]
        reason = (
            f"upstream's default; it applies {_listed(fields)}"
            if sampler == default and fields
            else "upstream's default"
            if sampler == default
            else f"--sampler auto: {default} does not apply "
            f"{_listed([f for f in fields if not table.honoured(path, f, default)])}, {sampler} applies every "
            "--sampling-fields field"
        )
    else:
        sampler = UPSTREAM_NAME[choice]
        reason = f"--sampler {choice.value}"
    problems = [
        f"'sampling_fields' {field!r}: TensorRT-LLM {version}'s {sampler} does not apply it (row "
        f"{table.row(path, field, sampler).id} of contract/upstream/data/sampling_support_{version}.json); "
        + ("use --sampler auto" if table.samplers_honouring(path, (field,)) else "no sampler of that version does")
        for field in fields
        if not table.honoured(path, field, sampler)
    ]
    spec_limit = _limit(table, sampler, "speculative")
    if speculative and spec_limit is not None:
        problems.append(f"'sampler' {sampler} with speculative decoding: {spec_limit}")
    info = table.samplers.get((path, sampler))
    costs = tuple(f"{x.limit} ({x.citation.source.path})" for x in (info.limits if info else ()))
    return SamplerPlan(sampler, reason, costs, tuple(problems))


def _limit(table, sampler: str, limit_id: str) -> str | None:
    info = table.samplers.get((EnginePath.PYTORCH, sampler))
    found = info.limit(limit_id) if info else None
    return found.limit if found else None


def _listed(fields) -> str:
    return ", ".join(fields) or "nothing beyond the defaults"


def _none_applies(version: str, fields: tuple[str, ...], speculative: bool) -> str:
    with_spec = " with speculative decoding" if speculative else ""
    return (
        f"'sampling_fields' {list(fields)}: no sampler of TensorRT-LLM {version}'s PyTorch backend applies them all"
        f"{with_spec} (contract/upstream/data/sampling_support_{version}.json); drop the fields"
        + (" or the speculative decoding" if speculative else "")
    )
