"""The TensorRT-LLM part of the build spec as typed values: parallelism, KV cache, plugins,
calibration, speculative decoding, LoRA, the target GPU and TensorRT-LLM version, and the serving
settings of the `tensorrt_llm` Triton model.  The rules over them are build_engines/trtllm/spec.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from build_engines.gpus import DEFAULT_GPU, GpuTarget, known_gpu
from build_engines.trtllm.lora import TrtLlmLora
from build_engines.trtllm.versions import default_target
from contract.upstream.citation import Citation, Source


class KvCacheDtype(str, enum.Enum):
    AUTO = "auto"  # the model's 16-bit activation dtype
    FP8 = "fp8"
    INT8 = "int8"


class SchedulerPolicy(str, enum.Enum):
    # batch_scheduler_policy of the tensorrt_llm model (model_instance_state.cc,
    # getSchedulerConfigFromParams): the only two values the backend accepts.
    MAX_UTILIZATION = "max_utilization"
    GUARANTEED_NO_EVICT = "guaranteed_no_evict"


class GuidedDecodingBackend(str, enum.Enum):
    """guided_decoding_backend of the tensorrt_llm model: upstream accepts only "xgrammar" (any
    other non-empty value fails the load) and leaves guided decoding off when the parameter or
    xgrammar_tokenizer_info_path is empty (rows guided.config, guided.backend_invalid of
    contract/upstream/data/trtllm_backend_semantics_<version>.json).  NONE renders them empty."""

    XGRAMMAR = "xgrammar"
    NONE = "none"

    @property
    def parameter(self) -> str:
        """The model parameter's value: empty for NONE (upstream then leaves guided decoding off)."""
        return "" if self is GuidedDecodingBackend.NONE else self.value


class SpeculativeDecoding(str, enum.Enum):
    """trtllm-build's --speculative_decoding_mode (table row flag --speculative_decoding_mode:
    draft_tokens_external, lookahead_decoding, medusa, explicit_draft_tokens, eagle).  Wired:
    lookahead, which needs no second model (the engine drafts its own n-grams), eagle
    (EAGLE-1 heads converted with the base model: build_engines/trtllm/eagle.py) and
    draft_tokens_external (a draft engine and the BLS's draft loop:
    build_engines/trtllm/draft_target.py).  Not wired: medusa, explicit_draft_tokens (ReDrafter)."""

    NONE = "none"
    LOOKAHEAD = "lookahead_decoding"
    EAGLE = "eagle"
    DRAFT_TOKENS_EXTERNAL = "draft_tokens_external"


_EXECUTOR_H = Source(
    "NVIDIA/TensorRT-LLM",
    "v1.1.0",
    "cpp/include/tensorrt_llm/executor/executor.h",
    "0165bd7ac275dae69796767cdbb71ce1963506f3",
)
_DECODING_CONFIG = Source(
    "NVIDIA/TensorRT-LLM",
    "v1.1.0",
    "cpp/tensorrt_llm/executor/decodingConfig.cpp",
    "97e36d0b1ebd0cbaf13c560b4ef819119ba13009",
)
_NOT_AT_TAG = "read at a stored commit of unidentified version; the index holds no copy at v1.1.0"
# Each lookahead fact this kit relies on, with where it was read.
LOOKAHEAD_CITATIONS = {
    "defaults W=4 N=3 G=4 (kDefaultLookaheadDecoding{Window,Ngram,VerificationSet})": Citation(
        _EXECUTOR_H, "", False, _NOT_AT_TAG
    ),
    "legal: N >= 1, W >= 1, G >= 0; N == 1 needs W == 1 and G == 0 (LookaheadDecodingConfig::isLegal)": Citation(
        _DECODING_CONFIG, "", False, _NOT_AT_TAG
    ),
    "draft tokens per step = (N == 1 ? 0 : N - 2) + (W - 1 + G) * (N - 1) "
    "(calculateSpeculativeResourceTuple)": Citation(_DECODING_CONFIG, "", False, _NOT_AT_TAG),
    "model parameters lookahead_window_size / lookahead_ngram_size / lookahead_verification_set_size": Citation(
        Source(
            "NVIDIA/TensorRT-LLM",
            "v1.1.0",
            "triton_backend/all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt",
            "2a9abd9536aa62ad3e4b9314be9286b1b1be523b",
        ),
        "804-821",
        False,
        "read at 2a9abd9536 (triton_models_1.1.0.json rows); no stored copy at the r25.12 pin",
    ),
    "model parameter decoding_mode: lookahead": Citation(
        Source("triton-inference-server/tensorrtllm_backend", "r25.12", "docs/model_config.md"), "160"
    ),
}


