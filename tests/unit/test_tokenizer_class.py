"""The preprocessing stub loads the tokenizer AutoTokenizer would, by the class AutoTokenizer
picked when the repository was rendered (model_repository/text/tokenizer_class.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from model_repository.text.tokenizer_class import TokenizerClass, load_tokenizer, resolve

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ünïcode, tabs\tand  spaces?"}]
TEXTS = ("Hello world", " leading space", "日本語のテキスト", "<|im_start|>user")


def test_the_recorded_class_is_autotokenizers_and_loads_the_same_tokenizer(default_checkpoint):
    import transformers
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(default_checkpoint))
    recorded = resolve(default_checkpoint)
    assert recorded == TokenizerClass(transformers.__version__, f"{type(auto).__module__}.{type(auto).__qualname__}")
    direct = load_tokenizer(default_checkpoint, recorded)
    assert type(direct) is type(auto)
    for text in TEXTS:
        for special in (True, False):
            assert direct.encode(text, add_special_tokens=special) == auto.encode(text, add_special_tokens=special)
    for generation_prompt in (True, False):
        kwargs = {"add_generation_prompt": generation_prompt, "tokenize": True, "return_dict": True}
        assert direct.apply_chat_template(MESSAGES, **kwargs)["input_ids"] == \
            auto.apply_chat_template(MESSAGES, **kwargs)["input_ids"]
    assert direct.chat_template == auto.chat_template


def test_the_stub_imports_the_class_alone(default_checkpoint):
    """What the record is for: AutoTokenizer's module (and the model configurations it pulls in)
    is never imported on the recorded path."""
    recorded = resolve(default_checkpoint)
    code = (
        "import sys, json; from pathlib import Path\n"
        "from model_repository.text.tokenizer_class import TokenizerClass, load_tokenizer\n"
        f"recorded = TokenizerClass(*{json.dumps([recorded.transformers_version, recorded.path])})\n"
        f"t = load_tokenizer(Path({str(default_checkpoint)!r}), recorded)\n"
        "print(json.dumps(['transformers.models.auto.tokenization_auto' in sys.modules, type(t).__name__]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.splitlines()[-1]) == [False, recorded.path.rsplit(".", 1)[1]]


def test_another_transformers_version_or_nothing_recorded_asks_autotokenizer(default_checkpoint, tmp_path):
    from transformers import AutoTokenizer

    auto = type(AutoTokenizer.from_pretrained(str(default_checkpoint)))
    # a class recorded under another version is not imported (it may not exist there, or pick otherwise)
    assert type(load_tokenizer(default_checkpoint, TokenizerClass("0.0.1", "transformers.NoSuchTokenizer"))) is auto
    assert type(load_tokenizer(default_checkpoint)) is auto
    assert resolve(tmp_path) == TokenizerClass()  # no tokenizer files here (e.g. a path inside a container)

