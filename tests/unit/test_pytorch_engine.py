"""The PyTorch-backend engine's pure parts: SamplingParams keywords (held to the LLM-API table),
LLM(...) keywords, step outputs, the MPI world, and the asyncio engine driven with a fake LLM."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contract.model_configs import KvCacheDtype, PyTorchEngineParameters
from contract.upstream.llmapi import SUPPORTED_VERSIONS, llmapi
from model_repository.engine_step.runner import FailCode
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from model_repository.engine_step.engine_metrics import MetricsRecorder
from model_repository.engines.pytorch import mpi_world, outputs
from model_repository.engines.pytorch.engine import EngineSettings, LlmEngine
from model_repository.engines.pytorch.llm_config import llm_kwargs
from model_repository.engines.pytorch.sampling import guided_decoding_kwargs, problems, sampling_kwargs

REQUEST = EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=8, end_id=2, streaming=True)


# --- SamplingParams ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("request_", [
    REQUEST,
    EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, runtime_top_k=40, runtime_top_p=0.9,
                 temperature=0.7, seed=5, stop_words_list=((7,), (8, 9)), bad_words_list=((11,),), min_tokens=2,
                 return_log_probs=True, end_id=-1, repetition_penalty=1.1, presence_penalty=0.2),
])
def test_every_keyword_is_a_sampling_params_field_of_the_table(version, request_):
    assert set(sampling_kwargs(request_)) <= set(llmapi(version).sampling_fields)


def test_greedy_is_top_k_one_and_sampling_leaves_unset_limits_none():
    assert sampling_kwargs(REQUEST)["top_k"] == 1 and "temperature" not in sampling_kwargs(REQUEST)
    sampled = sampling_kwargs(EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, runtime_top_k=0,
                                           runtime_top_p=0.9, temperature=0.7, seed=5))
    # top_p 0 would mean greedy in the LLM API (row sampling.greedy): "not set" is None there
    assert (sampled["top_k"], sampled["top_p"], sampled["temperature"], sampled["seed"]) == (None, 0.9, 0.7, 5)


def test_words_of_one_token_go_to_the_llm_longer_ones_are_watched_or_refused():
    r = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, stop_words_list=((7,), (8, 9)),
                     bad_words_list=((11,),), end_id=-1)
    kwargs = sampling_kwargs(r)
    assert (kwargs["stop_token_ids"], kwargs["bad_token_ids"], kwargs["end_id"]) == ([7], [11], -1)
    assert kwargs["detokenize"] is False and kwargs["logprobs"] is None
    assert problems(r) == []
    refused = problems(EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, bad_words_list=((1, 2),)))
    assert len(refused) == 1 and refused[0].startswith("'bad_words_list'")


# --- LLM(...) --------------------------------------------------------------------------------------
PARAMS = PyTorchEngineParameters(engine_dir=Path("/e"), model_dir=Path("/e/model"), max_batch_size=8,
                                 max_num_tokens=512, max_seq_len=2048, max_input_len=1536)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_llm_keywords_are_constructor_parameters_or_llm_args_fields(version):
    api = llmapi(version)
    allowed = set(api.signature("LLM.__init__").names()) | set(api.rule("llm.args.fields").extra["fields"])
    kwargs = llm_kwargs(PARAMS, lambda **kv: kv)
    assert set(kwargs) <= allowed
    assert set(kwargs["kv_cache_config"]) <= set(api.rule("kv_cache_config.fields").extra["fields"])
    assert kwargs["skip_tokenizer_init"] is True and "dtype" not in kwargs["kv_cache_config"]
    # guided decoding: the LLM's executor builds the xgrammar decoder from the LLM's tokenizer
    # (row llm.guided.tokenizer), so the LLM loads it
    guided = llm_kwargs(dataclasses.replace(PARAMS, guided_decoding_backend="xgrammar"), lambda **kv: kv)
    assert set(guided) <= allowed and guided["guided_decoding_backend"] == "xgrammar"
    assert guided["skip_tokenizer_init"] is False and "guided_decoding_backend" not in kwargs
    # LoRA: LoraConfig over the served adapters' directories (row llm.lora)
    from contract import lora
    adapters = lora.to_parameter([lora.LoraAdapter("a", 1, "/lora/a/adapter_model.safetensors", 2.0),
                                  lora.LoraAdapter("b", 2, "/lora/b/adapter_model.safetensors", 2.0)])
    with_lora = llm_kwargs(dataclasses.replace(PARAMS, lora_adapters=adapters, lora_max_rank=16), lambda **kv: kv,
                           lora_config=lambda **kv: kv)
    assert set(with_lora) <= allowed and "lora_config" not in kwargs
    assert with_lora["lora_config"] == {"lora_dir": ["/lora/a", "/lora/b"], "max_lora_rank": 16, "max_loras": 2,
                                        "max_cpu_loras": 2}
    assert set(with_lora["lora_config"]) <= set(api.rule("llm.lora").extra["lora_config_fields"])


def test_an_fp8_kv_cache_is_asked_for_by_dtype():
    import dataclasses

    kwargs = llm_kwargs(dataclasses.replace(PARAMS, kv_cache_dtype=KvCacheDtype.FP8), lambda **kv: kv)
    assert kwargs["kv_cache_config"]["dtype"] == "fp8"


# --- step outputs ------------------------------------------------------------------------------------
@dataclass
class Logprob:
    logprob: float
    rank: int | None = None


@dataclass
class Completion:
    token_ids: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    last: int = 0

    @property
    def token_ids_diff(self):
        return self.token_ids[self.last:]

    @property
    def logprobs_diff(self):
        return self.logprobs[self.last:]


def test_read_tokens_reads_dict_and_float_log_probs_and_alternatives():
    entries = [{5: Logprob(-0.5), 7: Logprob(-2.0)}, {6: Logprob(-1.5), 9: Logprob(-0.1)}]
    assert outputs.read_tokens([5, 6], entries) == ([5, 6], [-0.5, -1.5], [])
    assert outputs.read_tokens([5, 6], entries, k=2) == ([5, 6], [-0.5, -1.5], [([5, 7], [-0.5, -2.0]),
                                                                                ([9, 6], [-0.1, -1.5])])
    assert outputs.read_tokens([5], [-0.25]) == ([5], [-0.25], [])
    assert outputs.read_tokens([5, 6], []) == ([5, 6], [0.0, 0.0], [])
    with pytest.raises(ValueError, match="no log prob for the chosen token 5"):  # 1.2.x: top K only
        outputs.read_tokens([5], [{9: Logprob(-0.1)}])


def test_sampled_log_probs_are_refused_where_the_llm_returns_the_top_k_only():
    from contract.upstream.llmapi import llmapi
    from model_repository.engines.pytorch.sampling import log_prob_problems

    sampled = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, runtime_top_k=40,
                           temperature=1.0, return_log_probs=True)
    greedy = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, return_log_probs=True)
    for version, refused in (("1.2.1", True), ("1.3.0rc29", False)):
        included = llmapi(version).rule("result.logprobs.top_k").extra["sampled_token_included"]
        assert bool(log_prob_problems(sampled, included, version)) is refused
        assert not log_prob_problems(greedy, included, version)
    assert "row result.logprobs.top_k" in log_prob_problems(sampled, False, "1.2.1")[0]


def test_kv_cache_usage_from_an_iteration_stat():
    stat = {"kvCacheStats": {"maxNumBlocks": 200, "usedNumBlocks": 50}}
    assert outputs.kv_cache_usage(json.dumps(stat)) == 0.25 == outputs.kv_cache_usage(stat)
    assert outputs.kv_cache_usage("{}") is None and outputs.kv_cache_usage("not json") is None


# --- the MPI world ------------------------------------------------------------------------------------
def test_mpi_roles_and_the_variables_cleared_for_one_rank():
    assert mpi_world.world({}).role == mpi_world.Role.SINGLE
    assert mpi_world.world({"OMPI_COMM_WORLD_SIZE": "1"}).role == mpi_world.Role.SINGLE
    assert mpi_world.world({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"}).role == mpi_world.Role.LEADER
    assert mpi_world.world({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}) == \
        mpi_world.World(mpi_world.Role.WORKER, 1, 2)
    env = {"OMPI_COMM_WORLD_SIZE": "1", "PMIX_RANK": "0", "OMPI_MCA_orte_x": "1", "OMPI_MCA_btl": "tcp", "PATH": "/b"}
    assert mpi_world.clear_job_variables(env) == ["OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_x", "PMIX_RANK"]
    assert env == {"OMPI_MCA_btl": "tcp", "PATH": "/b"}


def test_the_cleared_variables_are_the_tables():
    row = llmapi("1.2.1").rule("triton.mpi_env").extra
    assert mpi_world.JOB_VARIABLES == set(row["cleared"]) and mpi_world.JOB_PREFIXES == tuple(row["cleared_prefixes"])


# --- the engine, with a fake LLM --------------------------------------------------------------------------
class FakeResult:
    """A RequestOutput: yields scripted steps; `hold` yields nothing until aborted."""

    def __init__(self, steps, hold=False):
        self.steps, self.hold, self.aborted, self.finished = list(steps), hold, False, False
        self.outputs = [Completion()]

    def abort(self):
        self.aborted = True

    def __aiter__(self):
        return self

    async def __anext__(self):
        while self.hold and not self.aborted:
            await asyncio.sleep(0.005)
        if self.finished:
            raise StopAsyncIteration
        await asyncio.sleep(0.002)
        out = self.outputs[0]
        out.last = len(out.token_ids)
        if self.aborted or not self.steps:
            self.finished = True
            return self
        out.token_ids += self.steps.pop(0)
        self.finished = not self.steps
        return self


class FakeLlm:
    def __init__(self, script):
        self.script, self.calls, self.shut = script, [], False

    def generate_async(self, inputs, sampling_params=None, streaming=False, lora_request=None):
        self.calls.append((inputs, sampling_params, streaming))
        self.lora = getattr(self, "lora", []) + [lora_request]
        result = self.script(len(self.calls))
        if isinstance(result, Exception):
            raise result
        self.last = result
        return result

    def get_stats_async(self, timeout=2):
        async def stats():
            yield json.dumps({"kvCacheStats": {"maxNumBlocks": 10, "usedNumBlocks": 4}})
        return stats()

    def shutdown(self):
        self.shut = True


class Sink:
    def __init__(self, cancelled=False):
        self.sent, self.failed, self.cancelled, self.done = [], None, cancelled, threading.Event()

    def is_cancelled(self):
        return self.cancelled

    def send(self, ids, log_probs, cum, final, sequence=0, top=None):
        self.sent.append((list(ids), final))
        if final:
            self.done.set()

    def fail(self, message, code=FailCode.INTERNAL):
        self.failed = (message, code)
        self.done.set()


def engine(script, capacity=None, timeout=None):
    llm = FakeLlm(script)
    e = LlmEngine(lambda: llm, dict, EngineSettings(max_batch_size=2, capacity=capacity, queue_timeout_s=timeout,
                                                    cancel_period_s=0.01, stats_period_s=0.05), MetricsRecorder())
    e.start(5)
    return e, llm


def run(e, request=REQUEST, sink=None, request_id=""):
    sink = sink or Sink()
    e.submit(request, sink, request_id)
    assert sink.done.wait(5)
    return sink


def test_streamed_steps_go_out_as_they_come_and_the_end_id_closes():
    e, llm = engine(lambda n: FakeResult([[5], [6, 7], [2]]))
    try:
        assert run(e).sent == [([5], False), ([6, 7], False), ([2], True)]
        inputs, params, streaming = llm.calls[0]
        assert inputs == [1, 2, 3] and streaming is True and params["end_id"] == 2 and params["top_k"] == 1
    finally:
        e.shutdown()


def test_a_whole_answer_is_one_final_response():
    e, _ = engine(lambda n: FakeResult([[5], [6], [2]]))
    try:
        assert run(e, EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=8, end_id=2)).sent == \
            [([5, 6, 2], True)]
    finally:
        e.shutdown()


def test_an_end_the_tokens_do_not_show_gets_a_closing_response():
    """TensorRT-LLM leaves the end id out of the output: a streamed request ends with a
    response without tokens, which postprocessing reads as the end."""
    e, _ = engine(lambda n: FakeResult([[5], [6]]))
    try:
        assert run(e).sent == [([5], False), ([6], False), ([], True)]
    finally:
        e.shutdown()


def test_an_adapter_goes_to_the_llm_as_a_lora_request_and_the_base_model_as_none():
    requests = []
    llm = FakeLlm(lambda n: FakeResult([[5], [2]]))
    e = LlmEngine(lambda: llm, dict, EngineSettings(max_batch_size=2, capacity=None, queue_timeout_s=None,
                                                    cancel_period_s=0.01, stats_period_s=0.05), MetricsRecorder(),
                  lora_request=lambda task: requests.append(task) or ("LoRARequest", task))
    e.start(5)
    try:
        run(e, dataclasses.replace(REQUEST, options=GenerationOptions(lora_task_id=2)))
        run(e, REQUEST)
    finally:
        e.shutdown()
    assert requests == [2] and llm.lora == [("LoRARequest", 2), None]


class TwoSamples(FakeResult):
    """A RequestOutput of SamplingParams.n=2 as the LLM API streams it: each scripted step is
    one response per sequence with new tokens, and a response moves only its own output's
    diff (result.py _handle_response / _handle_sequence; the other keeps its last diff)."""

    def __init__(self, steps):
        super().__init__([(index, new) for step in steps for index, new in enumerate(step) if new])
        self.outputs = [Completion(), Completion()]

    async def __anext__(self):
        if self.finished:
            raise StopAsyncIteration
        await asyncio.sleep(0.002)
        index, new = self.steps.pop(0)
        out = self.outputs[index]
        out.last = len(out.token_ids)
        out.token_ids += new
        self.finished = not self.steps
        return self


class SequenceSink(Sink):
    def send(self, ids, log_probs, cum, final, sequence=0, top=None):
        self.sent.append((sequence, list(ids), final))
        if final and sum(f for _, _, f in self.sent) == 2:
            self.done.set()


def test_n_samples_stream_by_index_and_each_ends_with_its_own_final():
    """SamplingParams.n: one CompletionOutput per sample; every sample's stream goes out with
    its index and ends with its own final when the request finishes;
    a greedy request for several samples is refused as SamplingParams refuses it."""
    e, llm = engine(lambda n: TwoSamples([[[5], [7]], [[2], [8]], [[], [9]]]))
    request = EngineInputs(input_ids=(1, 2), input_lengths=2, request_output_len=8, end_id=2, streaming=True,
                           runtime_top_k=40, runtime_top_p=0.0, temperature=1.0,
                           options=GenerationOptions(num_return_sequences=2))
    try:
        sent = run(e, request, SequenceSink()).sent
        assert [x for x in sent if x[0] == 0] == [(0, [5], False), (0, [2], False), (0, [], True)]
        assert [x for x in sent if x[0] == 1] == [(1, [7], False), (1, [8], False), (1, [9], False), (1, [], True)]
        assert llm.calls[0][1]["n"] == 2
    finally:
        e.shutdown()
    guides = {kind: guided_decoding_kwargs(dataclasses.replace(request, options=GenerationOptions(
        guided_decoding_guide_type=kind, guided_decoding_guide=guide))) for kind, guide in
        (("json", ""), ("json_schema", '{"type": "object"}'), ("regex", "[a-z]+"), ("ebnf_grammar", 'root ::= "a"'))}
    assert guides == {"json": {"json_object": True}, "json_schema": {"json": '{"type": "object"}'},  # GuidedDecodingParams
                      "regex": {"regex": "[a-z]+"}, "ebnf_grammar": {"grammar": 'root ::= "a"'}}
    assert guided_decoding_kwargs(request) is None
    greedy = dataclasses.replace(request, runtime_top_k=1)
    assert any("'num_return_sequences' 2 with greedy decoding" in p for p in problems(greedy))
    assert problems(request) == []


def test_a_stop_sequence_of_several_tokens_aborts_the_request():
    e, llm = engine(lambda n: FakeResult([[5], [8, 9, 4], [4], [4]]))
    request = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=8, stop_words_list=((8, 9),),
                           streaming=True)
    try:
        assert run(e, request).sent == [([5], False), ([8, 9], True)] and llm.last.aborted
    finally:
        e.shutdown()


def test_a_client_that_left_is_aborted_and_failed_cancelled():
    e, llm = engine(lambda n: FakeResult([], hold=True))
    try:
        sink = run(e, sink=Sink(cancelled=True))
        assert sink.failed == ("cancelled", FailCode.CANCELLED) and llm.last.aborted
    finally:
        e.shutdown()


def test_no_first_token_in_time_is_unavailable():
    e, llm = engine(lambda n: FakeResult([], hold=True), timeout=0.1)
    try:
        sink = run(e)
        assert sink.failed[1] == FailCode.UNAVAILABLE and "retry later" in sink.failed[0] and llm.last.aborted
    finally:
        e.shutdown()


def test_beyond_capacity_the_request_is_refused_at_once():
    e, _ = engine(lambda n: FakeResult([], hold=True), capacity=1)
    try:
        e.submit(REQUEST, Sink())
        refused = run(e)
        assert refused.failed[1] == FailCode.UNAVAILABLE and "is full" in refused.failed[0]
        assert e.counts() == (1, 0)
    finally:
        e.shutdown()


def test_stop_by_request_id_ends_with_the_tokens_not_sent():
    results = {}

    def script(n):
        results[n] = FakeResult([[5], [6]] + [[7]] * 1000)
        return results[n]

    e, _ = engine(script)
    sink, other = Sink(), Sink()
    try:
        e.submit(EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=2000, streaming=True), sink, "abc")
        end = time.monotonic() + 5
        while not sink.sent and time.monotonic() < end:  # running: it streamed a token
            time.sleep(0.005)
        e.submit(EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=2000), other, "xyz")
        e.stop("abc")
        assert sink.done.wait(5) and sink.sent[-1][1] is True and sink.failed is None
        assert results[1].aborted and not other.done.is_set()
    finally:
        e.shutdown()
    assert other.failed == ("the engine is shutting down", FailCode.UNAVAILABLE)


def test_what_the_llm_refuses_fails_the_request_with_its_words():
    e, _ = engine(lambda n: ValueError("The sum of prompt length (3.0), query length (0) should not exceed "
                                       "max_num_tokens (2)"))
    try:
        sink = run(e)
        assert sink.failed[1] == FailCode.INTERNAL and "should not exceed max_num_tokens" in sink.failed[0]
    finally:
        e.shutdown()


def test_kv_cache_usage_is_read_from_the_stats_and_shutdown_shuts_the_llm():
    e, llm = engine(lambda n: FakeResult([[2]]))
    try:
        run(e)  # the gauge reads the stats from the first request on
        end = time.monotonic() + 3
        while e.kv_cache_usage == 0 and time.monotonic() < end:
            time.sleep(0.02)
        assert e.kv_cache_usage == 0.4
    finally:
        e.shutdown()
    assert llm.shut


def test_the_gauge_does_not_ask_for_stats_before_the_first_request(capfd):
    """Issue 46 item 5: before any request the executor answers get_stats_async with a printed
    warning, every call (executor.py aget_stats at ed53795b, 325-329; the stand-in prints it): the
    engine does not ask until a request has gone to the LLM, then does."""
    e, llm = engine(lambda n: FakeResult([[2]]))
    asked = []
    inner = llm.get_stats_async
    llm.get_stats_async = lambda timeout=2: (asked.append(timeout), inner(timeout))[1]
    try:
        time.sleep(0.3)  # six stats periods
        assert asked == [] and e.kv_cache_usage == 0
        run(e)
        end = time.monotonic() + 3
        while not asked and time.monotonic() < end:
            time.sleep(0.02)
        assert asked
    finally:
        e.shutdown()


def test_the_standin_warns_before_the_first_request_and_the_engine_never_makes_it(trtllm, tmp_path, capfd):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 16, "standin_toy_model": {}}))


    async def direct():
        llm = trtllm.LLM(str(tmp_path), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(),
                         enable_iter_perf_stats=True)
        try:
            return [s async for s in llm.get_stats_async(0.01)]
        finally:
            llm.shutdown()
    assert asyncio.run(direct()) == []
    assert "Iteration statistics are not available yet" in capfd.readouterr().err
    e = LlmEngine(lambda: trtllm.LLM(str(tmp_path), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(),
                                     enable_iter_perf_stats=True),
                  trtllm.SamplingParams, EngineSettings(max_batch_size=2, capacity=None, queue_timeout_s=None,
                                                        stats_period_s=0.02), MetricsRecorder())
    e.start(10)
    try:
        time.sleep(0.2)
    finally:
        e.shutdown()
    assert "Iteration statistics are not available yet" not in capfd.readouterr().err


def test_an_llm_that_fails_to_start_fails_start():
    e = LlmEngine(lambda: (_ for _ in ()).throw(RuntimeError("no GPU")), dict,
                  EngineSettings(max_batch_size=1, capacity=None, queue_timeout_s=None), MetricsRecorder())
    with pytest.raises(RuntimeError, match="no GPU"):
        e.start(5)


class EndsEarly(FakeResult):
    """Outputs that stop without one marked finished."""

    async def __anext__(self):
        if not self.steps:
            raise StopAsyncIteration
        result = await super().__anext__()
        self.finished = False
        return result


def test_outputs_that_end_unfinished_still_end_the_request():
    e, _ = engine(lambda n: EndsEarly([[5], [6]]))
    try:
        assert run(e).sent == [([5], False), ([6], False), ([], True)]
    finally:
        e.shutdown()


@pytest.mark.parametrize("raw,message", [
    ({"max_input_len": "4096"}, "'max_input_len' (4096) must be < 'max_seq_len' (2048)"),
    ({"kv_cache_free_gpu_mem_fraction": "1.5"}, "'kv_cache_free_gpu_mem_fraction' must be in (0, 1]"),
    ({"dtype": "float32"}, "'dtype' must be auto, float16 or bfloat16"),
    ({"kv_cache_dtype": "int8"}, "'kv_cache_dtype' must be one of ['auto', 'fp8']"),
    ({"tensor_parallel_size": "0"}, "'tensor_parallel_size' must be >= 1"),
])
def test_engine_parameters_refuse_bad_values_naming_them(raw, message):
    from contract.model_parameters import ParameterError, from_parameters, to_parameters

    good = to_parameters(PARAMS)
    assert from_parameters(PyTorchEngineParameters, "tensorrt_llm_pytorch", good) == PARAMS
    with pytest.raises(ParameterError) as e:
        from_parameters(PyTorchEngineParameters, "tensorrt_llm_pytorch", good | raw)
    assert message in str(e.value) and "model 'tensorrt_llm_pytorch'" in str(e.value)
