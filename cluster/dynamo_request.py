"""A request from Dynamo's frontend (its PreprocessedRequest: the prompt already tokenized with
the chat template applied, OpenAI's fields sorted into stop_conditions, sampling_options and
output_options) -> the engine step's inputs, in TensorRT-LLM's contract (contract/tensors.py), so
one worker fronts the C++ backend, the PyTorch backend and the CPU engine alike.

Checked here: only what is the worker's to decide - the request's shape, the Dynamo fields no
engine of ours honours (refused naming them, never ignored), and the feature and sampling
refusals preprocessing applies to the ensemble (contract/features.py), since the worker takes
preprocessing's place.  Ranges, lengths and guides are checked where the request enters the
engine model, by the same rules (contract/params.py, model_repository/engine_step/request_check.py).

What the frontend does itself and the worker leaves to it: stop strings, hiding end-of-sequence
ids, skip_special_tokens, include_stop_str_in_output and detokenizing (docs/cluster.md)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from cluster.replica_model import ReplicaModel
from contract import params, sampling_fields
from contract.features import ENGINE_INPUT_FEATURES, SAMPLING_INPUT_FEATURES, refusals
from contract.params import InvalidParameter
from contract.sampling_fields import SentSampling
from contract.tensors import ENGINE_INPUTS, by_name
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.text.preprocessor import engine_sampling, feature_fields_sent, resolve_sampling

# Keys of each section that the worker maps or leaves to the frontend; a key of a section outside
# these with a value is refused (Dynamo 1.6.1's fields: docs/cluster.md, "What the worker honours").
STOP_KEYS = frozenset(
    {
        "max_tokens",
        "min_tokens",
        "ignore_eos",
        "stop",
        "stop_token_ids_hidden",
        "stop_token_ids_visible",
        "stop_token_ids",
    }
)
# The sampling fields (contract/sampling_fields.py) come in sampling_options, but min_tokens (a stop condition).
SAMPLING_KEYS = frozenset(
    {"n", "guided_decoding", "include_stop_str_in_output", *(n for n in sampling_fields.NAMES if n not in STOP_KEYS)}
)
OUTPUT_KEYS = frozenset({"logprobs", "skip_special_tokens", "formatted_prompt", "return_tokens_as_token_ids"})
# Fields with a value that asks for nothing: accepted (clients such as vLLM's send defaults).
NEUTRAL: dict[str, Any] = {"best_of": 1, "use_beam_search": False, "length_penalty": 1.0}
# Dynamo's guided_decoding keys -> TensorRT-LLM's guide types (GenerationOptions.GUIDE_TYPES).
GUIDES = {"json": "json_schema", "regex": "regex", "grammar": "ebnf_grammar"}
_ENGINE_INPUTS = by_name(ENGINE_INPUTS)


@dataclass(frozen=True)
class EngineRequest:
    inputs: EngineInputs
    end_ids: frozenset[int]  # the ids that end the sequence (the engine's end_id and its single-token stops)
    prompt_tokens: int

    @property
    def max_tokens(self) -> int:
        return self.inputs.request_output_len

    @property
    def sequences(self) -> int:
        return self.inputs.options.num_return_sequences


def _section(request: Mapping[str, Any], name: str, allowed: frozenset[str]) -> dict[str, Any]:
    section = request.get(name) or {}
    if not isinstance(section, Mapping):
        raise InvalidParameter(name, f"expected an object, got {type(section).__name__}")
    for key, value in section.items():
        if value is None or key in allowed or NEUTRAL.get(key, object()) == value:
            continue
        raise InvalidParameter(
            key,
            f"{value!r} is not supported by this deployment's Dynamo worker "
            f"(the engine contract has no such setting); leave it out",
        )
    return {k: v for k, v in section.items() if v is not None and k in allowed}


def _ids(name: str, value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidParameter(name, "expected a list of token ids")
    return tuple(value)


def _guide(value: Any) -> dict[str, str]:
    """Dynamo's guided_decoding (json | regex | grammar | choice) -> the engine's guide inputs."""
    if not isinstance(value, Mapping):
        raise InvalidParameter("guided_decoding", "expected an object")
    given = {k: v for k, v in value.items() if v is not None and k != "backend"}
    if "choice" in given:
        raise InvalidParameter("guided_decoding", "'choice' is not supported; send a regex of the choices")
    unknown = sorted(set(given) - set(GUIDES))
    if unknown or len(given) != 1:
        raise InvalidParameter("guided_decoding", f"send exactly one of {sorted(GUIDES)}; got {sorted(given)}")
    ((key, guide),) = given.items()
    if key == "json":
        guide = guide if isinstance(guide, str) else json.dumps(guide)
    elif not isinstance(guide, str):
        raise InvalidParameter("guided_decoding", f"'{key}' must be a string")
    return {"guided_decoding_guide_type": GUIDES[key], "guided_decoding_guide": guide}


def engine_request(request: Mapping[str, Any], replica: ReplicaModel) -> EngineRequest:
    """Raises InvalidParameter naming the field."""
    if not isinstance(request, Mapping):
        raise InvalidParameter("request", "expected an object")
    prompt = _ids("token_ids", request.get("token_ids"))
    if not prompt:
        raise InvalidParameter("token_ids", "the prompt has no tokens")
    stop = _section(request, "stop_conditions", STOP_KEYS)
    sampling = _section(request, "sampling_options", SAMPLING_KEYS)
    output = _section(request, "output_options", OUTPUT_KEYS)

    room = replica.max_seq_len - len(prompt)
    max_tokens = stop.get("max_tokens", min(replica.default_max_tokens, max(room, 1)))
    min_tokens = max_tokens if stop.get("ignore_eos") else stop.get("min_tokens", 0)
    eos = _ids("eos_token_ids", request.get("eos_token_ids")) or replica.defaults.eos_ids
    stop_ids = [
        *eos[1:],
        *(
            i
            for key in ("stop_token_ids_hidden", "stop_token_ids_visible", "stop_token_ids")
            for i in _ids(key, stop.get(key))
        ),
    ]
    stop_rows = tuple((i,) for i in dict.fromkeys(stop_ids) if i != eos[0])

    top_k = None if sampling.get("top_k") == -1 else sampling.get("top_k")  # vLLM's and Dynamo's "no top-k"
    sent = SentSampling(
        **{name: sampling[name] for name in sampling_fields.NAMES if name in sampling}
        | {
            "top_k": top_k,
            "top_p": params.implied_top_p(sampling.get("temperature"), top_k, sampling.get("top_p")),
            "min_tokens": min_tokens,
        }
    )
    resolved = resolve_sampling(sent)
    k = output.get("logprobs")
    options = {
        "num_return_sequences": sampling.get("n", 1),
        "priority": request.get("priority", GenerationOptions.priority),
        "top_logprobs": k or 0,
        **(_guide(sampling["guided_decoding"]) if "guided_decoding" in sampling else {}),
    }
    for name, reason in refusals(options, replica.engine, ENGINE_INPUT_FEATURES) + refusals(
        feature_fields_sent(sent, resolved), replica.engine, SAMPLING_INPUT_FEATURES
    ):
        raise InvalidParameter(name, reason)
    for name, sent_as in (("num_return_sequences", "n"), ("top_logprobs", "logprobs"), ("priority", "priority")):
        params.check(name, options[name], sent_as)
    generation = GenerationOptions.from_arrays({name: np.asarray([value]) for name, value in options.items()})
    inputs = EngineInputs(
        input_ids=prompt,
        input_lengths=len(prompt),
        request_output_len=max_tokens,
        end_id=eos[0],
        pad_id=replica.defaults.pad_id,
        stop_words_list=stop_rows,
        **engine_sampling(sent, resolved),
        return_log_probs=k is not None,
        streaming=True,  # the engine model is decoupled (ReplicaModel.read refuses one that is not)
        options=generation,
    )
    return EngineRequest(inputs, frozenset((eos[0], *(r[0] for r in stop_rows))), len(prompt))


def engine_arrays(request: EngineRequest) -> dict[str, np.ndarray]:
    """The engine model's input tensors, with the batch dimension: the core inputs and the
    pass-through options (num_return_sequences, guided decoding, top_logprobs)."""
    arrays = request.inputs.to_arrays()
    options = request.inputs.options
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if value != f.default:
            spec = _ENGINE_INPUTS[f.name]
            arrays[f.name] = np.asarray(
                [[value.encode() if isinstance(value, str) else value]], dtype=spec.dtype.numpy_type
            )
    return arrays
