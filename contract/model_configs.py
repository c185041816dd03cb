"""The `parameters` each of our Python-backend models takes (see model_parameters.py)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from contract.features import EngineFeatures


@dataclass(frozen=True)
class PreprocessingParameters:
    tokenizer_dir: Path  # HF checkpoint dir: tokenizer.json, generation_config.json, config.json
    max_input_len: int  # engine limit on prompt tokens
    max_seq_len: int  # engine limit on prompt + generated tokens
    default_max_tokens: int  # used when a request has no max_tokens
    add_special_tokens: bool = True  # tokenizer's own BOS/EOS for plain text prompts
    # The engine behind the ensemble: how messages name it, and the features it honours
    # (contract/features.py: a request asking for another is refused, never ignored).
    engine_label: str = "the engine"
    engine_features: str = ""  # comma-separated Feature names
    engine_withheld: str = ""  # JSON: Feature name -> why this deployment withholds it (EngineFeatures.withheld)
    # LoRA adapters served (JSON object: name -> lora_task_id; contract/lora.py served_to_parameter):
    # an unknown lora_task_id is refused here, and clients list them from this config.
    lora_adapters: str = ""
    # What the deployment computes with (build_engines/served_identity.py), for clients to read:
    # the OpenAI front answers with system_fingerprint.
    system_fingerprint: str = ""
    served_numerics: str = ""
    reproducible: bool = False  # greedy answers independent of batching, the prefix cache, speculation
    # The transformers class AutoTokenizer picked for tokenizer_dir when the repository was rendered,
    # and that transformers' version (model_repository/text/tokenizer_class.py); empty: AutoTokenizer.
    tokenizer_class: str = ""
    tokenizer_class_transformers: str = ""

    def validate(self) -> None:
        for name in ("max_input_len", "max_seq_len", "default_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        if self.max_input_len >= self.max_seq_len:
            raise ValueError(f"'max_input_len' ({self.max_input_len}) must be < 'max_seq_len' ({self.max_seq_len})")
        self.engine()  # a misspelt feature fails at load

    def engine(self) -> EngineFeatures:
        return EngineFeatures.from_parameter(self.engine_label, self.engine_features, self.engine_withheld)


@dataclass(frozen=True)
class PostprocessingParameters:
    tokenizer_dir: Path
    # Streams whose end was never seen (client cancelled, engine error) are forgotten after
    # this many seconds without a token: far longer than any gap between two tokens.
    stream_state_ttl_s: float = 120.0

    def validate(self) -> None:
        if self.stream_state_ttl_s <= 0:
            raise ValueError(f"'stream_state_ttl_s' must be > 0, got {self.stream_state_ttl_s}")


# The CPU engine's numerics (OpenVINO INFERENCE_PRECISION_HINT and KV_CACHE_PRECISION values).
ACTIVATION_PRECISIONS = ("f32", "bf16", "f16")
DRAFT_SUBDIR = "draft"  # a CPU engine's draft model (speculative decoding), inside its engine directory
KV_CACHE_PRECISIONS = ("u8", "f16", "bf16", "f32")


def prompt_lookup_problems(num_assistant_tokens: int, max_ngram_size: int) -> list[str]:
    return [
        f"'{name}' must be >= 1, got {value}"
        for name, value in (("num_assistant_tokens", num_assistant_tokens), ("max_ngram_size", max_ngram_size))
        if value < 1
    ]


@dataclass(frozen=True)
class OpenVinoEngineParameters:
    engine_dir: Path  # output of `build_engines build` (IR + build.json)
    max_num_seqs: int  # requests in the running batch
    max_num_batched_tokens: int  # tokens per scheduler step (prefill chunks + decodes)
    kv_cache_size_gb: int = 0  # KV-cache pool, whole GB; 0: grows on demand
    enable_prefix_caching: bool = True  # measured: build_engines/spec.py (OpenVinoOptions)
    inference_threads: int = 0  # 0 = OpenVINO's default (all cores)
    max_queue_size: int = 64  # requests waiting beyond the running batch; more are refused (UNAVAILABLE)
    # Requests beyond max_num_seqs wait in front of the engine and are admitted by priority
    # (input `priority`), each waiting second adding this much so nothing starves (0: strict).
    priority_aging_per_s: float = 0.1
    # Seats of max_num_seqs that requests below the default priority (batch work marked low)
    # never take, so default and high-priority requests find one free at once; -1: a quarter
    # of max_num_seqs.  Deployments that send no low priorities lose nothing.
    priority_reserved_seqs: int = -1

    @property
    def reserved_from_low_priority(self) -> int:
        return self.max_num_seqs // 4 if self.priority_reserved_seqs < 0 else self.priority_reserved_seqs

    queue_timeout_s: float = 60.0  # no first token after this long: fail (UNAVAILABLE); 0 = wait forever
    # A thread asks Triton this often whether each request's client cancelled (the step thread
    # drops those at its next step); 0: asked at every step, on the step thread.  The default is
    # TensorRT-LLM's backend's cancellation_check_period_ms (row param.cancellation_check_period_ms).
    cancel_check_period_ms: int = 100
    # Tokens per streamed response after the first; 0 = by batch size (1 up to 4 running
    # requests, 2 up to 8, then 4): fewer trips through the pipeline when the CPU is busiest.
    stream_interval: int = 0
    # The engine's numerics, pinned (INFERENCE_PRECISION_HINT, KV_CACHE_PRECISION): the spec's
    # openvino.activation_precision / kv_cache_precision (build_engines/openvino/precision.py).
    activation_precision: str = "f32"
    kv_cache_precision: str = "f32"
    # DYNAMIC_QUANTIZATION_GROUP_SIZE: activations quantized to int8 in groups of this size before
    # the matmuls with compressed weights (0: off), as llama.cpp's Q8_0 does.  The default and the
    # measurements behind it: build_engines/spec.py (OpenVinoOptions).
    dynamic_quantization_group_size: int = 0
    # Prompt-lookup speculative decoding (OpenVINO GenAI's `prompt_lookup` pipeline property and
    # GenerationConfig num_assistant_tokens / max_ngram_size); measured: build_engines/spec.py.
    prompt_lookup: bool = False
    num_assistant_tokens: int = 3
    max_ngram_size: int = 3
    # Draft-model speculative decoding: the draft's IR in <engine_dir>/draft (OpenVINO GenAI's
    # `draft_model` pipeline property); num_assistant_tokens draft tokens per step.
    draft_model: bool = False
    # Top-k log probs (input top_logprobs): the IR compiled a second time scores those requests'
    # tokens (engines/openvino/ir_scorer.py); false saves its memory and refuses top_logprobs.
    top_logprobs: bool = True
    # LoRA adapters served beside the base model (contract/lora.py: JSON of LoraAdapter); "": none.
    lora_adapters: str = ""

    @property
    def draft_dir(self) -> Path:
        return Path(self.engine_dir) / DRAFT_SUBDIR

    @property
    def speculative(self) -> bool:
        return self.prompt_lookup or self.draft_model

    def validate(self) -> None:
        problems = prompt_lookup_problems(self.num_assistant_tokens, self.max_ngram_size)
        if self.prompt_lookup and self.draft_model:
            problems.append(
                "'prompt_lookup' and 'draft_model' are exclusive: one kind of speculative decoding per engine"
            )
        if problems:
            raise ValueError("; ".join(problems))
        if self.activation_precision not in ACTIVATION_PRECISIONS:
            raise ValueError(
                f"'activation_precision' must be one of {list(ACTIVATION_PRECISIONS)}, got "
                f"{self.activation_precision!r}"
            )
        if self.kv_cache_precision not in KV_CACHE_PRECISIONS:
            raise ValueError(
                f"'kv_cache_precision' must be one of {list(KV_CACHE_PRECISIONS)}, got {self.kv_cache_precision!r}"
            )
        if self.dynamic_quantization_group_size < 0:
            raise ValueError(
                f"'dynamic_quantization_group_size' must be >= 0 (0: off), got {self.dynamic_quantization_group_size}"
            )
        if (
            self.max_queue_size < 0
            or self.queue_timeout_s < 0
            or self.stream_interval < 0
            or self.priority_aging_per_s < 0
            or self.cancel_check_period_ms < 0
        ):
            raise ValueError(
                "'max_queue_size', 'queue_timeout_s', 'stream_interval', 'priority_aging_per_s' and "
                "'cancel_check_period_ms' must be >= 0"
            )
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("'max_num_seqs' and 'max_num_batched_tokens' must be >= 1")
        if not -1 <= self.priority_reserved_seqs < self.max_num_seqs:
            raise ValueError(
                f"'priority_reserved_seqs' must be -1 (a quarter of max_num_seqs) or 0 to max_num_seqs - 1 "
                f"({self.max_num_seqs - 1}), got {self.priority_reserved_seqs}"
            )
        if self.kv_cache_size_gb < 0:
            raise ValueError(f"'kv_cache_size_gb' must be >= 0 (0: grows on demand), got {self.kv_cache_size_gb}")
        if self.inference_threads < 0:
            raise ValueError(f"'inference_threads' must be >= 0, got {self.inference_threads}")


@dataclass(frozen=True)
class EngineRelayParameters:
    # The model that runs the engine contract: `tensorrt_llm` (C++ backend) on a GPU;
    # the CPU engine (`openvino_llm`) in this project's CPU tests of the GPU wiring.
    target_model: str
    engine_dir: Path  # holds build.json: the relay refuses an engine built by other runtime versions
    # How often requests whose client went away are looked for (TensorRT-LLM's backend
    # polls with the same kind of period: cancellation_check_period_ms).
    cancel_check_period_ms: int = 50
    # No first response after this long: the request fails UNAVAILABLE (0: wait forever).  Set
    # in front of TensorRT-LLM, which has no such timeout; the CPU engine keeps its own.
    first_token_timeout_s: float = 0.0
    # Record the llm_* engine metrics (contract/metrics.py) of the relayed requests: in front of
    # TensorRT-LLM, whose backend records none of them; the CPU engine records its own.
    record_metrics: bool = False
    # Draft-target speculative decoding (tensorrt_llm_bls only): the draft engine's model and
    # the target engine's --max_draft_len, the most num_draft_tokens a request may ask for.
    draft_model: str = ""
    max_draft_len: int = 0

    def validate(self) -> None:
        if bool(self.draft_model) != (self.max_draft_len > 0):
            raise ValueError(
                f"'draft_model' ({self.draft_model!r}) and 'max_draft_len' ({self.max_draft_len}) go "
                "together: a draft model and a max_draft_len >= 1, or neither"
            )
        if not self.target_model.strip():
            raise ValueError("'target_model' must name a model of the repository")
        if self.cancel_check_period_ms < 1:
            raise ValueError(f"'cancel_check_period_ms' must be >= 1, got {self.cancel_check_period_ms}")
        if self.first_token_timeout_s < 0:
            raise ValueError(f"'first_token_timeout_s' must be >= 0 (0: never), got {self.first_token_timeout_s}")


@dataclass(frozen=True)
class TensorRtLlmParameters:
    """`parameters` of the C++ `tensorrt_llm` model, rendered (never parsed) by this kit.
    Keys are those read by TensorRT-LLM 1.1's triton_backend/inflight_batcher_llm/src/
    model_instance_state.cc and model_state.cc."""

    gpt_model_path: Path  # the engine directory
    kv_cache_free_gpu_mem_fraction: float
    enable_kv_cache_reuse: bool
    enable_chunked_context: bool
    batch_scheduler_policy: str  # max_utilization | guaranteed_no_evict
    cancellation_check_period_ms: int
    gpt_model_type: str = "inflight_fused_batching"
    max_beam_width: int = 1
    exclude_input_in_output: bool = True
    # getGuidedDecodingConfigFromParams reads these three without a fallback, so they must
    # be present; empty values leave guided decoding off.
    tokenizer_dir: str = ""
    guided_decoding_backend: str = ""
    xgrammar_tokenizer_info_path: str = ""


class KvCacheDtype(str, enum.Enum):
    """KvCacheConfig.dtype of the LLM API: 'auto' follows the checkpoint (a ModelOpt
    checkpoint with an FP8 KV cache gets one), 'fp8' asks for it explicitly."""

    AUTO = "auto"
    FP8 = "fp8"


PYTORCH_SAMPLERS = ("TorchSampler", "TRTLLMSampler")  # TorchLlmArgs.sampler_type values the kit renders


@dataclass(frozen=True)
class PyTorchEngineParameters:
    """`parameters` of tensorrt_llm_pytorch: one `tensorrt_llm.LLM` (PyTorch backend) serving
    the engine contract.  The LLM's own arguments (upstream table llmapi_<version>.json rows
    llm.args.*) come from the build; the rest is ours (queue bound, timeouts, polling)."""

    engine_dir: Path  # holds build.json: the model refuses a checkpoint prepared by other versions
    model_dir: Path  # the Hugging Face checkpoint the LLM loads (ModelOpt-quantized or 16-bit)
    max_batch_size: int  # LLM(max_batch_size=...): requests in the running batch
    max_num_tokens: int  # LLM(max_num_tokens=...): tokens per engine step
    max_seq_len: int  # LLM(max_seq_len=...): prompt + generated tokens
    max_input_len: int  # our limit on prompt tokens (checked before the LLM sees the request)
    dtype: str = "auto"  # LLM(dtype=...): auto (the checkpoint's), float16 or bfloat16
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    kv_cache_free_gpu_mem_fraction: float = 0.9  # KvCacheConfig.free_gpu_memory_fraction
    enable_block_reuse: bool = True  # KvCacheConfig.enable_block_reuse (prefix caching)
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO  # KvCacheConfig.dtype
    enable_chunked_prefill: bool = True  # LLM(enable_chunked_prefill=...)
    max_queue_size: int = 64  # requests waiting beyond the running batch; more are refused (UNAVAILABLE)
    # Requests beyond max_num_seqs wait in front of the engine and are admitted by priority
    # (input `priority`), each waiting second adding this much so nothing starves (0: strict).
    priority_aging_per_s: float = 0.1
    queue_timeout_s: float = 60.0  # no first token after this long: fail (UNAVAILABLE); 0 = wait forever
    cancel_check_period_ms: int = 50  # how often requests whose client went away are looked for
    stats_period_s: float = 1.0  # how often the LLM's iteration stats (KV-cache usage) are read
    # LLM(speculative_config=...) as JSON: {"decoding_type": ..., fields of its DecodingConfig}, "{}" for none
    # (build_engines/pytorch/speculative.py renders it; the model builds the tensorrt_llm.llmapi class by name).
    speculative_config: str = "{}"
    # LLM(guided_decoding_backend=...): "" leaves structured output off; "xgrammar" also makes the
    # LLM load its tokenizer (its executor builds the decoder from it: row llm.guided.tokenizer)
    guided_decoding_backend: str = ""
    # LoRA adapters (contract/lora.py to_parameter: name, task id, weights file, scale) served with
    # LLM(lora_config=LoraConfig(lora_dir=<their directories>, max_lora_rank=...)) and picked per
    # request with LoRARequest (row llm.lora); "" for none
    lora_adapters: str = ""
    lora_max_rank: int = 0
    # LLM(sampler_type=...): upstream's sampler, chosen by the plan (build_engines/pytorch/sampler.py); what
    # it applies is in contract/upstream/data/sampling_support_<version>.json (rows pytorch.*)
    sampler_type: str = "TorchSampler"

    def validate(self) -> None:
        if self.sampler_type not in PYTORCH_SAMPLERS:
            raise ValueError(f"'sampler_type' must be one of {list(PYTORCH_SAMPLERS)}, got {self.sampler_type!r}")
        for name in (
            "max_batch_size",
            "max_num_tokens",
            "max_seq_len",
            "max_input_len",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "cancel_check_period_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        if self.max_input_len >= self.max_seq_len:
            raise ValueError(f"'max_input_len' ({self.max_input_len}) must be < 'max_seq_len' ({self.max_seq_len})")
        if not 0 < self.kv_cache_free_gpu_mem_fraction <= 1:
            raise ValueError(
                f"'kv_cache_free_gpu_mem_fraction' must be in (0, 1], got {self.kv_cache_free_gpu_mem_fraction}"
            )
        if self.dtype not in ("auto", "float16", "bfloat16"):
            raise ValueError(f"'dtype' must be auto, float16 or bfloat16, got {self.dtype!r}")
        if self.max_queue_size < 0 or self.queue_timeout_s < 0 or self.stats_period_s <= 0:
            raise ValueError("'max_queue_size' and 'queue_timeout_s' must be >= 0, 'stats_period_s' > 0")
