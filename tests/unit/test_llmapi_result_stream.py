"""The stand-in LLM API streams results as upstream's result.py does (standins/llmapi/trtllm_llmapi/
executor/result.py, responses.py): each test feeds responses shaped as the executor makes
them and checks what a reader of RequestOutput sees, behaviour by behaviour, with the
upstream lines each one comes from (result.py at a678b91a, llmRequest.cpp at 119c6e60,
executor.py at ed53795b)."""

from __future__ import annotations

import asyncio
import json

import pytest


@pytest.fixture
def api(trtllm):
    from tensorrt_llm.executor import responses, result

    return responses, result


def params(trtllm, **kwargs):
    return trtllm.SamplingParams(**({"temperature": 1.0, "top_k": 8, "end_id": -1, "detokenize": False} | kwargs))


async def feed(result, responses) -> list:
    """Hand `responses` to a result and read one step per response, as `async for` does."""
    seen = []
    for response in responses:
        result.post(response)
    async for step in result:
        seen.append([(o.index, list(o.token_ids_diff), list(o.token_ids)) for o in step.outputs])
    return seen


def make(api, p, streaming=True):
    responses, result = api
    return responses.RequestResults(7, p, streaming), (lambda: result.GenerationResult(7, p, streaming))


def test_one_sequence_per_response_and_the_others_keep_their_last_diff(trtllm, api):
    """result.py 505-515 and 352-357: a response touches only its sequence_index; every other
    output's token_ids_diff is what its own last response added."""
    responses, _ = api
    executor, new_result = make(api, params(trtllm, n=2))
    sent = [executor.advance(0, [5], [], -1.0), executor.advance(1, [7], [], -1.0),
            executor.advance(0, [6], [], -2.0, responses.FinishReason.LENGTH),
            executor.advance(1, [8], [], -2.0, responses.FinishReason.LENGTH)]

    async def go():
        return await feed(new_result(), sent)
    steps = asyncio.run(go())
    assert steps == [[(0, [5], [5]), (1, [], [])],
                     [(0, [5], [5]), (1, [7], [7])],  # output 0 repeats its diff
                     [(0, [6], [5, 6]), (1, [7], [7])],
                     [(0, [6], [5, 6]), (1, [8], [7, 8])]]
    assert [r.result.is_final for r in sent] == [False, False, False, True]  # llmRequest.cpp 85-89


def test_finish_reasons_and_stop_trimming_wait_for_the_requests_last_response(trtllm, api):
    """result.py 413-437: finish reasons are set, and a stop word cut, only when the response is
    the request's last; a sequence that ended earlier keeps its stop token and no reason."""
    responses, _ = api
    p = params(trtllm, n=2, stop_token_ids=[9], logprobs=1)
    executor, new_result = make(api, p)
    lp = lambda t, v: {t: trtllm.llmapi.request_output.Logprob(v, 1)}  # noqa: E731
    sent = [executor.advance(0, [5, 9], [lp(5, -0.5), lp(9, -0.25)], -0.75, responses.FinishReason.STOP_WORDS),
            executor.advance(1, [4], [lp(4, -1.0)], -1.0),
            executor.advance(1, [9], [lp(9, -2.0)], -3.0, responses.FinishReason.STOP_WORDS)]

    async def go():
        result = new_result()
        await feed(result, sent)
        return result
    result = asyncio.run(go())
    first, second = result.outputs
    assert (first.token_ids, first.finish_reason, first.stop_reason) == ([5, 9], None, None)
    assert (second.token_ids, second.finish_reason, second.stop_reason) == ([4], "stop", 9)
    assert len(second.logprobs) == 2 and second.cumulative_logprob == -3.0  # log probs are not trimmed


