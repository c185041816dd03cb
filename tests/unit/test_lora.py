"""LoRA adapter discovery, scale and request checks (contract/lora.py), and the features a
LoRA deployment honours (no server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contract import features, lora


def _adapter(root, name, **config):
    (root / name).mkdir(parents=True)
    (root / name / lora.ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", **config}))
    (root / name / lora.ADAPTER_WEIGHTS).write_bytes(b"")


def test_adapters_in_name_order_with_peft_scale(tmp_path):
    _adapter(tmp_path, "b-tone", r=8, lora_alpha=16)
    _adapter(tmp_path, "a.style", r=16, lora_alpha=16, use_rslora=True)
    found = lora.discover(tmp_path)
    assert [(a.name, a.task_id, a.alpha) for a in found] == [("a.style", 1, 4.0), ("b-tone", 2, 2.0)]
    assert lora.from_parameter(lora.to_parameter(found)) == found and lora.from_parameter("") == []


@pytest.mark.parametrize("setup,message", [
    (lambda root: None, "no adapter subdirectory"),
    (lambda root: (root / "x").mkdir(), "needs adapter_config.json"),
    (lambda root: _adapter(root, "bad name", r=8), "must match"),
    (lambda root: _adapter(root, "ia3", r=8, peft_type="IA3"), "only LORA"),
])
def test_bad_adapter_directories_name_the_field(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(lora.LoraError, match=f"'lora_dir'.*{message}"):
        lora.discover(tmp_path)


def test_request_problems_name_the_served_adapters():
    assert lora.request_problems(0, {}) == [] and lora.request_problems(2, {2: "x"}) == []
    assert lora.request_problems(3, {1: "a", 2: "b"}) == [
        "'lora_task_id' 3 is not a served LoRA adapter; served: 1 (a), 2 (b); 0 is the base model"]


def test_a_lora_deployment_takes_task_ids_but_not_request_weights():
    engine = features.with_lora(features.CPU_ENGINE)
    assert features.refusals({"lora_task_id": np.array([[1]], dtype=np.uint64)}, engine) == []
    refused = features.refusals({"lora_weights": np.ones((1, 2, 2), dtype=np.float16)}, engine)
    assert [name for name, _ in refused] == ["lora_weights"] and "LoRA weights sent with a request" in refused[0][1]
    assert [n for n, _ in features.refusals({"lora_task_id": np.array([[1]], dtype=np.uint64)}, features.CPU_ENGINE)] == ["lora_task_id"]
