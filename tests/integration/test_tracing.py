"""Traces end to end (issue 38, docs/tracing.md), checked at an OTLP/HTTP receiver that decodes
what arrives with opentelemetry-proto (tests/integration/otlp_receiver.py), nothing of ours
mocked: one streamed request through the OpenAI front and one through tensorrt_llm_bls (the
Python client's CLI) arrive as one tree each, Triton's own spans included; a refused and a
cancelled request show their status; the request id is on every hop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (requirements/lock.txt) is not installed")
pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto (requirements/lock.txt) is not installed")

from contract.telemetry import TraceSettings  # noqa: E402
from serving.launcher import ServerSettings, TritonServer  # noqa: E402
from serving.triton_install import server_dir  # noqa: E402
from tests import layouts  # noqa: E402
from tests.integration.openai_front_process import MODEL, running_front  # noqa: E402
from tests.integration.otlp_receiver import OtlpReceiver, ReceivedSpan, tree  # noqa: E402

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parent.parent.parent
INCOMING_TRACE = {"server": "4bf92f3577b34da6a3ce929d0e0e4701", "standin_server": "4bf92f3577b34da6a3ce929d0e0e4702",
                  "pytorch_server": "4bf92f3577b34da6a3ce929d0e0e4703"}
INCOMING_SPAN = "00f067aa0ba902b7"
TREES: dict[str, str] = {}  # printed at the end (the note's trace trees)


def _python_path() -> str:
    """The test process's own path, so the stubs import the same OpenTelemetry packages."""
    return os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())


@pytest.fixture(scope="module")
def receiver():
    with OtlpReceiver() as rx:
        yield rx


def _traced_server(repository: Path, receiver: OtlpReceiver, tmp: Path, environment=()) -> TritonServer:
    trace = TraceSettings(endpoint=receiver.endpoint + "/v1/traces", sample_ratio=1.0, service_name=None)
    settings = ServerSettings.on_free_ports(repository, tmp / "tritonserver.log", server_dir=server_dir(ROOT / "build"),
                                            exit_timeout_s=10, trace=trace, environment=tuple(environment))
    return TritonServer(settings)


@pytest.fixture(scope="module", params=["server", "standin_server", "pytorch_server"])
def traced(request, default_engine, receiver, tmp_path_factory):
    """A traced server of the layout: the CPU engine; the GPU layout on the C++ backend's
    stand-in; the PyTorch-backend layout on the stand-in LLM API."""
    tmp = tmp_path_factory.mktemp(f"traced-{request.param}")
    torch_engine = request.getfixturevalue("pytorch_engine") if request.param == "pytorch_server" else None
    rendered = layouts.render_layout(layouts.Layout(request.param), default_engine, tmp / "repository", torch_engine)
    environment = dict(rendered.environment)
    python_path = os.pathsep.join(p for p in (environment.pop("PYTHONPATH", ""), _python_path()) if p)
    server = _traced_server(rendered.repository, receiver, tmp, (("PYTHONPATH", python_path), *environment.items()))
    with server:
        yield request.param, server, tmp


def _by_request(receiver: OtlpReceiver, request_id: str, trace_id: str) -> list[tuple[str, str, str]]:
    """(trace, span, parent) of spans naming `request_id` that arrived under another trace."""
    return sorted((s.trace_id[:8], s.name, s.parent_id[:8]) for s in receiver.spans() if s.trace_id != trace_id and
                  request_id in (s.attributes.get("triton.request_id"), s.attributes.get("llm.request_id")))


OURS = {"server": {"llm.generate"}, "standin_server": {"llm.relay"}, "pytorch_server": {"llm.generate"}}
# The BLS calls the engine model itself: on the stand-in layout that is the stand-in of NVIDIA's C++
# tensorrt_llm (no span of ours), and engine_relay (llm.relay) is only on the ensemble's path.
OURS_ON_BLS = {"server": {"llm.generate"}, "standin_server": set(), "pytorch_server": {"llm.generate"}}


def _triton_went_elsewhere(receiver: OtlpReceiver, trace_id: str, request_id: str, ours: set[str]):
    """A stop condition for a wait: Triton's spans of the request arrived under another trace and
    ours in this one (waiting longer would not bring Triton's here)."""
    return lambda: bool(_by_request(receiver, request_id, trace_id)) and ours <= {
        s.name for s in receiver.spans(trace_id)}


