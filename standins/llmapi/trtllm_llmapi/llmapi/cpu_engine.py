"""The stand-in's generation: the project's CPU engine (model_repository.cpu_engine's step
loop over OpenVINO GenAI) on a built CPU engine.

Each generate_async call runs as the executor runs it: best_of sequences, sequence i a
request of its own with seed + i (executor/responses.py, LlmRequest::createChildRequest),
each answering with its own responses (RequestResults, LlmRequest::createResult).
SamplingParams become the CPU engine's requests (EngineInputs) by the table's rules: greedy as
row sampling.greedy says; temperature 1 when sampling without one; end_id -1 = no end id
(row executor.request); stop_token_ids = single-token stops.  What OpenVINO GenAI cannot do
(bad words, logit bias, beams, ...) is refused as a stand-in limitation.  The LLM's sampler
(samplers.py) decides what reaches the CPU engine: TorchSampler's requests go without their
penalties, bad words, seed and min_p (every one seeded 42, its one generator's seed: the CPU engine
has no generator shared across requests), TRTLLMSampler's with them, and its log probs are the
sampled token's only.  Iteration stats: one per CPU-engine step seen (StatsFeed), none while
it does not step."""

from __future__ import annotations

import collections
import json
import os
import random
import threading
from pathlib import Path

from contract import lora
from contract.model_configs import OpenVinoEngineParameters
from model_repository.engines.openvino.openvino_backend import OpenVinoBackend
from model_repository.engine_step.runner import EngineRunner
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from .._upstream import StandinLimitation
from ..executor.responses import FinishReason, RequestResults, Response, sequence_count, sequence_seed
from ..executor.result import Logprob
from . import samplers

ENGINE_VARIABLE = "TRTLLM_STANDIN_OPENVINO_ENGINE"
# SamplingParams fields the CPU engine cannot honour: (field, value that asks for nothing).
UNSUPPORTED = (("stop", None), ("embedding_bias", None),
               ("logits_processor", None), ("use_beam_search", False),
               ("prompt_logprobs", None), ("return_context_logits", False), ("return_generation_logits", False),
               ("lookahead_config", None), ("no_repeat_ngram_size", None))


def adapters(lora_config) -> list[lora.LoraAdapter]:
    """LoraConfig.lora_dir (row llm.lora) as the CPU engine's adapters, task ids in that order."""
    if lora_config is None:
        return []
    return [lora.read_adapter(Path(d), task_id) for task_id, d in enumerate(lora_config.lora_dir, start=1)]


def task_of(served: list[lora.LoraAdapter], lora_request) -> int:
    """The CPU engine's adapter for a LoRARequest (by its path); 0 without one."""
    if lora_request is None:
        return 0
    for adapter in served:
        if Path(adapter.weights).parent == Path(lora_request.lora_path).resolve():
            return adapter.task_id
    raise StandinLimitation(f"LoRARequest {lora_request.lora_path}: only the adapters of lora_config.lora_dir "
                            "(upstream loads others from lora_path when first used)")


def start_runner(max_batch_size: int, max_num_tokens: int, prefix_caching: bool,
                 served: list[lora.LoraAdapter] = ()) -> EngineRunner:
    engine = os.environ.get(ENGINE_VARIABLE)
    if not engine or not Path(engine).is_dir():
        raise StandinLimitation(f"set {ENGINE_VARIABLE} to a built CPU engine directory (the stand-in generates with it)")
    params = OpenVinoEngineParameters(engine_dir=Path(engine), max_num_seqs=max_batch_size,
                                      max_num_batched_tokens=max_num_tokens, enable_prefix_caching=prefix_caching,
                                      lora_adapters=lora.to_parameter(list(served)) if served else "")
    backend = OpenVinoBackend(params)
    backend.warm_up()
    runner = EngineRunner(backend, stream_interval=1)
    runner.start()
    return runner


