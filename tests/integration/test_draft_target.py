"""Draft-target speculative decoding on the engine flow's layout (build_engines/trtllm/draft_target.py),
served by the stand-ins of the C++ backend: `tensorrt_llm` (the default engine, the target) and
`tensorrt_llm_draft` (the default model's first 2 layers: a weak draft, so drafts are often
rejected), with tensorrt_llm_bls running the draft loop for requests with num_draft_tokens.

Greedy answers equal the same layout's answers without drafts, token for token; the draft
counts come with return_perf_metrics; what NVIDIA's BLS refuses (streaming, batches) is refused
with its texts, and a client that leaves stops both engines."""

from __future__ import annotations

import queue
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from build_engines.fidelity.options import FidelityOptions
from build_engines.openvino.build import build_openvino_engine
from build_engines.spec import BuildSpec
from contract import names
from model_repository.engines.relay.draft_target import BATCH_REFUSAL, STREAMING_REFUSAL
from serving import prometheus
from serving.prometheus import value
from standins.trtllm.repository import render_standin_repository
from tests.integration.test_draft_model import truncated_checkpoint

pytestmark = [pytest.mark.server, pytest.mark.slow]

MAX_DRAFT_LEN = 4
PROMPTS = ("Write a short story about a cat who learns to fly.",
           "Explain how a bicycle works, step by step.",
           "Repeat after me: the quick brown fox jumps over the lazy dog.")
TYPES = {np.dtype(object): "BYTES", np.dtype(np.int32): "INT32", np.dtype(bool): "BOOL"}


@pytest.fixture(scope="module")
def server(default_checkpoint, default_engine, tmp_path_factory, serve):
    root = tmp_path_factory.mktemp("draft-target")
    draft = truncated_checkpoint(default_checkpoint, 2, root / "draft-checkpoint")
    draft_engine = root / "draft-engine"
    build_openvino_engine(BuildSpec(checkpoint=draft, fidelity=FidelityOptions(evaluation="off")), draft_engine)
    repository = root / "repository"
    render_standin_repository(default_engine, repository, draft_engine_dir=draft_engine, max_draft_len=MAX_DRAFT_LEN)
    return serve(repository)


def request(server, text: str | list[str], max_tokens: int = 64, stream: bool = False, cancel_after_s: float = 0.0,
            wait_s: float = 300.0, **extra) -> tuple[dict, str | None]:
    """One request to tensorrt_llm_bls -> (its outputs, the error text or None); no final
    response within `wait_s` is the error "no final response" (the request is then cancelled)."""
    texts = [text] if isinstance(text, str) else text
    values = {"text_input": np.array([[t.encode()] for t in texts], dtype=object),
              "max_tokens": np.full((len(texts), 1), max_tokens, np.int32), "stream": np.full((len(texts), 1), stream)}
    for name, v in extra.items():
        array = np.asarray(v)
        values[name] = (array.astype(np.int32) if array.dtype.kind == "i" else array).reshape(len(texts), -1)
    inputs = []
    for name, array in values.items():
        tensor = grpcclient.InferInput(name, list(array.shape), TYPES[array.dtype])
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.settings.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    client.async_stream_infer(names.LLM_BLS, inputs, request_id=f"draft-target-{uuid.uuid4().hex[:8]}", enable_empty_final_response=True)
    out: dict = {"text_output": ""}
    leave = bool(cancel_after_s)
    try:
        if cancel_after_s:
            time.sleep(cancel_after_s)
            return out, None
        while True:
            try:
                result, error = answers.get(timeout=wait_s)
            except queue.Empty:
                leave = True
                return out, f"no final response after {wait_s:.0f}s"
            if error is not None:
                return out, error.message()
            for name in ("text_output", "output_ids", "total_draft_tokens", "total_accepted_draft_tokens",
                         "acceptance_rate"):
                array = result.as_numpy(name)
                if array is not None and array.size:
                    out[name] = out[name] + array.reshape(-1)[0].decode() if name == "text_output" else array
            if result.get_response().parameters["triton_final_response"].bool_param:
                return out, None
    finally:
        client.stop_stream(cancel_requests=leave)
        client.close()


def test_greedy_answers_equal_plain_decoding_with_the_draft_counts(server):
    check_greedy_answers(server)


def check_greedy_answers(server, same_tokens: int | None = None) -> None:
    """Each prompt's greedy answer with 1 and MAX_DRAFT_LEN draft tokens per round equals the
    answer without drafts: whole (`same_tokens` None: the stand-in), or in its first
    `same_tokens` tokens (a GPU verifies several tokens per step, in other kernels than plain
    decoding's, so a near tie may part later)."""
    drafted = 0
    for prompt in PROMPTS:
        plain, error = request(server, prompt)
        assert error is None and plain["text_output"], (prompt, plain)  # an answer, not the end token at once
        for drafts in (1, MAX_DRAFT_LEN):
            speculative, error = request(server, prompt, num_draft_tokens=drafts, return_perf_metrics=True)
            assert error is None
            ours, theirs = speculative["output_ids"].reshape(-1).tolist(), plain["output_ids"].reshape(-1).tolist()
            if same_tokens is None:
                assert ours == theirs, (prompt, drafts)
                assert speculative["text_output"] == plain["text_output"]
            else:
                assert ours[:same_tokens] == theirs[:same_tokens], (prompt, drafts)
            total, accepted = int(speculative["total_draft_tokens"]), int(speculative["total_accepted_draft_tokens"])
            assert 0 < total <= 64 * drafts and 0 <= accepted <= total
            assert float(speculative["acceptance_rate"]) == pytest.approx(accepted / total)
            drafted += total
    assert drafted > 0


