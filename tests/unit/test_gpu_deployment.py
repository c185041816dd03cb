"""Where `make build-engine` builds a TensorRT-LLM engine, the compose file's promises, and
the provenance recorded for the GPU image."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from build_engines.dispatch import compose_command, decide
from contract.build_record import container_version

ROOT = Path(__file__).resolve().parents[2]
ARGS = ("--precision", "fp8", "--tp", "2")


def test_inside_the_image_it_builds_here():
    where = decide(ARGS, Path("/models/llama"), trtllm_ok=True, compose=None, engine_ok=False, python="python3")
    assert where.kind == "local"
    assert where.argv == ("python3", "-m", "build_engines", "build", "--backend", "tensorrt_llm",
                          "--checkpoint", "/models/llama", *ARGS)


def test_with_compose_it_builds_in_the_builder_service(tmp_path):
    model = tmp_path / "Llama-3.1-8B-Instruct"
    where = decide(ARGS, model, trtllm_ok=False, compose=("docker", "compose"), engine_ok=True)
    assert where.kind == "compose"
    assert where.argv == ("docker", "compose", "--profile", "build", "run", "--rm",
                          "-v", f"{model}:/models/Llama-3.1-8B-Instruct:ro", "builder", "build",
                          "--backend", "tensorrt_llm", "--checkpoint", "/models/Llama-3.1-8B-Instruct", *ARGS)


@pytest.mark.parametrize("compose,engine_ok,missing", [
    (None, False, "Docker Compose is not installed"),
    (("docker-compose",), False, "no Docker engine is running"),
])
def test_with_neither_it_explains_and_offers_the_cpu_engine(compose, engine_ok, missing):
    where = decide(ARGS, None, trtllm_ok=False, compose=compose, engine_ok=engine_ok)
    assert where.kind == "none" and missing in where.message
    assert "make build-engine BACKEND=openvino" in where.message


def test_compose_command_prefers_the_plugin():
    assert compose_command(lambda argv: True, which=lambda name: "/usr/bin/" + name) == ("docker", "compose")
    assert compose_command(lambda argv: False, which=lambda name: "/usr/bin/" + name) == ("docker-compose",)
    assert compose_command(lambda argv: False, which=lambda name: None) is None


def test_container_version_is_recorded():
    assert container_version({"NVIDIA_TRITON_SERVER_VERSION": "25.12"}) == "25.12"
    assert container_version({}) == "none"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_triton_service(compose):
    triton = compose["services"]["triton"]
    assert "profiles" not in triton  # `docker compose up` starts it
    assert triton["command"][:4] == ["python3", "-m", "serving", "gpu-up"]
    assert [p.split(":")[-1] for p in triton["ports"]] == ["8000", "8001", "8002"]
    assert "/v2/health/ready" in " ".join(triton["healthcheck"]["test"])
    devices = triton["deploy"]["resources"]["reservations"]["devices"][0]
    assert devices["driver"] == "nvidia" and devices["capabilities"] == ["gpu"]
    assert triton["shm_size"] and triton["ulimits"]["memlock"] == -1
    assert any(v.startswith("./build:/workspace/build") for v in triton["volumes"])


def test_openai_front_is_deployed_with_triton(compose):
    front, triton = compose["services"]["openai"], compose["services"]["triton"]
    assert "profiles" not in front  # `docker compose up` starts it beside triton
    assert front["image"] == triton["image"] and "deploy" not in front  # the kit image, no GPU
    argv = front["command"]
    assert argv[:4] == ["python3", "-m", "openai_front", "serve"]
    assert argv[argv.index("--grpc-url") + 1] == "triton:8001"
    assert argv[argv.index("--api-key-file") + 1] == "/run/secrets/openai_api_key"
    assert front["secrets"] == ["openai_api_key"] and "openai_api_key" in compose["secrets"]
    assert front["depends_on"]["triton"]["condition"] == "service_healthy"
    assert "/health" in " ".join(front["healthcheck"]["test"])
    dockerfile = (ROOT / "docker" / "gpu.Dockerfile").read_text()
    image_requirements = (ROOT / "requirements" / "gpu-image.txt").read_text().split()
    assert "COPY openai_front /opt/kit/openai_front" in dockerfile and "requirements/gpu-image.txt" in dockerfile
    assert {"fastapi", "uvicorn"} <= set(image_requirements)
    scrape = yaml.safe_load((ROOT / "docker" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in scrape["scrape_configs"]}
    assert jobs["openai-front"] == ["openai:9000"]


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="no docker compose CLI")
def test_compose_config_shows_the_openai_front():
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) and subprocess.run(cmd + ["version"], capture_output=True).returncode == 0:
            result = subprocess.run(cmd + ["config"], cwd=ROOT, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
            services = yaml.safe_load(result.stdout)["services"]
            assert {"triton", "openai"} <= set(services)
            return
    pytest.skip("neither `docker compose` nor `docker-compose` runs here")


def test_builder_uses_the_same_image_and_paths(compose):
    services = compose["services"]
    builder, triton = services["builder"], services["triton"]
    assert builder["image"] == triton["image"] and builder["build"] == triton["build"]
    # through NVIDIA's entrypoint (its entrypoint.d scripts), then the kit's build CLI
    assert builder["profiles"] == ["build"]
    assert builder["entrypoint"] == ["/opt/nvidia/nvidia_entrypoint.sh", "python3", "-m", "build_engines"]
    # rendered paths are valid in both containers only if the build dir is mounted at the same place
    targets = {v.rsplit(":", 2)[-2] if v.endswith(":ro") else v.rsplit(":", 1)[-1] for v in builder["volumes"]}
    assert targets >= {"/workspace/build", "/models"}
    assert builder["working_dir"] == triton["working_dir"] == "/workspace"


def test_cpu_and_metrics_profiles(compose):
    services = compose["services"]
    assert services["triton-cpu"]["profiles"] == ["cpu"] and "deploy" not in services["triton-cpu"]
    assert services["prometheus"]["profiles"] == ["metrics"]
    scrape = yaml.safe_load((ROOT / "docker" / "prometheus.yml").read_text())
    assert "triton:8002" in scrape["scrape_configs"][0]["static_configs"][0]["targets"]


def test_env_pins_the_image_and_versions():
    env = dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["TRITON_IMAGE"] == "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"
    assert env["TRTLLM_VERSION"] == "1.1.0"


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="no docker compose CLI")
def test_compose_file_validates():
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) and subprocess.run(cmd + ["version"], capture_output=True).returncode == 0:
            result = subprocess.run(cmd + ["--profile", "build", "--profile", "cpu", "--profile", "metrics",
                                           "--profile", "cluster", "--profile", "cluster-cpu",
                                           "config", "--quiet"], cwd=ROOT, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
            return
    pytest.skip("neither `docker compose` nor `docker-compose` runs here")


def test_the_pytorch_backend_is_built_where_the_engine_flow_is():
    where = decide(["--backend", "tensorrt_llm_pytorch", "--precision", "fp8"], Path("/models/llama"), trtllm_ok=False,
                   compose=("docker", "compose"), engine_ok=True)
    assert where.kind == "compose" and where.argv.count("--backend") == 1
    assert where.argv[where.argv.index("--backend") + 1] == "tensorrt_llm_pytorch"


# --- the compose file against the Compose Specification, without a compose CLI --------------------
COMPOSE_SPEC = ROOT / "tests" / "unit" / "data" / "compose-spec.json"  # compose-spec/compose-spec, pinned
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolated(text: str, environment: dict[str, str]) -> str:
    """Compose's interpolation of ${NAME}, ${NAME:-default} and ${NAME-default} (the forms the
    file uses; any other `$` form is refused so that this stays honest)."""
    def value(m: re.Match) -> str:
        name, op, default = m.groups()
        if name in environment and (environment[name] or op != ":-"):
            return environment[name]
        return default if op else ""

    out = VARIABLE.sub(value, text)
    assert "$" not in out.replace("$$", ""), "a variable form this interpolation does not know"
    return out


def dot_env() -> dict[str, str]:
    return dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
                if line and not line.startswith("#"))


def test_compose_file_matches_the_compose_specification():
    import jsonschema

    vendored = json.loads(COMPOSE_SPEC.read_text())
    assert vendored["source"]["repository"] == "compose-spec/compose-spec"
    document = yaml.safe_load(interpolated((ROOT / "docker-compose.yml").read_text(), dot_env()))
    validator = jsonschema.Draft7Validator(vendored["schema"])
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path)))
    assert not errors, "\n".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)
    services = document["services"]
    for name, service in services.items():
        depends = service.get("depends_on", [])
        for other in depends if isinstance(depends, list) else list(depends):
            assert other in services, f"{name} depends on {other}, which is not defined"
            # a dependency in another profile would not start: the profile must be shared (or none)
            theirs = set(services[other].get("profiles", []))
            assert not theirs or theirs & set(service.get("profiles", [])), f"{name} -> {other}: profiles"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith((".", "/", "$")) or source in document["volumes"], f"{name}: volume {source}"


def test_the_checker_catches_mistakes():
    import jsonschema

    vendored = json.loads(COMPOSE_SPEC.read_text())
    document = yaml.safe_load(interpolated((ROOT / "docker-compose.yml").read_text(), dot_env()))
    document["services"]["dynamo-frontend"]["depends_on"] = {"dynamo-worker-0": {"required": True}}  # no condition
    document["services"]["dynamo-worker-0"]["healthcheck"] = {"test": ["CMD", "true"], "intervall": "10s"}
    paths = {".".join(map(str, e.path)) for e in jsonschema.Draft7Validator(vendored["schema"]).iter_errors(document)}
    assert any(p.startswith("services.dynamo-worker-0.healthcheck") for p in paths), paths
    assert any(p.startswith("services.dynamo-frontend.depends_on") for p in paths), paths
    assert interpolated("${A:-x} ${B-y} ${C}", {"A": "", "B": ""}) == "x  "


# --- the cluster profiles: two replicas behind NVIDIA Dynamo, as cluster/topology.py runs them ----
# profile: (replica prefix, worker prefix, frontend, the build directory every container mounts)
CLUSTER_PROFILES = {
    "cluster": ("triton-replica-", "dynamo-worker-", "dynamo-frontend", "/workspace/build"),
    "cluster-cpu": ("triton-cpu-replica-", "dynamo-worker-cpu-", "dynamo-frontend-cpu", "/opt/kit/build"),
}


def defaults(argv: list[str]) -> list[str]:
    return [interpolated(a, {}) for a in argv]


def mounts(service: dict) -> dict[str, str]:
    """target -> source of a service's volumes."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        found[target] = source
    return found


