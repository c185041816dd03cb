"""Fixtures shared by the unit tests."""

from __future__ import annotations

import importlib
import sys

import pytest

from standins.links import LLMAPI


@pytest.fixture(scope="module")
def trtllm():
    """The stand-in LLM API (standins/llmapi/tensorrt_llm), imported for one test module only (it
    must not leak into other tests)."""
    sys.path.insert(0, str(LLMAPI))
    try:
        yield importlib.import_module("tensorrt_llm")
    finally:
        sys.path.remove(str(LLMAPI))
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]
