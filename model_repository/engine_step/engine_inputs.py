"""The engine step's inputs computed by preprocessing, as one typed object per prompt (field
names == ENGINE_CORE_INPUTS names), with the conversions to and from the arrays that travel
between the models: [n, ...] arrays for a request of n prompts, ragged rows padded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from contract import params
from contract.tensors import ENGINE_CORE_INPUTS, DType, by_name
from model_repository.engine_step.admission import DEFAULT_PRIORITY
from model_repository.engine_step.word_lists import from_word_list, to_word_list

_SPECS = by_name(ENGINE_CORE_INPUTS)
_WORD_LISTS = ("stop_words_list", "bad_words_list")
_VECTORS = {"input_ids": np.int32, "embedding_bias": np.float32}


GUIDE_TYPES = ("json", "json_schema", "regex", "ebnf_grammar")  # TensorRT-LLM's names (GuidedDecodingParams)


@dataclass(frozen=True)
class GenerationOptions:
    """The engine inputs the ensemble feeds straight from the client (ENGINE_PASSTHROUGH)
    that an engine of ours honours; the others are refused by contract/features.py."""

    num_return_sequences: int = 1
    guided_decoding_guide_type: str = ""  # "" | one of GUIDE_TYPES
    guided_decoding_guide: str = ""  # the JSON schema, regex or EBNF grammar
    priority: float = DEFAULT_PRIORITY  # admission order when the engine is full (engine_step/admission.py)
    lora_task_id: int = 0  # the LoRA adapter (contract/lora.py); 0: the base model
    top_logprobs: int = 0  # alternatives returned per generated token (output_top_ids / _log_probs)
    prompt_logprobs: int = -1  # -1: none; k >= 0: the prompt's log probs, k alternatives each (prompt_*)

    @property
    def scores_prompt(self) -> bool:
        """prompt_logprobs asked (its rule allows -1, none, and 0-20)."""
        return self.prompt_logprobs != -1

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "GenerationOptions":
        """Raises ValueError naming the input on a malformed or unknown value (the ranges:
        contract/params.py, InvalidParameter).  Called at each entry: preprocessing and the
        engine models."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in arrays and np.asarray(arrays[f.name]).size:
                item = np.asarray(arrays[f.name]).reshape(-1)[0]
                kind = {"str": DType.STRING, "float": DType.FP32}.get(str(f.type), DType.INT32)
                values[f.name] = _scalar_value(f.name, kind, item)
        options = cls(**values)
        for name in ("priority", "num_return_sequences", "top_logprobs", "prompt_logprobs"):
            if name in values:
                params.check(name, values[name])
        guide_type = options.guided_decoding_guide_type
        if guide_type and guide_type not in GUIDE_TYPES:
            raise params.InvalidParameter(
                "guided_decoding_guide_type", f"{guide_type!r} is not supported; allowed: {list(GUIDE_TYPES)}"
            )
        if guide_type and guide_type != "json" and not options.guided_decoding_guide:
            raise params.InvalidParameter("guided_decoding_guide", f"empty; guide type {guide_type!r} needs one")
        if options.guided_decoding_guide and not guide_type:
            raise params.InvalidParameter("guided_decoding_guide", "needs 'guided_decoding_guide_type'")
        return options


