"""The C++ backend's facts as the stand-in uses them: the semantics table of the TensorRT-LLM
version it stands in for, and errors rendered with upstream's codes and texts.

Texts come from the table rows (never spelt here).  What upstream appends to a TllmException
text - " (<file>:<line>)" and a stack trace (row error.exception_text) - is not reproduced:
the stand-in cannot know upstream's line numbers, so clients must match upstream texts as
substrings, as they would have to on a GPU (the trace differs per build).
"""

from __future__ import annotations

import os
from typing import Mapping

from contract.upstream.backend_semantics import BackendSemantics, backend_semantics

PINNED_VERSION = "1.1.0"  # TensorRT-LLM of the pinned 25.12 image (.env TRTLLM_VERSION)
VERSION_ENV = "TRTLLM_VERSION"  # the stand-in's config must equal the GPU's, so the version is not a parameter


def version(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(VERSION_ENV) or PINNED_VERSION


def semantics(environ: Mapping[str, str] | None = None) -> BackendSemantics:
    return backend_semantics(version(environ))


class UpstreamError(Exception):
    """An error as the C++ backend reports it: a Triton error code and upstream's text."""

    def __init__(self, rule_id: str, code: str, message: str) -> None:
        super().__init__(message)
        self.rule_id = rule_id
        self.code = code
        self.message = message


class StandinLimitation(Exception):
    """A request upstream would serve that the CPU engine cannot: refused with UNSUPPORTED and
    a text that says it is the stand-in speaking (never an upstream text)."""

    code = "UNSUPPORTED"

    def __init__(self, what: str) -> None:
        self.message = f"tensorrt_llm stand-in (CPU engine): {what}"
        super().__init__(self.message)


def exception_text(sem: BackendSemantics, rule_id: str, **fields) -> str:
    """The rule's text as e.what() starts (row error.exception_text: TLLM_CHECK* prefix)."""
    rule = sem.rule(rule_id)
    raised_by = rule.extra.get("raised_by", "std::runtime_error")
    prefix = sem.rule("error.exception_text").extra["prefix"].get(raised_by, "")
    # request errors are error rows; load-time texts (guided.*) are the row's message
    message = sem.error(rule_id).render(**fields) if rule_id in sem.errors else rule.extra["message"].format(**fields)
    return prefix + message


def error(sem: BackendSemantics, rule_id: str, **fields) -> UpstreamError:
    """An enqueue-time error (delivery enqueue_response): the request's only response."""
    return UpstreamError(rule_id, sem.error(rule_id).code, exception_text(sem, rule_id, **fields))


def executor_failure(sem: BackendSemantics, executor_request_id: int, what: str) -> UpstreamError:
    """An executor error response (row error.executor_response wraps the executor's text)."""
    rule = sem.error("error.executor_response")
    return UpstreamError("error.executor_response", rule.code,
                         rule.render(executor_request_id=executor_request_id, error=what))


def fetch_failure(sem: BackendSemantics, executor_request_id: int, rule_id: str, **fields) -> UpstreamError:
    """A request refused by the executor after it was queued.  Rows whose template is the
    client's whole text (it names {executor_request_id}) render as they are; otherwise the
    rule's exception text is wrapped by rows error.fetch_prefix and error.executor_response."""
    rule = sem.error(rule_id)
    if "{executor_request_id}" in rule.message:
        return UpstreamError(rule_id, rule.code, rule.render(executor_request_id=executor_request_id, **fields))
    what = sem.rule("error.fetch_prefix").extra["message"].format(what=exception_text(sem, rule_id, **fields))
    return executor_failure(sem, executor_request_id, what)


def load_failure(sem: BackendSemantics, what: str) -> RuntimeError:
    """A model load failure as upstream words it (row param.load_failure)."""
    return RuntimeError(sem.rule("param.load_failure").extra["template"].format(what=what))
