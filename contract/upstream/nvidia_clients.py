"""The requests NVIDIA's own clients send, as data (`data/nvidia_clients.json`).

One `ClientCase` per script and command line (end_to_end_grpc_client.py default, --streaming,
--batch-inputs, ...; inflight_batcher_llm_client.py; end_to_end_test.py;
benchmark_core_model.py; the curl examples of the docs; genai-perf's tensorrtllm backend).
A case holds one or more `ClientRequest`s: the tensors sent (name, datatype, shape, value or
how it is derived), the model, the transport, request parameters, the outputs asked for and
how the script reads the response.  Conformance tests replay these against our server; the
scripts themselves are NVIDIA's and are not vendored.

Shapes are wire shapes with the batch dimension; a string in a shape ("L", "T") is a length
the script derives at run time (prompt tokens, generated tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contract.upstream.citation import Citation, load_table
from contract.upstream.triton_models import citations

TRANSPORTS = ("grpc_stream", "grpc_unary", "http_unary", "http_generate", "http_generate_stream")
UNDECLARED = ("error", "parameter", "dropped")
DATATYPES = ("BOOL", "INT32", "INT64", "UINT64", "FP16", "FP32", "BYTES")


@dataclass(frozen=True)
class TensorSent:
    name: str
    datatype: str  # tritonclient InferInput datatype: INT32, BYTES, ...
    shape: tuple[int | str, ...]
    value: Any  # a literal, or a sentence saying how the script derives it

    @property
    def batch(self) -> int | str:
        return self.shape[0]


@dataclass(frozen=True)
class ClientRequest:
    model: str
    transport: str
    streaming: bool  # the stream/streaming tensor, or the generate_stream endpoint
    inputs: tuple[TensorSent, ...]
    parameters: dict[str, Any]  # request parameters (gRPC/HTTP infer `parameters`)
    outputs: tuple[str, ...] | None  # requested outputs; None: the script asks for none, so all come back
    reads: tuple[str, ...]  # how the script reads the response
    request_id: str = ""
    # What becomes of a tensor the model does not declare: "error" (tritonclient sends it, Triton
    # refuses the request), "parameter" (HTTP generate makes it a request parameter),
    # "dropped" (perf_analyzer sends only the model's declared inputs).
    undeclared: str = "error"

    def input(self, name: str) -> TensorSent:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(f"the request to {self.model} sends no {name!r}")

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)


@dataclass(frozen=True)
class ClientCase:
    script: str
    case: str
    argv: str
    requests: tuple[ClientRequest, ...]
    expects: str
    client_version: str
    citation: Citation
    more_lines: tuple[str, ...] = ()
    body: str = ""  # curl: the JSON body as the docs give it

    # The first request is the case's main one (the others are chained steps or a stop request).
    @property
    def model(self) -> str:
        return self.requests[0].model

    @property
    def streaming(self) -> bool:
        return self.requests[0].streaming

    @property
    def inputs(self) -> tuple[TensorSent, ...]:
        return self.requests[0].inputs

    @property
    def outputs(self) -> tuple[str, ...] | None:
        return self.requests[0].outputs

    @property
    def parameters(self) -> dict[str, Any]:
        return self.requests[0].parameters

    @property
    def reads(self) -> tuple[str, ...]:
        return self.requests[0].reads


def _request(raw: dict[str, Any]) -> ClientRequest:
    if raw["transport"] not in TRANSPORTS:
        raise ValueError(f"unknown transport {raw['transport']!r}")
    inputs = tuple(TensorSent(t["name"], t["datatype"], tuple(t["shape"]), t["value"]) for t in raw["inputs"])
    for t in inputs:
        if t.datatype not in DATATYPES:
            raise ValueError(f"{raw['model']}: {t.name} has unknown datatype {t.datatype!r}")
    outputs = None if raw["outputs"] is None else tuple(raw["outputs"])
    if raw["undeclared"] not in UNDECLARED:
        raise ValueError(f"unknown policy for undeclared tensors {raw['undeclared']!r}")
    return ClientRequest(
        raw["model"],
        raw["transport"],
        bool(raw["streaming"]),
        inputs,
        dict(raw["parameters"]),
        outputs,
        tuple(raw["reads"]),
        raw.get("request_id", ""),
        raw["undeclared"],
    )


@lru_cache(maxsize=None)
def load_client_cases() -> tuple[ClientCase, ...]:
    table = load_table("nvidia_clients")
    cases = []
    for row in table.rows:
        nested = row["cite"].get("also")  # a second file the case was read from
        citations(table, {"cite": row["cite"], **({"also": nested} if nested else {})})
        if row["kind"] != "case":
            continue
        cases.append(
            ClientCase(
                row["script"],
                row["case"],
                row["argv"],
                tuple(_request(r) for r in row["requests"]),
                row["expects"],
                row["client_version"],
                table.citation(row),
                tuple(row["cite"].get("more_lines", ())),
                row.get("body", ""),
            )
        )
    return tuple(cases)


def client_case(script_suffix: str, case: str) -> ClientCase:
    """The case `case` of the script whose path ends with `script_suffix`."""
    for c in load_client_cases():
        if c.script.endswith(script_suffix) and c.case == case:
            return c
    raise KeyError(f"no recorded case {case!r} of {script_suffix!r}")