@pytest.mark.parametrize("profile", sorted(CLUSTER_PROFILES))
def test_cluster_profile_is_the_topology_in_containers(compose, profile):
    from cluster.dynamo_names import ENDPOINT
    from cluster.topology import ClusterSpec, RouterMode

    replica_prefix, worker_prefix, frontend_name, build = CLUSTER_PROFILES[profile]
    services = {n: s for n, s in compose["services"].items() if profile in s.get("profiles", [])}
    replicas = sorted(n for n in services if n.startswith(replica_prefix))
    workers = sorted(n for n in services if n.startswith(worker_prefix))
    assert len(replicas) == len(workers) == 2
    repository = Path(build) / "repository"
    # Triton's ports are published nowhere: only the frontend's OpenAI port is
    assert {n for n, s in services.items() if s.get("ports")} == {frontend_name}
    frontend = services[frontend_name]
    assert frontend["ports"] == ["${CLUSTER_HOST:-127.0.0.1}:${OPENAI_PORT:-9000}:9000"]  # no API key: loopback
    spec = ClusterSpec(repository=repository, model_name="llama", host="0.0.0.0", frontend_port=9000,
                       router_mode=RouterMode.KV)
    assert defaults(frontend["command"])[1:] == list(spec.frontend().command[1:])
    discovery = next(source for target, source in mounts(frontend).items() if target == "/var/lib/dynamo")
    topology_env = dict(spec.dynamo_environment())
    for index, (replica, worker) in enumerate(zip(replicas, workers)):
        assert replica.endswith(str(index)) and worker.endswith(str(index))
        command = defaults(services[worker]["command"])
        expected = ClusterSpec(repository=repository, model_name="llama", host=replica, base_port=8000).worker(0)
        assert command[1:] == list(expected.command[1:])
        assert command[command.index("--endpoint") + 1] == ENDPOINT
        assert services[worker]["depends_on"][replica]["condition"] == "service_healthy"
        assert services[worker]["restart"] == "unless-stopped"  # exit 3 (replica gone): back, registers again
        # the repository and the engine's tokenizer at the replica's paths, read-only
        assert mounts(services[worker])[build] == mounts(services[replica])[build]
        assert f"{mounts(services[worker])[build]}:{build}:ro" in services[worker]["volumes"]
        assert mounts(services[worker])["/var/lib/dynamo"] == discovery  # one discovery directory
    assert set(frontend["depends_on"]) == set(workers)
    assert mounts(frontend)[build] == mounts(services[replicas[0]])[build]  # the model card's files
    for name in workers + [frontend_name]:
        variables = services[name]["environment"]
        assert variables["DYN_DISCOVERY_BACKEND"] == "file" and variables["DYN_FILE_KV"].startswith("/var/lib/dynamo/")
        for same in ("DYN_REQUEST_PLANE", "DYN_EVENT_PLANE", "HF_HUB_OFFLINE"):
            assert variables[same] == topology_env[same]
        # loopback (the one-host topology's addresses) would be unreachable from the other containers
        assert "127.0.0.1" not in variables.values()
        assert services[name]["image"] == "${KIT_DYNAMO_IMAGE:-llama-triton-kit-dynamo:1.6.1}"
        assert services[name]["build"]["dockerfile"] == "docker/dynamo.Dockerfile"
    assert frontend["environment"]["DYN_DISABLE_FRONTEND_ADMIN_API"] == "1"


