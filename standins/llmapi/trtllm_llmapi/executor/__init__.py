"""tensorrt_llm.executor as far as tensorrt_llm_pytorch uses it (stand-in)."""

from .request import LoRARequest  # noqa: F401
