"""The types of the tensor tables (contract/tensors.py), below every table that declares
tensors: the sampling-field table (contract/sampling_fields.py) spells its fields' dtypes with
them, and contract/tensors.py lays those fields out among the other inputs."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class DType(enum.Enum):
    """Triton data types we use, with their numpy equivalents."""

    BOOL = ("TYPE_BOOL", "BOOL", np.bool_)
    INT32 = ("TYPE_INT32", "INT32", np.int32)
    INT64 = ("TYPE_INT64", "INT64", np.int64)
    UINT8 = ("TYPE_UINT8", "UINT8", np.uint8)
    FP16 = ("TYPE_FP16", "FP16", np.float16)
    UINT64 = ("TYPE_UINT64", "UINT64", np.uint64)
    FP32 = ("TYPE_FP32", "FP32", np.float32)
    STRING = ("TYPE_STRING", "BYTES", np.object_)

    def __init__(self, config_name: str, wire_name: str, numpy_type: type) -> None:
        self.config_name = config_name  # as written in config.pbtxt
        self.wire_name = wire_name  # as sent by tritonclient (InferInput datatype)
        self.numpy_type = numpy_type


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: DType
    dims: tuple[int, ...]
    optional: bool = False
    extra: bool = False  # not part of NVIDIA's contract; ours
    doc: str = ""
    wire_shape: tuple[int, ...] | None = None  # per request on the wire, where it is not [1, *dims]

    @property
    def wire(self) -> tuple[int, ...]:
        return self.wire_shape if self.wire_shape is not None else (1, *self.dims)

    @property
    def is_scalar(self) -> bool:
        return self.dims == (1,)


def scalar(name: str, dtype: DType, doc: str, *, optional: bool = True, extra: bool = False) -> TensorSpec:
    return TensorSpec(name, dtype, (1,), optional=optional, extra=extra, doc=doc)
