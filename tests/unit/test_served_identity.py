"""What a deployment computes with, as its answers say it (system_fingerprint) and as its
preprocessing config carries it for Triton clients (issue 49)."""

from dataclasses import replace
from pathlib import Path

from build_engines.openvino.options import OpenVinoOptions
from build_engines.served_identity import served_identity
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from contract.build_record import BuildRecord

DQ32 = {"activation_precision": "f32", "kv_cache_precision": "f32", "dynamic_quantization_group_size": 32}


def _record(spec: BuildSpec, **fields) -> BuildRecord:
    return BuildRecord(backend=spec.backend.value, spec=spec.to_dict(), checkpoint={"hash": "sha256:ab"},
                       versions={"openvino-genai": "2026.4.1"}, built_at="", build_seconds=0.0, **fields)


def test_fast_and_exact_from_one_build_differ_and_say_which_is_reproducible():
    fast = BuildSpec(checkpoint=Path("/c"))
    exact = replace(fast, openvino=OpenVinoOptions(numerics="exact"))
    numerics = {"fast": DQ32}
    a, b = served_identity(fast, _record(fast, numerics=numerics)), served_identity(exact, _record(exact, numerics=numerics))
    assert a.numerics == "fast: f32 activations, f32 KV cache, dynamic quantization 32" and not a.reproducible
    assert b.numerics == "exact: f32 activations, f32 KV cache, dynamic quantization off" and b.reproducible
    assert a.system_fingerprint != b.system_fingerprint
    assert a.system_fingerprint.startswith("fp_") and len(a.system_fingerprint) == 13


def test_the_fingerprint_is_stable_and_follows_the_weights_and_versions():
    spec = BuildSpec(checkpoint=Path("/c"))
    record = _record(spec)
    assert served_identity(spec, record) == served_identity(spec, record)
    other_weights = replace(record, checkpoint={"hash": "sha256:cd"})
    other_engine = replace(record, versions={"openvino-genai": "2026.5.0"})
    prints = {served_identity(spec, r).system_fingerprint for r in (record, other_weights, other_engine)}
    assert len(prints) == 3


def test_tensorrt_llm_promises_no_batch_invariance():
    spec = BuildSpec(checkpoint=Path("/c"), backend=EngineBackend.TENSORRT_LLM_PYTORCH)
    identity = served_identity(spec, replace(_record(spec), versions={"tensorrt_llm": "1.2.1"}))
    assert identity.numerics.startswith("TensorRT-LLM 1.2.1 PyTorch backend") and not identity.reproducible
