"""The engine relay's logic: one engine request relayed to the model that runs the engine
(`tensorrt_llm` on a GPU) as a streamed call, every response forwarded with the request's
detokenize_params, errors passed on, and client cancellation turned into stopping the
engine request.

Why a relay: the C++ `tensorrt_llm` backend cannot echo an extra tensor, and Triton's
ensemble rejects a step fed by a decoupled model and by anything else, so postprocessing's
per-request settings must travel through the engine step (contract/tensors.py).

The call goes over the server's own gRPC endpoint (model_repository/triton/engine_grpc.py
says why not as a decoupled BLS call): its responses carry no final flag that the relay
needs (the call just ends), so the relay forwards each response at once and sends an empty
final response when the call ends.  Cancelling is TensorRT-LLM's stop protocol, on every
Triton version: a request with the same request id and stop=true; the call is never
cancelled, only read to its end.

Nothing here imports Triton: tests drive it with fakes.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, Mapping, Protocol

import numpy as np

from contract import sampling_fields
from contract.features import ENGINE_INPUT_FEATURES, SAMPLING_INPUT_FEATURES, InputUse
from contract.tensors import (
    ENGINE_INPUTS,
    PROMPT_LOGPROB_OUTPUTS,
    STOP,
    TOP_LOGPROB_OUTPUTS,
    TRTLLM_INPUTS,
    TRTLLM_OUTPUTS,
)
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engines.relay.engine_errors import classify

# What the relay sends to the target and asks back (the engine contract without the echo).
FORWARDED_INPUTS = tuple(t.name for t in TRTLLM_INPUTS if t is not STOP)
REQUESTED_OUTPUTS = tuple(t.name for t in TRTLLM_OUTPUTS)
# Inputs of ours (priority, top_logprobs, and the sampling fields not in NVIDIA's contract:
# contract/sampling_fields.py rows with nvidia False, each with a feature): our engine models
# declare them, the C++ model does not.  Preprocessing lets a value that asks for something through
# only to an engine with the feature (contract/features.py), so a relay forwards one exactly then:
# to our engines behind a relay (non-decoupled deployments) it arrives, and the C++ model never gets one.
_OWN_USES: dict[str, InputUse] = {
    **ENGINE_INPUT_FEATURES,
    **{f.engine_name: SAMPLING_INPUT_FEATURES[f.name] for f in sampling_fields.FIELDS if not f.nvidia},
}
OWN_INPUTS = tuple(t.name for t in ENGINE_INPUTS if t.extra and t.name in _OWN_USES)


def forwarded(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`arrays` without the OWN_INPUTS whose values ask for nothing (their engine defaults)."""
    return {
        name: value for name, value in arrays.items() if name not in OWN_INPUTS or not _OWN_USES[name].neutral(value)
    }


