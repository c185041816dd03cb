"""LoRA adapters rewritten for an engine with fused projections (build_engines/openvino/fused_lora.py):
A stacked and B block-diagonal per fused group, so the fused B·A·x is each member's own, stacked
in the fused weight's order; adapters of unfused modules are served as they are; forms the kit
cannot stack fail naming the adapter and the way out."""

from __future__ import annotations

import pytest

from build_engines.openvino.fused_lora import for_fused_engine, stacked_adapter
from contract.lora import LoraAdapter, LoraError

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

PREFIX = "base_model.model.model.layers.0"
FUSION = {"fused_modules": ["gate_proj", "k_proj", "q_proj", "up_proj", "v_proj"],
          "rows": {"k_proj+q_proj+v_proj": [4, 8, 4], "gate_proj+up_proj": [12, 12]}}
IN = 8


def _adapter(tmp_path, name: str, modules: dict[str, tuple[int, int]]) -> LoraAdapter:
    """PEFT-named tensors: module -> (output rows, rank), seeded values."""
    g = torch.Generator().manual_seed(len(name))
    tensors = {}
    for module, (rows, rank) in modules.items():
        where = "self_attn" if module.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else "mlp"
        tensors[f"{PREFIX}.{where}.{module}.lora_A.weight"] = torch.randn(rank, IN, generator=g)
        tensors[f"{PREFIX}.{where}.{module}.lora_B.weight"] = torch.randn(rows, rank, generator=g)
    path = tmp_path / f"{name}.safetensors"
    safetensors_torch.save_file(tensors, str(path))
    return LoraAdapter(name, 1, str(path), 2.0)


def test_the_stacked_adapter_computes_each_members_own_update(tmp_path):
    adapter = _adapter(tmp_path, "qv", {"q_proj": (8, 2), "v_proj": (4, 3), "o_proj": (8, 2)})
    original = safetensors_torch.load_file(adapter.weights)
    stacked = safetensors_torch.load(stacked_adapter(adapter.weights, FUSION, "qv"))
    fused = f"{PREFIX}.self_attn.k_proj+q_proj+v_proj"
    a, b = stacked[f"{fused}.lora_A.weight"], stacked[f"{fused}.lora_B.weight"]
    assert a.shape == (5, IN) and b.shape == (16, 5)  # ranks 2 + 3; rows k 4, q 8, v 4
    x = torch.randn(3, IN)
    update = x @ a.T @ b.T
    own = {m: x @ original[f"{PREFIX}.self_attn.{m}.lora_A.weight"].T @ original[f"{PREFIX}.self_attn.{m}.lora_B.weight"].T
           for m in ("q_proj", "v_proj")}
    assert torch.equal(update[:, :4], torch.zeros(3, 4))  # k has no adapter
    torch.testing.assert_close(update[:, 4:12], own["q_proj"], rtol=0, atol=1e-6)
    torch.testing.assert_close(update[:, 12:], own["v_proj"], rtol=0, atol=1e-6)
    # o_proj is not fused: kept under its own name; the q/v tensors are gone.
    assert sorted(stacked) == sorted([f"{fused}.lora_A.weight", f"{fused}.lora_B.weight",
                                      f"{PREFIX}.self_attn.o_proj.lora_A.weight", f"{PREFIX}.self_attn.o_proj.lora_B.weight"])


def test_only_adapters_of_fused_modules_are_rewritten_into_the_repository(tmp_path):
    concise = _adapter(tmp_path, "concise", {"o_proj": (8, 2)})
    mlp = _adapter(tmp_path, "mlp", {"up_proj": (12, 4)})
    served, files = for_fused_engine([concise, mlp], FUSION, tmp_path / "repo" / "openvino_llm")
    assert served[0] == concise and list(files) == ["lora/mlp.safetensors"]
    assert served[1].weights == str(tmp_path / "repo" / "openvino_llm" / "lora" / "mlp.safetensors")
    assert (served[1].name, served[1].task_id, served[1].alpha) == ("mlp", 1, 2.0)
    b = safetensors_torch.load(files["lora/mlp.safetensors"])[f"{PREFIX}.mlp.gate_proj+up_proj.lora_B.weight"]
    assert b.shape == (24, 4) and torch.equal(b[:12], torch.zeros(12, 4))  # gate first, no adapter


@pytest.mark.parametrize("fusion,message", [
    ({"fused_modules": FUSION["fused_modules"]}, "fused without a row record; build the engine again"),
    ({**FUSION, "rows": {**FUSION["rows"], "k_proj+q_proj+v_proj": [4, 6, 4]}}, r"lora_B \[6, r\]"),
])
def test_adapters_that_cannot_be_stacked_fail_naming_the_adapter(tmp_path, fusion, message):
    adapter = _adapter(tmp_path, "qv", {"q_proj": (8, 2)})
    with pytest.raises(LoraError, match=f"'lora_dir': adapter 'qv'.*{message}"):
        stacked_adapter(adapter.weights, fusion, "qv")