def test_stop_strings_and_short_answers_end_the_loop_as_plain_decoding_ends(server):
    stop = np.array([["cat"]], dtype=object)
    plain, _ = request(server, PROMPTS[0], stop_words=stop)
    speculative, error = request(server, PROMPTS[0], stop_words=stop, num_draft_tokens=3)
    assert error is None and speculative["text_output"] == plain["text_output"]
    assert plain["text_output"].endswith("a ")  # cut before "cat"
    one, error = request(server, PROMPTS[1], max_tokens=1, num_draft_tokens=3)
    assert error is None and one["text_output"] == request(server, PROMPTS[1], max_tokens=1)[0]["text_output"]


REFUSALS = [
    ({"stream": True}, STREAMING_REFUSAL),
    ({"text": [PROMPTS[0], PROMPTS[1]]}, BATCH_REFUSAL),
    ({"num_draft_tokens_value": MAX_DRAFT_LEN + 1}, f"exceeds the target engine's max_draft_len {MAX_DRAFT_LEN}"),
    ({"use_draft_logits": True}, "invalid 'use_draft_logits'"),
]


@pytest.mark.parametrize("kwargs, message", REFUSALS)
def test_what_the_loop_cannot_serve_is_refused_and_the_server_keeps_serving(server, kwargs, message):
    kwargs = dict(kwargs)
    text = kwargs.pop("text", PROMPTS[0])
    drafts = kwargs.pop("num_draft_tokens_value", 2)
    rows = len(text) if isinstance(text, list) else 1
    if "use_draft_logits" in kwargs:
        kwargs["use_draft_logits"] = np.full((rows, 1), kwargs["use_draft_logits"])
    _, error = request(server, text, num_draft_tokens=np.full((rows, 1), drafts, np.int32), **kwargs)
    assert error is not None and message in error and "INVALID_ARG" in error
    assert request(server, PROMPTS[0], max_tokens=4, num_draft_tokens=2)[1] is None


def test_a_client_that_leaves_stops_the_draft_loop_and_both_engines(server):
    scrape = lambda: prometheus.scrape(server.settings.metrics_url)  # noqa: E731

    def active(model: str) -> float:
        return value(scrape(), "nv_trt_llm_request_metrics", model=model, request_type="active")

    def running() -> dict[str, float]:
        return {"draft loop": value(scrape(), "llm_requests_running", model=names.LLM_BLS),
                names.TRTLLM_ENGINE: active(names.TRTLLM_ENGINE), names.TRTLLM_DRAFT: active(names.TRTLLM_DRAFT)}

    request(server, PROMPTS[0], max_tokens=1000, num_draft_tokens=3, min_tokens=1000, cancel_after_s=1.0)
    # Idle host: everything stops 0.6 s after the client leaves, and 1,000 forced tokens would
    # take the loop ~13 s (200 in 2.7 s). Two full suites' hosts (every module's server alive)
    # took more than 3 s to show the cancellation, so the bound is 8 s: still well short of
    # the answer's natural end.
    left, deadline = time.monotonic(), time.monotonic() + 8.0
    while time.monotonic() < deadline and any(running().values()):
        time.sleep(0.1)
    still = {k: v for k, v in running().items() if v}
    assert not still, f"still running {time.monotonic() - left:.1f}s after the client left: {still}"
    assert request(server, PROMPTS[1], max_tokens=8, num_draft_tokens=2)[1] is None



def test_the_client_asks_for_draft_tokens(server):
    """SamplingParams.num_draft_tokens, sent to tensorrt_llm_bls, not streamed."""
    from client import ChatMessage, LlmClient, SamplingParams

    prompt = [ChatMessage("user", PROMPTS[0])]
    with LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as client:
        plain = client.generate(prompt, SamplingParams(max_tokens=32, temperature=0.0), stream=False)
        drafted = client.generate(prompt, SamplingParams(max_tokens=32, temperature=0.0, num_draft_tokens=3),
                                  stream=False)
    assert drafted.text == plain.text and drafted.token_ids == plain.token_ids and plain.completion_tokens > 0


def test_concurrent_draft_loops_each_get_their_own_answer(server):
    """Several draft loops at once share both engines' batches, each under its own request id,
    and no answer is another's: each starts as its prompt's plain answer (its first tokens; a
    whole answer may part later, as the CPU engine's sums differ with what a step batches
    together: measured once, at the 8th token of one of 6 answers).

    Also the smoke test of the tensorrt_llm_bls stub crash this load found on Triton 2.51 when
    the engine calls were decoupled BLS calls (a finished response iterator freed without the
    GIL): each loop makes two engine calls per round, and 12 loops at a time crashed the stub
    after 2 to 14 rounds (its clients then wait forever, hence the bounded waits).  The calls go
    over gRPC now (model_repository/triton/engine_grpc.py); three rounds of 12 here."""
    from concurrent.futures import ThreadPoolExecutor

    prompts = [f"{p} Answer number {i}." for i, p in enumerate(PROMPTS * 2)]
    ids = lambda out: out.get("output_ids", np.zeros(0, np.int32)).reshape(-1).tolist()  # noqa: E731 (none: the end at once)
    plain = [ids(request(server, p, max_tokens=32)[0]) for p in prompts]
    for drafts in (3, 1, 3):
        with ThreadPoolExecutor(2 * len(prompts)) as pool:
            drafted = list(pool.map(lambda p: request(server, p, max_tokens=32, num_draft_tokens=drafts, wait_s=120),
                                    prompts * 2))
        assert [error for _, error in drafted] == [None] * len(drafted)
        starts = [ids(out)[:4] for out, _ in drafted]
        assert starts == [answer[:4] for answer in plain * 2]