def test_best_of_sorts_and_renumbers_at_every_read(trtllm, api):
    """result.py 289-294, 311-327: best_of outputs; `outputs` keeps the best n by cumulative
    log prob and renumbers `index` each time it is read."""
    executor, new_result = make(api, params(trtllm, n=2, best_of=3, logprobs=1))
    lp = lambda t, v: {t: trtllm.llmapi.request_output.Logprob(v, 1)}  # noqa: E731
    length = api[0].FinishReason.LENGTH
    sent = [executor.advance(0, [1], [lp(1, -3.0)], -3.0, length),
            executor.advance(1, [2], [lp(2, -1.0)], -1.0, length),
            executor.advance(2, [3], [lp(3, -2.0)], -2.0, length)]

    async def go():
        result = new_result()
        return await feed(result, sent), result
    steps, result = asyncio.run(go())
    # after sequence 0's response it is the only one with a log prob: first; then 1 overtakes it
    assert [[tokens for _, _, tokens in step] for step in steps] == [[[1], []], [[2], [1]], [[2], [3]]]
    assert [o.index for o in result._outputs] == [2, 0, 1]  # renumbered by rank: best 1, then 2, then 0


def test_a_cancelled_sequence_says_so_at_once_and_logprobs_are_kept_whole(trtllm, api):
    """result.py 384-390 (no trim when cancelled), 404-408: 'cancelled' on each output whose
    response carries CANCELLED, before the request's last response."""
    responses, _ = api
    executor, new_result = make(api, params(trtllm, n=2))
    sent = [executor.advance(0, [], [], 0.0, responses.FinishReason.CANCELLED),
            executor.advance(1, [], [], 0.0, responses.FinishReason.CANCELLED)]

    async def go():
        result = new_result()
        result.post(sent[0])
        await result.__anext__()
        first = [o.finish_reason for o in result.outputs]
        result.post(sent[1])
        await result.__anext__()
        return first, [o.finish_reason for o in result.outputs], result.finished
    assert asyncio.run(go()) == (["cancelled", None], ["cancelled", "cancelled"], True)


def test_an_error_response_raises_in_the_reader(trtllm, api):
    """result.py 481-485 with executor.py 264-270, 280: RequestError(error_msg)."""
    responses, result = api

    async def go():
        r = result.GenerationResult(1, params(trtllm), True)
        r.post(responses.Response(1, error_msg="boom"))
        await r.__anext__()
    with pytest.raises(result.RequestError, match="boom"):
        asyncio.run(go())


def test_what_the_executor_sends_streaming_or_not(trtllm, api):
    """llmRequest.cpp 72-78, 113-135, 152-156, 223-224: streaming sends the tokens not sent
    yet; otherwise one response with every token when the sequence finishes; log probs, since
    PR #8785 (in 1.2.1, which the stand-in stands in for), only the ones new in the response; a
    child is seeded seed + its index (329-342), best_of sequences run."""
    responses, _ = api
    whole = responses.RequestResults(1, params(trtllm, logprobs=1), streaming=False)
    assert whole.advance(0, [4], [-0.5], -0.5) is None
    last = whole.advance(0, [6], [-0.25], -0.75, responses.FinishReason.LENGTH).result
    assert (last.output_token_ids, last.log_probs, last.cum_log_probs, last.is_final) == \
        ([[4, 6]], [[-0.5, -0.25]], [-0.75], True)
    streamed = responses.RequestResults(1, params(trtllm, logprobs=1), streaming=True)
    streamed.advance(0, [4], [-0.5], -0.5)
    assert streamed.advance(0, [6], [-0.25], -0.75).result.output_token_ids == [[6]]
    assert streamed.advance(0, [], [], -0.75) is None  # nothing new, not finished: no response
    end = streamed.advance(0, [], [], -0.75, responses.FinishReason.END_ID).result  # finished: always one
    assert (end.output_token_ids, end.log_probs, end.finish_reasons) == ([[]], [[]], [responses.FinishReason.END_ID])
    p = params(trtllm, n=2, best_of=3, seed=40)
    assert responses.sequence_count(p) == 3
    assert [responses.sequence_seed(p, i) for i in range(3)] == [40, 41, 42]
    assert [responses.sequence_seed(params(trtllm, n=2), i) for i in range(2)] == [0, 1]
    assert responses.sequence_seed(params(trtllm, seed=None), 0) is None


