"""A real tritonserver on loopback, serving the default model's repository (one per session)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from build_engines.render import set_parameters
from build_engines.repository import render_repository
from client import LlmClient
from serving.launcher import ServerSettings, TritonServer
from serving.triton_install import server_dir
from tests import layouts

ROOT = Path(__file__).resolve().parent.parent.parent


STREAM_TTL_S = 3.0  # short, so tests can see cancelled streams' state go away


@pytest.fixture(scope="session")
def repository(default_engine, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("served") / "repository"
    render_repository(default_engine, out)
    set_parameters(out, "postprocessing", {"stream_state_ttl_s": str(STREAM_TTL_S)})
    return out


class ServerPool:
    """The servers a session started: the layouts' shared ones live until the session ends; one a
    module started for itself (a LoRA, a draft model, a small batch...) stops when that module ends,
    in the background, so the next module's tests run beside it drain rather than wait for it.  On 2
    cores every server kept alive to the end (~15 in a full run, each with its engine's threads
    and ~0.5-1 GB) slowed the modules after it; the late draft-loop and wedge checks failed under
    them in clean-clone CI runs while they passed alone."""

    def __init__(self, tmp_path_factory) -> None:
        self._tmp = tmp_path_factory
        self.started: list[TritonServer] = []
        self.module_owned: list[TritonServer] = []
        self.stopping: list[threading.Thread] = []

    def start(self, repository: Path, environment: tuple[tuple[str, str], ...] = (), *,
              session_wide: bool = False) -> TritonServer:
        settings = ServerSettings.on_free_ports(repository, self._tmp.mktemp("logs") / "tritonserver.log",
                                                server_dir=server_dir(ROOT / "build"), exit_timeout_s=10,
                                                environment=environment)
        server = TritonServer(settings)
        self.started.append(server)  # before it is ready: a server that fails to start is stopped too
        if not session_wide:
            self.module_owned.append(server)
        return server.__enter__()

    def stop_module_owned(self) -> None:
        for server in self.module_owned:
            self.started.remove(server)
            thread = threading.Thread(target=server.__exit__, args=(None, None, None), daemon=True)
            thread.start()
            self.stopping.append(thread)
        self.module_owned.clear()

    def stop_all(self) -> None:
        """Every server still up, all at once (one by one, each drain and exit took ~10 s)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, len(self.started))) as pool:
            list(pool.map(lambda s: s.__exit__(None, None, None), self.started))
        for thread in self.stopping:
            thread.join()


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory):
    pool = ServerPool(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session")
def serve(server_pool):
    """start(repository) -> a ready server on free loopback ports, stopped when the module that
    asked for it ends (ServerPool); session_wide=True keeps it to the session's end."""
    return server_pool.start


@pytest.fixture(scope="module", autouse=True)
def _stop_the_modules_servers(server_pool):
    """A module's own servers stop when it ends (the session-wide layouts' do not)."""
    yield
    server_pool.stop_module_owned()


@pytest.fixture(scope="session")
def server(repository, serve):
    return serve(repository, session_wide=True)


@pytest.fixture(scope="session")
def relay_server(default_engine, tmp_path_factory, serve):
    """The GPU wiring (ensemble -> engine_relay -> engine, tensorrt_llm_bls -> engine_relay's target)
    with the CPU engine behind the relay."""
    return serve(layouts.render_layout(layouts.Layout.RELAY, default_engine,
                                       tmp_path_factory.mktemp("relayed") / "repository").repository,
                 session_wide=True)


@pytest.fixture(scope="session")
def standin_server(default_engine, tmp_path_factory, serve):
    """The GPU repository layout (ensemble -> engine_relay -> tensorrt_llm, tensorrt_llm_bls ->
    tensorrt_llm) with `tensorrt_llm` served by the CPU stand-in for the C++ backend."""
    return serve(layouts.render_layout(layouts.Layout.STANDIN, default_engine,
                                       tmp_path_factory.mktemp("standin") / "repository").repository,
                 session_wide=True)


# --- the PyTorch-backend layout (issue 10) ----------------------------------------------
@pytest.fixture(scope="session")
def pytorch_engine(default_checkpoint) -> Path:
    """tests/layouts.py pytorch_engine: the default checkpoint for the stand-in LLM API."""
    return layouts.pytorch_engine(default_checkpoint)


@pytest.fixture(scope="session")
def pytorch_server(pytorch_engine, default_engine, tmp_path_factory, serve):
    """The PyTorch-backend repository (ensemble -> tensorrt_llm_pytorch, tensorrt_llm_bls ->
    tensorrt_llm_pytorch) on the stand-in LLM API, which generates with the CPU engine."""
    rendered = layouts.render_layout(layouts.Layout.PYTORCH, default_engine,
                                     tmp_path_factory.mktemp("pytorch") / "repository", pytorch_engine)
    return serve(rendered.repository, rendered.environment, session_wide=True)


# Every repository layout the tests serve (tests/layouts.py): the CPU engine, the GPU wiring
# in front of it, the GPU layout on the stand-in of the C++ backend, and the PyTorch-backend
# layout on the stand-in LLM API.  Behaviour tests run on each of LAYOUTS: by default every one but
# the GPU wiring in front of the CPU engine (relay_server), whose relay the C++ stand-in's layout
# runs too (it cost ~80 s of a CI run over 30 minutes); KIT_LAYOUTS=all (or a comma-separated
# list) runs it as well (docs/testing.md).
ALL_LAYOUTS = tuple(layout.value for layout in layouts.Layout)
LAYOUTS_ENV = "KIT_LAYOUTS"


def layouts_from(variable: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """The layouts an environment variable names: `all`, or a comma-separated list of ALL_LAYOUTS;
    `default` when it is unset or empty."""
    value = os.environ.get(variable, "")
    if not value:
        return default
    chosen = ALL_LAYOUTS if value == "all" else tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in chosen if name not in ALL_LAYOUTS]
    if unknown or not chosen:
        raise ValueError(f"{variable}={value!r}: expected 'all' or a comma-separated list of {ALL_LAYOUTS}")
    return chosen


LAYOUTS = layouts_from(LAYOUTS_ENV, tuple(name for name in ALL_LAYOUTS if name != layouts.Layout.RELAY.value))


@pytest.fixture(scope="session", params=LAYOUTS)
def layout_server(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def layout_client(layout_server):
    with LlmClient(layout_server.settings.grpc_url) as c:
        yield c


@pytest.fixture(scope="session")
def agent_front(server, default_engine, tmp_path_factory):
    """The OpenAI front as agents and client libraries meet it: on the default model, with its
    tokenizer (logprobs, the tool-call format); shared by test_openai_agents.py and
    test_client_compat.py."""
    from tests.integration.openai_front_process import running_front

    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("agent-front-log"),
                       "--tokenizer", str(default_engine)) as base:
        yield base


@pytest.fixture(scope="session")
def client(server):
    with LlmClient(server.settings.grpc_url) as c:
        yield c


@pytest.fixture
def metrics(server):
    from serving import prometheus

    return lambda: prometheus.scrape(server.settings.metrics_url)


@pytest.fixture(scope="session")
def compat_table(request):
    """The session's PASS/FAIL table of client libraries and tools (tests/integration/compat_table.py):
    written to build/client-compat-report/ and printed when the session ends."""
    from bench.environments import BUILD
    from tests.integration.compat_table import Report

    report = Report()
    yield report
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    for path, lines in report.write(BUILD / "client-compat-report"):
        with capture.global_and_fixture_disabled():  # shown whatever the capture mode
            print(f"\nclient and tool compatibility ({path}):\n" + "\n".join(lines), flush=True)
