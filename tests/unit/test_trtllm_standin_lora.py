"""The stand-in's LoRA cache against the cited table (rows lora.*, input.lora_task_id,
error.lora_*): what `lora_prefetch_dir` loads and refuses, the converted tasks read back as the
PEFT adapters they came from, and the request errors upstream answers (at enqueue or at fetch),
with a fake engine.  The converted tasks are written by standins/trtllm/hf_lora_convert.py, a
reproduction of NVIDIA's converter."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics
from standins.trtllm import upstream
from standins.trtllm.executor import ExecutorLimits, StandinExecutor
from standins.trtllm.hf_lora_convert import convert
from standins.trtllm.lora_cache import ModelDims, load_cache, peft_tensors, prefetch
from standins.trtllm.request import parse_request
from standins.trtllm.settings import load_settings
from standins.trtllm.upstream import StandinLimitation, UpstreamError
from tests.unit.test_trtllm_standin import config, parse, request
from tests.unit.test_trtllm_standin_executor import FakeEngine, responder

SEM = backend_semantics(upstream.PINNED_VERSION)
# A tiny Llama: hidden 8, 2 heads of 4 (q 8), 1 KV head (kv 4), MLP 12, 2 layers.
DIMS = ModelDims(hidden=8, q=8, kv=4, mlp=12, layers=2)
SHAPES = {"self_attn.q_proj": (8, 8), "self_attn.v_proj": (8, 4), "self_attn.o_proj": (8, 8), "mlp.down_proj": (12, 8),
          "mlp.up_proj": (8, 12)}  # module -> (in, out)


def peft_adapter(root: Path, rank: int = 2, alpha: float = 4.0, seed: int = 0) -> dict[str, np.ndarray]:
    """A PEFT adapter directory as peft saves it; returns its tensors."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(DIMS.layers):
        for module, (width_in, width_out) in SHAPES.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = rng.standard_normal((rank, width_in)).astype(np.float32)
            tensors[f"{prefix}.lora_B.weight"] = rng.standard_normal((width_out, rank)).astype(np.float32)
    root.mkdir(parents=True)
    save_file(tensors, str(root / "adapter_model.safetensors"))
    (root / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank, "lora_alpha": alpha}))
    return tensors


@pytest.mark.parametrize("storage, tolerance", [("float16", 2e-3), ("float32", 0.0)])
def test_a_converted_adapter_reads_back_as_the_peft_adapter_with_its_scale_in_b(tmp_path, storage, tolerance):
    original = peft_adapter(tmp_path / "peft", rank=2, alpha=4.0)
    convert(SEM, tmp_path / "peft", tmp_path / "cache" / "3", storage)
    tasks = prefetch(SEM, tmp_path / "cache", DIMS, model_dtype=storage)
    assert list(tasks) == [3]
    back = peft_tensors(SEM, tasks[3], DIMS)
    assert set(back) == set(original)
    for key, value in original.items():
        expected = value * (2.0 if ".lora_B." in key else 1.0)  # lora_alpha / r folded into B
        np.testing.assert_allclose(back[key], expected, rtol=tolerance, atol=tolerance)


def test_the_cache_writes_peft_adapters_the_cpu_engine_loads_with_alpha_one(tmp_path):
    peft_adapter(tmp_path / "a", seed=1)
    peft_adapter(tmp_path / "b", seed=2)
    convert(SEM, tmp_path / "a", tmp_path / "cache" / "12345")
    convert(SEM, tmp_path / "b", tmp_path / "cache" / "7")
    cache = load_cache(SEM, tmp_path / "cache", DIMS)
    try:
        assert cache.engine_keys() == {7: 1, 12345: 2}  # the engine's keys: 1, 2 (0 is its base model)
        assert all(a.alpha == 1.0 and Path(a.weights).is_file() for a in cache.adapters)
    finally:
        cache.close()
    assert not Path(cache.adapters[0].weights).exists()


def test_prefetch_takes_digit_directories_and_skips_the_rest_as_upstream_does(tmp_path, caplog):
    peft_adapter(tmp_path / "peft")
    convert(SEM, tmp_path / "peft", tmp_path / "cache" / "007")  # std::stoi: task 7
    convert(SEM, tmp_path / "peft", tmp_path / "cache" / "sql")
    (tmp_path / "cache" / "notes.txt").write_text("ignored")
    with caplog.at_level(logging.WARNING):
        assert list(prefetch(SEM, tmp_path / "cache", DIMS)) == [7]
    assert "lora task name sql is invalid, skipping to load lora weight from this folder." in caplog.text
    assert "notes.txt" not in caplog.text
    assert prefetch(SEM, tmp_path / "missing", DIMS) == {}  # only a debug log upstream


