"""What the three engine loops do alike about cancellation, `stop` and streaming, and why the
rest differs.  The loops: the CPU engine's step loop (engine_step/runner.py EngineRunner), the
PyTorch backend's asyncio loop over TensorRT-LLM's LLM API (engines/pytorch/engine.py
LlmEngine), and the relays in front of another engine model (engines/relay/relay.py Relay,
relay_pool.py CancelWatcher and RelayPool, triton/bls_calls.py).  One paragraph per policy.

Cancellation polling.  Shared: a request whose client went away ends CANCELLED, and one without
its first token past the model's deadline ends UNAVAILABLE ("retry later") with one text
(FirstTokenDeadline; polled_ending is the running request's verdict, client first).  The period
is each model's parameter, not a constant here: cancel_check_period_ms in
contract/model_configs.py (100 ms on the CPU engine, TensorRT-LLM's default, row
param.cancellation_check_period_ms; 50 ms on the PyTorch engine and the relays), and each loop
asks `is_cancelled()` (a round trip to the server in Triton's Python backend) once per period.
Where it asks differs with who owns the requests: the runner's Periodic thread asks off the step
thread, which alone touches the batch and drops the answered requests at its next step (0: asked
at every step, on the step thread); the LLM engine asks on its asyncio loop (a coroutine, as
NVIDIA's llmapi model polls and aborts: row triton.cancellation), because everything of a
request there, `RequestOutput.abort()` (row result.abort) included, happens on that loop; the
relay cannot end the engine's request itself: its CancelWatcher thread (asleep while no relay
runs, woken by a new one) sends TensorRT-LLM's stop to the target (the C++ backend or an engine
model of ours), whose own polling (its WaitForCancel thread, row cancel.poll) never sees the
relay's client leave, since a relay never cancels its gRPC call (triton/engine_grpc.py: Triton
2.51's cancel/complete race), and sends it again while the engine still answers (a stop ahead of
its request is lost, row stop.lookup).  A request still waiting for a seat on the CPU engine
that both timed out and was cancelled ends UNAVAILABLE (EngineRunner._drop_cancelled_waiting:
the deadline first), a running one CANCELLED; the relay's text leaves out "in the queue" (it
does not know where the engine holds the request).

Stop by request id.  Shared: the key is the stop request's own Triton request id (row
stop.lookup; triton_io.answer_stop refuses an empty one and answers the stop itself, row
stop.reply), an empty id stops nothing (`is_stopped`), and the engines end a stopped request as
TensorRT-LLM's executor ends a cancelled one: a final response per sequence with the tokens not
sent yet, not an error (row cancel.final_result), recorded CANCELLED.  Where the id is looked up
differs with the loop: the runner collects stopped ids under its condition and applies them at
its next step, to running requests and to those still waiting (an empty final per sequence),
since only the step thread touches the batch; the LLM engine hands the id to its loop
(call_soon_threadsafe) and aborts there; the relays run on pool threads that no one loop scans,
so RelayPool keeps them by id, and a stop becomes TensorRT-LLM's stop request to the target
(EngineStreams.cancel), whose engine ends the request as above.  The relay itself ends its
client's request as a client that left (CANCELLED, "cancelled by the client"; Relay._pump drops
what the target sends after the stop): it does not tell a stop from a cancellation.

Stream cadence and closing.  Shared: `stream_due`, when a streamed sequence's pending tokens go
out before its final response: the first at once, then every `interval` tokens; the final
response carries what is left (everything when not streaming).  The runner's interval is its
stream_interval parameter (0: by batch size, EngineRunner.stream_interval): one OpenVINO step
makes one token per sequence, and every response is a trip through Triton and postprocessing
that takes CPU from the engine.  The LLM engine's is 1: the LLM API hands over a request's
tokens at its own cadence, LlmArgs.stream_interval (row llm.stream_interval, default 1), and
each output's new tokens go out as they come.  The relay counts no tokens: it forwards each
response of the target as it comes (the target applied its own cadence; TensorRT-LLM's streamed
responses hold the tokens since the previous one, row output.token_window), and a response
carries more than tokens (logits, indices), which no relay merges.  Closing: TensorRT-LLM leaves
the end id out of its output (row output.end_id_not_in_output), so the relays, which track no
sample's tokens, end every streamed request with a closing response without tokens per prompt
and sample (bls_calls.SenderSink.finish, bls_pipeline.closing_response); the LLM engine sends
one only when a sample's tokens do not show its end (LlmEngine._visible_end: no end id, fewer
than request_output_len); the runner sends none (its final response is the last one).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import AbstractSet


class FailCode(enum.Enum):
    """Triton error codes a request can end with (names of pb_utils.TritonError codes)."""

    INTERNAL = "INTERNAL"
    CANCELLED = "CANCELLED"
    UNAVAILABLE = "UNAVAILABLE"  # overloaded: retry later


@dataclass(frozen=True)
class FirstTokenDeadline:
    """A request without its first token after `timeout_s` fails UNAVAILABLE (the server is
    overloaded: retry later); None: it waits as long as it takes."""

    timeout_s: float | None
    where: str = " in the queue"  # where the request waited, as the message says it

    def overdue(self, arrived: float, now: float) -> bool:
        return self.timeout_s is not None and now - arrived > self.timeout_s

    def message(self, arrived: float, now: float) -> str:
        return f"no first token after {now - arrived:.0f}s{self.where}; the server is overloaded, retry later"


def polled_ending(
    cancelled: bool, started: bool, arrived: float, now: float, deadline: FirstTokenDeadline
) -> tuple[str, FailCode] | None:
    """How a cancellation poll ends a running request: its client went away (CANCELLED), or it
    has no first token (`started` False) past the deadline (UNAVAILABLE); None: it runs on."""
    if cancelled:
        return "cancelled", FailCode.CANCELLED
    if not started and deadline.overdue(arrived, now):
        return deadline.message(arrived, now), FailCode.UNAVAILABLE
    return None


def is_stopped(request_id: str, stops: AbstractSet[str]) -> bool:
    """Whether a `stop` names this request (one without a request id is never stopped)."""
    return bool(request_id) and request_id in stops


def stream_due(pending: int, sent: int, interval: int) -> bool:
    """Whether a streamed sequence's `pending` tokens go out now rather than with its final
    response: the first token(s) at once, then every `interval` tokens."""
    return pending > 0 and (sent == 0 or pending >= interval)
