"""The generation backend of the CPU engine: OpenVINO GenAI's ContinuousBatchingPipeline.

The library owns attention, the paged KV cache and the scheduler (chunked prefill mixed
with decodes).  This module only maps the engine contract onto it: one GenerationConfig
per request, token ids in and out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from contract import lora
from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.alternatives import Scorer
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engine_step.prefix_hits import PrefixHitEstimator
from model_repository.engine_step.runner import HandleStatus
from model_repository.engines.openvino.ir_scorer import IrScorer

WARM_UP_REQUEST_ID = 2**62  # never reached by the runner's counter

_STATUS = {
    "RUNNING": HandleStatus.RUNNING,
    "FINISHED": HandleStatus.FINISHED,
    "STOP": HandleStatus.STOPPED,
    "CANCEL": HandleStatus.CANCELLED,
    "IGNORED": HandleStatus.IGNORED,
}


# TensorRT-LLM's guide types (GuidedDecodingParams) -> OpenVINO GenAI's StructuredOutputConfig
# field; "json" (any JSON value, xgrammar's built-in JSON grammar upstream) is the empty schema.
_GUIDE_FIELDS = {"json": "json_schema", "json_schema": "json_schema", "regex": "regex", "ebnf_grammar": "grammar"}


def structured_output_config(guide_type: str, guide: str):
    import openvino_genai as og

    config = og.StructuredOutputConfig()
    setattr(config, _GUIDE_FIELDS[guide_type], guide if guide_type != "json" else "{}")
    return config


def assisted_generation_problems(request: EngineInputs, params: OpenVinoEngineParameters) -> list[str]:
    """What a speculative deployment (prompt lookup or a draft model) cannot honour.  min_tokens:
    OpenVINO GenAI's sampler, after rejecting draft tokens, sets the logit processor's count of
    generated tokens to the processed ones, prompt included (Sampler::sample:
    update_generated_len(prompt_len + min_generated_len - 1), src/cpp/src/sampling/sampler.cpp),
    so EOSPenaltyTransform::is_applicable (logit_transformers.hpp) stops holding EOS back early;
    read at openvino.genai master da1db864d, not at the 2026.4.1 tag (no copy of it here).
    Observed with 2026.4.1: prompt lookup, min_new_tokens 128, EOS generated at token 75."""
    if request.min_tokens > 0 and (params.prompt_lookup or params.draft_model):
        kind = "prompt-lookup decoding" if params.prompt_lookup else "draft-model speculative decoding"
        return [
            f"'min_tokens' ({request.min_tokens}) is not honoured by the CPU engine with {kind} "
            f"(OpenVINO GenAI 2026.4.1 lets EOS through early); send 0 or leave it out (the OpenAI front's "
            f"ignore_eos sends min_tokens)"
        ]
    return []


def generation_config(request: EngineInputs, params: OpenVinoEngineParameters | None = None):
    """`params`: the deployment's settings a request inherits (prompt lookup's draft sizes)."""
    import openvino_genai as og

    gc = og.GenerationConfig()
    if params is not None and params.prompt_lookup:  # every request of such a pipeline must say them
        gc.num_assistant_tokens, gc.max_ngram_size = params.num_assistant_tokens, params.max_ngram_size
    elif params is not None and params.draft_model:
        gc.num_assistant_tokens = params.num_assistant_tokens
    gc.max_new_tokens = request.request_output_len
    gc.min_new_tokens = request.min_tokens
    gc.repetition_penalty = request.repetition_penalty
    gc.presence_penalty = request.presence_penalty
    gc.frequency_penalty = request.frequency_penalty
    gc.logprobs = 1 if request.return_log_probs else 0
    single_token_stops = {w[0] for w in request.stop_words_list if len(w) == 1}
    if request.end_id >= 0:
        gc.eos_token_id = request.end_id
        single_token_stops.add(request.end_id)
    else:
        gc.ignore_eos = True
    gc.stop_token_ids = single_token_stops
    if request.is_greedy and request.options.num_return_sequences > 1:
        # n greedy answers (OpenAI's n with temperature 0): n identical samples of top-1.
        gc.do_sample, gc.top_k, gc.temperature, gc.rng_seed = True, 1, 1.0, request.seed
    elif request.is_greedy:
        gc.do_sample = False
    else:
        gc.do_sample = True
        gc.temperature = request.temperature
        gc.top_p = request.runtime_top_p if request.runtime_top_p > 0 else 1.0
        if request.runtime_top_k > 0:
            gc.top_k = request.runtime_top_k
        # GenerationConfig.min_p (LogitTransformers::MinPFilter); sampling, it must be in [0, 1): 1 keeps
        # only the most probable token, which top-k 1 does (generation_config.cpp's check, 2026.4.1)
        if request.min_p >= 1.0:
            gc.top_k = 1
        else:
            gc.min_p = request.min_p
        gc.rng_seed = request.seed
    options = request.options
    gc.num_return_sequences = options.num_return_sequences  # > 1: sampling only (the engine check says so)
    if options.guided_decoding_guide_type:
        gc.structured_output_config = structured_output_config(
            options.guided_decoding_guide_type, options.guided_decoding_guide
        )
    return gc


class OpenVinoHandle:
    def __init__(self, handle) -> None:
        self._h = handle

    def read(self) -> tuple[list[int], list[float]]:
        return self.read_sequences().get(0, ([], []))

    def read_sequences(self) -> dict[int, tuple[list[int], list[float]]]:
        """New ids and log probs per sequence; OpenVINO keys a request's parallel samples
        0..n-1 (their grouped ids) and sends only the sequences that advanced."""
        out: dict[int, tuple[list[int], list[float]]] = {}
        while self._h.can_read():
            for index, seq in self._h.read().items():
                ids, lps = out.setdefault(int(index), ([], []))
                ids.extend(seq.generated_ids)
                lps.extend(seq.generated_log_probs or [0.0] * len(seq.generated_ids))
        return out

    def status(self) -> HandleStatus:
        return _STATUS[self._h.get_status().name]

    def stop(self) -> None:
        self._h.stop()

    def cancel(self) -> None:
        self._h.cancel()


def engine_properties(params: OpenVinoEngineParameters) -> dict[str, object]:
    """The properties the engine is compiled with: its numerics pinned by the spec, never left to
    the host's defaults (bf16 activations on a CPU with native bf16, f32 elsewhere), and threads."""
    properties: dict[str, object] = {
        "INFERENCE_PRECISION_HINT": params.activation_precision,
        "KV_CACHE_PRECISION": params.kv_cache_precision,
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": params.dynamic_quantization_group_size,
    }
    if params.inference_threads:
        properties["INFERENCE_NUM_THREADS"] = params.inference_threads
    return properties


