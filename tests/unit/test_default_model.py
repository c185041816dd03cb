"""The embedded default model converts into a working HF checkpoint."""

from build_engines.default_model import is_prepared, locate_default_gguf
from build_engines.gguf_tokenizer import build_tokenizer, read_gguf_tokenizer

# Reference ids from transformers 5.23's own GGUF conversion of the same file.
REFERENCE = {
    "Hello world, how are you? 12345 日本語 🙂": [19556, 905, 28, 638, 359, 346, 47, 216, 33, 34, 35, 36, 37, 17097, 241,
                                              115, 40993, 179, 120, 248, 47526],
    "<|im_start|>user\nhi<|im_end|>": [1, 4093, 198, 6004, 2],
}


def test_tokenizer_from_gguf_matches_reference():
    tok = build_tokenizer(read_gguf_tokenizer(locate_default_gguf()))
    for text, ids in REFERENCE.items():
        assert tok.encode(text).ids == ids
        assert tok.decode(ids, skip_special_tokens=False) == text


def test_prepared_checkpoint(default_checkpoint):
    from transformers import AutoTokenizer

    assert is_prepared(default_checkpoint)
    names = {p.name for p in default_checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "generation_config.json"} <= names
    tok = AutoTokenizer.from_pretrained(str(default_checkpoint))
    assert (tok.bos_token, tok.eos_token, tok.eos_token_id) == ("<|im_start|>", "<|im_end|>", 2)
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert chat.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
