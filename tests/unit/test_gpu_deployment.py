"""Where `make build-engine` builds a TensorRT-LLM engine, the compose file's promises, and
the provenance recorded for the GPU image."""

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
    assert builder["profiles"] == ["build"] and builder["entrypoint"] == ["python3", "-m", "build_engines"]
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
                                           "config", "--quiet"], cwd=ROOT, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
            return
    pytest.skip("neither `docker compose` nor `docker-compose` runs here")


def test_the_pytorch_backend_is_built_where_the_engine_flow_is():
    where = decide(["--backend", "tensorrt_llm_pytorch", "--precision", "fp8"], Path("/models/llama"), trtllm_ok=False,
                   compose=("docker", "compose"), engine_ok=True)
    assert where.kind == "compose" and where.argv.count("--backend") == 1
    assert where.argv[where.argv.index("--backend") + 1] == "tensorrt_llm_pytorch"
