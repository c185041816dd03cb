"""CPU stand-in for TensorRT-LLM's LLM API (tests only: see standins/README.md)."""

from .llmapi import LLM, KvCacheConfig, SamplingParams  # noqa: F401

__version__ = "1.2.1"