@dataclass(frozen=True)
class LookaheadConfig:
    """TensorRT-LLM's LookaheadDecodingConfig (W, N, G), defaults as upstream's."""

    window_size: int = 4  # W: n-grams in the lookahead branch per step
    ngram_size: int = 3  # N: tokens per n-gram
    verification_set_size: int = 4  # G: n-grams verified per step

    def problems(self) -> list[str]:
        w, n, g = self.window_size, self.ngram_size, self.verification_set_size
        out = []
        if n < 1 or w < 1 or g < 0:
            out.append(
                f"'lookahead' (window, ngram, verification set) = ({w}, {n}, {g}): window and ngram must be "
                ">= 1, verification set >= 0"
            )
        elif n == 1 and (w != 1 or g != 0):
            out.append(f"'lookahead' ngram size 1 needs window size 1 and verification set size 0, got ({w}, {n}, {g})")
        return out

    @property
    def max_draft_len(self) -> int:
        """The draft tokens per step this config needs: the engine's --max_draft_len."""
        w, n, g = self.window_size, self.ngram_size, self.verification_set_size
        return (0 if n == 1 else n - 2) + (w - 1 + g) * (n - 1)


@dataclass(frozen=True)
class TrtLlmPlugins:
    """trtllm-build plugin/feature switches (tensorrt_llm/plugin/plugin.py, cli_plugin_args)."""

    gemm_plugin: bool = True  # --gemm_plugin auto (cuBLASLt GEMMs in the model dtype)
    context_fmha: bool = True  # fused attention in the context phase
    remove_input_padding: bool = True  # packed tokens; required by in-flight batching
    use_fused_mlp: bool = True  # one GEMM for gate+up of the gated MLP
    multiple_profiles: bool = True  # more TensorRT profiles: slower build, faster engine
    reduce_fusion: bool = False  # AllReduce+RMSNorm fusion (TP > 1 only)


@dataclass(frozen=True)
class TrtLlmServing:
    """Parameters of the `tensorrt_llm` Triton model (names: tensorrt_llm/config.pbtxt and
    triton_backend/inflight_batcher_llm/src/model_instance_state.cc)."""

    kv_cache_free_gpu_mem_fraction: float = 0.9  # of the GPU memory left after the engine loads
    enable_kv_cache_reuse: bool = True  # prefix caching across requests
    enable_chunked_context: bool = True  # long prompts prefilled in max_num_tokens chunks
    batch_scheduler_policy: SchedulerPolicy = SchedulerPolicy.GUARANTEED_NO_EVICT
    max_queue_delay_microseconds: int = 0  # the in-flight batcher needs no batching delay
    # Requests queued in front of the executor beyond the running batch; more are refused
    # (dynamic_batching.default_queue_policy.max_queue_size: upstream row limit.max_queue_size_source).
    max_queue_size: int = 64
    queue_timeout_s: float = 60.0  # no first token after this long: UNAVAILABLE (the relay's); 0: never
    cancellation_check_period_ms: int = 100
    # Structured output (JSON schema, regex, EBNF) constrained by the executor's xgrammar
    # guided decoder; the tokenizer info it needs is written beside the engine at render time.
    guided_decoding_backend: GuidedDecodingBackend = GuidedDecodingBackend.XGRAMMAR


def default_trtllm_version() -> str:
    """The TensorRT-LLM version of the default image (empty where none is supported)."""
    target = default_target()
    return target.version if target else ""


def default_triton_release() -> str:
    """The Triton release of the default image (empty where none is supported)."""
    target = default_target()
    return target.release if target else ""


@dataclass(frozen=True)
class EagleOptions:
    """The EAGLE heads and the draft tree the engine is built for (the converter's defaults)."""

    heads_dir: str = ""  # Hugging Face checkpoint of the EAGLE heads (--eagle_model_dir)
    max_draft_len: int = 63
    num_eagle_layers: int = 4  # the tree's depth: the most draft tokens accepted per step
    max_non_leaves_per_layer: int = 10
    choices: tuple[tuple[int, ...], ...] = ()  # the tensorrt_llm model's eagle_choices; (): the backend's default

    @classmethod
    def from_dict(cls, data: dict) -> "EagleOptions":
        d = dict(data)
        d["choices"] = tuple(tuple(int(i) for i in path) for path in d.get("choices", ()))
        return cls(**d)


@dataclass(frozen=True)
class DraftTargetOptions:
    """The draft model and the most draft tokens the target verifies per step."""

    draft_checkpoint: str = ""  # Hugging Face Llama checkpoint of the draft (same vocabulary as the target)
    max_draft_len: int = 10  # the target's --max_draft_len: the most num_draft_tokens a request may ask for

    @classmethod
    def from_dict(cls, data: dict) -> "DraftTargetOptions":
        return cls(**data)