@pytest.mark.parametrize("case, message", [
    ("bfloat16", "unexpected error when creating modelInstanceState: numpy data type '|V2' not supported"),
    ("float32", "Incompatible data types"),
    ("no_config", "unexpected error when creating modelInstanceState: Could not open file"),
    ("big_id", "unexpected error when creating modelInstanceState: stoi"),
    ("not_npy", "unexpected error when creating modelInstanceState: tensorrt_llm stand-in: .*model.lora_config.npy"),
])
def test_a_task_upstream_cannot_load_fails_the_model_load(tmp_path, case, message):
    peft_adapter(tmp_path / "peft")
    task = tmp_path / "cache" / ("2147483648" if case == "big_id" else "1")
    convert(SEM, tmp_path / "peft", task, case if case in ("bfloat16", "float32") else "float16")
    if case == "no_config":
        (task / "model.lora_config.npy").unlink()
    if case == "not_npy":
        (task / "model.lora_config.npy").write_text("not a numpy file")
    with pytest.raises(RuntimeError, match=message):
        prefetch(SEM, tmp_path / "cache", DIMS)


def test_settings_serve_lora_when_a_prefetch_directory_is_named():
    assert load_settings(SEM, config(lora_prefetch_dir="/engine/lora")).lora_prefetch_dir == Path("/engine/lora")
    for unset in ("", "${lora_prefetch_dir}", None):
        assert load_settings(SEM, config(lora_prefetch_dir=unset)).lora_prefetch_dir is None


def _lora(sem=SEM, **arrays):
    return parse_request(sem, request(**arrays), decoupled=True, exclude_input_default=True, lora=True)[0]


WEIGHTS, CONFIG = np.zeros((1, 2, 48), np.float16), np.array([[[1, 0, 2], [3, 1, 2]]], np.int32)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_lora_inputs_are_read_as_upstream_reads_them(version):
    sem, task = backend_semantics(version), np.array([[1]], np.uint64)
    assert _lora(sem, lora_task_id=np.array([[12345]], np.uint64)).lora_task_id == 12345
    assert _lora(sem).lora_task_id is None
    # without a task id the LoRA tensors are ignored (input.lora_task_id): the base model
    assert _lora(sem, lora_weights=WEIGHTS).lora_task_id is None
    with pytest.raises(UpstreamError, match=r"^\[TensorRT-LLM\]\[ERROR\] Assertion failed: Request for LoRA "
                                            r"inference with lora weights must also have lora config"):
        _lora(sem, lora_task_id=task, lora_weights=WEIGHTS)
    assert _lora(sem, lora_task_id=task, lora_config=CONFIG).lora_error == "error.lora_config_without_weights"
    with pytest.raises(StandinLimitation, match="'lora_weights' / 'lora_config': LoRA weights sent with a request"):
        _lora(sem, lora_task_id=task, lora_weights=WEIGHTS, lora_config=CONFIG)
    with pytest.raises(StandinLimitation, match="'lora_task_id' asks for LoRA adapters"):
        parse(request(lora_task_id=np.array([[1]], np.uint64)))  # no LoRA cache configured


def _executor(tasks):
    engine = FakeEngine()
    limits = ExecutorLimits(max_active=4, max_queue_size=0, max_input_len=16, max_seq_len=32, vocab_size_padded=100,
                            max_beam_width=1, guard_streaming=False, lora_tasks=tasks)
    return StandinExecutor(SEM, engine, limits), engine


def test_the_executor_runs_cached_tasks_on_their_adapter_and_fails_the_others_with_upstreams_text():
    ex, engine = _executor({12345: 1})
    ex.enqueue([_lora(lora_task_id=np.array([[12345]], np.uint64))], responder()[0])
    assert engine.requests["1"].options.lora_task_id == 1
    ex.enqueue([_lora()], responder()[0])
    assert engine.requests["2"].options.lora_task_id == 0  # the base model
    target, sender = responder()
    ex.enqueue([_lora(lora_task_id=np.array([[9]], np.uint64))], target)
    assert sender.final == [("error", "INTERNAL", "Executor failed process requestId 3 due to the following error: "
                             "LoRA task 9 not found in cache. Please send LoRA weights with request")]
    target, sender = responder()
    ex.enqueue([_lora(lora_task_id=np.array([[12345]], np.uint64), lora_config=CONFIG)], target)
    assert sender.final == [("error", "INTERNAL", "Executor failed process requestId 4 due to the following error: "
                             "Encountered an error when fetching new request: [TensorRT-LLM][ERROR] Assertion failed: "
                             "Request for LoRA inference must have both lora_weights and lora_keys")]
    assert sorted(engine.requests) == ["1", "2"]
