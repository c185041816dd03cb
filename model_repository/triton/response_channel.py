"""One request's Triton response sender, closed once: the only way our models touch a sender.

Why (python_backend source, the same at r24.10 = Triton 2.51 and r25.12 = the GPU image):
- `ModelInstanceState::ResponseSendDecoupled` (src/python_be.cc, r24.10 L1142-1163) destroys
  the request's `TRITONBACKEND_ResponseFactory` when a response with the FINAL flag is sent.
- `ModelInstanceState::ProcessIsRequestCancelled` (src/python_be.cc, r24.10 L858-890; r25.12
  L899-921) hands the factory's address to `TRITONBACKEND_ResponseFactoryIsCancelled`
  without any check, and `ResponseSender::IsCancelled` (src/response_sender.cc) asks it
  whether or not the sender is closed (`PbCancel::IsCancelled`, src/pb_cancel.cc, caches
  only a `true`).
So `is_cancelled()` during or after the final send reads freed memory inside tritonserver:
the SIGSEGV with `TRITONBACKEND_ResponseFactoryIsCancelled` on top of the stack that killed
the server under streaming load on the BLS (a watcher thread asked while the relay thread
sent the final response).

The rule, made structural here: every send and every cancellation query of one request
goes through one lock; the final send closes the channel; after that nothing reaches the
sender (`is_cancelled()` answers from our own state, a send is refused and counted).
Nothing here imports Triton: tests drive it with fakes.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Protocol

log = logging.getLogger(__name__)


class Sender(Protocol):
    """pb_utils.InferenceResponseSender, as far as we use it."""

    def send(self, response: Any = None, flags: int = 0) -> None: ...

    def is_cancelled(self) -> bool: ...


class SendPump:
    """Sends the responses of many channels, in the order given, from a thread of its own, so
    that the thread that made a response goes on while Triton takes it.

    python_backend's `ResponseSender::Send` (src/response_sender.cc, r24.10 and main) releases
    the GIL, writes the response into shared memory and waits for tritonserver to acknowledge
    it: ~0.9 ms per response here, ~6% of a one-stream decode step spent waiting on the CPU
    engine's step thread.  A plain queue does not win it back: OpenVINO GenAI's `step()` holds
    the GIL throughout, so a sender thread could only start its send after the next step.
    Hence the hand-off: a channel's send returns once the pump is entering it, i.e. when the
    send has released the GIL; its wait for the acknowledgement then runs beside the next step.
    A second response in the same step waits for the first's acknowledgement, as before."""

    def __init__(self, name: str = "response-pump") -> None:
        self._jobs: deque[tuple[Callable[[], None], threading.Event]] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.failed_sends = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def queue(self, send: Callable[[], None]) -> threading.Event | None:
        """Queue `send` for the pump thread; wait on the returned event before going on (it is
        set when the send is about to run).  None: the pump has stopped, and `send` ran here."""
        entering = threading.Event()
        with self._cond:
            if not self._stopping:
                self._jobs.append((send, entering))
                self._cond.notify()
                return entering
        self._run(send)
        return None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Send what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stopping:
                    self._cond.wait()
                if not self._jobs:
                    return
                send, entering = self._jobs.popleft()
            entering.set()
            self._run(send)

    def _run(self, send: Callable[[], None]) -> None:
        try:
            send()
        except Exception:  # the response is lost, not the pump: Triton logs its side too
            self.failed_sends += 1
            log.exception("sending a response failed")


class ResponseChannel:
    """Thread-safe, close-once wrapper of one response sender.  With a `pump`, the sends go
    through it (SendPump: in order, without waiting for Triton's acknowledgement)."""

    def __init__(self, sender: Sender, final_flag: int, pump: SendPump | None = None) -> None:
        self._sender = sender
        self._final_flag = final_flag
        self._pump = pump
        self._lock = threading.Lock()  # the channel's state, and the order of its sends
        self._io = threading.Lock()  # held while the sender is asked anything (a send, a cancellation query)
        self._closed = False
        self._cancelled = False
        self.refused_sends = 0  # sends attempted after the final one (a bug of the caller, never sent)

    @property
    def closed(self) -> bool:
        return self._closed

    def is_cancelled(self) -> bool:
        """Whether the client cancelled; after the final send, the last answer (the sender's
        response factory no longer exists, so it must not be asked)."""
        with self._lock:
            if not self._closed and not self._cancelled:
                with self._io:
                    self._cancelled = bool(self._sender.is_cancelled())
            return self._cancelled

    def send(self, response: Any = None, final: bool = False) -> bool:
        """Send one response (None with final=True: an empty final response).  Returns False,
        sending nothing, when the channel is already closed.  Sends reach the sender in the
        order their calls took the channel's lock, with or without a pump."""
        with self._lock:
            if self._closed:
                self.refused_sends += 1
                return False
            if final:
                # Closed before the send: whatever happens inside it, the factory may be gone.
                self._closed = True
            if self._pump is None:
                self._send(response, final)
                return True
            entering = self._pump.queue(lambda: self._send(response, final))
        if entering is not None:
            entering.wait()
        return True

    def _send(self, response: Any, final: bool) -> None:
        with self._io:
            # Our references to the response's tensors, held across the send: Triton 2.51's
            # sender drops the outputs the request did not ask for without the GIL
            # (python_backend r24.10 src/response_sender.cc `ResponseSender::Send`:
            # `PruneOutputTensors` after `gil_scoped_release`), which frees their numpy arrays
            # there, corrupting the stub's heap, unless another reference keeps them (fixed
            # in r24.12, PR #390).  Dropped after the send, with the GIL.
            held = response.output_tensors() if hasattr(response, "output_tensors") else ()
            if final:
                self._sender.send(response, flags=self._final_flag)
            else:
                self._sender.send(response)
            del held

    def finish(self, response: Any = None) -> bool:
        return self.send(response, final=True)


class SharedChannel:
    """The n prompts of one batched request answer through one ResponseChannel (NVIDIA's
    batched requests: one response stream, each response tagged with its batch_index).  A
    row's final response goes out as final only when it is the last row to end."""

    def __init__(self, channel: ResponseChannel, rows: int) -> None:
        self.channel = channel
        self._remaining = rows
        self._lock = threading.Lock()

    def row(self) -> "RowChannel":
        return RowChannel(self)

    def _send(self, response: Any, final: bool) -> bool:
        with self._lock:
            if final:
                self._remaining -= 1
            last = self._remaining <= 0
        if response is None and not (final and last):
            return True  # a row's empty final: nothing to say until the last row ends
        return self.channel.send(response, final=final and last)


class RowChannel:
    """One prompt's view of a SharedChannel (the ResponseChannel interface)."""

    def __init__(self, shared: SharedChannel) -> None:
        self._shared = shared
        self._done = False

    @property
    def closed(self) -> bool:
        return self._done or self._shared.channel.closed

    def is_cancelled(self) -> bool:
        return self._shared.channel.is_cancelled()

    def send(self, response: Any = None, final: bool = False) -> bool:
        if self._done:
            return False
        self._done = final
        return self._shared._send(response, final)

    def finish(self, response: Any = None) -> bool:
        return self.send(response, final=True)
