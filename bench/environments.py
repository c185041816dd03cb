"""The side environments a benchmark needs, made from pinned lock files inside build/:
genai-perf (needs numpy 2, so not in the project's venv), AIPerf (its successor), the peer server (transformers
serve, a newer transformers than optimum-intel allows), and the shared libraries that the
perf_analyzer of tritonclient 2.51 links against."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from serving.side_environments import BUILD, DYNAMO_LOCK, ROOT, ensure_venv

# The engine `make build-engine` builds for the default model (build_engines/cli.py default_engine_dir),
# as the benchmarks name it from the repository root.
DEFAULT_ENGINE = Path("build/engines/SmolLM2-135M-Instruct-openvino-int8")


# The side environments the test suite installs on first use (AIPerf, genai-perf; the client libraries,
# instructor apart for its jiter pin; guidellm): CI makes them in the background while the unit tests run
# (`python -m bench.environments`, .ci/run).
TEST_ENVIRONMENTS = {
    "aiperf": ROOT / "requirements" / "aiperf.lock",  # tests/integration/test_aiperf.py, make bench
    "bench-tools": ROOT / "requirements" / "bench-tools.lock",
    "client-compat": ROOT / "requirements" / "client-compat.lock",
    "client-compat-instructor": ROOT / "requirements" / "client-compat-instructor.lock",
    "client-compat-anthropic": ROOT / "requirements" / "client-compat-anthropic.lock",  # /v1/messages
    "dynamo": DYNAMO_LOCK,
    "guidellm": ROOT / "requirements" / "guidellm.lock",  # tests/integration/test_guidellm.py
    "lm-eval": ROOT / "requirements" / "lm-eval.lock",  # tests/integration/test_lm_eval.py
}


def ensure_test_environments(names: tuple[str, ...] = tuple(TEST_ENVIRONMENTS)) -> dict[str, Path]:
    """These of TEST_ENVIRONMENTS, made at once (each install is mostly waiting on the network)."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(lambda name: ensure_venv(name, TEST_ENVIRONMENTS[name]), names)))


def pinned(environment: str, package: str) -> str:
    """The exact version of `package` in the lock of TEST_ENVIRONMENTS[environment] (what a report
    names the tool by)."""
    prefix = f"{package.lower()}=="
    for line in TEST_ENVIRONMENTS[environment].read_text().splitlines():
        if line.lower().startswith(prefix):
            return line[len(prefix) :].split()[0]
    raise ValueError(f"{TEST_ENVIRONMENTS[environment]} pins no {package}")


def aiperf_venv() -> Path:
    """build/aiperf: AIPerf 0.13.0 (requirements/aiperf.lock), the load generator of the HTTP sweeps."""
    return ensure_venv("aiperf", TEST_ENVIRONMENTS["aiperf"])


def perf_analyzer_libs() -> Path:
    """perf_analyzer (tritonclient 2.51 wheel) needs libb64.so.0d and libcudart.so.12; the
    nvidia-pytriton wheel already carries both under hashed names: link them by soname."""
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nvidia-pytriton is not installed")
    libs = Path(list(spec.submodule_search_locations)[0]).parent / "nvidia_pytriton.libs"
    target = BUILD / "perf-libs"
    target.mkdir(parents=True, exist_ok=True)
    for soname, pattern in (("libb64.so.0d", "libb64-*.so.0d"), ("libcudart.so.12", "libcudart-*.so.12*")):
        found = sorted(libs.glob(pattern))
        if not found:
            raise RuntimeError(f"{libs} has no {pattern}")
        link = target / soname
        link.unlink(missing_ok=True)
        link.symlink_to(found[0])
    return target


def perf_analyzer() -> Path:
    binary = Path(sys.prefix) / "bin" / "perf_analyzer"
    if not binary.is_file():
        raise RuntimeError(f"{binary} is missing: it comes with tritonclient==2.51.0")
    return binary


if __name__ == "__main__":
    for made in ensure_test_environments().values():
        print(f"ready: {made}")