def _xfail_if_triton_started_its_own_trace(receiver: OtlpReceiver, trace_id: str, request_id: str,
                                           ours: set[str]) -> None:
    """Triton 2.51 now and then starts a trace of its own for a request whose gRPC metadata carried
    a traceparent (in about half the runs of this module): every Triton span of the request then
    arrives under another trace id.  Our models' spans must still be in the client's trace, naming
    Triton's in `triton.trace_id` (model_repository/triton/tracing.py); then it is upstream's miss."""
    elsewhere = _by_request(receiver, request_id, trace_id)
    if not elsewhere:
        return
    spans = receiver.wait_for(trace_id, ours, timeout_s=15)
    mine = [s for s in spans if s.name in ours]
    assert ours <= {s.name for s in mine}, f"{tree(spans)}\nour spans are not in the client's trace either"
    # the ones Triton gave a context name its trace (a step Triton gives none, e.g. postprocessing
    # of a streamed response, is under the client's span by the traceparent parameter alone)
    orphan = {s.attributes.get("triton.trace_id") for s in mine} - {None}
    assert len(orphan) == 1 and trace_id not in orphan, orphan
    pytest.xfail(f"Triton 2.51 started its own trace ({orphan.pop()[:8]}) for request {request_id} instead of "
                 f"continuing {trace_id[:8]}; our spans stayed in the client's trace, linked to Triton's")


def _by_id(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.span_id: s for s in spans}


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert found, f"no span {name!r} in {sorted({s.name for s in spans})}"
    return found[0]


def _assert_one_tree(spans: list[ReceivedSpan], root_parent: str = "") -> None:
    ids = _by_id(spans)
    roots = [s for s in spans if s.parent_id not in ids]
    assert [s.parent_id for s in roots] == [root_parent], tree(spans)


def _ancestors(span: ReceivedSpan, ids: dict[str, ReceivedSpan]) -> list[str]:
    out = []
    while span.parent_id in ids:
        span = ids[span.parent_id]
        out.append(span.name)
    return out


def test_streamed_request_through_the_front_is_one_tree(traced, receiver, monkeypatch):
    layout, server, tmp = traced
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint + "/v1/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "openai-front")
    monkeypatch.setenv("PYTHONPATH", _python_path())
    request_id = f"trace-test-{layout}"
    incoming = INCOMING_TRACE[layout]  # one trace per layout: the receiver serves the module
    with running_front(server.settings.grpc_url, tmp, "--log-format", "json") as base:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8, "stream": True,
                "stream_options": {"include_usage": True}}
        http = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={
            "content-type": "application/json", "x-request-id": request_id,
            "traceparent": f"00-{incoming}-{INCOMING_SPAN}-01"})
        with urllib.request.urlopen(http, timeout=120) as r:
            assert r.headers["x-request-id"] == request_id
            assert r.headers["x-trace-id"] == incoming
            assert b"[DONE]" in r.read()
        expected = {"POST /v1/chat/completions", "triton ensemble", "InferRequest", "ensemble", "preprocessing",
                    "llm.preprocess", "postprocessing", "llm.postprocess"}
        engine = {"server": {"openvino_llm", "llm.generate"}, "standin_server": {"engine_relay", "llm.relay", "tensorrt_llm"},
                  "pytorch_server": {"tensorrt_llm_pytorch", "llm.generate"}}[layout]
        ours = {"llm.preprocess", "llm.postprocess"} | OURS[layout]
        spans = receiver.wait_for(incoming, expected | engine, stop=_triton_went_elsewhere(receiver, incoming, request_id,
                                                                                         ours))
        front_log = (tmp / "front.log").read_text()
    if not expected | engine <= {s.name for s in spans}:
        _xfail_if_triton_started_its_own_trace(receiver, incoming, request_id, ours)
    TREES[f"front, {layout}"] = tree(spans)
    print(f"\n--- trace tree: streamed chat completion through the front ({layout})\n{tree(spans)}")
    assert expected | engine <= {s.name for s in spans}, (
        f"{tree(spans)}\nreceiver errors: {receiver.errors}\nthis request's spans in other traces: "
        f"{_by_request(receiver, request_id, incoming)}")
    _assert_one_tree(spans, INCOMING_SPAN)
    ids = _by_id(spans)
    front = _one(spans, "POST /v1/chat/completions")
    client = _one(spans, "triton ensemble")
    assert front.parent_id == INCOMING_SPAN and "POST /v1/chat/completions" in _ancestors(client, ids)
    assert front.attributes["llm.request_id"] == request_id and client.attributes["llm.request_id"] == request_id
    assert client.attributes["llm.usage.completion_tokens"] > 0 and "llm.time_to_first_token_ms" in client.attributes
    assert any(s.name == "InferRequest" and s.parent_id == client.span_id for s in spans)  # Triton continued it
    assert all(s.attributes.get("triton.request_id") == request_id for s in spans if s.name == "ensemble")
    assert "ensemble" in _ancestors(_one(spans, "llm.preprocess"), ids)
    if layout in ("server", "pytorch_server"):  # an engine model of ours (engine_adapter.py)
        generate = _one(spans, "llm.generate")
        assert _ancestors(generate, ids)[1] == "ensemble"
        assert {"llm.time_to_first_token_ms", "llm.usage.completion_tokens"} <= set(generate.attributes)
        if layout == "server":  # the CPU runner knows when the engine took the request (the LLM API does not say)
            assert "llm.queue_time_ms" in generate.attributes
    else:  # the relay's engine call continues the relay's span (gRPC metadata): Triton's tensorrt_llm span under it
        assert "llm.relay" in _ancestors(_one(spans, "tensorrt_llm"), ids)
    assert "Say hi" not in json.dumps([s.attributes for s in spans])  # no prompt text unless asked
    lines = [json.loads(line) for line in front_log.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("logger") == "openai_front.access"]
    assert access and access[-1]["request_id"] == request_id and access[-1]["trace_id"] == incoming


