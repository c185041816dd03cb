"""A real tritonserver on loopback, serving the default model's repository (one per session)."""

from __future__ import annotations

from pathlib import Path

import pytest


from build_engines.render import set_parameters
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
    set_parameters(out, "postprocessing", {"stream_state_ttl_s": str(STREAM_TTL_S)})
    return out


@pytest.fixture(scope="session")
def serve(tmp_path_factory):
    """start(repository) -> a ready server on free loopback ports; every one is stopped when the
    session ends, all at once (one by one, each drain and exit took ~10 s: minutes in all)."""
    from concurrent.futures import ThreadPoolExecutor

    started: list[TritonServer] = []

    def start(repository: Path, environment: tuple[tuple[str, str], ...] = ()) -> TritonServer:
        settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("logs") / "tritonserver.log",
                                                server_dir=ROOT / "build" / "tritonserver", exit_timeout_s=10,
                                                environment=environment)
        server = TritonServer(settings)
        started.append(server)  # before it is ready: a server that fails to start is stopped too
        return server.__enter__()

    try:
        yield start
    finally:
        with ThreadPoolExecutor(max_workers=max(1, len(started))) as pool:
            list(pool.map(lambda s: s.__exit__(None, None, None), started))


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


# --- the PyTorch-backend layout (issue 10) ----------------------------------------------
STANDINS = ROOT / "tests" / "standins"  # the stand-in `tensorrt_llm` (LLM API): test servers only


def use_standin_llmapi(repository: Path, cpu_engine: Path) -> tuple[tuple[str, str], ...]:
    """Make a rendered repository's models see the stand-in `tensorrt_llm` and return the
    server environment it needs (the CPU engine it generates with).  The Python-backend stub
    ignores PYTHONPATH but puts each model's directory on its path, so the stand-in package and
    its dist-info (which makes importlib.metadata say 1.2.1, as the image's does) are linked
    into the directories of the models that import it or check the runtime version.  Only
    test repositories get them: the stand-in never shadows the real package in an image."""
    from contract import names

    for model in (names.PYTORCH_ENGINE, names.LLM_BLS, names.ENGINE_RELAY):
        if (repository / model).is_dir():
            for item in STANDINS.iterdir():
                if item.name.startswith("tensorrt_llm"):
                    (repository / model / item.name).symlink_to(item)
    return (("TRTLLM_STANDIN_OPENVINO_ENGINE", str(cpu_engine.resolve())),)


@pytest.fixture(scope="session")
def pytorch_engine(default_checkpoint) -> Path:
    """`build --backend tensorrt_llm_pytorch --image 26.07 --no-kv-cache-reuse` of the default
    checkpoint (a copy and build.json: no compile), rebuilt only when missing or built from
    another spec.  Without KV-cache reuse: the stand-in maps reuse onto OpenVINO's prefix
    caching (exact with the CPU engine's default numerics, measured: build_engines/spec.py),
    kept off so an answer of this layout never depends on what earlier tests left cached."""
    from build_engines.cli import default_engine_dir, reuse_engine
    from build_engines.cli_options import make_spec
    from build_engines.pytorch_build import build_pytorch_engine, engine_is_built

    spec = make_spec(default_checkpoint, backend="tensorrt_llm_pytorch", precision=None, max_batch_size=32,
                     max_input_len=1536, max_seq_len=2048, max_num_tokens=512, default_max_tokens=256,
                     kv_cache_size_gb=0, prefix_caching=False, inference_threads=0, triton_image="26.07",
                     kv_cache_reuse=False, detect=lambda: None)
    engine_dir = ROOT / default_engine_dir(spec)
    if not (engine_is_built(engine_dir) and reuse_engine(engine_dir, spec)):
        build_pytorch_engine(spec, engine_dir)
    return engine_dir


@pytest.fixture(scope="session")
def pytorch_server(pytorch_engine, default_engine, tmp_path_factory, serve):
    """The PyTorch-backend repository (ensemble -> tensorrt_llm_pytorch, tensorrt_llm_bls ->
    tensorrt_llm_pytorch) on the stand-in LLM API, which generates with the CPU engine."""
    repository = tmp_path_factory.mktemp("pytorch") / "repository"
    render_repository(pytorch_engine, repository)
    return serve(repository, use_standin_llmapi(repository, default_engine))


# Every repository layout the product serves: the CPU engine, the GPU wiring in front of it,
# the GPU layout on the stand-in of the C++ backend, and the PyTorch-backend layout on the
# stand-in LLM API.  Behaviour tests run on each.
LAYOUTS = ("server", "relay_server", "standin_server", "pytorch_server")


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
