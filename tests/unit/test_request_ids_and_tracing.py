"""Request ids, log lines and trace settings (issue 38, docs/tracing.md): pure logic."""

from __future__ import annotations

import io
import json
import logging

import pytest

from contract import request_ids, telemetry
from contract.features import parameter_problems
from serving.trace_config import trace_args, triton_rate


def test_a_clients_request_id_is_kept_only_when_safe():
    assert request_ids.accepted("abc-123_x.y:z") == "abc-123_x.y:z"
    assert request_ids.accepted("bad id\n") is None
    assert request_ids.accepted("x" * 129) is None
    assert request_ids.accepted(None) is None
    assert request_ids.new_request_id().startswith("req-")


def test_every_log_line_carries_the_bound_request_id_as_json():
    out = io.StringIO()
    handler = request_ids.configure_logging(json_lines=True, stream=out)
    try:
        with request_ids.bind("req-42"):
            logging.getLogger("t").info("hello %s", "there", extra={"path": "/v1/x"})
        logging.getLogger("t").info("outside")
    finally:
        logging.getLogger().removeHandler(handler)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["message"] == "hello there" and first["request_id"] == "req-42" and first["path"] == "/v1/x"
    assert second["request_id"] == ""
    assert request_ids.tagged("boom", "r1") == "[request_id=r1] boom"


def test_trace_settings_follow_opentelemetrys_variables():
    off = telemetry.TraceSettings.from_env({})
    assert not off.enabled and trace_args(off) == []
    on = telemetry.TraceSettings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
                                           "OTEL_TRACES_SAMPLER_ARG": "0.1", "OTEL_SERVICE_NAME": "llm"})
    assert on.endpoint == "http://collector:4318/v1/traces" and on.sample_ratio == 0.1
    args = trace_args(on)
    assert "--trace-config=mode=opentelemetry" in args and "--trace-config=rate=10" in args
    assert "--trace-config=opentelemetry,url=http://collector:4318/v1/traces" in args
    assert "--trace-config=opentelemetry,resource=service.name=llm" in args
    assert not any("TENSORS" in a for a in args)  # never the prompts
    assert triton_rate(1.0) == 1 and triton_rate(0.01) == 100
    with pytest.raises(ValueError):
        telemetry.TraceSettings.from_env({"OTEL_TRACES_SAMPLER_ARG": "2"})


def test_traceparent_round_trips_and_is_an_accepted_request_parameter():
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    ctx = telemetry.context_from({"traceparent": parent})
    assert ctx is not None
    assert telemetry.context_from_json(json.dumps({"traceparent": parent})) is not None
    assert telemetry.context_from({"traceparent": "garbage"}) is None
    assert telemetry.context_from_json("not json") is None
    assert parameter_problems({"traceparent": parent, "tracestate": "a=b"}) == []
    assert parameter_problems({"nonsense": 1})


def test_the_chart_and_compose_wire_tracing_through_the_environment():
    from pathlib import Path

    import yaml

    from deploy import chart

    def env_of(values):
        rendered = chart.render(chart.merge_values(chart.load_values([]), values))
        deployment = next(d for r in rendered for d in r.documents if d["kind"] == "Deployment")
        return {c["name"]: {e["name"]: e.get("value") for e in c.get("env", [])}
                for c in deployment["spec"]["template"]["spec"]["containers"]}

    off = env_of({})
    assert not any("OTEL_EXPORTER_OTLP_ENDPOINT" in env for env in off.values())
    on = env_of({"tracing": {"endpoint": "http://collector:4318", "sampleRatio": 0.25}})
    assert on["triton"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"
    assert on["triton"]["OTEL_TRACES_SAMPLER_ARG"] == "0.25" and on["triton"]["KIT_TRACE_SERVICE"] == "triton-server"
    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
    for service in ("triton", "openai", "triton-cpu"):
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" in compose["services"][service]["environment"]
    assert compose["services"]["jaeger"]["profiles"] == ["metrics"]


def test_the_front_logs_json_lines_in_the_chart_and_on_request_in_compose():
    from pathlib import Path

    import yaml

    from deploy import chart

    def front_args(values):
        rendered = chart.render(chart.merge_values(chart.load_values([]), values))
        deployment = next(d for r in rendered for d in r.documents if d["kind"] == "Deployment")
        return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "openai")["args"]

    assert "--log-format=json" in front_args({})  # a fleet's log pipeline parses lines
    assert "--log-format=text" in front_args({"openai": {"logFormat": "text"}})
    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
    command = compose["services"]["openai"]["command"]
    assert command[command.index("--log-format") + 1] == "${OPENAI_LOG_FORMAT:-text}"


def test_without_opentelemetry_api_every_span_is_a_no_op():
    """An image without the kit's requirements has no opentelemetry-api: the client and the models must still import."""
    import subprocess
    import sys

    code = """
import builtins
real = builtins.__import__
def blocked(name, *args, **kwargs):
    if name.startswith("opentelemetry"):
        raise ImportError(name)
    return real(name, *args, **kwargs)
builtins.__import__ = blocked
from contract import telemetry
import client.aio_client, client.tracing
assert not telemetry.HAVE_API and not telemetry.setup("x", telemetry.TraceSettings(endpoint="http://h/v1/traces"))
span = client.tracing.RequestSpan("ensemble", "r1", True, "p")
span.end(None, True)
assert span.headers is None and telemetry.context_from({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) is None
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_model_keeps_the_clients_trace_when_triton_started_another_and_links_to_it():
    """Triton 2.51 now and then starts its own trace for a request whose metadata carried a
    traceparent (model_repository/triton/tracing.py): our spans then stay in the client's trace."""
    import json

    from contract import telemetry
    from model_repository.triton import tracing

    client, triton = "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "00-" + "c" * 32 + "-" + "d" * 16 + "-01"

    class Request:
        def __init__(self, triton_parent, client_parent):
            self._t, self._c = triton_parent, client_parent

        def trace(self):
            return type("Trace", (), {"get_context": lambda _: json.dumps({"traceparent": self._t}) if self._t else None})()

        def parameters(self):
            return json.dumps({"traceparent": self._c} if self._c else {})

    parent, orphan = tracing._parent_and_orphan(Request(triton, client))
    assert telemetry.trace_id_of(parent) == "a" * 32 and telemetry.trace_id_of(orphan) == "c" * 32
    assert len(telemetry.links_to(orphan)) == 1
    same = "00-" + "a" * 32 + "-" + "e" * 16 + "-01"  # Triton continued it: its span is the parent
    parent, orphan = tracing._parent_and_orphan(Request(same, client))
    assert orphan is None and telemetry.trace_id_of(parent) == "a" * 32
    assert telemetry.trace.get_current_span(parent).get_span_context().span_id == int("e" * 16, 16)
    assert tracing._parent_and_orphan(Request(None, client))[1] is None
    assert tracing._parent_and_orphan(Request(None, None)) == (None, None)
