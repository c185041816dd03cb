"""tensorrt_llm.executor.request (stand-in): LoRARequest with the table's fields (row llm.lora
lora_request_fields: lora_name, lora_int_id, lora_path, lora_ckpt_source)."""

from __future__ import annotations

import dataclasses

from .._upstream import API

_FIELDS = API.rule("llm.lora").extra["lora_request_fields"]

LoRARequest = dataclasses.make_dataclass(
    "LoRARequest", [(name, object) if default == "<required>" else (name, object, dataclasses.field(default=default))
                    for name, default in _FIELDS.items()],
    namespace={"__module__": "tensorrt_llm.executor.request"})
