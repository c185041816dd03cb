"""tensorrt_llm.executor as far as tensorrt_llm_pytorch uses it (stand-in)."""

from tensorrt_llm.executor.request import LoRARequest  # noqa: F401
