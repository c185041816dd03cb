"""llm_bls's logic: the ensemble's dataflow (preprocessing -> engine stream ->
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

from contract.tensors import DETOKENIZE_PARAMS, ENGINE_TO_CLIENT, POSTPROCESSING_INPUTS, POSTPROCESSING_OUTPUTS
from model_repository.relay import FORWARDED_INPUTS

POSTPROCESSING_INPUT_NAMES = tuple(t.name for t in POSTPROCESSING_INPUTS)
POSTPROCESSING_OUTPUT_NAMES = tuple(t.name for t in POSTPROCESSING_OUTPUTS)


def engine_request(preprocessed: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Preprocessing's outputs -> (the engine's inputs, detokenize_params kept for postprocessing)."""
    engine = {name: preprocessed[name] for name in FORWARDED_INPUTS if name in preprocessed}
    return engine, preprocessed[DETOKENIZE_PARAMS.name]


def postprocessing_request(engine: Mapping[str, np.ndarray], detokenize_params: np.ndarray) -> dict[str, np.ndarray]:
    request = {name: engine[name] for name in POSTPROCESSING_INPUT_NAMES if name in engine}
    request[DETOKENIZE_PARAMS.name] = detokenize_params
    return request


def client_outputs(engine: Mapping[str, np.ndarray], post: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ensemble's outputs for one engine response (what the engine did not send stays out)."""
    out = {name: post[name] for name in POSTPROCESSING_OUTPUT_NAMES}
    out.update({name: engine[name] for name in ENGINE_TO_CLIENT if name in engine})
    return out
