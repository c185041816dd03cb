"""The CPU engine's (OpenVINO GenAI) part of the build spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from build_engines.openvino.compress import Int4Recipe
from build_engines.openvino.numerics import EXACT, NUMERICS_MODES, Numerics, NumericsMode
from build_engines.openvino.numerics_decisions import DECISION_SOURCES, DecisionSource
from build_engines.openvino.precision import default_kv_cache_precision, precision_problems
from build_engines.spec_base import SpecError
from contract.model_configs import prompt_lookup_problems


@dataclass(frozen=True)
class OpenVinoOptions:
    # The KV-cache pool in whole GB (OpenVINO's unit).  0: it grows block by block as sequences
    # need room (bounded by max_batch_size x max_seq_len), so memory follows the load; a fixed
    # pool is reserved at start but its pages are touched one block at a time, so the server's
    # RSS creeps up to the whole pool over hours of traffic (looks like a leak, is not one).
    kv_cache_size_gb: int = 0
    # Reuse the KV blocks of earlier prompts' shared prefixes (system prompts, chat history).
    # Measured (default model, int8, multi-turn chats with a ~300-token system prompt): TTFT of
    # turns 1-3 ~6x lower; greedy answers equal with and without (12 of 12, u8 and f32 KV cache,
    # f32 activations, dynamic quantization off; bf16 activations or dynamic quantization 32
    # break that equality; a later run of 18 answers: 18 with the default f32 cache, 17 with u8,
    # build_engines/openvino/precision.py); server RSS the same over 128 distinct requests (the KV
    # pool grows on demand either way).  OpenVINO GenAI reports no hit counts: see engine_step/prefix_hits.py.
    enable_prefix_caching: bool = True
    inference_threads: int = 0  # 0: all cores
    max_queue_size: int = 64  # waiting requests beyond the batch; more are refused at once
    queue_timeout_s: float = 60.0  # a request without a first token after this long fails; 0: never
    stream_interval: int = 0  # tokens per streamed response after the first; 0: by batch size
    # Numerics, pinned rather than left to the host (build_engines/openvino/precision.py);
    # defaults measured in docs/examples/fidelity/ (quality and speed).
    activation_precision: str = "f32"
    # "" (the default): the activations' precision, unquantized (f32): greedy answers then do not
    # change with the batch, the prefix cache or speculative decoding, as they did with u8
    # (build_engines/openvino/precision.py, measured); u8 takes a quarter of the memory.  With
    # `numerics` fast the build also measures u8 and serves it where it won every speed round
    # within the gate; given by hand (not f32), every candidate keeps it.
    kv_cache_precision: str = ""
    # int8 activations, in groups of this many values, for the matmuls with int8/int4 weights, as
    # llama.cpp's Q8_0 does (0: off; fp16 weights ignore it).  Measured on the default model, int8
    # weights, 2-core AVX-512 VNNI host (docs/examples/bench/peers.md, docs/examples/fidelity/):
    # 32 decodes 1.24-1.45x faster at concurrency 1 in-process (served: 0.65-0.74x -> 0.87-1.05x
    # of llama.cpp's Q8_0 server; at concurrency 16 0.95x -> 1.6-1.9x of vLLM CPU), but mean KLD vs float32 0.0036 ->
    # 0.0062 (top-1 96.7% ->
    # 95.9%, inside the int8 gate) and greedy answers then change when a prompt's prefix comes
    # from the prefix cache (6 of 12 multi-turn answers differed; 12 of 12 equal with 0), so
    # prefix caching would no longer be exact.  That is the quantization, not the KV cache: with
    # the f32 cache, 32 changed 16 of 16 greedy answers batched vs one at a time (0 of 16 with 0;
    # bf16 activations 15 of 16; 128 tokens, in-process, 2-core AMD EPYC Zen 4, 2026-11-26):
    # rounding activations to int8 turns the last-bit differences between computation paths
    # (batch, prefill chunk, verify pass) into whole steps, as the u8 KV cache does (a 96-token
    # prompt in one pass vs chunks of 1-48: logits 0.85-1.36 apart, 0.0001 without).  With prompt
    # lookup it is fast (an extra token per step costs ~3% of a one-token step, ~27% without:
    # 1.53-2.31x plain at one stream) but its answers are not plain decoding's (5 of 8 equal).
    # The spec's own value is 0; `numerics` fast (the default) serves a group where the build
    # measured it fastest within the gate on its host (build_engines/openvino/numerics.py);
    # on an AVX2-only AMD EPYC without VNNI OpenVINO computes exactly as without it (2026-11-27).
    # 128: as fast as 32, KLD 0.0136 (over the gate).
    dynamic_quantization_group_size: int = 0
    int4: Int4Recipe = field(default_factory=Int4Recipe)  # used by precision int4 only
    # Prompt-lookup (n-gram) speculative decoding: up to `num_assistant_tokens` draft tokens per
    # step copied from the prompt after a match of up to `max_ngram_size` tokens, verified in one
    # forward pass.  Greedy answers equal plain decoding's with the default unquantized KV cache
    # (kv_cache_precision above; with u8 they did not).  Measured (default model, int8,
    # input-grounded greedy prompts, 2-core AMD EPYC, `bench speculative`): 1.42x output tok/s at
    # concurrency 1 against plain decoding on the same f32 cache (1.36x against u8), 0.84x at 16
    # (0.75x against u8).  3 drafts: OpenVINO GenAI pads
    # every step to 1 + num_assistant_tokens tokens per request, matched or not; 2-3 measured
    # best here (5: 1.07-1.12x at one stream, 0.76x at 16).  OpenVINO GenAI refuses n > 1 with
    # it ("parallel sampling not compatible with assistant generation") and lets EOS through
    # before min_tokens, so such a deployment refuses both.  Off by default.
    prompt_lookup: bool = False
    num_assistant_tokens: int = 3
    max_ngram_size: int = 3
    # Draft-model speculative decoding: a smaller checkpoint with the same tokenizer, exported
    # beside the engine (<engine>/draft, same weight format) and proposing num_assistant_tokens
    # tokens per step; greedy answers equal plain decoding's with the default (unquantized) KV
    # cache.  Measured (default model with a draft of its own first 10 of 30 layers, int8,
    # greedy 128 tokens, concurrency 1, in-process, 3 drafts): 0.36-0.43x the output tok/s of
    # plain decoding: a 135M model is too cheap per token for any draft to pay off here; the
    # feature is for big targets with a small sibling (e.g. Llama-3.1-8B with Llama-3.2-1B).
    # n > 1 and min_tokens are refused, as with prompt lookup.
    draft_checkpoint: str = ""
    # top_logprobs: OpenVINO GenAI 2026.4.1 computes one log prob per position, so the engine
    # model compiles the IR a second time, with the same numerics, and scores the tokens of the
    # requests that ask for alternatives (model_repository/engines/openvino/ir_scorer.py).
    # Measured on the default model: +1.9 s load, +~100 MB RSS (the IR's weights again).
    top_logprobs: bool = True
    # Fused projections (build_engines/openvino/fusion.py): each layer's q/k/v matmuls become one,
    # and its gate/up matmuls one, over stacked weights; logits bit-equal with f32 activations.
    # Measured (default model, int8, 2-core AMD EPYC, alternating pairs): served at concurrency 1
    # 1.07x output tok/s (8 pairs, 0.92-1.12), in-process 1.05-1.21x; at 16 within noise (median
    # 1.03x).  LoRA adapters of those modules are rewritten for the fused matmuls at render time
    # (build_engines/openvino/fused_lora.py).
    fuse_projections: bool = True
    # Which numerics the engine is served with (build_engines/openvino/numerics.py): fast, the
    # fastest setting the build measured within the precision's fidelity gate; exact, f32
    # activations and KV cache without dynamic quantization (answers independent of batching,
    # the prefix cache and speculative decoding); custom, the activation precision and
    # dynamic-quantization group above (implied when either differs from f32 / 0).  Only a fast
    # build measures every candidate; its engine also serves exact without a rebuild.
    numerics: str = NumericsMode.FAST.value
    # Where fast's choice comes from (build_engines/openvino/numerics_decisions.py): auto, a decision
    # recorded for this kind of host, model and engine version when one matches (the build still
    # measures the reused setting's fidelity), else the whole sweep; measure, always the sweep.
    numerics_decision: str = DecisionSource.AUTO.value

    def __post_init__(self) -> None:
        if not self.kv_cache_precision:
            object.__setattr__(self, "kv_cache_precision", default_kv_cache_precision(self.activation_precision))
        hand_set = self.activation_precision != "f32" or self.dynamic_quantization_group_size != 0
        if self.numerics == NumericsMode.FAST.value and hand_set:
            object.__setattr__(self, "numerics", NumericsMode.CUSTOM.value)

    def pinned_numerics(self) -> Numerics:
        """The setting the spec itself names (custom's; fast's unquantized baseline)."""
        return Numerics(self.activation_precision, self.kv_cache_precision, self.dynamic_quantization_group_size)

    def validate(self, dims: tuple[int, ...] = ()) -> None:
        problems = precision_problems(self.activation_precision, self.kv_cache_precision) + self.int4.validate(dims)
        problems += prompt_lookup_problems(self.num_assistant_tokens, self.max_ngram_size)
        if self.numerics not in NUMERICS_MODES:
            problems.append(f"'numerics' must be one of {list(NUMERICS_MODES)}, got {self.numerics!r}")
        elif self.numerics == NumericsMode.EXACT.value and self.pinned_numerics() != EXACT:
            problems.append(
                f"'numerics' exact means {EXACT.label}; got {self.pinned_numerics().label} (leave the precisions "
                "and the group out, or use numerics custom)"
            )
        if self.numerics_decision not in DECISION_SOURCES:
            problems.append(
                f"'numerics_decision' must be one of {list(DECISION_SOURCES)}, got {self.numerics_decision!r}"
            )
        if self.prompt_lookup and self.draft_checkpoint:
            problems.append("'prompt_lookup' and 'draft_checkpoint' are exclusive: one kind of speculative decoding")
        if self.dynamic_quantization_group_size < 0:
            problems.append(
                f"'dynamic_quantization_group_size' must be >= 0 (0: off), got {self.dynamic_quantization_group_size}"
            )
        if problems:
            raise SpecError("; ".join(problems))
        if self.max_queue_size < 0:
            raise SpecError(f"'max_queue_size' must be >= 0, got {self.max_queue_size}")
        if self.queue_timeout_s < 0:
            raise SpecError(f"'queue_timeout_s' must be >= 0, got {self.queue_timeout_s}")
        if self.stream_interval < 0:
            raise SpecError(f"'stream_interval' must be >= 0, got {self.stream_interval}")
        if self.kv_cache_size_gb < 0:
            raise SpecError(f"'kv_cache_size_gb' must be >= 0 (0: grows on demand), got {self.kv_cache_size_gb}")
        if self.inference_threads < 0:
            raise SpecError(f"'inference_threads' must be >= 0, got {self.inference_threads}")


def openvino_options_from_dict(data: dict[str, Any]) -> OpenVinoOptions:
    """Older records lack the precision fields: they were built with OpenVINO's host defaults,
    which the record cannot say; they read as this version's defaults (fusion: as off, which
    it was)."""
    fields = dict(data)
    fields.setdefault("fuse_projections", False)  # records older than the field: built unfused
    if isinstance(fields.get("int4"), dict):
        fields["int4"] = Int4Recipe(**fields["int4"])
    return OpenVinoOptions(**fields)
