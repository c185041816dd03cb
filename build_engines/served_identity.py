"""What a deployment computes with, said in every answer: the OpenAI routes' `system_fingerprint`
and preprocessing's config parameters (`system_fingerprint`, `served_numerics`, `reproducible`),
which Triton clients read with get_model_config.

OpenAI documents `system_fingerprint` as the backend configuration the model runs with, changing
when a change could alter determinism; here it is a hash of the engine, its version, the weights,
their precision and the served numerics, so two answers with the same fingerprint came from the
same arithmetic.  `reproducible` says whether a greedy answer is the same alone or batched, from the
prefix cache or a fresh prefill, and with speculative decoding as without: the CPU engine's exact
numerics are (measured: build_engines/openvino/precision.py); its fast settings and TensorRT-LLM's
kernels are not promised to be (docs/precision.md, "Which guarantees each setting keeps")."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from contract.build_record import BuildRecord


@dataclass(frozen=True)
class ServedIdentity:
    numerics: str  # in words: the mode and the setting (CPU), or the engine and its precision (GPU)
    reproducible: bool
    system_fingerprint: str  # "fp_" and 10 hex digits


def served_identity(spec: BuildSpec, record: BuildRecord) -> ServedIdentity:
    from build_engines.openvino.numerics import served_numerics
    from build_engines.openvino.precision import path_dependence

    what: dict[str, object] = {
        "backend": spec.backend.value,
        "precision": spec.precision.value,
        "checkpoint": record.checkpoint.get("hash", ""),
        "versions": record.versions,
    }
    if spec.backend == EngineBackend.OPENVINO:
        served = served_numerics(spec.openvino.numerics, spec.openvino.pinned_numerics(), record.numerics)
        what["numerics"] = served.to_dict()
        numerics = f"{spec.openvino.numerics}: {served.label}"
        reproducible = not path_dependence(*served.values())
    else:
        version = record.versions.get("tensorrt_llm", "?")
        flow = "PyTorch backend" if spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH else "engine"
        numerics = f"TensorRT-LLM {version} {flow}, {spec.precision.value}"
        reproducible = False
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
    return ServedIdentity(numerics, reproducible, "fp_" + digest[:10])