class OpenVinoBackend:
    # OpenVINO GenAI 2026.4.1 applies a StructuredOutputConfig to the first of a request's
    # num_return_sequences only: the forked samples run unconstrained (checked: regex
    # "[1-9][0-9]?" with n=3 gave "1", "10 * 2 + 1", "43 MLB work ...").
    guides_every_sequence = False

    def __init__(
        self, params: OpenVinoEngineParameters, on_prefix_lookup: Callable[[int, int], None] | None = None
    ) -> None:
        """`on_prefix_lookup(tokens looked up, tokens found)`: each prompt's estimated prefix-cache
        hits, when prefix caching is on (the library does not count them)."""
        import openvino as ov
        import openvino_genai as og

        self._ov = ov
        scheduler = og.SchedulerConfig()
        scheduler.cache_size = params.kv_cache_size_gb
        scheduler.max_num_seqs = params.max_num_seqs
        scheduler.max_num_batched_tokens = params.max_num_batched_tokens
        scheduler.dynamic_split_fuse = True
        scheduler.enable_prefix_caching = params.enable_prefix_caching
        properties = engine_properties(params)
        if params.prompt_lookup:
            properties["prompt_lookup"] = True
        if params.draft_model:  # compiled with the same pinned numerics as the main model
            properties["draft_model"] = og.draft_model(str(params.draft_dir), "CPU", **engine_properties(params))
        self._params = params
        self._prefix = PrefixHitEstimator() if params.enable_prefix_caching and on_prefix_lookup else None
        self._on_prefix_lookup = on_prefix_lookup
        self._adapters = {a.task_id: a for a in lora.from_parameter(params.lora_adapters)}
        # top_logprobs: the pipeline computes one log prob per position (GenerationConfig.logprobs
        # above 1 acts as 1), so the IR is compiled again, same numerics, to score those requests.
        self.scorer: Scorer | None = (
            IrScorer(params.engine_dir, engine_properties(params)) if params.top_logprobs else None
        )
        self._make = lambda extra=None: og.ContinuousBatchingPipeline(
            str(Path(params.engine_dir)), scheduler, "CPU", {**properties, **(extra or {})}
        )
        self._pipes: dict[int, Any] = {}  # openvino_genai.ContinuousBatchingPipeline (untyped)
        self._make_all()

    def _make_all(self) -> None:
        """The base model's pipeline, and one per LoRA adapter.  OpenVINO GenAI 2026.4.1 cannot
        batch different adapters (checked 2026-11-24): generate() with one request on no adapter
        and one on an adapter raised "LoRA adapters value must be the same for all requests"
        (continuous_batching/pipeline_impl.cpp:697); with two different adapters it raised
        nothing and gave both the first one's tokens; and it applies a switchable adapter in
        generate() only, not in the add_request()/step() path used here.  Each adapter's
        pipeline is therefore compiled with its adapter as constants (AdapterConfig MODE_STATIC:
        LoRASeparateTransform with the weights as constants, src/cpp/src/lora/adapter.cpp, read
        on openvino.genai's master, not at the tag): the same greedy answers as the switchable
        mode set once by a generate(), 1.28x its tok/s at one stream and 1.16x at 16 (6 and 3
        alternating rounds, 2026-11-26), whose LoRA tensors are state variables read at every
        step.  The base model's pipeline has no adapter: registered and never applied, adapters
        still cost its requests 0.86x of one stream's tok/s (8 alternating rounds)."""
        import openvino_genai as og

        self._pipes = {0: self._make()}
        for task_id, adapter in self._adapters.items():
            static = og.AdapterConfig(og.Adapter(adapter.weights), adapter.alpha, og.AdapterConfig.Mode.MODE_STATIC)
            self._pipes[task_id] = self._make({"adapters": static})

    @property
    def lora_task_ids(self) -> tuple[int, ...]:
        return tuple(self._adapters)

    @property
    def base_pipeline(self):
        return self._pipes[0]

    def recover(self) -> None:
        """New pipelines after a step raised: OpenVINO GenAI's stays in its scheduling phase
        (every later step raises "cannot be called when we are already in scheduling phase")."""
        self._pipes = {}
        self._make_all()
        self.warm_up()

    def warm_up(self) -> None:
        """Run one tiny request so the first real one does not pay for kernel compilation."""
        handle = self.add(
            WARM_UP_REQUEST_ID, EngineInputs(input_ids=(0, 0, 0, 0), input_lengths=4, request_output_len=2, end_id=-1)
        )
        while self.has_unfinished():
            self.step()
        handle.read()

    def add(self, request_id: int, request: EngineInputs) -> OpenVinoHandle:
        task_id = request.options.lora_task_id
        if (
            self._prefix is not None
            and self._on_prefix_lookup is not None  # both or neither
            and request_id != WARM_UP_REQUEST_ID
            and task_id == 0
        ):
            self._on_prefix_lookup(*self._prefix.lookup(request.input_ids))
        ids = self._ov.Tensor(np.asarray([request.input_ids], dtype=np.int64))
        pipe = self._pipes[task_id]  # the engine model refused unknown ids
        return OpenVinoHandle(pipe.add_request(request_id, ids, generation_config(request, self._params)))

    def step(self) -> None:
        for pipe in self._pipes.values():
            if pipe.has_non_finished_requests():
                pipe.step()

    def has_unfinished(self) -> bool:
        return any(pipe.has_non_finished_requests() for pipe in self._pipes.values())

    def stats(self) -> dict[str, float]:
        metrics = [pipe.get_metrics() for pipe in self._pipes.values()]
        return {
            "kv_cache_usage": max(float(m.cache_usage) for m in metrics) / 100.0,
            "requests": float(sum(m.requests for m in metrics)),
            "scheduled_requests": float(sum(m.scheduled_requests for m in metrics)),
        }
