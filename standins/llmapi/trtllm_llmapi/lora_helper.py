"""tensorrt_llm.lora_helper (stand-in): LoraConfig with the fields and defaults of the table
(row llm.lora lora_config_fields)."""

from __future__ import annotations

import dataclasses

from ._upstream import API

def _field(default):
    """A fresh list or dict per instance, as the dataclass's default factories give."""
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default))
    return dataclasses.field(default=default)


LoraConfig = dataclasses.make_dataclass(
    "LoraConfig", [(name, object, _field(default))
                   for name, default in API.rule("llm.lora").extra["lora_config_fields"].items()],
    namespace={"__module__": "tensorrt_llm.lora_helper"})
