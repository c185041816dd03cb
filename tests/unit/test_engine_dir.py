"""What build.json records about the engine directory it is written into."""

from __future__ import annotations

import json

from build_engines.engine_dir import tool_call_format
from contract import tool_formats


def test_the_tool_call_format_comes_from_the_chat_template_the_engine_carries(tmp_path):
    assert tool_call_format(tmp_path) == tool_formats.JSON  # no template: the generic fallback
    tokenizer = tmp_path / "tokenizer"  # where the TensorRT-engine flow keeps it
    tokenizer.mkdir()
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ '<tool_call>' }}{{ tools }}"}))
    assert tool_call_format(tmp_path) == tool_formats.HERMES
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "<|python_tag|>{{ tools }}"}))
    assert tool_call_format(tmp_path) == tool_formats.LLAMA3_JSON  # beside the engine first
