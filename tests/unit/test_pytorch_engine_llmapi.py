"""The PyTorch engine (engines/pytorch/engine.py) on the stand-in LLM API with its toy model:
the result stream is upstream's (one sequence per response, best_of re-sorting, stop words
trimmed only at the request's last response, IterationResult done after its first timeout),
so these tests hold the engine to what the real LLM API hands it, not to what a fake assumes.

Each n > 1 answer is compared with n = 1 runs of the same request: sample i is the executor's
sequence i, seeded seed + i (LlmRequest::createChildRequest; standins/llmapi/trtllm_llmapi/
executor/responses.py), so on the stand-in it must equal a one-sample run with seed + i."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest

from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.engine_step.engine_metrics import MetricsRecorder
from model_repository.engines.pytorch.engine import EngineSettings, LlmEngine

SAMPLED = EngineInputs(input_ids=(3, 1, 4, 1, 5), input_lengths=5, request_output_len=12, end_id=-1, streaming=True,
                       runtime_top_k=8, runtime_top_p=0.0, temperature=1.0, seed=21, return_log_probs=True,
                       options=GenerationOptions(top_logprobs=8))  # logprobs 8 = top_k: the sampled token is in them


@pytest.fixture
def toy(tmp_path_factory) -> Path:
    model = tmp_path_factory.mktemp("toy")
    (model / "config.json").write_text(json.dumps({"vocab_size": 48, "standin_toy_model": {"iteration_s": 0.001}}))
    return model


class Recorder:
    """A ResponseSink that keeps each sample's stream."""

    def __init__(self, n: int) -> None:
        self.ids = {i: [] for i in range(n)}
        self.log_probs = {i: [] for i in range(n)}
        self.cum = {i: None for i in range(n)}
        self.responses = {i: 0 for i in range(n)}
        self.finals, self.failed, self.done = set(), None, threading.Event()
        self._n = n

    def is_cancelled(self) -> bool:
        return False

    def send(self, ids, log_probs, cum, final, sequence=0, top=None) -> None:
        assert sequence not in self.finals, f"sample {sequence} got a response after its final"
        self.ids[sequence] += list(ids)
        self.log_probs[sequence] += [float(x) for x in log_probs]
        self.cum[sequence] = float(cum)
        self.responses[sequence] += 1
        if final:
            self.finals.add(sequence)
            if len(self.finals) == self._n:
                self.done.set()

    def fail(self, message, code=None) -> None:
        self.failed = (message, code)
        self.done.set()

    def sample(self, i: int) -> tuple[list[int], list[float], float]:
        return self.ids[i], self.log_probs[i], self.cum[i]


# Seeded samples are reproducible only under the sampler that applies a request's own seed: at 1.2.1
# TorchSampler draws every request from one generator (standins/llmapi/.../samplers.py), so the
# kit picks TRTLLMSampler for a deployment that takes seeds (build_engines/pytorch/sampler.py).
SEEDED = "TRTLLMSampler"
SAMPLED_SEEDED = dataclasses.replace(SAMPLED, options=GenerationOptions())  # it returns the sampled token's log prob only


def start(trtllm, model: Path, stats_period_s: float = 1.0, params=None,
          sampler_type: str = "auto") -> tuple[LlmEngine, dict]:
    made = {}

    def make_llm():
        made["llm"] = trtllm.LLM(str(model), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(),
                                 enable_iter_perf_stats=True, max_batch_size=16, sampler_type=sampler_type)
        return made["llm"]

    engine = LlmEngine(make_llm, params or trtllm.SamplingParams,
                       EngineSettings(max_batch_size=16, capacity=None, queue_timeout_s=None, cancel_period_s=0.01,
                                      stats_period_s=stats_period_s), MetricsRecorder())
    engine.start(10)
    return engine, made


def run(engine: LlmEngine, request: EngineInputs) -> Recorder:
    sink = Recorder(request.options.num_return_sequences)
    engine.submit(request, sink)
    assert sink.done.wait(20), "the request did not end"
    assert sink.failed is None, sink.failed
    return sink


def with_n(request: EngineInputs, n: int, **changes) -> EngineInputs:
    return dataclasses.replace(request, options=dataclasses.replace(request.options, num_return_sequences=n), **changes)


@pytest.mark.parametrize("streaming", [True, False])
def test_each_of_n_samples_is_the_one_sample_run_with_its_seed(trtllm, toy, streaming):
    """Item 2 of issue 33: tokens, log probs and cumulative log prob of every sample equal a
    one-sample run seeded seed + i - no token or log prob repeated from another sample's step."""
    engine, _ = start(trtllm, toy, sampler_type=SEEDED)
    try:
        request = dataclasses.replace(SAMPLED_SEEDED, streaming=streaming)
        many = run(engine, with_n(request, 3))
        alone = [run(engine, with_n(request, 1, seed=request.seed + i)) for i in range(3)]
    finally:
        engine.shutdown()
    for i in range(3):
        ids, lps, cum = many.sample(i)
        assert len(ids) == request.request_output_len, f"sample {i}: {len(ids)} tokens for max_tokens 12: {ids}"
        assert (ids, lps) == alone[i].sample(0)[:2], f"sample {i} differs from its one-sample run"
        assert cum == pytest.approx(alone[i].sample(0)[2]) == pytest.approx(sum(lps))
    assert len({tuple(many.ids[i]) for i in range(3)}) == 3  # three different samples, not one thrice
    if not streaming:
        assert set(many.responses.values()) == {1}  # each sample whole, in its final response