class GpuOptions(Protocol):
    """What both GPU flows' options carry and the shared GPU rules read (TrtLlmOptions here,
    PyTorchOptions in build_engines/pytorch/spec.py)."""

    @property
    def trtllm_version(self) -> str: ...
    @property
    def tp_size(self) -> int: ...
    @property
    def pp_size(self) -> int: ...
    @property
    def gpu(self) -> GpuTarget: ...
    @property
    def kv_cache_dtype(self) -> KvCacheDtype: ...
    @property
    def world_size(self) -> int: ...


class GpuFlowFields(TypedDict):
    """The fields of TrtLlmOptions and PyTorchOptions that both take from the options of both GPU
    flows (build_engines/cli_options.py): the target image, the GPU, parallelism, calibration."""

    trtllm_version: str
    triton_release: str
    tp_size: int
    pp_size: int
    kv_cache_dtype: KvCacheDtype
    calib_dataset: str | None
    calib_size: int
    gpu: GpuTarget


class GpuServingFields(TypedDict):
    """The fields of TrtLlmServing and PyTorchServing that both take from those options."""

    kv_cache_free_gpu_mem_fraction: float
    max_queue_size: int
    queue_timeout_s: float
    guided_decoding_backend: GuidedDecodingBackend


@dataclass(frozen=True)
class TrtLlmOptions:
    # The Triton release and the TensorRT-LLM version it ships (build_engines/trtllm/versions.py);
    # empty where nothing configures one (the CPU image), which a TensorRT-LLM spec refuses.
    trtllm_version: str = field(default_factory=default_trtllm_version)
    triton_release: str = field(default_factory=default_triton_release)
    tp_size: int = 1
    pp_size: int = 1
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    paged_kv_cache: bool = True
    use_paged_context_fmha: bool = True  # needed by KV-cache reuse and chunked context
    plugins: TrtLlmPlugins = field(default_factory=TrtLlmPlugins)
    calib_dataset: str | None = None  # HF dataset name or local directory (quantize.py --calib_dataset)
    calib_size: int = 512
    calib_max_seq_length: int = 512
    awq_block_size: int = 128
    gpu: GpuTarget = field(default_factory=lambda: known_gpu(DEFAULT_GPU))
    speculative_decoding: SpeculativeDecoding = SpeculativeDecoding.NONE
    lookahead: LookaheadConfig = field(default_factory=LookaheadConfig)  # with speculative_decoding lookahead
    eagle: EagleOptions = field(default_factory=EagleOptions)  # with speculative_decoding eagle
    draft_target: DraftTargetOptions = field(default_factory=DraftTargetOptions)  # with draft_tokens_external
    lora: TrtLlmLora = field(default_factory=TrtLlmLora)  # LoRA adapters built in (build_engines/trtllm/lora.py)
    serving: TrtLlmServing = field(default_factory=TrtLlmServing)

    @property
    def world_size(self) -> int:
        return self.tp_size * self.pp_size

    @property
    def has_draft_engine(self) -> bool:
        """Draft-target decoding: a draft engine beside the target (build_engines/trtllm/draft_target.py)."""
        return self.speculative_decoding == SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL

    @property
    def engine_kv_cache_fraction(self) -> float:
        """Each engine's kv_cache_free_gpu_mem_fraction: with a draft engine on the same GPUs
        each takes half (NVIDIA's example gives each 0.5: row draft_target_requirements)."""
        return self.serving.kv_cache_free_gpu_mem_fraction / (2 if self.has_draft_engine else 1)


def trtllm_options_from_dict(data: dict) -> TrtLlmOptions:
    """Inverse of dataclasses.asdict (enums as values), for specs read back from build.json."""
    d = dict(data)
    d["kv_cache_dtype"] = KvCacheDtype(d["kv_cache_dtype"])
    d["speculative_decoding"] = SpeculativeDecoding(d["speculative_decoding"])
    d["lookahead"] = LookaheadConfig(**d.get("lookahead", {}))
    d["eagle"] = EagleOptions.from_dict(d.get("eagle", {}))
    d["draft_target"] = DraftTargetOptions.from_dict(d.get("draft_target", {}))
    d["lora"] = TrtLlmLora.from_dict(d.get("lora", {}))
    d["plugins"] = TrtLlmPlugins(**d["plugins"])
    d["gpu"] = GpuTarget(**d["gpu"])
    serving = dict(d["serving"])
    serving["batch_scheduler_policy"] = SchedulerPolicy(serving["batch_scheduler_policy"])
    if "guided_decoding_backend" in serving:  # older records lack it: this version's default
        serving["guided_decoding_backend"] = GuidedDecodingBackend(serving["guided_decoding_backend"])
    d["serving"] = TrtLlmServing(**serving)
    return TrtLlmOptions(**d)
