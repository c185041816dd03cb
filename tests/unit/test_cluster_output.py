"""The Dynamo worker's answers (cluster/dynamo_output.py, cluster/worker.py ReplicaWorker): the
engine's responses as Dynamo's chunks, where each sequence ends, and what the worker does when
its client leaves, its replica goes away or a request is bad - driven with fakes of the engine
call and of Dynamo's request context (the real ones: tests/integration/test_cluster.py)."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

import numpy as np
import pytest

from cluster.dynamo_output import ChunkMaker
from cluster.dynamo_request import engine_request
from cluster.replica_engine import EngineError, ErrorKind, error_kind
from cluster.worker import ReplicaWorker, WorkerSettings
from tests.unit.test_cluster_request import CAPTURED, replica, request


def response(ids, log_probs=None, sequence=0, top=None):
    """One engine response as the engine model sends it: [batch 1, beam 1, tokens, ...]."""
    out = {"output_ids": np.array([[ids]], dtype=np.int32), "sequence_length": np.array([[len(ids)]], dtype=np.int32),
           "sequence_index": np.array([[sequence]], dtype=np.int32)}
    if log_probs is not None:
        out["output_log_probs"] = np.array([[log_probs]], dtype=np.float32)
    if top is not None:
        out["output_top_ids"] = np.array([[[t for t, _ in row] for row in top]], dtype=np.int32)[None]
        out["output_top_log_probs"] = np.array([[[lp for _, lp in row] for row in top]], dtype=np.float32)[None]
    return out


def maker(max_tokens=5, **sections):
    return ChunkMaker(engine_request(request(stop_conditions={"max_tokens": max_tokens}, **sections), replica()),
                      token_text=lambda t: f"<{t}>")


def test_an_end_id_ends_the_sequence_and_is_passed_on_for_the_frontend_to_hide():
    m = maker(output_options={"logprobs": None})
    assert m.chunks(response([10, 11])) == [{"token_ids": [10, 11], "index": 0}]
    assert m.chunks(response([2])) == [{"token_ids": [2], "index": 0, "finish_reason": "stop"}]
    assert m.done and m.completion_tokens == 3 and m.closing() == []
    assert m.chunks(response([12])) == []  # nothing after the end


def test_max_tokens_is_enforced_by_the_worker():
    """Dynamo's frontend does not cut at max_tokens: tokens past it are dropped here."""
    m = maker(max_tokens=3, output_options={"logprobs": None})
    assert m.chunks(response([10, 11]))[0]["token_ids"] == [10, 11]
    assert m.chunks(response([12, 13, 14])) == [{"token_ids": [12], "index": 0, "finish_reason": "length"}]


def test_a_stream_that_ends_without_an_end_id_ends_with_stop():
    """TensorRT-LLM leaves the end id out of its output and ends the stream."""
    m = maker(output_options={"logprobs": None})
    m.chunks(response([10]))
    assert m.closing() == [{"token_ids": [], "index": 0, "finish_reason": "stop"}]


def test_log_probs_and_alternatives_in_dynamos_shape():
    m = maker()  # the captured request: logprobs with 2 alternatives
    (chunk,) = m.chunks(response([10], [-0.5], top=[[(10, -0.5), (11, -1.5)]]))
    assert chunk["log_probs"] == [-0.5]
    assert chunk["top_logprobs"] == [[{"rank": 1, "token_id": 10, "token": "<10>", "logprob": -0.5},
                                      {"rank": 2, "token_id": 11, "token": "<11>", "logprob": -1.5}]]


def test_no_chunk_carries_usage():
    """A worker's completion_usage.prompt_tokens overwrites the frontend's count, which after a
    migration would include the re-sent tokens (docs/cluster.md)."""
    m = maker(output_options={"logprobs": None})
    chunks = m.chunks(response([10, 2])) + m.closing()
    assert chunks and not any("completion_usage" in c for c in chunks)


def test_each_of_n_sequences_ends_on_its_own():
    m = maker(sampling_options={"n": 2, "temperature": 1.0}, output_options={"logprobs": None})
    assert m.chunks(response([2], sequence=1)) == [{"token_ids": [2], "index": 1, "finish_reason": "stop"}]
    assert not m.done
    assert m.chunks(response([10], sequence=0))[0]["index"] == 0
    assert m.closing() == [{"token_ids": [], "index": 0, "finish_reason": "stop"}]
    with pytest.raises(ValueError):
        m.chunks(response([10], sequence=2))


