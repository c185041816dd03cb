"""Lay out the model repository for a built engine (the `repo` step).

The engine directory is self-contained (engine + tokenizer + generation_config.json +
build.json), so the repository depends on nothing else.  Preprocessing, postprocessing and
the ensemble are the same for both engines; only the engine step differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from build_engines.pytorch.repository import MODEL_SUBDIR, pytorch_engine_model
from build_engines.render import RenderedModel, ensemble_config, python_model_config, write_repository
from build_engines.served_identity import served_identity
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from build_engines.trtllm import lora as trtllm_lora
from build_engines.trtllm.build import TOKENIZER_SUBDIR
from build_engines.trtllm.repository import bls_model, draft_relay, relay_model, trtllm_engine_models
from contract import lora, names
from contract.build_record import BuildRecord
from contract.features import (
    CPU_ENGINE,
    EngineFeatures,
    Feature,
    pytorch_engine,
    trtllm_engine,
    with_draft_model,
    with_guided_decoding,
    with_lora,
    with_top_logprobs,
    withhold,
)
from contract.lora import LoraAdapter
from contract.model_configs import (
    OpenVinoEngineParameters,
    PostprocessingParameters,
    PreprocessingParameters,
)
from contract.model_parameters import to_parameters
from contract.tensors import (
    ENGINE_INPUTS,
    ENGINE_OUTPUTS,
    POSTPROCESSING_INPUTS,
    POSTPROCESSING_OUTPUTS,
    PREPROCESSING_INPUTS,
    PREPROCESSING_OUTPUTS,
)
from model_repository.text import tokenizer_class

if TYPE_CHECKING:
    from build_engines.pytorch.spec import PyTorchServing
    from build_engines.trtllm.options import TrtLlmServing


def top_logprobs_withheld(spec: BuildSpec, numerics: dict | None) -> str:
    """Why this CPU deployment must not serve top_logprobs although asked to ('' when it may):
    under its served numerics the alternatives would not describe the sampled tokens
    (build_engines/openvino/numerics.py top_logprobs_problem; `numerics`: build.json's)."""
    from build_engines.openvino.numerics import served_numerics, top_logprobs_problem

    if spec.backend != EngineBackend.OPENVINO or not spec.openvino.top_logprobs:
        return ""
    served = served_numerics(spec.openvino.numerics, spec.openvino.pinned_numerics(), numerics or {})
    problem = top_logprobs_problem(served, numerics or {})
    return f"{problem}; `--numerics exact` serves them" if problem else ""


def engine_features(spec: BuildSpec, lora: bool = False, numerics: dict | None = None) -> EngineFeatures:
    """What the engine behind the ensemble honours (contract/features.py); `numerics`: build.json's
    (the CPU engine's served setting decides whether it answers top_logprobs)."""
    if spec.backend == EngineBackend.TENSORRT_LLM:
        engine = trtllm_engine(spec.trtllm.trtllm_version)  # the sampling fields its version honours
    elif spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH:
        engine = pytorch_engine(spec.pytorch.trtllm_version, spec.pytorch.sampler_plan.sampler)
    else:
        engine = CPU_ENGINE
    serving: dict[EngineBackend, TrtLlmServing | PyTorchServing] = {
        EngineBackend.TENSORRT_LLM: spec.trtllm.serving,
        EngineBackend.TENSORRT_LLM_PYTORCH: spec.pytorch.serving,
    }
    if spec.backend in serving and serving[spec.backend].guided_decoding_backend.parameter:
        engine = with_guided_decoding(engine)
    if spec.backend == EngineBackend.OPENVINO and spec.openvino.top_logprobs:
        withheld = top_logprobs_withheld(spec, numerics)
        if withheld:  # both come from the scorer (the prompt's must agree with the generated tokens')
            engine = withhold(withhold(engine, Feature.TOP_LOG_PROBS, withheld), Feature.PROMPT_LOG_PROBS, withheld)
        else:
            engine = with_top_logprobs(engine)
    if spec.backend == EngineBackend.TENSORRT_LLM and spec.trtllm.has_draft_engine:
        engine = with_draft_model(engine)
    return with_lora(engine) if lora else engine


def text_models(
    tokenizer_dir: Path, spec: BuildSpec, record: BuildRecord, served: dict[str, int] | None = None
) -> list[RenderedModel]:
    """Preprocessing and postprocessing: identical for every engine (preprocessing knows which
    features the engine has, to refuse requests for others, the LoRA adapters it serves:
    name -> lora_task_id, and what the engine computes with, for clients to read)."""
    limits = spec.limits
    engine = engine_features(spec, bool(served), record.numerics)
    identity = served_identity(spec, record)
    tokenizer = tokenizer_class.resolve(tokenizer_dir)
    pre = PreprocessingParameters(
        tokenizer_dir=tokenizer_dir,
        max_input_len=limits.max_input_len,
        max_seq_len=limits.max_seq_len,
        default_max_tokens=limits.default_max_tokens,
        engine_label=engine.label,
        engine_features=engine.to_parameter(),
        engine_withheld=engine.withheld_parameter(),
        lora_adapters=lora.served_to_parameter(served or {}),
        system_fingerprint=identity.system_fingerprint,
        served_numerics=identity.numerics,
        reproducible=identity.reproducible,
        tokenizer_class=tokenizer.path,
        tokenizer_class_transformers=tokenizer.transformers_version,
    )
    post = PostprocessingParameters(tokenizer_dir=tokenizer_dir)
    return [
        RenderedModel(
            python_model_config(
                names.PREPROCESSING,
                PREPROCESSING_INPUTS,
                PREPROCESSING_OUTPUTS,
                max_batch_size=limits.max_batch_size,
                parameters=to_parameters(pre),
            ),
            "model_repository.models.preprocessing.model",
        ),
        # One instance: the responses of a stream must be detokenized in order.
        RenderedModel(
            python_model_config(
                names.POSTPROCESSING,
                POSTPROCESSING_INPUTS,
                POSTPROCESSING_OUTPUTS,
                max_batch_size=limits.max_batch_size,
                parameters=to_parameters(post),
            ),
            "model_repository.models.postprocessing.model",
        ),
    ]


def openvino_engine_model(
    engine_dir: Path,
    spec: BuildSpec,
    adapters: Sequence[LoraAdapter] = (),
    fusion: dict | None = None,
    repository: Path | None = None,
    numerics: dict | None = None,
) -> RenderedModel:
    """`fusion`: the engine's fused projections (build.json); adapters of fused modules are
    rewritten for them into the engine model's directory of `repository` (build_engines/openvino/fused_lora.py).
    `numerics`: the build's measured numerics (build.json), where the spec's `fast` choice is read."""
    from build_engines.openvino.numerics import served_numerics

    served = served_numerics(spec.openvino.numerics, spec.openvino.pinned_numerics(), numerics or {})
    files: dict[str, bytes] = {}
    if adapters and fusion and fusion.get("fused_modules"):
        from build_engines.openvino.fused_lora import for_fused_engine

        assert repository is not None, "adapters of a fused engine are rewritten into the repository"
        adapters, files = for_fused_engine(list(adapters), fusion, repository.resolve() / names.OPENVINO_ENGINE)
    params = OpenVinoEngineParameters(
        engine_dir=engine_dir,
        max_num_seqs=spec.limits.max_batch_size,
        max_num_batched_tokens=spec.limits.max_num_tokens,
        kv_cache_size_gb=spec.openvino.kv_cache_size_gb,
        enable_prefix_caching=spec.openvino.enable_prefix_caching,
        inference_threads=spec.openvino.inference_threads,
        max_queue_size=spec.openvino.max_queue_size,
        queue_timeout_s=spec.openvino.queue_timeout_s,
        stream_interval=spec.openvino.stream_interval,
        activation_precision=served.activation_precision,
        kv_cache_precision=served.kv_cache_precision,
        dynamic_quantization_group_size=served.dynamic_quantization_group_size,
        prompt_lookup=spec.openvino.prompt_lookup,
        num_assistant_tokens=spec.openvino.num_assistant_tokens,
        max_ngram_size=spec.openvino.max_ngram_size,
        draft_model=bool(spec.openvino.draft_checkpoint),
        top_logprobs=spec.openvino.top_logprobs and not top_logprobs_withheld(spec, numerics),
        lora_adapters=lora.to_parameter(list(adapters)) if adapters else "",
    )
    config = python_model_config(
        names.OPENVINO_ENGINE,
        ENGINE_INPUTS,
        ENGINE_OUTPUTS,
        max_batch_size=spec.limits.max_batch_size,
        parameters=to_parameters(params),
        decoupled=True,
        dynamic_batching=False,
    )
    return RenderedModel(config, "model_repository.models.openvino_llm.model", files)


def render_repository(
    engine_dir: Path, out_dir: Path, *, relay: bool = False, decoupled: bool = True, lora_dir: Path | None = None
) -> list[str]:
    """Render the repository for a built engine.  `relay` puts the CPU engine behind the
    engine relay, exactly as `tensorrt_llm` sits on a GPU: the GPU wiring, tested on CPU.
    `decoupled=False` is NVIDIA's `decoupled_mode: false`: the ensemble and the BLS answer
    with one response per request (unary infer() works; streaming and batched requests are
    refused), the engine relay in front of the engine model.  `lora_dir`: PEFT adapters the CPU
    engine serves beside the base model (contract/lora.py)."""
    engine_dir = engine_dir.resolve()
    record = BuildRecord.read(engine_dir)
    spec = BuildSpec.from_dict(record.spec)
    serve_time = (EngineBackend.OPENVINO, EngineBackend.TENSORRT_LLM_PYTORCH)  # adapters loaded when serving
    adapters = lora.discover(lora_dir) if lora_dir is not None and spec.backend in serve_time else []
    served = {a.name: a.task_id for a in adapters}
    if spec.backend == EngineBackend.TENSORRT_LLM:  # built into the engine (build_engines/trtllm/lora.py)
        served = trtllm_lora.served(spec.trtllm.lora)
        built = spec.trtllm.lora.adapters
        if lora_dir is not None and tuple(trtllm_lora.lora_options(lora_dir).adapters) != built:
            raise lora.LoraError(
                f"'lora_dir': this engine was built for the adapters {list(built)}; "
                f"build it again with --lora-dir {lora_dir}"
            )
    batch = spec.limits.max_batch_size
    relay = relay or not decoupled
    if spec.backend == EngineBackend.TENSORRT_LLM:
        tokenizer_dir, target = engine_dir / TOKENIZER_SUBDIR, names.TRTLLM_ENGINE
        engines = trtllm_engine_models(engine_dir, spec, tokenizer_dir, decoupled)
    else:  # an engine model that serves the contract itself (CPU engine, PyTorch backend)
        pytorch = spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH
        max_rank = trtllm_lora.lora_options(lora_dir).max_rank if adapters and lora_dir is not None else 0
        engine = (
            pytorch_engine_model(engine_dir, spec, adapters, max_rank)
            if pytorch
            else openvino_engine_model(engine_dir, spec, adapters, record.fusion, out_dir, record.numerics)
        )
        engines = [engine] + ([relay_model(engine_dir, engine.config.name, batch, decoupled)] if relay else [])
        tokenizer_dir, target = (engine_dir / MODEL_SUBDIR if pytorch else engine_dir), engine.config.name
    step = names.ENGINE_RELAY if spec.backend == EngineBackend.TENSORRT_LLM or relay else target
    draft = draft_relay(spec) if spec.backend == EngineBackend.TENSORRT_LLM else ("", 0)
    bls = bls_model(engine_dir, target, batch, decoupled, spec.trtllm.serving.queue_timeout_s, draft)
    models = text_models(tokenizer_dir, spec, record, served) + engines + [bls]
    models.append(RenderedModel(ensemble_config(step, batch), None))
    write_repository(models, out_dir)
    return [m.config.name for m in models]
