"""RequestOutput (stand-in): what LLM.generate_async returns - upstream's RequestOutput is a
GenerationResult with the prompt beside it (row result.fields; tensorrt_llm/llmapi/llm.py
RequestOutput(DetokenizedGenerationResultBase, GenerationResult)).  How it streams - one
sequence per response, best_of re-sorting, finish reasons, abort - is the stand-in's
tensorrt_llm/executor/result.py, reproduced from upstream's result.py."""

from __future__ import annotations

from ..executor.result import CompletionOutput, GenerationResult, Logprob  # noqa: F401


class RequestOutput(GenerationResult):
    def __init__(self, request_id: int, prompt_token_ids: list, sampling_params, streaming: bool,
                 abort_request=lambda request_id: None) -> None:
        super().__init__(request_id, sampling_params, streaming, abort_request)
        self.prompt = None  # token ids in: no prompt text (no tokenizer)
        self.prompt_token_ids = prompt_token_ids
