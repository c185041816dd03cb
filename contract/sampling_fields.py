"""The sampling fields: one row per field, the one place a sampling field is declared.

A row says everything the kit does with the field: its ensemble input (name, dtype) and the
engine contract's input it becomes (name, default when not sent), the range every entry of the
server checks (contract/params.py RULES), the bounds and kind of the OpenAI front's parameter,
and, where an engine may take the field and not apply it, the feature an engine needs to be
sent a value that asks for something (contract/features.py refuses it elsewhere, naming it).

Everything else is derived from the rows: the ensemble's and the engine's tensors
(contract/tensors.py), the ranges (contract/params.py), the client's request builder
(client/request_builder.py), preprocessing's parser and engine defaults
(model_repository/text/), the OpenAI front's schema and parameter table (openai_front/), the
Dynamo worker's request (cluster/dynamo_request.py) and the refusals (contract/features.py).
A request's sampling as sent, `SentSampling` (None when not sent), declares one attribute per
row, and the engine step's typed inputs (model_repository/engine_step/engine_inputs.py
EngineInputs, in the engine contract's order) one per row's engine name, with its default;
tests/unit/test_sampling_fields.py holds both to the rows.  Adding a field: a row, its attribute
in SentSampling, the engines that apply it (their EngineInputs attribute and
model_repository/engines/), and tests.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from contract.tensor_spec import DType


class SamplingFeature(str, enum.Enum):
    """Sampling fields every engine took until a pinned TensorRT-LLM was found to accept and ignore
    them (contract/upstream/data/sampling_support_<version>.json): honoured where an engine lists them."""

    REPETITION_PENALTY = "a repetition penalty"
    PRESENCE_PENALTY = "a presence penalty"
    FREQUENCY_PENALTY = "a frequency penalty"
    SEED = "a per-request seed"
    MIN_P = "min-p sampling"


@dataclass(frozen=True)
class Range:
    """Allowed values (contract/params.py NumberRule takes these fields)."""

    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    integer: bool = False


class OpenAiKind(str, enum.Enum):
    SDK = "a parameter of OpenAI's API"  # openai_front/params.py CHAT_PARAMETERS honours it
    EXTENSION = "an extension vLLM and TGI accept"


@dataclass(frozen=True)
class OpenAiParameter:
    """The field at the OpenAI front: its bounds there (OpenAI's own, where narrower than the engine's)."""

    kind: OpenAiKind
    bounds: Range
    note: str = ""  # what the front does with it, where more than OpenAI's meaning (openai_front/params.py)


@dataclass(frozen=True)
class SamplingField:
    name: str  # the ensemble input, the client's and the OpenAI front's field
    dtype: DType
    doc: str
    range: Range  # the engine's rule, checked at every entry of the server
    engine_default: float | int  # what the engine takes when the request does not send it
    openai: OpenAiParameter
    engine_input: str = ""  # the engine contract's name, where not `name`
    # The feature an engine needs to be sent a value outside `neutral` (None: every engine applies it).
    feature: SamplingFeature | None = None
    neutral: tuple[float | int, ...] = ()  # values that ask for nothing (with `feature`)
    neutral_text: str = ""  # them, for refusals
    cpu_engine: bool = True  # the CPU engine applies it (model_repository/engines/openvino/openvino_backend.py)
    # Preprocessing's resolve_sampling decides its engine value (TensorRT-LLM's greedy rule), not the default.
    resolved: bool = False
    nvidia: bool = True  # an input of NVIDIA's ensemble and tensorrt_llm model (else ours: `extra`)

    @property
    def engine_name(self) -> str:
        return self.engine_input or self.name


_UNBOUNDED_INT = Range(low=0, integer=True)
_PENALTY = Range(low=-2.0, high=2.0)
_IGNORED = " (its sampler accepts the field and ignores it)"

FIELDS: tuple[SamplingField, ...] = (
    SamplingField(
        "top_k",
        DType.INT32,
        "top-k sampling; 0 with top_p 0, or 1: greedy",
        _UNBOUNDED_INT,
        1,
        OpenAiParameter(OpenAiKind.EXTENSION, Range(low=0), "0 or unset: no top-k"),
        engine_input="runtime_top_k",
        resolved=True,
    ),
    SamplingField(
        "top_p",
        DType.FP32,
        "nucleus sampling; 0 with top_k 0: greedy",
        Range(low=0.0, high=1.0),  # 0: not used (TensorRT-LLM's default), as NVIDIA's clients send it
        0.0,
        OpenAiParameter(OpenAiKind.SDK, Range(low=0.0, high=1.0, low_inclusive=False)),
        engine_input="runtime_top_p",
        resolved=True,
    ),
    SamplingField(
        "temperature",
        DType.FP32,
        "sampling temperature (alone it does not turn sampling on); 0 = greedy",
        Range(low=0.0, high=100.0),
        1.0,
        OpenAiParameter(OpenAiKind.SDK, Range(low=0.0, high=2.0)),
        resolved=True,
    ),
    SamplingField(
        "repetition_penalty",
        DType.FP32,
        "repetition penalty, > 0",
        Range(low=0.0, high=100.0, low_inclusive=False),
        1.0,
        OpenAiParameter(OpenAiKind.EXTENSION, Range(low=0.0, low_inclusive=False), "> 0"),
        feature=SamplingFeature.REPETITION_PENALTY,
        neutral=(1.0,),
        neutral_text="1.0 or nothing" + _IGNORED,
    ),
    SamplingField(
        "min_tokens",
        DType.INT32,
        "minimum number of generated tokens",
        _UNBOUNDED_INT,
        0,
        OpenAiParameter(OpenAiKind.EXTENSION, Range(low=0), "at most max_tokens"),
    ),
    SamplingField(
        "presence_penalty",
        DType.FP32,
        "presence penalty",
        _PENALTY,
        0.0,
        OpenAiParameter(OpenAiKind.SDK, _PENALTY),
        feature=SamplingFeature.PRESENCE_PENALTY,
        neutral=(0.0,),
        neutral_text="0 or nothing" + _IGNORED,
    ),
    SamplingField(
        "frequency_penalty",
        DType.FP32,
        "frequency penalty",
        _PENALTY,
        0.0,
        OpenAiParameter(OpenAiKind.SDK, _PENALTY),
        feature=SamplingFeature.FREQUENCY_PENALTY,
        neutral=(0.0,),
        neutral_text="0 or nothing" + _IGNORED,
    ),
    SamplingField(
        "seed",
        DType.UINT64,
        "sampling seed",
        Range(low=0, high=2**64 - 1, integer=True),
        0,
        OpenAiParameter(OpenAiKind.SDK, Range(low=0)),
        feature=SamplingFeature.SEED,
        # preprocessing passes a seed only when the request samples: a greedy request's seed changes nothing
        neutral_text="nothing, or decode greedily" + _IGNORED,
        resolved=True,
    ),
    SamplingField(
        "min_p",
        DType.FP32,
        "min-p sampling: tokens less probable than min_p times the most probable one are dropped; 0: off",
        Range(low=0.0, high=1.0),
        0.0,  # TensorRT-LLM's SamplingConfig default (SamplingParams.min_p: "C++ runtime default 0.0")
        OpenAiParameter(OpenAiKind.EXTENSION, Range(low=0.0, high=1.0), "vLLM's: [0, 1], 0 off"),
        feature=SamplingFeature.MIN_P,
        neutral=(0.0,),
        neutral_text="0 or nothing",
        nvidia=False,  # NVIDIA's ensemble and tensorrt_llm model declare no min_p input
    ),
)
BY_NAME: dict[str, SamplingField] = {f.name: f for f in FIELDS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
# The fields whose engine value is the one sent, or the engine's default (the others: resolve_sampling).
PASSED_AS_SENT: tuple[SamplingField, ...] = tuple(f for f in FIELDS if not f.resolved)


@dataclass(frozen=True)
class SentSampling:
    """A request's sampling fields as sent (None: not sent): the client's SamplingParams, the
    ensemble's parsed request and the Dynamo worker's token request are ones."""

    top_k: int | None = None
    top_p: float | None = None
    temperature: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    min_p: float | None = None

    def sent(self) -> dict[str, float | int]:
        """The fields that were sent, by name."""
        return {n: v for n in NAMES if (v := getattr(self, n)) is not None}


def as_sent_defaults(sent: SentSampling) -> dict[str, float | int]:
    """The engine inputs of the fields passed as sent (PASSED_AS_SENT): the value, or the engine's default."""
    out: dict[str, float | int] = {}
    for f in PASSED_AS_SENT:
        value = getattr(sent, f.name)
        out[f.engine_name] = f.engine_default if value is None else value
    return out