def requested_outputs(arrays: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The outputs to ask the target for: the top-k alternatives and the prompt's log probs too when
    the request asks for them (only engines of ours declare them; preprocessing refuses top_logprobs
    and prompt_logprobs for the others)."""
    outputs = REQUESTED_OUTPUTS
    top = arrays.get("top_logprobs")
    if top is not None and np.asarray(top).any():
        outputs += TOP_LOGPROB_OUTPUTS
    prompt = arrays.get("prompt_logprobs")
    if prompt is not None and not ENGINE_INPUT_FEATURES["prompt_logprobs"].neutral(prompt):
        outputs += PROMPT_LOGPROB_OUTPUTS
    return outputs


def stop_request_arrays() -> dict[str, np.ndarray]:
    """A stop request: the engine's required inputs (placeholders) and stop=true.  The
    target cancels the running request with the same request id."""
    arrays = EngineInputs.stop_request().to_arrays()
    return {name: arrays[name] for name in ("input_ids", "input_lengths", "request_output_len", STOP.name)}


FINISHED, ERROR, CANCELLED = "finished", "error", "cancelled"


class Response(Protocol):
    def has_error(self) -> bool: ...

    def output_tensors(self) -> list: ...


class RelaySink(Protocol):
    """The client side of one relayed request (Triton's response sender)."""

    def is_cancelled(self) -> bool: ...

    def forward(self, response: Response, final: bool = False) -> None: ...  # outputs + detokenize_params

    def forward_error(self, response: Response) -> None: ...  # the target's error, final

    def fail(self, message: str, code: str) -> None: ...  # our error, final

    def finish(self) -> None: ...  # empty final response


class SingleResponse:
    """A RelaySink for a non-decoupled deployment (NVIDIA's `decoupled_mode` false): exactly
    one response per request, so the engine's one response (streaming is refused there) is
    held and goes out as the final response."""

    def __init__(self, sink: RelaySink) -> None:
        self._sink = sink
        self._held: Response | None = None

    def is_cancelled(self) -> bool:
        return self._sink.is_cancelled()

    def forward(self, response: Response, final: bool = False) -> None:
        if self._held is not None:
            raise RuntimeError("the engine sent more than one response to a non-streaming request")
        self._held = response

    def forward_error(self, response: Response) -> None:
        self._sink.forward_error(response)

    def fail(self, message: str, code: str) -> None:
        self._sink.fail(message, code)

    def finish(self) -> None:
        if self._held is None:
            self._sink.fail("the engine ended the request without a response", "INTERNAL")
        else:
            self._sink.forward(self._held, final=True)


class Relay:
    """One relayed request.  `run` is called on a worker thread; `cancel` from any thread."""

    def __init__(
        self,
        request_id: str,
        sink: RelaySink,
        start: Callable[[], Iterable[Response]],
        cancel_stream: Callable[[str, object], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request_id = request_id
        self.sink = sink
        self._start = start
        self._cancel_stream = cancel_stream
        self._clock = clock
        self._lock = threading.Lock()
        self._stream: Iterable[Response] | None = None
        self._cancelled = False
        self._expired = ""  # why the relay gave up waiting for a first response
        self.arrived = clock()
        self.responded = False  # the engine has sent something: it runs the request
        self.stops_sent = 0
        self.last_stop = 0.0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            stream = self._stream
        if stream is not None:
            self._stop(stream)

    def expire(self, why: str) -> bool:
        """Give up on a request the engine has not started answering (first-token timeout)."""
        with self._lock:
            if self._cancelled or self.responded:
                return False
            self._cancelled, self._expired = True, why
            stream = self._stream
        if stream is not None:
            self._stop(stream)
        return True

    def stop_again(self) -> None:
        """Send the stop once more: on Triton 2.51 it is a `stop` request, and one that reaches
        TensorRT-LLM's backend before the request itself is lost (upstream row stop.lookup:
        an unknown id is no error)."""
        with self._lock:
            stream = self._stream if self._cancelled else None
        if stream is not None:
            self._stop(stream)

    def _stop(self, stream) -> None:
        self.stops_sent += 1
        self.last_stop = self._clock()
        self._cancel_stream(self.request_id, stream)

    def run(self) -> str:
        """Relay until the engine's stream ends; returns the outcome: finished | error | cancelled."""
        if self._cancelled:
            self.sink.fail("cancelled before the engine started it", "CANCELLED")
            return CANCELLED
        try:
            stream = self._start()
        except Exception as e:
            code, message = classify(f"the engine model did not accept the request: {e}")
            self.sink.fail(message, code or "INTERNAL")
            return ERROR
        with self._lock:
            self._stream = stream
            cancel_now = self._cancelled
        if cancel_now:
            self._stop(stream)
        return self._pump(stream)

    def _pump(self, stream: Iterable[Response]) -> str:
        ended = False  # a final error went out; the rest is drained unseen
        try:
            for response in stream:
                self.responded = True
                if ended or self._cancelled:
                    continue
                if response.has_error():
                    self.sink.forward_error(response)
                    ended = True
                elif response.output_tensors():
                    self.sink.forward(response)
        except Exception as e:
            if not ended:
                self.sink.fail(f"the engine stream failed: {e}", "INTERNAL")
            return ERROR
        if self._cancelled:
            if not ended:
                self.sink.fail(
                    *((self._expired, "UNAVAILABLE") if self._expired else ("cancelled by the client", "CANCELLED"))
                )
            return ERROR if self._expired else CANCELLED
        if ended:
            return ERROR
        self.sink.finish()
        return FINISHED
