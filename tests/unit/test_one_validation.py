"""One validation per request field (issue 36): every entry of the server - preprocessing (the
ensemble's and the BLS's), the engine models (NVIDIA's clients call them directly) - and the
client's pre-check refuse the same bad value in the same words, because each calls the one
function of contract/params.py.  A re-implemented range check at any of them would word its
refusal its own way (or let the value through) and fail here."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from client.errors import InvalidRequestError
from client.request_builder import build_inputs
from client.types import SamplingParams
from contract import params
from contract.features import CPU_ENGINE
from contract.model_configs import PreprocessingParameters
from contract.params import InvalidParameter
from contract.tensors import PREPROCESSING_INPUTS, by_name
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.engine_step.request_check import EngineRequestCheck
from model_repository.text.generate_request import parse_generate_request
from model_repository.text.preprocessor import Preprocessor

ROOT = Path(__file__).resolve().parents[2]
SPECS = by_name(PREPROCESSING_INPUTS)
VOCAB = 32000

# (ensemble field, bad value)
CORE_CASES = [("max_tokens", 0), ("max_tokens", -5), ("top_p", 1.5), ("top_p", -0.5), ("top_k", -1),
              ("temperature", -1.0), ("temperature", 101.0), ("repetition_penalty", 0.0),
              ("presence_penalty", 3.0), ("frequency_penalty", -2.5), ("min_tokens", -1)]
OPTION_CASES = [("priority", 1.5), ("priority", -0.5), ("num_return_sequences", 0), ("top_logprobs", 21),
                ("top_logprobs", -1)]


def client_message(field: str, value) -> str:
    name = {"num_return_sequences": "n"}.get(field, field)
    with pytest.raises(InvalidRequestError) as e:
        build_inputs("hi", SamplingParams(**{name: value}), stream=False)
    return str(e.value).replace("'n'", "'num_return_sequences'")


def preprocessing_message(pre: Preprocessor | None, field: str, value) -> str:
    arrays = {"text_input": np.array([[b"hi"]], dtype=object),
              field: np.array([[value]], dtype=SPECS[field].dtype.numpy_type)}
    with pytest.raises(InvalidParameter) as e:
        request = parse_generate_request(arrays)
        pre(request)
    return str(e.value)


def engine_message(field: str, value) -> str:
    name = params.ENGINE_NAMES.get(field, field)
    row = EngineInputs(**({"input_ids": (1, 2, 3), "input_lengths": 3, "request_output_len": 8} | {name: value}))
    problems = EngineRequestCheck(max_input_len=64, max_seq_len=100, vocab_size=VOCAB).problems(row)
    assert len(problems) == 1, problems
    return problems[0].replace(f"'{name}'", f"'{field}'")


@pytest.fixture(scope="module")
def pre(default_checkpoint):
    return Preprocessor(PreprocessingParameters(tokenizer_dir=default_checkpoint, max_input_len=64, max_seq_len=100,
                                                default_max_tokens=20, engine_label=CPU_ENGINE.label))


@pytest.mark.parametrize("field,value", CORE_CASES)
def test_every_entry_refuses_a_core_field_in_the_same_words(pre, field, value):
    expected = str(pytest.raises(InvalidParameter, params.check, field, value).value)
    assert client_message(field, value) == expected
    assert preprocessing_message(pre, field, value) == expected
    assert engine_message(field, value) == expected


@pytest.mark.parametrize("field,value", OPTION_CASES)
def test_every_entry_refuses_an_engine_option_in_the_same_words(field, value):
    """Options the ensemble feeds the engine as they are: preprocessing and the engine models
    both parse them with GenerationOptions.from_arrays."""
    expected = str(pytest.raises(InvalidParameter, params.check, field, value).value)
    assert client_message(field, value) == expected
    dtype = SPECS[field].dtype.numpy_type
    with pytest.raises(InvalidParameter) as e:
        GenerationOptions.from_arrays({field: np.array([value], dtype=dtype)})
    assert str(e.value) == expected


def test_limits_are_checked_in_the_same_words_at_preprocessing_and_the_engine(pre):
    with pytest.raises(InvalidParameter) as e:
        pre(parse_generate_request({"text_input": np.array([[b"hi"]], dtype=object),
                                    "max_tokens": np.array([[100]], dtype=np.int32)}))
    prompt = len(pre.prompt_ids(parse_generate_request({"text_input": np.array([[b"hi"]], dtype=object)})))
    row = EngineInputs(input_ids=(1,) * prompt, input_lengths=prompt, request_output_len=100)
    engine = EngineRequestCheck(max_input_len=64, max_seq_len=100, vocab_size=VOCAB).problems(row)
    assert engine == [str(e.value).replace("'max_tokens'", "'request_output_len'")]
    assert "max_seq_len is 100" in engine[0]


def test_min_tokens_above_max_tokens_in_the_same_words():
    with pytest.raises(InvalidParameter) as e:
        parse_generate_request({"text_input": np.array([[b"hi"]], dtype=object),
                                "max_tokens": np.array([[3]], dtype=np.int32),
                                "min_tokens": np.array([[4]], dtype=np.int32)})
    row = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=3, min_tokens=4)
    engine = EngineRequestCheck(max_input_len=64, max_seq_len=100, vocab_size=VOCAB).problems(row)
    assert engine == [str(e.value).replace("max_tokens", "request_output_len")]


# --- no second implementation -------------------------------------------------------------
# The fields whose range contract/params.py owns, in both spellings.
RANGED = set(params.RULES) | set(params.ENGINE_NAMES.values()) | {"n"}
# Comparisons with a number that decide meaning, not validity (greedy, defaults, "set or not").
ALLOWED = {
    ("model_repository/text/preprocessor.py", "top_k"), ("model_repository/text/preprocessor.py", "top_p"),
    ("model_repository/text/preprocessor.py", "temperature"),
    ("model_repository/engine_step/engine_inputs.py", "runtime_top_k"),
    ("model_repository/engine_step/engine_inputs.py", "runtime_top_p"),
    ("client/cli.py", "n"), ("model_repository/engine_step/runner.py", "n"),  # n > 1: several samples
}
PACKAGES = ("client", "model_repository/text", "model_repository/engine_step", "model_repository/triton",
            "model_repository/models")


def _ordering_comparisons(path: Path):
    """(line, field) of each `<field> <, <=, >, >= <number>` (either side) in the module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare) or not all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                                                         for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        if not any(isinstance(o, ast.Constant) and isinstance(o.value, (int, float)) for o in operands):
            continue
        for o in operands:
            name = o.attr if isinstance(o, ast.Attribute) else o.id if isinstance(o, ast.Name) else None
            if name in RANGED:
                yield node.lineno, name


def test_no_range_check_of_a_request_field_outside_contract_params():
    """A bound of a ranged field compared with a number outside contract/params.py is a second
    implementation of its rule (the hops after the entry trust the typed value)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            found += [f"{rel}:{line} {name}" for line, name in _ordering_comparisons(path) if (rel, name) not in ALLOWED]
    assert not found, f"range checks outside contract/params.py: {found}"
