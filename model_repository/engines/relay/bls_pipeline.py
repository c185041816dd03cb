"""tensorrt_llm_bls's logic: the ensemble's dataflow (preprocessing -> engine stream ->
postprocessing per response) as BLS calls from one decoupled model.

Why it exists: Triton (2.51 and 25.12, core ensemble_scheduler.cc ScheduleSteps) passes a
client's cancellation of an ensemble only to steps scheduled after it, so the engine step
of an ensemble keeps generating for a client that left.  A model the client calls directly
sees the cancellation (its response sender) and cancels the engine request; the relay
machinery (model_repository.engines.relay.relay) does the rest.  Inputs and outputs are the ensemble's.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from contract.tensors import (
    DETOKENIZE_PARAMS,
    ENGINE_PASSTHROUGH,
    ENGINE_TO_CLIENT,
    POSTPROCESSING_INPUTS,
    POSTPROCESSING_OUTPUTS,
)
from model_repository.engines.relay.relay import FORWARDED_INPUTS, OWN_INPUTS, forwarded

POSTPROCESSING_INPUT_NAMES = tuple(t.name for t in POSTPROCESSING_INPUTS)
POSTPROCESSING_OUTPUT_NAMES = tuple(t.name for t in POSTPROCESSING_OUTPUTS)


def engine_request(
    preprocessed: Mapping[str, np.ndarray], request: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Preprocessing's outputs and the client's pass-through inputs (fed to the engine as
    NVIDIA's ensemble feeds them) -> (the engine's inputs, detokenize_params [n, 1] kept for
    postprocessing)."""
    # and our inputs preprocessing computes (min_p): `forwarded` keeps them only where they ask for something
    engine = {name: preprocessed[name] for name in FORWARDED_INPUTS + OWN_INPUTS if name in preprocessed}
    engine.update({inner: request[outer] for outer, inner in ENGINE_PASSTHROUGH.items() if outer in request})
    return forwarded(engine), preprocessed[DETOKENIZE_PARAMS.name]


def first_value(arrays: Mapping[str, np.ndarray], name: str, default=None):
    """The first element of an optional tensor as a Python value (bytes of a string tensor as
    they are); `default` when it is absent or empty."""
    value = arrays.get(name)
    if value is None or np.asarray(value).size == 0:
        return default
    first = np.asarray(value).reshape(-1)[0]
    return first.item() if isinstance(first, np.generic) else first


def _index(engine: Mapping[str, np.ndarray], name: str) -> int:
    return int(first_value(engine, name, 0))


def without_base_adapter(engine: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """lora_task_id 0 is the base model in our contract (contract/lora.py) but a task id like
    any other to TensorRT-LLM's LoRA cache: a relay sends none for it."""
    task = engine.get("lora_task_id")
    if task is not None and not np.asarray(task).any():
        return {k: v for k, v in engine.items() if k != "lora_task_id"}
    return engine


def row_of(engine: Mapping[str, np.ndarray]) -> int:
    """Which prompt of the request an engine response belongs to (batch_index; 0 when the
    engine leaves it out, as TensorRT-LLM does for a request of one prompt)."""
    return _index(engine, "batch_index")


def sequence_of(engine: Mapping[str, np.ndarray]) -> int:
    """Which of the prompt's num_return_sequences samples (sequence_index; 0 when the engine
    leaves it out, as TensorRT-LLM does for one sequence: row output.sequence_index)."""
    return _index(engine, "sequence_index")


def postprocessing_request(engine: Mapping[str, np.ndarray], detokenize_params: np.ndarray) -> dict[str, np.ndarray]:
    """`detokenize_params`: the request's [n, 1] array; the response's row is picked."""
    request = {name: engine[name] for name in POSTPROCESSING_INPUT_NAMES if name in engine}
    row = row_of(engine)
    request[DETOKENIZE_PARAMS.name] = np.asarray(detokenize_params)[row : row + 1]
    return request


def client_outputs(engine: Mapping[str, np.ndarray], post: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ensemble's outputs for one engine response (what the engine did not send stays out;
    batch_index and sequence_index are always there)."""
    out = {name: post[name] for name in POSTPROCESSING_OUTPUT_NAMES}
    out.update({name: engine[name] for name in ENGINE_TO_CLIENT if name in engine})
    out.setdefault("batch_index", np.array([[row_of(engine)]], dtype=np.int32))
    out.setdefault("sequence_index", np.zeros((1, 1), dtype=np.int32))
    return out


def closing_response(row: int, sequence: int = 0) -> dict[str, np.ndarray]:
    """An engine response with no token for prompt `row`'s sample `sequence`: how a relay tells
    postprocessing that a streamed request ended.  TensorRT-LLM never puts the end id in
    output_ids (upstream row output.end_id_not_in_output), and with several sequences its
    backend does not say which one ended (row output.sequence_results), so its last streamed
    response can carry nothing that says "the end"; postprocessing ends a stream on a
    response without tokens."""
    return {
        "output_ids": np.zeros((1, 1, 0), dtype=np.int32),
        "sequence_length": np.zeros((1, 1), dtype=np.int32),
        "batch_index": np.array([[row]], dtype=np.int32),
        "sequence_index": np.array([[sequence]], dtype=np.int32),
    }


def new_log_probs(engine: dict[str, np.ndarray], streaming: bool) -> dict[str, np.ndarray]:
    """Our contract: output_log_probs holds the log probs of this response's tokens (as
    output_ids holds its tokens).  TensorRT-LLM's streamed responses carry every token's log
    prob so far (upstream row output.log_probs_window): keep the last `sequence_length`."""
    log_probs = engine.get("output_log_probs")
    if not streaming or log_probs is None or "sequence_length" not in engine:
        return engine
    count = int(np.asarray(engine["sequence_length"]).reshape(-1)[0])
    return engine | {"output_log_probs": np.asarray(log_probs)[..., log_probs.shape[-1] - count :]}


def relay_outputs(engine: Mapping[str, np.ndarray], echo: np.ndarray) -> dict[str, np.ndarray]:
    """The engine relay's outputs for one engine response: the engine's, its prompt's
    detokenize_params (echo [n, 1], picked by batch_index) and batch/sequence indices (which
    TensorRT-LLM sends only for batched requests and several sequences)."""
    row = row_of(engine)
    out = dict(engine)
    out["detokenize_params"] = np.asarray(echo)[row : row + 1]
    out.setdefault("batch_index", np.array([[row]], dtype=np.int32))
    out.setdefault("sequence_index", np.zeros((1, 1), dtype=np.int32))
    return out
