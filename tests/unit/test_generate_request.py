import json

import numpy as np
import pytest

from contract.params import InvalidParameter
from model_repository.text.generate_request import parse_generate_request


def s(text):  # a [1, 1] BYTES tensor
    return np.array([[text.encode() if isinstance(text, str) else text]], dtype=object)


def n(value, dtype):
    return np.array([[value]], dtype=dtype)


def test_full_request():
    req = parse_generate_request({
        "text_input": s("hi"), "max_tokens": n(5, np.int32), "stream": n(True, bool), "temperature": n(0.5, np.float32),
        "stop_words": np.array([[b"\n", b""]], dtype=object), "seed": n(2**64 - 1, np.uint64),
    })
    assert (req.text, req.max_tokens, req.stream, req.temperature, req.stop_words, req.seed) == \
        ("hi", 5, True, 0.5, ("\n",), 2**64 - 1)


def test_messages():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    req = parse_generate_request({"messages": s(json.dumps(msgs))})
    assert req.text is None and [m.role for m in req.messages] == ["system", "user"]


@pytest.mark.parametrize("arrays,field,message", [
    ({"text_input": s("")}, "text_input", "empty"),
    ({"text_input": s("   ")}, "text_input", "empty"),
    ({}, "text_input", "empty"),
    ({"text_input": s(b"\xff\xfe")}, "text_input", "not valid UTF-8"),
    ({"text_input": s("x"), "max_tokens": n(-3, np.int32)}, "max_tokens", "outside"),
    ({"text_input": s("x"), "top_p": n(1.5, np.float32)}, "top_p", "outside"),
    ({"text_input": s("x"), "max_tokens": n(3, np.int32), "min_tokens": n(4, np.int32)}, "min_tokens", "greater"),
    ({"text_input": s("x"), "messages": s("[]")}, "messages", "either"),
    ({"messages": s("not json")}, "messages", "not valid JSON"),
    ({"messages": s('[{"role": "robot", "content": "x"}]')}, "messages", "role"),
    ({"text_input": np.array([[b"a"], [b"b"]], dtype=object)}, "text_input", "batch size 2"),
    ({"text_input": s("x"), "stop_words": np.array([[b"x"] * 65], dtype=object)}, "stop_words", "at most 64"),
    ({"text_input": s("x"), "beam_widht": n(1, np.int32)}, "beam_widht", "unknown input"),
    ({"text_input": s("x"), "stop_words": np.array([[b"", b"end"]], dtype=object)}, "stop_words", "entry 0 is empty"),
    ({"text_input": s("x"), "bad_words": np.array([[b"a", b"", b"b"]], dtype=object)}, "bad_words", "entry 1 is empty"),
])
def test_errors_name_the_field(arrays, field, message):
    with pytest.raises(InvalidParameter, match=message) as e:
        parse_generate_request(arrays)
    assert e.value.field == field


def test_a_batch_of_prompts_is_one_request_per_prompt():
    from model_repository.text.generate_request import parse_generate_requests

    rows = parse_generate_requests({"text_input": np.array([[b"a"], [b"b"], [b"c"]], dtype=object),
                                    "max_tokens": np.array([[5], [6], [7]], dtype=np.int32)})
    assert [(r.text, r.max_tokens) for r in rows] == [("a", 5), ("b", 6), ("c", 7)]
    with pytest.raises(InvalidParameter, match="batch size 1, but other inputs of the request have 3"):
        parse_generate_requests({"text_input": np.array([[b"a"], [b"b"], [b"c"]], dtype=object),
                                 "max_tokens": np.array([[5]], dtype=np.int32)})


def test_inputs_that_ask_for_engine_features_travel_as_sent():
    req = parse_generate_request({"text_input": s("x"), "beam_width": n(1, np.int32), "lora_task_id": n(3, np.uint64)})
    assert dict(req.feature_inputs).keys() == {"beam_width", "lora_task_id"}


def test_trailing_empty_words_are_nvidias_padding():
    """[""] is NVIDIA's "no words" (end_to_end_test.py) and trailing "" pads ragged rows."""
    for words, expected in (([b""], ()), ([b"end", b""], ("end",)), ([b"", b""], ())):
        req = parse_generate_request({"text_input": s("x"), "stop_words": np.array([words], dtype=object)})
        assert req.stop_words == expected
