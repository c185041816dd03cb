"""Errors of the engine behind a relay, in our contract's codes.

TensorRT-LLM's backend answers every error as INTERNAL with its own text (upstream table rows
error.*), and Triton's scheduler refuses a request over the queue bound with its own text.
Our clients tell "retry later" from "bad request" from "failure" by the code, so the texts
that mean overload are recognised here; our own models' errors already carry their code.
"""

from __future__ import annotations

import re

from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics

OUR_CODE = re.compile(r"^\[(INVALID_ARG|INTERNAL|CANCELLED|UNAVAILABLE|NOT_FOUND|UNSUPPORTED)\]")

# The fixed part of each overload text: TensorRT-LLM's executor (error.queue_full, up to its
# first placeholder) and Triton core's PolicyQueue::Enqueue (src/scheduler_utils.cc, r24.10
# and r25.12 L172-176: UNAVAILABLE "...Exceeds maximum queue size").
OVERLOAD_MARKERS: tuple[str, ...] = tuple(
    sorted(
        {backend_semantics(v).error("error.queue_full").message.split("{")[0] for v in SUPPORTED_VERSIONS}
        | {"Exceeds maximum queue size"}
    )
)


def classify(message: str) -> tuple[str | None, str]:
    """(code, message) for an error the engine sent; code None: ours already, keep it as it is."""
    if OUR_CODE.match(message):
        return None, message
    if any(marker in message for marker in OVERLOAD_MARKERS):
        return "UNAVAILABLE", f"the engine is full ({message}); retry later"
    return "INTERNAL", f"the engine failed the request: {message}"