def test_bls_request_from_the_client_is_one_tree(traced, receiver):
    layout, server, tmp = traced
    before = {s.span_id for s in receiver.spans()}
    env = os.environ | {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/v1/traces",
                        "OTEL_SERVICE_NAME": "llm-client", "PYTHONPATH": _python_path()}
    out = subprocess.run([sys.executable, "-m", "client", "--url", server.settings.grpc_url, "--model", "tensorrt_llm_bls",
                          "generate", "Name a colour.", "--max-tokens", "8", "--stream", "--json"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 20
    client = None
    while client is None and time.monotonic() < deadline:
        client = next((s for s in receiver.spans() if s.name == "triton tensorrt_llm_bls" and s.service == "llm-client"
                       and s.span_id not in before), None)
        time.sleep(0.2)
    assert client is not None, sorted({s.name for s in receiver.spans()})
    expected = {"InferRequest", "tensorrt_llm_bls", "llm.bls", "preprocessing", "llm.preprocess", "llm.postprocess"}
    expected |= {"server": {"openvino_llm", "llm.generate"}, "standin_server": {"tensorrt_llm"},
                 "pytorch_server": {"tensorrt_llm_pytorch", "llm.generate"}}[layout]
    ours = {"llm.bls", "llm.preprocess", "llm.postprocess"} | OURS_ON_BLS[layout]
    request_id = client.attributes["llm.request_id"]
    spans = receiver.wait_for(client.trace_id, expected,
                              stop=_triton_went_elsewhere(receiver, client.trace_id, request_id, ours))
    if not expected <= {s.name for s in spans}:
        _xfail_if_triton_started_its_own_trace(receiver, client.trace_id, request_id, ours)
    TREES[f"client -> tensorrt_llm_bls, {layout}"] = tree(spans)
    print(f"\n--- trace tree: the client's streamed request to tensorrt_llm_bls ({layout})\n{tree(spans)}")
    # Seen once in CI (pytorch_server, not reproduced): only the client's span arrived.  What else
    # arrived since then, by trace, tells a server span under another trace id from no export.
    elsewhere = sorted({(s.trace_id[:8], s.name) for s in receiver.spans() if s.span_id not in before} - {
        (s.trace_id[:8], s.name) for s in spans})
    assert expected <= {s.name for s in spans}, (
        f"{tree(spans)}\nreceiver errors: {receiver.errors}\nother traces since: {elsewhere}")
    _assert_one_tree(spans)
    ids = _by_id(spans)
    assert _ancestors(_one(spans, "llm.bls"), ids)[:2] == ["tensorrt_llm_bls", "InferRequest"]
    assert "llm.bls" in _ancestors(_one(spans, "llm.postprocess"), ids)
    assert "tensorrt_llm_bls" in _ancestors(_one(spans, "llm.preprocess"), ids)  # via trace=request.trace()
    bls = _one(spans, "llm.bls")
    assert bls.attributes["llm.usage.completion_tokens"] > 0 and bls.status_code != 2


def test_refused_and_cancelled_requests_show_their_status(traced, receiver, monkeypatch):
    layout, server, tmp = traced
    if layout != "server":
        pytest.skip("statuses are the same code on every layout; checked on the CPU layout")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint + "/v1/traces")
    monkeypatch.setenv("PYTHONPATH", _python_path())
    with running_front(server.settings.grpc_url, tmp) as base:
        refused_trace, cancelled_trace = "1" * 32, "2" * 32
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}
        http = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={
            "content-type": "application/json", "traceparent": f"00-{refused_trace}-{INCOMING_SPAN}-01"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(http, timeout=60)
        assert refused.value.code == 400 and refused.value.headers["x-request-id"]
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 400,
                "stream": True, "min_tokens": 400}
        http = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={
            "content-type": "application/json", "traceparent": f"00-{cancelled_trace}-{INCOMING_SPAN}-01"})
        r = urllib.request.urlopen(http, timeout=60)
        r.readline()
        r.readline()
        r.close()  # the client goes away mid-stream
        refused_spans = receiver.wait_for(refused_trace, {"POST /v1/chat/completions"})
        # not one tree: Triton ends no span of a request its client cancelled (the tree checks are above)
        cancelled_spans = receiver.wait_for(cancelled_trace, {"POST /v1/chat/completions", "triton ensemble",
                                                              "llm.generate"}, one_tree=False)
    TREES["refused"] = tree(refused_spans)
    TREES["cancelled"] = tree(cancelled_spans)
    print(f"\n--- refused\n{tree(refused_spans)}\n--- cancelled\n{tree(cancelled_spans)}")
    front = _one(refused_spans, "POST /v1/chat/completions")
    assert front.status_code == 2 and front.attributes["error.type"] == "400"
    front = _one(cancelled_spans, "POST /v1/chat/completions")
    assert front.status_code == 2 and front.attributes["error.type"]  # CANCELLED, or FastAPI's own CancelledError
    client = _one(cancelled_spans, "triton ensemble")
    assert client.status_code == 2 and client.attributes["error.type"] == "CANCELLED"
    assert _one(cancelled_spans, "llm.generate").attributes.get("llm.cancelled") is True  # stopped by the client's `stop`


def test_every_grpc_response_carries_the_request_id(traced):
    """On gRPC the request id comes back in each response's `id` (Triton echoes it); the client's
    traceparent parameter is accepted by every model."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    layout, server, tmp = traced
    responses = []
    client = grpcclient.InferenceServerClient(server.settings.grpc_url)
    client.start_stream(lambda result, error: responses.append((result, error)))

    def tensor(name, array, dtype):
        t = grpcclient.InferInput(name, array.shape, dtype)
        t.set_data_from_numpy(array)
        return t

    inputs = [tensor("text_input", np.array([["Say hi"]], dtype=object), "BYTES"),
              tensor("max_tokens", np.array([[4]], dtype=np.int32), "INT32"), tensor("stream", np.array([[True]]), "BOOL")]
    client.async_stream_infer("ensemble", inputs, request_id="grpc-id-1", enable_empty_final_response=True,
                              parameters={"traceparent": f"00-{'3' * 32}-{INCOMING_SPAN}-01"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
            r is not None and r.get_response().parameters["triton_final_response"].bool_param for r, _ in responses):
        time.sleep(0.1)
    client.stop_stream()
    assert responses and all(e is None for _, e in responses), responses
    assert {r.get_response().id for r, _ in responses} == {"grpc-id-1"}