def engine_request(prompt: list[int], p, lora_task_id: int = 0, seed: int | None = None,
                   sampler: str = samplers.TORCH) -> EngineInputs:
    """One sequence of the request (the CPU engine samples it alone, with `seed`), as `sampler` applies it."""
    asked = [name for name, neutral in UNSUPPORTED if getattr(p, name) not in (neutral, None, [], ())]
    if samplers.bad_token_ids(p, sampler):  # TRTLLMSampler masks them; TorchSampler ignores them
        asked.append("bad_token_ids")
    if asked:
        raise StandinLimitation(f"SamplingParams {asked} (OpenVINO GenAI cannot)")
    unread = samplers.unread_fields(p, sampler)  # TorchSampler ignores min_p (row pytorch.min_p)
    if unread:
        raise StandinLimitation(f"SamplingParams {unread} on {sampler} (not read upstream)")
    penalties = samplers.applies_request_fields(sampler)
    sampling = {"runtime_top_k": 1, "runtime_top_p": 0.0}
    if not p.is_greedy:
        sampling = {"runtime_top_k": p.top_k or 0, "runtime_top_p": p.top_p if p.top_p is not None else 1.0,
                    "temperature": p.temperature if p.temperature is not None else 1.0,
                    "seed": seed or 0}
    return EngineInputs(
        input_ids=tuple(prompt), input_lengths=len(prompt), request_output_len=p.max_tokens,
        end_id=p.end_id, pad_id=p.pad_id if p.pad_id is not None else 0,
        stop_words_list=tuple((t,) for t in (p.stop_token_ids or ())),
        repetition_penalty=p.repetition_penalty if penalties and p.repetition_penalty is not None else 1.0,
        presence_penalty=(p.presence_penalty or 0.0) if penalties else 0.0,
        frequency_penalty=(p.frequency_penalty or 0.0) if penalties else 0.0,
        min_tokens=p.min_tokens or 0, return_log_probs=bool(p.logprobs), streaming=True,
        # logprobs = K > 1: TorchSampler's top K of each position, from the CPU engine's scorer (row
        # result.logprobs.top_k); TRTLLMSampler: the sampled token's only
        options=GenerationOptions(num_return_sequences=1, lora_task_id=lora_task_id,
                                  top_logprobs=p.logprobs if p.logprobs and p.logprobs > 1 and not penalties else 0,
                                  **guide_options(p.guided_decoding)), **sampling)


# GuidedDecodingParams field -> the CPU engine's guide type (TensorRT-LLM's C++ names)
GUIDE_TYPES = {"json_object": "json", "json": "json_schema", "regex": "regex", "grammar": "ebnf_grammar"}


def guide_options(guided) -> dict:
    """SamplingParams.guided_decoding (row sampling.guided_decoding.fields) as GenerationOptions keywords."""
    if guided is None:
        return {}
    guided._validate()
    if guided.structural_tag:
        raise StandinLimitation("GuidedDecodingParams.structural_tag (OpenVINO GenAI's structural tags are not mapped)")
    for name, kind in GUIDE_TYPES.items():
        value = getattr(guided, name)
        if value:
            guide = "" if name == "json_object" else (value if isinstance(value, str) else json.dumps(value))
            return {"guided_decoding_guide_type": kind, "guided_decoding_guide": guide}
    return {}


class Admission:
    """At most max_batch_size requests in the CPU engine at once, the rest wait in order - what
    the LLM's scheduler does with LlmArgs.max_batch_size (OpenVINO's own bound is not strict)."""

    def __init__(self, runner: EngineRunner, max_batch_size: int) -> None:
        self._runner = runner
        self._max = max_batch_size
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: collections.deque = collections.deque()

    def submit(self, request: EngineInputs, sink) -> None:
        with self._lock:
            if self._running >= self._max:
                self._waiting.append((request, sink))
                return
            self._running += 1
        self._runner.submit(request, _Releasing(sink, self))

    def withdraw(self, sink) -> bool:
        """Drop a request that is still waiting (aborted before it ran); True if it was."""
        with self._lock:
            for item in self._waiting:
                if item[1] is sink:
                    self._waiting.remove(item)
                    return True
        return False

    def _ended(self) -> None:
        with self._lock:
            if not self._waiting:
                self._running -= 1
                return
            request, sink = self._waiting.popleft()
        self._runner.submit(request, _Releasing(sink, self))

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self._running, len(self._waiting)


class _Releasing:
    """A sink that frees its slot in the batch when its sequence ends."""

    def __init__(self, sink, admission: Admission) -> None:
        self._sink, self._admission = sink, admission

    def is_cancelled(self) -> bool:
        return self._sink.is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None) -> None:
        self._sink.send(ids, log_probs, cum_log_prob, final, sequence, top)
        if final:
            self._admission._ended()

    def fail(self, message, code=None) -> None:
        self._sink.fail(message, code)
        self._admission._ended()


