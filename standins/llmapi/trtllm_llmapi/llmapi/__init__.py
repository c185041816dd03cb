"""tensorrt_llm.llmapi as far as tensorrt_llm_pytorch uses it (stand-in)."""

from .kv_cache_config import KvCacheConfig  # noqa: F401
from .llm import LLM  # noqa: F401
from .request_output import CompletionOutput, RequestOutput  # noqa: F401
from .sampling_params import SamplingParams  # noqa: F401
