"""The GPU repository layout around a CPU engine with `tensorrt_llm` served by the stand-in:
the stand-in's config is the GPU's, only `backend` differs; and every table row the stand-in
names exists, cited, in every supported version's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format

from build_engines.render import read_config
from build_engines.spec import BuildSpec
from build_engines.trtllm.repository import tensorrt_llm_config
from build_engines.trtllm.options import TrtLlmServing
from contract import names
from contract.build_record import BuildRecord
from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics
from standins.trtllm.repository import STANDIN_ADAPTER, StandinRenderError, render_standin_repository, standin_spec
from tests.unit.trtllm_fixtures import write_default_tokenizer

PACKAGE = Path(__file__).resolve().parents[2] / "standins" / "trtllm"


@pytest.fixture
def cpu_engine(tmp_path) -> Path:
    engine = tmp_path / "engine"
    engine.mkdir()
    spec = BuildSpec(checkpoint=tmp_path / "ckpt")
    BuildRecord(backend="openvino", spec=spec.to_dict(), checkpoint={}, versions={}, built_at="", build_seconds=0.0).write(engine)
    return write_default_tokenizer(engine)  # the CPU engine holds its tokenizer


def test_the_stand_in_gets_the_gpu_config_with_only_the_backend_changed(cpu_engine, tmp_path):
    serving = TrtLlmServing(enable_chunked_context=False, max_queue_size=3)
    out = tmp_path / "repository"
    models = render_standin_repository(cpu_engine, out, serving)
    assert set(models) == {names.PREPROCESSING, names.POSTPROCESSING, names.ENGINE_RELAY, names.TRTLLM_ENGINE,
                           names.LLM_BLS, names.ENSEMBLE}
    rendered = read_config(out / names.TRTLLM_ENGINE / "config.pbtxt")
    gpu = tensorrt_llm_config(cpu_engine.resolve(), standin_spec(cpu_engine.resolve(), serving))
    assert gpu.backend == "tensorrtllm" and rendered.backend == "python"
    rendered.backend = gpu.backend
    assert text_format.MessageToString(rendered) == text_format.MessageToString(gpu)
    assert rendered.dynamic_batching.default_queue_policy.max_queue_size == 3
    assert rendered.parameters["enable_chunked_context"].string_value == "false"
    assert STANDIN_ADAPTER in (out / names.TRTLLM_ENGINE / "1" / "model.py").read_text()


def test_the_gpu_wiring_around_it(cpu_engine, tmp_path):
    out = tmp_path / "repository"
    render_standin_repository(cpu_engine, out)
    ensemble = read_config(out / names.ENSEMBLE / "config.pbtxt")
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == \
        [names.PREPROCESSING, names.ENGINE_RELAY, names.POSTPROCESSING]
    for relaying in (names.ENGINE_RELAY, names.LLM_BLS):
        config = read_config(out / relaying / "config.pbtxt")
        assert config.parameters["target_model"].string_value == names.TRTLLM_ENGINE


# A fresh `make venv` maps the product's packages (pyproject) and not `standins`; the stub adds
# the model's directory to sys.path.  This stub's path, without the checkout on it.
STUB_PATH = """
import importlib.machinery, sys
root, model_dir = sys.argv[1:3]
sys.path[:] = [p for p in sys.path if p not in ("", root)]
class Installed:  # the editable install's finder: the product's packages only
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in ("contract", "model_repository", "build_engines", "serving", "client"):
            return importlib.machinery.PathFinder.find_spec(name, [root])
sys.meta_path.insert(0, Installed)
sys.path.append(model_dir)
import standins.trtllm.settings
print(standins.trtllm.settings.__file__)
"""


def test_the_stand_in_model_finds_standins_through_its_directory(cpu_engine, tmp_path):
    """Only the models the stand-in serves get the link to `standins` (no image has one: the
    package is not installed, and the stub ignores PYTHONPATH)."""
    import subprocess
    import sys

    out = tmp_path / "repository"
    render_standin_repository(cpu_engine, out)
    linked = sorted(p.parent.name for p in out.glob("*/standins"))
    assert linked == [names.TRTLLM_ENGINE] and (out / names.TRTLLM_ENGINE / "standins").resolve() == PACKAGE.parent
    model_dir = out / names.TRTLLM_ENGINE
    found = subprocess.run([sys.executable, "-c", STUB_PATH, str(PACKAGE.parents[1]), str(model_dir)],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert found == str(model_dir / "standins" / "trtllm" / "settings.py")


def test_only_a_cpu_engine_can_stand_in(tmp_path):
    engine = tmp_path / "trt"
    engine.mkdir()
    spec = BuildSpec.from_dict({**BuildSpec(checkpoint=tmp_path).to_dict(), "backend": "tensorrt_llm"})
    BuildRecord(backend="tensorrt_llm", spec=spec.to_dict(), checkpoint={}, versions={}, built_at="",
                build_seconds=0.0).write(engine)
    with pytest.raises(StandinRenderError, match="CPU engine"):
        standin_spec(engine)


# Row ids as the package names them (in code, comments and docstrings).  `request.` and
# `param.` are also Python names there (a pb_utils request, a ModelParameter): those are left out,
# as are attributes (`self.lora.adapters`).
ROW_ID = re.compile(r"(?<![./\w])(?:request_id|stop|cancel|error|limit|input|output|param|sampling|request|metric|lora)\.[a-z_0-9]+\b")
CODE_NAMES = re.compile(r"request\.(?!batch_split)|param\.(default|type)$")


def test_every_row_the_stand_in_names_exists_and_cites_upstream():
    named = {m for path in PACKAGE.glob("*.py") for m in ROW_ID.findall(path.read_text()) if not CODE_NAMES.match(m)}
    assert len(named) > 60
    for version in SUPPORTED_VERSIONS:
        sem = backend_semantics(version)
        for rule_id in sorted(named):
            rule = sem.rule(rule_id)  # raises naming the row when it is missing
            assert rule.citation.source.path and (rule.citation.lines or rule.extra.get("locator")), rule_id