def test_a_sample_that_stops_early_ends_as_it_would_alone(trtllm, toy):
    """A stop token is cut from a sample by the LLM API only at the request's last response
    (result.py 413-424): with n = 2, the sample that stops first keeps it there - the engine
    must not pass it on, so both samples equal their one-sample runs (where it is cut)."""
    engine, _ = start(trtllm, toy, sampler_type=SEEDED)
    try:
        free = [run(engine, with_n(SAMPLED_SEEDED, 1, seed=SAMPLED_SEEDED.seed + i)).ids[0] for i in range(2)]
        # a stop token sample 0 meets early and sample 1 never does: sample 0 ends first
        stop = next(t for t in free[0][1:6] if t not in free[1])
        request = with_n(SAMPLED_SEEDED, 2, stop_words_list=((stop,),))
        both = run(engine, request)
        alone = [run(engine, with_n(request, 1, seed=SAMPLED_SEEDED.seed + i)) for i in range(2)]
    finally:
        engine.shutdown()
    assert stop not in alone[0].ids[0] and len(alone[0].ids[0]) < len(free[0])
    for i in range(2):
        assert both.sample(i)[:2] == alone[i].sample(0)[:2], f"sample {i}: {both.ids[i]} vs {alone[i].ids[0]}"
        assert stop not in both.ids[i]


def test_best_of_more_than_n_answers_the_best_n_whole(trtllm, toy):
    """With best_of > n, `outputs` re-sorts all best_of sequences by cumulative log prob and
    renumbers them at every read (result.py 311-327): the engine answers with the best n, each
    whole - the best best_of one-sample runs, ranked by their cumulative log prob."""
    best_of = 4

    def with_best_of(**kwargs):
        return trtllm.SamplingParams(**kwargs, best_of=best_of)

    engine, _ = start(trtllm, toy, params=with_best_of, sampler_type=SEEDED)
    try:
        both = run(engine, with_n(SAMPLED_SEEDED, 2))
    finally:
        engine.shutdown()
    engine, _ = start(trtllm, toy, sampler_type=SEEDED)
    try:
        alone = [run(engine, with_n(SAMPLED_SEEDED, 1, seed=SAMPLED_SEEDED.seed + i)).sample(0) for i in range(best_of)]
    finally:
        engine.shutdown()
    ranked = sorted(alone, key=lambda s: s[2], reverse=True)
    assert [both.sample(i) for i in range(2)] == [ranked[0], ranked[1]]


def usage_when(engine: LlmEngine, check, timeout_s: float = 5.0) -> float:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not check(engine.kv_cache_usage):
        time.sleep(0.01)
    return engine.kv_cache_usage


def test_the_kv_cache_gauge_reads_zero_once_the_llm_is_idle(trtllm, toy):
    """Item 5 of issue 33: the last iteration stat still counts the finished request's blocks,
    and no stat follows while nothing runs; the gauge must not keep that value while idle."""
    engine, _ = start(trtllm, toy, stats_period_s=0.05)
    sink = Recorder(2)
    try:
        engine.submit(with_n(SAMPLED, 2, request_output_len=300), sink)
        busy = usage_when(engine, lambda u: u > 0)
        assert sink.done.wait(20) and sink.failed is None
        idle = usage_when(engine, lambda u: u == 0, timeout_s=2.0)
    finally:
        engine.shutdown()
    assert busy > 0, "the gauge never showed the running request"
    assert idle == 0.0, f"the gauge still reads {idle} with nothing running"


def test_the_kv_cache_gauge_follows_a_request_past_a_slow_iteration(trtllm, tmp_path):
    """An iteration longer than the stats timeout marks the LLM's IterationResult done, and only
    a new request re-arms it (result.py 833-883, executor.py 238-250): the gauge must keep
    following the running request (its blocks grow as it generates)."""
    model = tmp_path / "slow"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vocab_size": 48, "standin_toy_model": {"iteration_s": 0.004}}))
    engine, made = start(trtllm, model, stats_period_s=0.05)
    sink = Recorder(1)
    try:
        engine.submit(with_n(SAMPLED, 1, request_output_len=600), sink)
        usage_when(engine, lambda u: u > 0)
        made["llm"]._generator.stall(0.4)  # one iteration takes 8 stats periods
        time.sleep(0.6)
        after_stall = engine.kv_cache_usage
        later = usage_when(engine, lambda u: u > after_stall, timeout_s=1.5)
        assert not sink.done.is_set(), "the request ended before the gauge could be read"
    finally:
        engine.shutdown()
    assert later > after_stall, f"the gauge stayed at {after_stall} while the request kept generating"