@pytest.mark.parametrize("message, kind", [
    ("[INVALID_ARG] invalid 'runtime_top_k': 100000 exceeds the vocabulary size 49152", ErrorKind.BAD_REQUEST),
    ("[UNAVAILABLE] the server's engine call failed (UNAVAILABLE: Socket closed): the server is stopping or "
     "restarting; retry", ErrorKind.REPLICA_GONE),
    ("[UNAVAILABLE] the engine has 64 requests, its limit: retry later", ErrorKind.OVERLOADED),
    ("Encountered an error in forwardAsync", ErrorKind.FAILED),
])
def test_engine_errors_are_told_apart(message, kind):
    assert error_kind(message).kind == kind


# --- the handler, with fakes ---------------------------------------------------------------
class FakeCall:
    def __init__(self, script):
        self.script, self.stops, self.ended = script, 0, False
        self.release = asyncio.Event()  # a reply marked None waits for it

    async def replies(self):
        for item in self.script:
            if item is None:
                await self.release.wait()
                continue
            if isinstance(item, EngineError):
                raise item
            yield item
        self.ended = True

    def stop(self):
        self.stops += 1
        self.release.set()


class FakeEngine:
    def __init__(self, script):
        self.call = FakeCall(script)
        self.started = []

    def start(self, arrays, request_id):
        self.started.append((request_id, arrays))
        return self.call


class FakeContext:
    """Dynamo's Context: its id and the future that resolves when the client leaves."""

    def __init__(self):
        self._stopped = None

    @property
    def stopped(self):
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
        return self._stopped

    def id(self):
        return "req-7"

    def async_killed_or_stopped(self):
        return self.stopped


class Migrate(Exception):
    pass


class BadRequest(Exception):
    pass


DYNAMO = types.SimpleNamespace(EngineShutdown=Migrate, InvalidArgument=BadRequest, WorkerUnavailable=RuntimeError,
                               Unknown=RuntimeError)


def worker(script):
    settings = WorkerSettings(replica_grpc="127.0.0.1:1", repository=Path("/r"), model_name="m")
    return ReplicaWorker(settings, replica(), FakeEngine(script), DYNAMO, token_text=lambda t: None)


async def collect(agen):
    return [chunk async for chunk in agen]


def test_the_handler_streams_the_engine_answer_under_the_request_id():
    w = worker([response([10], [-0.1]), response([2], [-0.2])])
    chunks = asyncio.run(collect(w.generate(CAPTURED, FakeContext())))
    assert [c["token_ids"] for c in chunks] == [[10], [2]] and chunks[-1]["finish_reason"] == "stop"
    assert w.engine.started[0][0] == "req-7" and w.engine.call.stops == 0


def test_a_client_that_leaves_stops_the_engine_request():
    async def run():
        w = worker([response([10]), None, response([11])])
        context = FakeContext()
        agen = w.generate(request(output_options={"logprobs": None}), context)
        first = await agen.__anext__()
        context.stopped.set_result(True)  # Dynamo: the HTTP client went away
        await asyncio.sleep(0)
        return first, w.engine.call.stops
    first, stops = asyncio.run(run())
    assert first["token_ids"] == [10] and stops == 1


def test_a_replica_that_goes_away_makes_dynamo_migrate_the_request():
    gone = error_kind("[UNAVAILABLE] the server's engine call failed (UNAVAILABLE: x): the server is stopping")
    w = worker([response([10]), gone])
    with pytest.raises(Migrate):
        asyncio.run(collect(w.generate(request(output_options={"logprobs": None}), FakeContext())))
    assert w.replica_gone.is_set()
    with pytest.raises(Migrate):  # and so is every later request, until the worker has left
        asyncio.run(collect(w.generate(CAPTURED, FakeContext())))


def test_a_bad_request_fails_alone_naming_the_field():
    w = worker([])
    with pytest.raises(BadRequest, match="use_beam_search"):
        asyncio.run(collect(w.generate(request(sampling_options={"use_beam_search": True}), FakeContext())))
    assert not w.engine.started
    refused = worker([error_kind("[INVALID_ARG] invalid 'runtime_top_k': 100000 exceeds the vocabulary size")])
    with pytest.raises(BadRequest, match="runtime_top_k"):
        asyncio.run(collect(refused.generate(CAPTURED, FakeContext())))
    assert not refused.replica_gone.is_set()
