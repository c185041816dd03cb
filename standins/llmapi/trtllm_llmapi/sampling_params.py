"""tensorrt_llm.sampling_params (stand-in): SamplingParams, and GuidedDecodingParams as the
table declares it (row sampling.guided_decoding.fields: keyword-only, every field optional,
only one guide per request, checked when the request is made)."""

from __future__ import annotations

import dataclasses

from ._upstream import API, error
from .llmapi.sampling_params import SamplingParams  # noqa: F401

_ROW = API.rule("sampling.guided_decoding.fields").extra


def _validate(self) -> None:
    num_guides = sum(bool(getattr(self, name)) for name in _ROW["fields"])
    if num_guides > 1:
        raise ValueError(_ROW["error"]["message"].format(num_guides=num_guides))


GuidedDecodingParams = dataclasses.make_dataclass(
    "GuidedDecodingParams", [(name, object, dataclasses.field(default=default)) for name, default in _ROW["fields"].items()],
    kw_only=True, namespace={"_validate": _validate, "__module__": "tensorrt_llm.sampling_params"})
