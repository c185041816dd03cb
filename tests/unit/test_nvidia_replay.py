"""The recorded NVIDIA client requests turn into the arrays the scripts send: the recorded
datatype and wire shape, derived values refused until a concrete one is given."""

from __future__ import annotations

import numpy as np
import pytest

from contract.upstream.nvidia_clients import client_case, load_client_cases
from tests.integration.nvidia_replay import NUMPY_TYPES, request_arrays, tensor_array

LITERAL = [c for c in load_client_cases() if c.script.endswith("end_to_end_grpc_client.py")]


@pytest.mark.parametrize("case", LITERAL, ids=[c.case for c in LITERAL])
def test_every_e2e_client_tensor_has_its_recorded_dtype_and_shape(case):
    arrays = request_arrays(case.requests[0])
    for tensor in case.inputs:
        array = arrays[tensor.name]
        assert array.shape == tensor.shape
        assert array.dtype == np.dtype(NUMPY_TYPES[tensor.datatype])
        if tensor.datatype == "BYTES":
            assert all(isinstance(v, bytes) for v in array.reshape(-1))


def test_batched_prompts_and_broadcast_scalars():
    case = client_case("end_to_end_grpc_client.py", "batch_inputs")
    arrays = request_arrays(case.requests[0])
    assert arrays["text_input"].reshape(-1).tolist() == [p.encode() for p in case.requests[0].input("text_input").value]
    assert arrays["max_tokens"].tolist() == [[5], [5], [5]]


def test_derived_values_need_a_concrete_one():
    case = client_case("inflight_batcher_llm_client.py", "default")
    ids = case.requests[0].input("input_ids")
    with pytest.raises(ValueError, match="input_ids"):
        tensor_array(ids)
    assert tensor_array(ids, [1, 2, 3]).shape == (1, 3)  # "L" is the value's own length


def test_empty_word_lists_as_the_docs_send_them():
    case = next(c for c in load_client_cases() if c.case == "readme_ensemble")
    assert request_arrays(case.requests[0])["bad_words"].tolist() == [[b""]]
