"""The few conversions between Triton's python-backend objects and ours, shared by every
model.py (so none of them copies a helper from another).  Imported only inside the
Python-backend stub, where `triton_python_backend_utils` exists."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, TypeVar

import numpy as np
import triton_python_backend_utils as pb_utils

from contract import features
from contract.model_parameters import from_parameters
from contract.tensors import STOP, DType, TensorSpec
from model_repository.triton.response_channel import ResponseChannel, SendPump

T = TypeVar("T")


def model_config(args: Mapping[str, str]) -> dict[str, Any]:
    return json.loads(args["model_config"])


def load_parameters(args: Mapping[str, str], cls: type[T]) -> T:
    config = model_config(args)
    return from_parameters(cls, config["name"], config.get("parameters", {}))


def read_inputs(request, specs: tuple[TensorSpec, ...]) -> dict[str, np.ndarray]:
    out = {}
    for spec in specs:
        tensor = pb_utils.get_input_tensor_by_name(request, spec.name)
        if tensor is not None:
            out[spec.name] = tensor.as_numpy()
    return out


def output_tensors(values: Mapping[str, Any], specs: tuple[TensorSpec, ...]) -> list:
    tensors = []
    for spec in specs:
        value = values[spec.name]
        if spec.dtype == DType.STRING:
            array = np.asarray(value, dtype=np.object_)
        else:
            array = np.asarray(value, dtype=spec.dtype.numpy_type)
        if spec.wire_shape is not None:  # e.g. text_output: 1-D per response, as NVIDIA sends it
            array = array.reshape(spec.wire_shape)
        tensors.append(pb_utils.Tensor(spec.name, array))
    return tensors


def text_array(text: str) -> np.ndarray:
    """A [1, 1] BYTES tensor (batch of one) holding UTF-8 text."""
    return np.array([[text.encode("utf-8")]], dtype=np.object_)


def error(message: str, code: str = "INVALID_ARG") -> Any:
    """The code also leads the message: Triton's gRPC streaming protocol carries only the
    message of an error, and clients still need to tell a bad request from a failure."""
    return pb_utils.TritonError(f"[{code}] {message}", getattr(pb_utils.TritonError, code))


def error_response(message: str, code: str = "INVALID_ARG") -> Any:
    return pb_utils.InferenceResponse(output_tensors=[], error=error(message, code))


def response_channel(request, pump: SendPump | None = None) -> ResponseChannel:
    """The request's response sender, behind the close-once rule (model_repository.triton.response_channel);
    `pump`: sent from the pump's thread."""
    return ResponseChannel(request.get_response_sender(), pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL, pump)


def fail(channel: ResponseChannel, message: str, code: str = "INVALID_ARG") -> None:
    """End a decoupled request with an error (its final response)."""
    channel.finish(error_response(message, code))


def parameter_problems(request) -> list[str]:
    """The request's parameters that no model of ours honours (contract/features.py)."""
    try:
        parameters = json.loads(request.parameters() or "{}")
    except ValueError:
        return ["the request parameters are not valid JSON"]
    return features.parameter_problems(parameters)


def is_stop(request) -> bool:
    """TensorRT-LLM's stop request: the optional BOOL input `stop` is true (absent: false)."""
    tensor = pb_utils.get_input_tensor_by_name(request, STOP.name)
    return tensor is not None and bool(tensor.as_numpy().reshape(-1)[0])


def answer_stop(
    channel: ResponseChannel, request_id: str, cancel: Callable[[str], object], decoupled: bool = True
) -> None:
    """Cancel what runs under the stop request's own id, then one empty final response
    (TensorRT-LLM's backend answers a stop so: upstream table rows stop.lookup, stop.reply); a
    non-decoupled model must send a response object, so it sends one without tensors."""
    if not request_id:
        fail(channel, "'stop' needs the request id of the request to stop: send it under that request's id")
        return
    cancel(request_id)
    channel.finish(None if decoupled else pb_utils.InferenceResponse(output_tensors=[]))


def logger():
    return pb_utils.Logger


def log_environment(model_name: str) -> None:
    """One line saying which interpreter and packages this model runs with."""
    import sys
    from importlib import metadata

    versions = {}
    for dist in ("numpy", "openvino", "openvino-genai", "transformers", "tokenizers", "tensorrt_llm"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "-"
    pb_utils.Logger.log_info(
        f"{model_name} environment: python={sys.executable} prefix={sys.prefix} "
        + " ".join(f"{k}={v}" for k, v in versions.items())
        + f" code={__file__}"
    )