@dataclass(frozen=True)
class EngineInputs:
    input_ids: tuple[int, ...]
    input_lengths: int
    request_output_len: int
    end_id: int = -1  # -1: no end id (generate until the length limit)
    pad_id: int = 0
    stop_words_list: tuple[tuple[int, ...], ...] = ()
    bad_words_list: tuple[tuple[int, ...], ...] = ()
    embedding_bias: tuple[float, ...] = ()  # [vocab] or empty: no bias
    # the sampling fields (contract/sampling_fields.py: each row's engine name and default)
    runtime_top_k: int = 1  # TensorRT-LLM defaults: greedy
    runtime_top_p: float = 0.0
    temperature: float = 1.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = 0
    min_p: float = 0.0
    return_log_probs: bool = False
    exclude_input_in_output: bool = True
    streaming: bool = False
    stop: bool = False  # cancel the running request with this request's id (nothing else is read)
    detokenize_params: str = ""  # opaque; returned unchanged with every response
    options: GenerationOptions = GenerationOptions()  # not a core tensor: the pass-through inputs

    @classmethod
    def stop_request(cls) -> "EngineInputs":
        """A stop request: placeholders for the inputs the engine's config requires, stop=true."""
        return cls(input_ids=(0,), input_lengths=1, request_output_len=1, stop=True)

    def option_problems(self) -> list[str]:
        """What no engine answers in this combination of core inputs and options (every engine
        model checks it: engine_adapter.serve_requests; the relays' targets are such models)."""
        problems = []
        if self.options.top_logprobs and not self.return_log_probs:
            problems.append(
                "'top_logprobs' needs 'return_log_probs' true (the alternatives come with the chosen tokens' log probs)"
            )
        if self.options.scores_prompt and self.options.num_return_sequences != 1:
            problems.append("'prompt_logprobs' needs 'num_return_sequences' 1 (the prompt is scored once per request)")
        return problems

    @property
    def is_greedy(self) -> bool:
        """TensorRT-LLM's rule: top-k 1, or neither top-k nor top-p set."""
        return self.runtime_top_k == 1 or (self.runtime_top_k == 0 and self.runtime_top_p == 0.0)

    def row_arrays(self) -> dict[str, np.ndarray]:
        """This prompt's arrays, without the batch dimension."""
        out: dict[str, np.ndarray] = {}
        for f in dataclasses.fields(self):
            if f.name not in _SPECS:
                continue
            spec, value = _SPECS[f.name], getattr(self, f.name)
            if f.name in _WORD_LISTS:
                out[f.name] = to_word_list([list(w) for w in value])
            elif f.name in _VECTORS:
                out[f.name] = np.asarray(value, dtype=_VECTORS[f.name])
            elif spec.dtype == DType.STRING:
                out[f.name] = np.asarray([value.encode("utf-8")], dtype=np.object_)
            else:
                out[f.name] = np.asarray([value], dtype=spec.dtype.numpy_type)
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays with the batch dimension (1) in front, as Triton carries them."""
        return stack([self])

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "EngineInputs":
        """One prompt's request (batch size 1); see `rows`."""
        rows = cls.rows(arrays)
        if len(rows) != 1:
            raise ValueError(f"batch size {len(rows)}; send one sequence per request")
        return rows[0]

    @classmethod
    def rows(cls, arrays: Mapping[str, np.ndarray]) -> list["EngineInputs"]:
        """Parse what a caller sent to the engine, one object per prompt of the batch; absent
        optional inputs take defaults.  Raises ValueError naming the tensor on a malformed input."""
        unknown = sorted(set(arrays) - set(_SPECS))
        if unknown:
            raise ValueError(f"'{unknown[0]}': not an input of the engine; allowed: {sorted(_SPECS)}")
        sizes = {name: np.asarray(a).shape[0] if np.asarray(a).ndim else 1 for name, a in arrays.items()}
        n = max(sizes.values(), default=1)
        mismatched = [name for name, size in sizes.items() if size != n]
        if mismatched:
            raise ValueError(f"'{mismatched[0]}': batch size {sizes[mismatched[0]]}, other inputs have {n}")
        for required in ("input_ids", "input_lengths", "request_output_len"):
            if required not in arrays:
                raise ValueError(f"'{required}': required input is missing")
        return [
            cls(
                **_row_values(
                    {name: np.asarray(a)[i] if np.asarray(a).ndim else np.asarray(a) for name, a in arrays.items()}
                )
            )
            for i in range(n)
        ]


def stack(rows: list[EngineInputs]) -> dict[str, np.ndarray]:
    """[n, ...] arrays of n prompts; ragged rows are padded (ids and bias with 0, word lists
    with -1 offsets) and `input_lengths` says how much of input_ids is real."""
    per_row = [r.row_arrays() for r in rows]
    out = {}
    for name in per_row[0]:
        arrays = [row[name] for row in per_row]
        width = max(a.shape[-1] for a in arrays)
        padded = []
        for a in arrays:
            extra = width - a.shape[-1]
            if extra and name in _WORD_LISTS:
                a = np.concatenate([a, np.array([[0] * extra, [-1] * extra], dtype=a.dtype)], axis=-1)
            elif extra:
                a = np.concatenate([a, np.zeros(extra, dtype=a.dtype)])
            padded.append(a)
        out[name] = np.stack(padded)
    return out


def _row_values(row: Mapping[str, np.ndarray]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, item in row.items():
        if name in _WORD_LISTS:
            try:
                values[name] = tuple(tuple(w) for w in from_word_list(item))
            except ValueError as e:
                raise ValueError(f"'{name}': {e}") from None
        elif name == "input_ids":
            values[name] = tuple(int(t) for t in item.reshape(-1))
        elif name == "embedding_bias":
            values[name] = tuple(float(b) for b in item.reshape(-1))
        else:
            flat = item.reshape(-1)
            if flat.size != 1:
                raise ValueError(f"'{name}': expected one value, got {flat.size}")
            values[name] = _scalar_value(name, _SPECS[name].dtype, flat[0])
    if "input_lengths" in values and "input_ids" in values:  # padded rows of a batch
        length = values["input_lengths"]
        if 0 <= length <= len(values["input_ids"]):
            values["input_ids"] = values["input_ids"][:length]
    return values


def _scalar_value(name: str, kind: DType, value: Any) -> bool | float | str | int:
    """`value`: a numpy scalar (np.bool_, np.float32, np.int32, np.bytes_/bytes, ...)."""
    if kind == DType.BOOL:
        return bool(value)
    if kind == DType.FP32:
        return float(value)
    if kind == DType.STRING:
        try:
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)
        except UnicodeDecodeError:
            raise ValueError(f"'{name}': not valid UTF-8") from None
    return int(value)
