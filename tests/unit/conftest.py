"""Fixtures shared by the unit tests."""

from __future__ import annotations

import importlib
import sys

import pytest

from standins.links import link_llmapi


@pytest.fixture(scope="module")
def trtllm(tmp_path_factory):
    """The stand-in LLM API (standins/llmapi/trtllm_llmapi, imported as `tensorrt_llm`), imported for one test module only (it
    must not leak into other tests)."""
    site = str(link_llmapi(tmp_path_factory.mktemp("llmapi")))
    sys.path.insert(0, site)
    try:
        yield importlib.import_module("tensorrt_llm")
    finally:
        sys.path.remove(site)
        for name in [n for n in sys.modules if n == "tensorrt_llm" or n.startswith("tensorrt_llm.")]:
            del sys.modules[name]
