"""The engine step's inputs as one typed object (field names == ENGINE_INPUTS names), with
the conversions to and from the arrays that travel between the models."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from contract.tensors import ENGINE_INPUTS, DType, by_name
from model_repository.word_lists import from_word_list, to_word_list

_SPECS = by_name(ENGINE_INPUTS)


@dataclass(frozen=True)
class EngineInputs:
    input_ids: tuple[int, ...]
    input_lengths: int
    request_output_len: int
    end_id: int = -1  # -1: no end id (generate until the length limit)
    pad_id: int = 0
    stop_words_list: tuple[tuple[int, ...], ...] = ()
    bad_words_list: tuple[tuple[int, ...], ...] = ()
    runtime_top_k: int = 1  # TensorRT-LLM defaults: greedy
    runtime_top_p: float = 0.0
    temperature: float = 1.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    min_tokens: int = 0
    seed: int = 0
    return_log_probs: bool = False
    exclude_input_in_output: bool = True
    streaming: bool = False
    stop: bool = False  # cancel the running request with this request's id (nothing else is read)
    detokenize_params: str = ""  # opaque; returned unchanged with every response

    @classmethod
    def stop_request(cls) -> "EngineInputs":
        """A stop request: placeholders for the inputs the engine's config requires, stop=true."""
        return cls(input_ids=(0,), input_lengths=1, request_output_len=1, stop=True)

    @property
    def is_greedy(self) -> bool:
        """TensorRT-LLM's rule: top-k 1, or neither top-k nor top-p set."""
        return self.runtime_top_k == 1 or (self.runtime_top_k == 0 and self.runtime_top_p == 0.0)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays with the batch dimension (1) in front, as Triton carries them."""
        out: dict[str, np.ndarray] = {}
        for f in dataclasses.fields(self):
            spec = _SPECS[f.name]
            value = getattr(self, f.name)
            if f.name in ("stop_words_list", "bad_words_list"):
                arr = to_word_list([list(w) for w in value])
            elif f.name == "input_ids":
                arr = np.asarray(value, dtype=np.int32)
            elif spec.dtype == DType.STRING:
                arr = np.asarray([value.encode("utf-8")], dtype=np.object_)
            else:
                arr = np.asarray([value], dtype=spec.dtype.numpy_type)
            out[f.name] = arr[np.newaxis, ...]
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "EngineInputs":
        """Parse what a caller sent to the engine; absent optional inputs take defaults.
        Raises ValueError naming the tensor on a malformed input."""
        unknown = sorted(set(arrays) - set(_SPECS))
        if unknown:
            raise ValueError(f"'{unknown[0]}': not an input of the engine; allowed: {sorted(_SPECS)}")
        values: dict[str, object] = {}
        for name, array in arrays.items():
            arr = np.asarray(array)
            if arr.ndim >= 1 and arr.shape[0] != 1:
                raise ValueError(f"'{name}': batch size {arr.shape[0]}; send one sequence per request")
            item = arr[0] if arr.ndim >= 1 else arr
            if name in ("stop_words_list", "bad_words_list"):
                try:
                    values[name] = tuple(tuple(w) for w in from_word_list(item))
                except ValueError as e:
                    raise ValueError(f"'{name}': {e}") from None
            elif name == "input_ids":
                values[name] = tuple(int(t) for t in item.reshape(-1))
            else:
                flat = item.reshape(-1)
                if flat.size != 1:
                    raise ValueError(f"'{name}': expected one value, got {flat.size}")
                values[name] = _scalar_value(name, _SPECS[name].dtype, flat[0])
        for required in ("input_ids", "input_lengths", "request_output_len"):
            if required not in values:
                raise ValueError(f"'{required}': required input is missing")
        return cls(**values)  # type: ignore[arg-type]


def _scalar_value(name: str, kind: DType, value: object):
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
