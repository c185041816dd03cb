"""What a Dynamo worker needs to know of the Triton replica it fronts, read from the replica's
rendered model repository (the same files the replica serves: one source of truth): which model
runs the engine, its limits and features, and the checkpoint directory Dynamo's frontend takes
the tokenizer and chat template from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from build_engines.render import read_config
from contract import names, tool_formats
from contract.features import EngineFeatures
from contract.kv_cache import TOKENS_PER_BLOCK
from contract.model_configs import PreprocessingParameters
from contract.model_parameters import from_parameters
from model_repository.engine_step.prefix_hits import CPU_BLOCK_TOKENS
from model_repository.text.generation_defaults import GenerationDefaults

# The engine models a worker sends token ids to, in the order it looks for them, with the KV
# block size of each (the router hashes prompts in blocks of that size): the PyTorch backend's
# LLM API and the C++ backend's TensorRT engine (contract/kv_cache.py), the CPU engine's paged
# attention (model_repository/engine_step/prefix_hits.py).
ENGINE_MODELS: tuple[tuple[str, int], ...] = (
    (names.PYTORCH_ENGINE, TOKENS_PER_BLOCK),
    (names.TRTLLM_ENGINE, TOKENS_PER_BLOCK),
    (names.OPENVINO_ENGINE, CPU_BLOCK_TOKENS),
)


# The kit's tool-call formats (contract/tool_formats.py) -> the Dynamo 1.6.1 frontend's tool-call
# parser for them (dynamo._core.get_tool_parser_names()); a format without one: no parser (the
# frontend then answers tool calls as text).
DYNAMO_TOOL_PARSERS = {
    tool_formats.LLAMA3_JSON: "llama3_json",
    tool_formats.HERMES: "hermes",
    tool_formats.JSON: "default",
}


class ReplicaModelError(ValueError):
    pass


@dataclass(frozen=True)
class ReplicaModel:
    engine_model: str  # the Triton model the worker streams token ids to
    kv_block_tokens: int
    checkpoint_dir: Path  # tokenizer.json, chat_template.jinja, config.json, generation_config.json
    served_name: str  # the model name clients send
    max_input_len: int
    max_seq_len: int
    default_max_tokens: int
    engine: EngineFeatures
    defaults: GenerationDefaults
    tool_call_format: str = tool_formats.NONE  # contract/tool_formats.py, as the build recorded it

    @property
    def dynamo_tool_parser(self) -> str | None:
        return DYNAMO_TOOL_PARSERS.get(self.tool_call_format)

    @classmethod
    def read(cls, repository: Path, served_name: str) -> "ReplicaModel":
        found = [(model, block) for model, block in ENGINE_MODELS if (repository / model / "config.pbtxt").is_file()]
        if not found:
            models = [m for m, _ in ENGINE_MODELS]
            raise ReplicaModelError(f"{repository} has none of the engine models {models}: render the repository first")
        model, block = found[0]
        if not read_config(repository / model / "config.pbtxt").model_transaction_policy.decoupled:
            raise ReplicaModelError(
                f"{repository}/{model}: 'model_transaction_policy.decoupled' is false; the Dynamo worker streams "
                "every request, so render the repository decoupled (the default)"
            )
        config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
        raw = {key: value.string_value for key, value in config.parameters.items()}
        params = from_parameters(PreprocessingParameters, names.PREPROCESSING, raw)
        return cls(
            engine_model=model,
            kv_block_tokens=block,
            checkpoint_dir=Path(params.tokenizer_dir),
            served_name=served_name,
            max_input_len=params.max_input_len,
            max_seq_len=params.max_seq_len,
            default_max_tokens=params.default_max_tokens,
            engine=params.engine(),
            defaults=GenerationDefaults.from_checkpoint(Path(params.tokenizer_dir)),
            tool_call_format=tool_formats.recorded_or_detected(Path(params.tokenizer_dir)),
        )
