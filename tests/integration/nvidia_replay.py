"""Replay a recorded NVIDIA client request (contract/upstream/nvidia_clients.py) against a live
server, and read the answer the way the recording says the script reads it.

The recording gives each tensor's name, datatype, wire shape and value; values the script
derives at run time (a tokenized prompt, a dataset prompt) are given as sentences, and the
caller substitutes concrete ones.  Nothing here is NVIDIA's code: the transports are what the
scripts use (tritonclient's gRPC stream API, HTTP generate / generate_stream as the docs' curl
sends it), written from the recorded behaviour.
"""

from __future__ import annotations

import json
import queue
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from contract.upstream.nvidia_clients import ClientRequest, TensorSent

NUMPY_TYPES = {"BOOL": np.bool_, "INT32": np.int32, "INT64": np.int64, "UINT64": np.uint64, "FP16": np.float16,
               "FP32": np.float32, "BYTES": np.object_}
STREAM_TIMEOUT_S = 180.0  # a guard only: the scripts wait for ever


def tensor_array(tensor: TensorSent, value: Any = None) -> np.ndarray:
    """The tensor as the script builds it: its datatype and its wire shape.  `value` replaces a
    recorded value (needed where the recording describes it in words)."""
    value = tensor.value if value is None else value
    if tensor.datatype != "BYTES" and isinstance(value, str):
        raise ValueError(f"{tensor.name}: the recording derives its value ({value!r}); pass a concrete one")
    items = np.asarray(value, dtype=object if tensor.datatype == "BYTES" else NUMPY_TYPES[tensor.datatype])
    if tensor.datatype == "BYTES":
        items = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode("utf-8"), otypes=[object])(items)
    shape = tuple(items.size if isinstance(d, str) else d for d in tensor.shape)  # "L": the value's own length
    if items.size == 1 and int(np.prod(shape)) != 1:
        return np.full(shape, items.reshape(-1)[0], dtype=items.dtype)
    return items.reshape(shape)


def request_arrays(request: ClientRequest, values: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    values = values or {}
    return {t.name: tensor_array(t, values.get(t.name)) for t in request.inputs}


def infer_inputs(request: ClientRequest, arrays: Mapping[str, np.ndarray], client_module: Any = grpcclient) -> list:
    """tritonclient InferInputs (grpc or http module) with the recorded names and datatypes."""
    inputs = []
    for tensor in request.inputs:
        array = arrays[tensor.name]
        infer_input = client_module.InferInput(tensor.name, list(array.shape), tensor.datatype)
        infer_input.set_data_from_numpy(array)
        inputs.append(infer_input)
    return inputs


@dataclass
class StreamAnswer:
    """What the gRPC stream callback received, in order: results and errors."""

    results: list[grpcclient.InferResult] = field(default_factory=list)
    errors: list[InferenceServerException] = field(default_factory=list)


def replay_grpc_stream(url: str, request: ClientRequest, arrays: Mapping[str, np.ndarray],
                       model: str | None = None) -> StreamAnswer:
    """As end_to_end_grpc_client.py does it: start_stream(callback), one async_stream_infer with
    the requested outputs and the request id, stop_stream() (which waits for the server to end
    the stream).  No empty final response is asked for, like the script."""
    inputs = infer_inputs(request, arrays)
    outputs = None if request.outputs is None else [grpcclient.InferRequestedOutput(n) for n in request.outputs]
    received: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    try:
        client.start_stream(callback=lambda result, error: received.put((result, error)),
                            stream_timeout=STREAM_TIMEOUT_S)
        client.async_stream_infer(model or request.model, inputs, outputs=outputs, request_id=request.request_id)
        client.stop_stream()
    finally:
        client.close()
    answer = StreamAnswer()
    while not received.empty():
        result, error = received.get_nowait()
        if error is not None:
            answer.errors.append(error)
        else:
            answer.results.append(result)
    return answer


def index_of(result: grpcclient.InferResult, name: str) -> int:
    """batch_index / sequence_index as the script reads them: absent means 0, else [0][0]."""
    value = result.as_numpy(name)
    return 0 if value is None else int(value[0][0])


def texts_as_the_script_reads(answer: StreamAnswer, batch_size: int, streaming: bool) -> list[str]:
    """One text per prompt: `output[0].decode('utf-8')` of each response, placed by batch_index;
    streamed chunks are appended, a whole response replaces."""
    texts = [""] * batch_size
    for result in answer.results:
        output = result.as_numpy("text_output")
        batch = index_of(result, "batch_index")
        index_of(result, "sequence_index")
        text = output[0].decode("utf-8")
        texts[batch] = texts[batch] + text if streaming else text
    return texts


@dataclass
class HttpAnswer:
    status: int
    body: Any  # the JSON object (generate), the list of SSE data objects (generate_stream), or the error object


def http_generate(http_url: str, model: str, body: Mapping[str, Any] | str, stream: bool = False,
                  timeout_s: float = STREAM_TIMEOUT_S) -> HttpAnswer:
    """POST v2/models/<model>/generate[_stream] with a JSON body, as the docs' curl does."""
    data = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
    url = f"{http_url}/v2/models/{model}/{'generate_stream' if stream else 'generate'}"
    request = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read().decode("utf-8")
            status = response.status
    except urllib.error.HTTPError as e:  # generate_stream's error comes as one server-sent event
        raw = (e.read() or b"{}").decode("utf-8")
        events = _events(raw)
        return HttpAnswer(e.code, events[0] if events else json.loads(raw))
    return HttpAnswer(status, _events(raw) if stream else json.loads(raw))


def _events(raw: str) -> list[Any]:
    return [json.loads(line[len("data:"):]) for line in raw.splitlines() if line.startswith("data:")]