def test_gpu_replicas_take_one_gpu_each(compose):
    services = compose["services"]
    triton = services["triton"]
    ids = []
    for name in ("triton-replica-0", "triton-replica-1"):
        replica = services[name]
        assert replica["image"] == triton["image"] and replica["build"] == triton["build"]
        assert replica["command"] == triton["command"] and replica["healthcheck"] == triton["healthcheck"]
        [device] = replica["deploy"]["resources"]["reservations"]["devices"]
        assert "count" not in device and device["capabilities"] == ["gpu"]
        ids += device["device_ids"]
    assert ids == ["${CLUSTER_GPU_0:-0}", "${CLUSTER_GPU_1:-1}"]


def test_cpu_replicas_are_the_topologys_replicas(compose):
    from cluster.topology import ClusterSpec

    services = compose["services"]
    build = services["cluster-cpu-build"]
    assert build["command"] == ["make", "build-engine"] and build["image"] == services["triton-cpu"]["image"]
    spec = ClusterSpec(repository=Path("/opt/kit/build/repository"), model_name="llama", host="0.0.0.0",
                       base_port=8000, state_dir=Path("/opt/kit/build"))
    for index in (0, 1):
        replica = services[f"triton-cpu-replica-{index}"]
        assert "deploy" not in replica
        expected = list(spec.replica(0).command[1:])  # every replica on the default ports, in its container
        expected[expected.index("--log-file") + 1] = f"/opt/kit/build/logs/replica-{index}/tritonserver.log"
        assert replica["command"][0] == ".venv/bin/python" and replica["command"][1:] == expected
    # built once, then replica 0, then replica 1 (the server directory in the volume is made once)
    first, second = services["triton-cpu-replica-0"]["depends_on"], services["triton-cpu-replica-1"]["depends_on"]
    assert first["cluster-cpu-build"]["condition"] == "service_completed_successfully"
    assert second["triton-cpu-replica-0"]["condition"] == "service_healthy"


def test_the_dynamo_image_installs_the_lock_without_dependencies_and_the_workers_packages():
    from build_engines.images.install_lines import context_copies

    dockerfile = (ROOT / "docker" / "dynamo.Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11\.\d+-slim-bookworm$", dockerfile, re.M)  # pinned, the lock's CPython
    assert "pip install --no-deps -r /opt/kit/requirements/dynamo.lock" in dockerfile
    copied = {s.rstrip("/") for c in context_copies(dockerfile) for s in c.sources}
    # what the worker imports (tests/unit/test_cluster_environment.py reads the imports)
    assert copied == {"requirements/dynamo.lock", "contract", "model_repository", "build_engines", "cluster"}
    assert re.search(r"^USER 1000:1000$", dockerfile, re.M)
    assert "HF_HUB_OFFLINE=1" in dockerfile
