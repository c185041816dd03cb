"""A real tritonserver on loopback, serving the default model's repository (one per session)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from google.protobuf import text_format

from build_engines.render import read_config
from build_engines.repository import render_repository
from build_engines.standin_repository import render_standin_repository
from client import LlmClient
from serving.launcher import ServerSettings, TritonServer

ROOT = Path(__file__).resolve().parent.parent.parent


STREAM_TTL_S = 3.0  # short, so tests can see cancelled streams' state go away


@pytest.fixture(scope="session")
def repository(default_engine, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("served") / "repository"
    render_repository(default_engine, out)
    post = out / "postprocessing" / "config.pbtxt"
    config = read_config(post)
    config.parameters["stream_state_ttl_s"].string_value = str(STREAM_TTL_S)
    post.write_text(text_format.MessageToString(config))
    return out


@pytest.fixture(scope="session")
def serve(tmp_path_factory):
    """start(repository) -> a ready server on free loopback ports, stopped when the session ends."""
    with contextlib.ExitStack() as servers:
        def start(repository: Path) -> TritonServer:
            settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("logs") / "tritonserver.log",
                                                    server_dir=ROOT / "build" / "tritonserver", exit_timeout_s=10)
            return servers.enter_context(TritonServer(settings))

        yield start


@pytest.fixture(scope="session")
def server(repository, serve):
    return serve(repository)


@pytest.fixture(scope="session")
def relay_server(default_engine, tmp_path_factory, serve):
    """The GPU wiring (ensemble -> engine_relay -> engine, tensorrt_llm_bls -> engine_relay's target)
    with the CPU engine behind the relay."""
    repository = tmp_path_factory.mktemp("relayed") / "repository"
    render_repository(default_engine, repository, relay=True)
    return serve(repository)


@pytest.fixture(scope="session")
def standin_server(default_engine, tmp_path_factory, serve):
    """The GPU repository layout (ensemble -> engine_relay -> tensorrt_llm, tensorrt_llm_bls ->
    tensorrt_llm) with `tensorrt_llm` served by the CPU stand-in for the C++ backend."""
    repository = tmp_path_factory.mktemp("standin") / "repository"
    render_standin_repository(default_engine, repository)
    return serve(repository)


# Every repository layout the product serves: the CPU engine, the GPU wiring in front of it,
# and the GPU layout on the stand-in.  Behaviour tests run on each.
LAYOUTS = ("server", "relay_server", "standin_server")


@pytest.fixture(scope="session", params=LAYOUTS)
def layout_server(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def layout_client(layout_server):
    with LlmClient(layout_server.settings.grpc_url) as c:
        yield c


@pytest.fixture(scope="session")
def client(server):
    with LlmClient(server.settings.grpc_url) as c:
        yield c


@pytest.fixture
def metrics(server):
    from serving import prometheus

    return lambda: prometheus.scrape(server.settings.metrics_url)
