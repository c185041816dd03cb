"""Shared fixtures: the default checkpoint and engine (built once, reused across runs from
build/), and GPU-test skipping."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"


def gpu_available() -> bool:
    return shutil.which("nvidia-smi") is not None and importlib.util.find_spec("tensorrt_llm") is not None


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and TensorRT-LLM (run inside the NGC trtllm image)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def default_checkpoint() -> Path:
    from build_engines.default_model import prepare_default_checkpoint

    return prepare_default_checkpoint(BUILD / "checkpoints" / "SmolLM2-135M-Instruct")


@pytest.fixture(scope="session")
def default_engine(default_checkpoint: Path) -> Path:
    """The default INT8 CPU engine with exact numerics (tests compare answers with references, and
    alone with batched: build_engines/openvino/numerics.py); rebuilt only when missing or built from
    another spec.  A `fast` build of the same directory (`make demo`) serves it too.  Built without
    a fidelity report (42 s of a clean run; `make demo` rebuilds an engine that has none): no test
    reads it, test_reference_outputs measures the served engine against the float32 checkpoint
    itself, and test_numerics_sweep runs the evaluation."""
    from build_engines.cli import reuse_engine
    from build_engines.fidelity.options import FidelityOptions
    from build_engines.openvino.build import build_openvino_engine, engine_is_built
    from build_engines.openvino.options import OpenVinoOptions
    from build_engines.spec import BuildSpec

    spec = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(numerics="exact"),
                     fidelity=FidelityOptions(evaluation="off"))
    engine_dir = BUILD / "engines" / "SmolLM2-135M-Instruct-openvino-int8"
    if not (engine_is_built(engine_dir) and reuse_engine(engine_dir, spec)):
        build_openvino_engine(spec, engine_dir)
    return engine_dir


@pytest.fixture(scope="session")
def unfused_engine(default_checkpoint: Path, tmp_path_factory) -> Path:
    """The default engine built without fused projections (--no-fuse-projections; no fidelity
    report): what LoRA adapters on q/k/v or gate/up need, and the reference fusion must equal."""
    from build_engines.fidelity.options import FidelityOptions
    from build_engines.openvino.build import build_openvino_engine
    from build_engines.spec import BuildSpec
    from build_engines.openvino.options import OpenVinoOptions

    spec = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(fuse_projections=False),
                     fidelity=FidelityOptions(evaluation="off"))
    engine_dir = tmp_path_factory.mktemp("unfused") / "engine"
    build_openvino_engine(spec, engine_dir)
    return engine_dir


@pytest.fixture(scope="session")
def tokenizer(default_checkpoint: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(default_checkpoint / "tokenizer.json"))
