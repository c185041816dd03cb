"""Fuzzing the ensemble's request fields on the live server: every request either succeeds
(valid text, a finish reason) or fails alone with INVALID_ARG - never an internal error,
never a hang - and the server stays ready."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.tensors import ENSEMBLE_INPUTS, DType, by_name

pytestmark = [pytest.mark.server, pytest.mark.slow]
SPECS = by_name(ENSEMBLE_INPUTS)

numbers = {
    "max_tokens": st.integers(-5, 12), "min_tokens": st.integers(-2, 14), "top_k": st.integers(-3, 60000),
    "top_p": st.one_of(st.floats(-0.5, 1.5), st.just(float("nan"))),
    "temperature": st.one_of(st.floats(-1, 150), st.sampled_from([float("nan"), float("inf")])),
    "repetition_penalty": st.floats(-1, 3), "presence_penalty": st.floats(-3, 3), "frequency_penalty": st.floats(-3, 3),
    "seed": st.integers(0, 2**64 - 1), "end_id": st.integers(-2, 60000),
}
texts = st.one_of(st.text(max_size=40), st.binary(max_size=20))
fields = st.fixed_dictionaries(
    {"text_input": texts},
    optional={**numbers, "stream": st.booleans(), "skip_special_tokens": st.booleans(),
              "exclude_input_in_output": st.booleans(), "return_log_probs": st.booleans(),
              "stop_words": st.lists(st.text(max_size=8), max_size=4)},
)


def tensor(name, value):
    spec = SPECS[name]
    if spec.dtype == DType.STRING:
        items = value if isinstance(value, list) else [value]
        arr = np.array([[v if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass") for v in items] or [b""]],
                       dtype=object)
    else:
        arr = np.array([[value]], dtype=spec.dtype.numpy_type)
    t = grpcclient.InferInput(name, list(arr.shape), spec.dtype.wire_name)
    t.set_data_from_numpy(arr)
    return t


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=fields)
def test_any_request_succeeds_or_fails_with_invalid_arg(server, client, request):
    if "max_tokens" not in request:
        request["max_tokens"] = 6  # keep every example short
    events = []
    grpc = grpcclient.InferenceServerClient(server.settings.grpc_url)
    grpc.start_stream(callback=lambda result, error: events.append((result, error)), stream_timeout=60)
    grpc.async_stream_infer("ensemble", [tensor(k, v) for k, v in request.items()], enable_empty_final_response=True)
    grpc.stop_stream()
    errors = [e for _, e in events if e is not None]
    if errors:
        assert "[INVALID_ARG]" in errors[0].message(), (request, errors[0].message())
    else:
        finals = [r for r, _ in events if r.get_response().parameters["triton_final_response"].bool_param]
        assert len(finals) == 1, request
        reasons = {r.as_numpy("finish_reason").reshape(-1)[0] for r, _ in events if r.as_numpy("finish_reason") is not None}
        assert reasons & {b"stop", b"length"}, (request, reasons)
    assert client.is_ready()
