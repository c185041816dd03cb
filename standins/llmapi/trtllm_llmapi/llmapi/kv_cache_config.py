"""KvCacheConfig: the fields of row kv_cache_config.fields, extra keywords refused (pydantic's
extra='forbid'), free_gpu_memory_fraction checked with upstream's text."""

from __future__ import annotations

from .._upstream import API, ValidationError

_ROW = API.rule("kv_cache_config.fields")
FIELDS: dict = _ROW.extra["fields"]


class KvCacheConfig:
    def __init__(self, **kwargs) -> None:
        unknown = sorted(set(kwargs) - set(FIELDS))
        if unknown:
            raise ValidationError(API.errors["llm.args.fields"].render(field=f"kv_cache_config.{unknown[0]}"))
        values = {**FIELDS, **kwargs}
        fraction = values["free_gpu_memory_fraction"]
        if fraction is not None and not 0 <= fraction <= 1:
            raise ValueError(API.errors["kv_cache_config.fields"].message)
        for name, value in values.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return "KvCacheConfig(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in FIELDS) + ")"
