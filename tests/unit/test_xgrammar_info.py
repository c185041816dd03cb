"""The xgrammar tokenizer info the engine flow's tensorrt_llm model loads for guided decoding:
what TensorRT-LLM's C++ decoder makes of it (xgrammar's TokenizerInfo from the vocabulary and
the metadata it detects in tokenizer_str) equals xgrammar's own reading of the Hugging Face
tokenizer, and a schema compiled against it allows exactly the schema's first tokens."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from build_engines.trtllm.xgrammar_info import INFO_FILE, TokenizerInfoError, tokenizer_info, write_tokenizer_info
from tests.unit.trtllm_fixtures import write_default_tokenizer


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("xgrammar")
    tokenizer_dir = write_default_tokenizer(root / "tokenizer")
    return tokenizer_dir, write_tokenizer_info(tokenizer_dir, root / INFO_FILE)


def test_the_info_reads_as_the_tokenizer_itself(written):
    import xgrammar
    from transformers import AutoTokenizer

    tokenizer_dir, path = written
    info = json.loads(path.read_text())
    assert set(info) == {"encoded_vocab", "tokenizer_str", "stop_token_ids"}  # row guided.tokenizer_info
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert info["encoded_vocab"] == [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
    assert tokenizer.eos_token_id in info["stop_token_ids"]
    metadata = xgrammar.TokenizerInfo._detect_metadata_from_hf(info["tokenizer_str"])
    from_file = xgrammar.TokenizerInfo(info["encoded_vocab"], vocab_type=metadata["vocab_type"],
                                       add_prefix_space=metadata["add_prefix_space"],
                                       stop_token_ids=info["stop_token_ids"])
    reference = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
    assert (from_file.vocab_type, from_file.vocab_size, from_file.add_prefix_space) == \
        (reference.vocab_type, reference.vocab_size, reference.add_prefix_space)
    assert from_file.decoded_vocab == reference.decoded_vocab

    compiled = xgrammar.GrammarCompiler(from_file).compile_json_schema(
        json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}))
    bitmask = xgrammar.allocate_token_bitmask(1, from_file.vocab_size)
    xgrammar.GrammarMatcher(compiled).fill_next_token_bitmask(bitmask)
    allowed = [i for i in range(from_file.vocab_size) if (int(bitmask[0, i // 32]) >> (i % 32)) & 1]
    assert allowed and all(tokenizer.decode([i]).startswith("{") for i in allowed)


def test_rewriting_an_unchanged_file_leaves_it_alone(written):
    tokenizer_dir, path = written
    before = path.stat().st_mtime_ns
    write_tokenizer_info(tokenizer_dir, path)
    assert path.stat().st_mtime_ns == before


def test_what_cannot_describe_a_tokenizer_is_refused_naming_it(tmp_path):
    with pytest.raises(TokenizerInfoError, match="has no tokenizer.json.*--guided-decoding none"):
        write_tokenizer_info(tmp_path, tmp_path / INFO_FILE)
    backend = SimpleNamespace(to_str=lambda: "{}")
    holes = SimpleNamespace(backend_tokenizer=backend, get_vocab=lambda: {"a": 0, "c": 2}, eos_token_id=0)
    with pytest.raises(TokenizerInfoError, match="not contiguous \\(no token 1\\)"):
        tokenizer_info(holes)
    slow = SimpleNamespace(get_vocab=lambda: {"a": 0}, eos_token_id=0)
    with pytest.raises(TokenizerInfoError, match="fast tokenizer"):
        tokenizer_info(slow)
    no_eos = SimpleNamespace(backend_tokenizer=backend, get_vocab=lambda: {"a": 0}, eos_token_id=None)
    with pytest.raises(TokenizerInfoError, match="no EOS"):
        tokenizer_info(no_eos)
    assert tokenizer_info(no_eos, (0,))["stop_token_ids"] == [0]