class _SequenceSink:
    """The CPU runner's ResponseSink for one sequence: what it produced becomes that sequence's
    responses, as the executor makes them."""

    def __init__(self, output, results: RequestResults, index: int, params) -> None:
        self._output, self._results, self._index, self._params = output, results, index, params
        self._cum = 0.0
        self._last = None

    @property
    def finished(self) -> bool:
        return self._results.finished

    def is_cancelled(self) -> bool:
        return self._output.aborted()

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None) -> None:
        ids = [int(t) for t in ids]
        self._cum = float(cum_log_prob)
        self._last = ids[-1] if ids else self._last
        self._post(self._results.advance(self._index, ids, self._entries(ids, log_probs, top), self._cum,
                                         self._reason() if final else FinishReason.NOT_FINISHED))

    def fail(self, message, code=None) -> None:
        if getattr(code, "value", code) == "CANCELLED" or self._output.aborted():
            self._post(self._results.advance(self._index, [], [], self._cum, FinishReason.CANCELLED))
        else:  # an error response for the whole request (RequestError in the consumer)
            self._output.post(Response(self._output.request_id, error_msg=message))

    def _entries(self, ids, log_probs, top) -> list:
        if top is not None:  # logprobs = K > 1: exactly the top K, ranked (row result.logprobs.top_k)
            return [{int(t): Logprob(float(lp), rank=r + 1) for r, (t, lp) in enumerate(zip(row_ids, row_lps))}
                    for row_ids, row_lps in zip(top.ids, top.log_probs)]
        if self._params.logprobs:  # K = 1: the sampled token (upstream: the most likely one; the same when greedy)
            return [{t: Logprob(float(lp), rank=1)} for t, lp in zip(ids, log_probs)]
        return []

    def _reason(self) -> FinishReason:
        p = self._params
        if self._output.aborted():
            return FinishReason.CANCELLED
        if self._last is not None and self._last in (p.stop_token_ids or ()):
            return FinishReason.STOP_WORDS
        if self._last is not None and self._last == p.end_id:
            return FinishReason.END_ID
        return FinishReason.LENGTH

    def _post(self, response) -> None:
        if response is not None:
            self._output.post(response)


class CpuGenerator:
    """The CPU engine behind the stand-in LLM: best_of one-sequence requests per call."""

    def __init__(self, runner: EngineRunner, max_batch_size: int, served: list[lora.LoraAdapter],
                 on_stat, iteration_stats: bool, sampler: str = samplers.TORCH) -> None:
        self._runner = runner
        self._sampler = sampler
        self._torch_generator = random.Random(samplers.TORCH_GLOBAL_SEED)  # TorchSampler's one generator
        self._admission = Admission(runner, max_batch_size)
        self._served = served
        self._sinks: dict[int, list] = {}
        self._feed = StatsFeed(runner, self._admission, on_stat) if iteration_stats else None

    def submit(self, output, prompt: list, params, lora_request=None) -> None:
        task_id = task_of(self._served, lora_request)
        results = RequestResults(output.request_id, params, output._streaming)
        sinks = [_SequenceSink(output, results, i, params) for i in range(sequence_count(params))]
        requests = [engine_request(prompt, params, task_id, self._seed(params, i), self._sampler)
                    for i in range(len(sinks))]
        self._sinks = {k: v for k, v in self._sinks.items() if not v[0].finished} | {output.request_id: sinks}
        for request, sink in zip(requests, sinks):
            self._admission.submit(request, sink)

    def _seed(self, params, index: int):
        """TRTLLMSampler: the sequence's own seed (responses.sequence_seed); TorchSampler: its generator's next draw."""
        if samplers.applies_request_fields(self._sampler):
            return sequence_seed(params, index)
        return self._torch_generator.randrange(1, 2**31)

    def abort(self, request_id: int) -> None:
        """The runner sees is_cancelled() at its next step; sequences still waiting end now."""
        for sink in self._sinks.pop(request_id, []):
            if self._admission.withdraw(sink):
                sink.fail("cancelled before it started", "CANCELLED")

    def counts(self) -> tuple[int, int]:
        return self._admission.counts()

    def shutdown(self) -> None:
        if self._feed is not None:
            self._feed.stop()
        self._runner.shutdown()


class StatsFeed:
    """One iteration stat per CPU-engine step (row stats.iteration_json).  OpenVINO has no KV
    blocks: usage is reported as used/max of 1000 blocks."""

    def __init__(self, runner: EngineRunner, admission: Admission, on_stat, period_s: float = 0.005) -> None:
        self._runner, self._admission, self._on_stat, self._period_s = runner, admission, on_stat, period_s
        self._stopped = threading.Event()
        threading.Thread(target=self._run, name="standin-stats", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        seen = self._runner.steps
        while not self._stopped.wait(self._period_s):
            if self._runner.steps == seen:
                continue  # no iteration: no stat
            seen = self._runner.steps
            running, waiting = self._admission.counts()
            used = round(1000 * self._runner.backend_stats.get("kv_cache_usage", 0.0))
            self._on_stat(json.dumps({"iter": seen, "numActiveRequests": running, "numQueuedRequests": waiting,
                                      "kvCacheStats": {"maxNumBlocks": 1000, "usedNumBlocks": used,
                                                       "freeNumBlocks": 1000 - used, "tokensPerBlock": 32}}))
