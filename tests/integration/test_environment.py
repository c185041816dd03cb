"""The models run in this project's virtualenv: our code, OpenVINO, numpy < 2."""

import re
import sys

import pytest

pytestmark = pytest.mark.server


def test_models_import_our_code_from_the_virtualenv(server):
    log = server.settings.log_file.read_text()
    for model in ("preprocessing", "postprocessing", "openvino_llm"):
        line = re.search(rf"{model} environment: (.*)", log)
        assert line, f"{model} logged no environment line"
        fields = dict(item.split("=", 1) for item in line.group(1).split())
        assert fields["prefix"].rstrip('"') == sys.prefix  # the venv the server was started from
        assert int(fields["numpy"].split(".")[0]) < 2  # numpy 2 makes the stub return empty tensors
        assert fields["openvino-genai"] != "-"
        assert "model_repository" in fields["code"]


def test_server_is_ready(client):
    assert client.is_ready()
    meta = client.metadata()
    assert meta["model"]["name"] == "ensemble"
