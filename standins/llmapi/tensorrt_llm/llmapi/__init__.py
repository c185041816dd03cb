"""tensorrt_llm.llmapi as far as tensorrt_llm_pytorch uses it (stand-in)."""

from tensorrt_llm.llmapi.kv_cache_config import KvCacheConfig  # noqa: F401
from tensorrt_llm.llmapi.llm import LLM  # noqa: F401
from tensorrt_llm.llmapi.request_output import CompletionOutput, RequestOutput  # noqa: F401
from tensorrt_llm.llmapi.sampling_params import SamplingParams  # noqa: F401
