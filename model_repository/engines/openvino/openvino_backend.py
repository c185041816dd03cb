"""The generation backend of the CPU engine: OpenVINO GenAI's ContinuousBatchingPipeline.

The library owns attention, the paged KV cache and the scheduler (chunked prefill mixed
with decodes).  This module only maps the engine contract onto it: one GenerationConfig
per request, token ids in and out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.runner import HandleStatus
from model_repository.engine_step.engine_inputs import EngineInputs

WARM_UP_REQUEST_ID = 2**62  # never reached by the runner's counter

_STATUS = {
    "RUNNING": HandleStatus.RUNNING,
    "FINISHED": HandleStatus.FINISHED,
    "STOP": HandleStatus.STOPPED,
    "CANCEL": HandleStatus.CANCELLED,
    "IGNORED": HandleStatus.IGNORED,
}


def generation_config(request: EngineInputs):
    import openvino_genai as og

    gc = og.GenerationConfig()
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
    if request.is_greedy:
        gc.do_sample = False
    else:
        gc.do_sample = True
        gc.temperature = request.temperature
        gc.top_p = request.runtime_top_p if request.runtime_top_p > 0 else 1.0
        if request.runtime_top_k > 0:
            gc.top_k = request.runtime_top_k
        gc.rng_seed = request.seed
    return gc


class OpenVinoHandle:
    def __init__(self, handle) -> None:
        self._h = handle

    def read(self) -> tuple[list[int], list[float]]:
        ids: list[int] = []
        lps: list[float] = []
        while self._h.can_read():
            for out in self._h.read().values():  # one sequence: num_return_sequences == 1
                ids.extend(out.generated_ids)
                lps.extend(out.generated_log_probs or [0.0] * len(out.generated_ids))
        return ids, lps

    def status(self) -> HandleStatus:
        return _STATUS[self._h.get_status().name]

    def stop(self) -> None:
        self._h.stop()

    def cancel(self) -> None:
        self._h.cancel()


def engine_properties(params: OpenVinoEngineParameters) -> dict[str, object]:
    """The properties the engine is compiled with: its numerics pinned by the spec, never left to
    the host's defaults (bf16 activations on a CPU with native bf16, f32 elsewhere), and threads."""
    properties: dict[str, object] = {"INFERENCE_PRECISION_HINT": params.activation_precision,
                                     "KV_CACHE_PRECISION": params.kv_cache_precision,
                                     "DYNAMIC_QUANTIZATION_GROUP_SIZE": params.dynamic_quantization_group_size}
    if params.inference_threads:
        properties["INFERENCE_NUM_THREADS"] = params.inference_threads
    return properties


class OpenVinoBackend:
    def __init__(self, params: OpenVinoEngineParameters) -> None:
        import openvino as ov
        import openvino_genai as og

        self._ov = ov
        scheduler = og.SchedulerConfig()
        scheduler.cache_size = params.kv_cache_size_gb
        scheduler.max_num_seqs = params.max_num_seqs
        scheduler.max_num_batched_tokens = params.max_num_batched_tokens
        scheduler.dynamic_split_fuse = True
        scheduler.enable_prefix_caching = params.enable_prefix_caching
        self._pipe = og.ContinuousBatchingPipeline(str(Path(params.engine_dir)), scheduler, "CPU", engine_properties(params))

    def warm_up(self) -> None:
        """Run one tiny request so the first real one does not pay for kernel compilation."""
        handle = self.add(WARM_UP_REQUEST_ID, EngineInputs(input_ids=(0, 0, 0, 0), input_lengths=4, request_output_len=2, end_id=-1))
        while self.has_unfinished():
            self.step()
        handle.read()

    def add(self, request_id: int, request: EngineInputs) -> OpenVinoHandle:
        ids = self._ov.Tensor(np.asarray([request.input_ids], dtype=np.int64))
        return OpenVinoHandle(self._pipe.add_request(request_id, ids, generation_config(request)))

    def step(self) -> None:
        self._pipe.step()

    def has_unfinished(self) -> bool:
        return self._pipe.has_non_finished_requests()

    def stats(self) -> dict[str, float]:
        m = self._pipe.get_metrics()
        return {"kv_cache_usage": float(m.cache_usage) / 100.0, "requests": float(m.requests),
                "scheduled_requests": float(m.scheduled_requests)}