def test_iteration_stats_are_done_after_the_first_timeout_until_a_new_request(trtllm, tmp_path):
    """result.py 833-883 and executor.py 238-250, 319-332: nothing before the first request;
    one iterable for every call; it stops at its first timeout and stays stopped - stats queued
    later are not read - until generate_async re-arms it; stats arrive as dicts."""
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 16, "standin_toy_model": {}}))

    async def go():
        llm = trtllm.LLM(str(tmp_path), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(),
                         enable_iter_perf_stats=True)
        try:
            before = [s async for s in llm.get_stats_async(0.05)]
            await llm.generate_async([1, 2], sampling_params=params(trtllm, max_tokens=3)).aresult()
            stats = llm.get_stats_async(0.05)
            first = [s async for s in stats]
            stats.put(json.dumps({"iter": 99}))  # a stat after the timeout: not read
            again = [s async for s in llm.get_stats_async(0.05)]
            await llm.generate_async([1, 2], sampling_params=params(trtllm, max_tokens=2)).aresult()
            rearmed = [s async for s in llm.get_stats_async(0.05)]
            return before, first, again, rearmed, stats is llm.get_stats_async(1)
        finally:
            llm.shutdown()
    before, first, again, rearmed, same = asyncio.run(go())
    assert before == [] and again == [] and same
    assert len(first) == 3 and all(isinstance(s, dict) and "kvCacheStats" in s for s in first)
    assert rearmed[0] == {"iter": 99} and len(rearmed) == 3


def test_the_toy_model_answers_one_sequence_per_response(trtllm, tmp_path):
    """The toy model runs the request as the executor does: each response one sequence's."""
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 16, "standin_toy_model": {}}))

    async def go():
        llm = trtllm.LLM(str(tmp_path), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig())
        try:
            out = llm.generate_async([1, 2], sampling_params=params(trtllm, n=2, max_tokens=4), streaming=True)
            steps = [[len(o.token_ids) for o in step.outputs] async for step in out]
            return steps, [o.finish_reason for o in out.outputs]
        finally:
            llm.shutdown()
    steps, reasons = asyncio.run(go())
    # 2 sequences x 4 tokens = 8 responses, each adding one token to one sequence
    assert len(steps) == 8 and all(sum(b) - sum(a) == 1 for a, b in zip([[0, 0]] + steps, steps))
    # sequence 0 finished in a response that was not the request's last: no finish reason (413)
    assert steps[-1] == [4, 4] and reasons == [None, "length"]


@pytest.mark.parametrize("incremental", [True, False], ids=["pr8785_new_only", "before_pr8785_every_one"])
def test_the_log_probs_a_caller_reads_are_the_same_whichever_way_responses_carry_them(
    trtllm, api, tmp_path, monkeypatch, incremental
):
    """Item 5 of issue 46: PR #8785 (1.2.1, 1.3.0rc29) sends each streamed response's new log probs
    only and result.py appends them; before it every response held all so far and result.py took
    the new ones.  Either way CompletionOutput.logprobs / logprobs_diff are the same, one per token."""
    responses, _ = api
    monkeypatch.setattr(responses, "INCREMENTAL_LOG_PROBS", incremental)
    streamed = responses.RequestResults(1, params(trtllm, logprobs=1), streaming=True)
    streamed.advance(0, [4], [{4: -0.5}], -0.5)
    second = streamed.advance(0, [6], [{6: -0.25}], -0.75).result
    assert second.log_probs == ([[{6: -0.25}]] if incremental else [[{4: -0.5}, {6: -0.25}]])
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 16, "standin_toy_model": {}}))

    async def go():
        llm = trtllm.LLM(str(tmp_path), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig())
        try:
            out = llm.generate_async([1, 2], sampling_params=params(trtllm, top_k=1, logprobs=1, max_tokens=5),
                                     streaming=True)
            diffs = [len(step.outputs[0].logprobs_diff) async for step in out]
            return diffs, out.outputs[0]
        finally:
            llm.shutdown()
    diffs, final = asyncio.run(go())
    assert diffs == [1] * 5 and len(final.logprobs) == len(final.token_ids) == 5
    assert all(list(d) == [t] for d, t in zip(final.logprobs, final.token_ids))  # greedy: the top one is the token
