"""Typed requests and results of the client."""

from __future__ import annotations

from dataclasses import dataclass, field

# The ensemble's message type (contract/chat_message.py), re-exported.
from contract.chat_message import ChatMessage as ChatMessage
from contract.sampling_fields import SentSampling


@dataclass(frozen=True)
class Guide:
    """Guided decoding (NVIDIA's guided_decoding_guide_type / guided_decoding_guide): the engine
    constrains every token, so the answer always matches."""

    type: str  # json (any JSON) | json_schema | regex | ebnf_grammar
    guide: str = ""  # the schema (JSON text), regex or grammar; empty for json

    @classmethod
    def json_schema(cls, schema: dict) -> "Guide":
        import json

        return cls("json_schema", json.dumps(schema))


# One position's most likely tokens: (token id, log prob) pairs, most likely first.
Alternatives = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class SamplingParams(SentSampling):
    """The sampling fields (temperature, top_p, top_k, min_tokens, seed, the penalties; None: the
    server's default, temperature 0: greedy) are SentSampling's (contract/sampling_fields.py)."""

    max_tokens: int | None = None  # None: the server's default
    stop: tuple[str, ...] = ()
    bad_words: tuple[str, ...] = ()
    return_log_probs: bool = False
    # The k most likely tokens at each generated position with their log probs (0-20; sends
    # return_log_probs too).  The CPU engine and the PyTorch backend; the engine flow refuses it.
    top_logprobs: int = 0
    n: int = 1  # independent samples (num_return_sequences); chunks carry sequence_index
    guide: Guide | None = None
    skip_special_tokens: bool | None = None
    # [0, 1], higher admitted first once the engine is full; None: the server's 0.5.  Honoured
    # by the CPU engine; the TensorRT-LLM layouts refuse any value but 0.5 (contract/features.py).
    priority: float | None = None
    # A LoRA adapter the server serves (its lora_task_id; AsyncLlmClient.lora_adapters() lists
    # them); None or 0: the base model.  Engines rendered with adapters (--lora-dir).
    lora_task_id: int | None = None
    # Draft-target speculative decoding: draft tokens per round, for tensorrt_llm_bls
    # (LlmClient(model="tensorrt_llm_bls")) of an engine built with a draft
    # (--speculative-decoding draft_tokens_external); not streamed (generate(stream=False)).
    num_draft_tokens: int | None = None
    # Prepend a text prompt to the output.  Done by the client: NVIDIA's ensemble contract never
    # streams the prompt back (exclude_input_in_output=false echoes only a non-streamed answer).
    echo: bool = False
    # The prompt's log probs (vLLM's prompt_logprobs): each prompt token's log prob given the ones
    # before it and this many most likely tokens at its position (0-20); None: not asked.  The CPU
    # engine where its scorer is compiled; the other engines refuse it by name.
    prompt_logprobs: int | None = None


@dataclass(frozen=True)
class PromptLogprobs:
    """The prompt as the engine tokenized it, each token's log prob given the ones before it (the
    first None: nothing predicts it) and the most likely tokens at each position (the first: ())."""

    token_ids: tuple[int, ...]
    log_probs: tuple[float | None, ...]
    top_logprobs: tuple[Alternatives, ...]


@dataclass(frozen=True)
class StreamChunk:
    text: str
    finish_reason: str  # "" while running, then "stop" | "length"
    num_input_tokens: int
    num_output_tokens: int
    token_ids: tuple[int, ...] = ()  # the engine's new tokens (before stop strings are cut)
    log_probs: tuple[float, ...] = ()
    top_logprobs: tuple[Alternatives, ...] = ()  # per token of token_ids, when asked (top_logprobs)
    arrived_s: float = 0.0  # seconds since the request was sent
    sequence_index: int = 0  # which of the n samples this chunk continues
    prompt_logprobs: PromptLogprobs | None = None  # in the first chunk, when asked (prompt_logprobs)


@dataclass
class GenerationResult:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    ttft_s: float | None  # time to first text; None when not streamed (one response: not measured)
    latency_s: float  # whole request
    chunk_times_s: list[float] = field(default_factory=list)  # arrival of every chunk
    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    top_logprobs: list[Alternatives] = field(default_factory=list)
    prompt_logprobs: PromptLogprobs | None = None  # when asked (SamplingParams.prompt_logprobs)

    @property
    def inter_token_latencies_s(self) -> list[float]:
        t = self.chunk_times_s
        return [b - a for a, b in zip(t, t[1:])]

    @property
    def output_tokens_per_s(self) -> float:
        if self.ttft_s is None:
            return 0.0
        decode = self.latency_s - self.ttft_s
        return (self.completion_tokens - 1) / decode if decode > 0 and self.completion_tokens > 1 else 0.0
