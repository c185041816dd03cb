"""tensorrt_llm_bls's logic: the ensemble's dataflow (preprocessing -> engine stream ->
postprocessing per response) as BLS calls from one decoupled model.

Why it exists: Triton (2.51 and 25.12, core ensemble_scheduler.cc ScheduleSteps) passes a
client's cancellation of an ensemble only to steps scheduled after it, so the engine step
of an ensemble keeps generating for a client that left.  A model the client calls directly
sees the cancellation (its response sender) and cancels the engine request; the relay
machinery (model_repository.relay) does the rest.  Inputs and outputs are the ensemble's.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from contract.tensors import (DETOKENIZE_PARAMS, ENGINE_PASSTHROUGH, ENGINE_TO_CLIENT, POSTPROCESSING_INPUTS,
                             POSTPROCESSING_OUTPUTS)
from model_repository.relay import FORWARDED_INPUTS

POSTPROCESSING_INPUT_NAMES = tuple(t.name for t in POSTPROCESSING_INPUTS)
POSTPROCESSING_OUTPUT_NAMES = tuple(t.name for t in POSTPROCESSING_OUTPUTS)


def engine_request(preprocessed: Mapping[str, np.ndarray],
                   request: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Preprocessing's outputs and the client's pass-through inputs (fed to the engine as
    NVIDIA's ensemble feeds them) -> (the engine's inputs, detokenize_params [n, 1] kept for
    postprocessing)."""
    engine = {name: preprocessed[name] for name in FORWARDED_INPUTS if name in preprocessed}
    engine.update({inner: request[outer] for outer, inner in ENGINE_PASSTHROUGH.items() if outer in request})
    return engine, preprocessed[DETOKENIZE_PARAMS.name]


def row_of(engine: Mapping[str, np.ndarray]) -> int:
    """Which prompt of the request an engine response belongs to (batch_index; 0 when the
    engine leaves it out, as TensorRT-LLM does for a request of one prompt)."""
    index = engine.get("batch_index")
    return int(np.asarray(index).reshape(-1)[0]) if index is not None and np.asarray(index).size else 0


def postprocessing_request(engine: Mapping[str, np.ndarray], detokenize_params: np.ndarray) -> dict[str, np.ndarray]:
    """`detokenize_params`: the request's [n, 1] array; the response's row is picked."""
    request = {name: engine[name] for name in POSTPROCESSING_INPUT_NAMES if name in engine}
    row = row_of(engine)
    request[DETOKENIZE_PARAMS.name] = np.asarray(detokenize_params)[row:row + 1]
    return request


def client_outputs(engine: Mapping[str, np.ndarray], post: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ensemble's outputs for one engine response (what the engine did not send stays out;
    batch_index and sequence_index are always there)."""
    out = {name: post[name] for name in POSTPROCESSING_OUTPUT_NAMES}
    out.update({name: engine[name] for name in ENGINE_TO_CLIENT if name in engine})
    out.setdefault("batch_index", np.array([[row_of(engine)]], dtype=np.int32))
    out.setdefault("sequence_index", np.zeros((1, 1), dtype=np.int32))
    return out
