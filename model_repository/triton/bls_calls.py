"""Calls shared by the Python models that call other models (engine_relay, tensorrt_llm_bls),
so neither model.py copies them: unary BLS calls (preprocessing, postprocessing) and the
engine streams, which go over the server's own gRPC endpoint (engine_grpc.py says why).
Imported only inside the Python-backend stub, where `triton_python_backend_utils` exists."""

from __future__ import annotations

import functools
import gc
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import triton_python_backend_utils as pb_utils

from contract import metrics
from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import EngineRelayParameters
from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics
from model_repository.engine_step.engine_metrics import MetricsRecorder
from model_repository.engines.relay import engine_errors
from model_repository.engines.relay.bls_pipeline import (
    closing_response,
    new_log_probs,
    row_of,
    sequence_of,
    without_base_adapter,
)
from model_repository.engines.relay.draft_target import DraftLoop, LoopCancelled, response_arrays
from model_repository.engines.relay.relay import FINISHED, Relay, SingleResponse, requested_outputs, stop_request_arrays
from model_repository.engines.relay.relay_pool import RelayPool
from model_repository.triton import triton_io
from model_repository.triton.engine_grpc import EngineClient, RelayConfigError, own_server_target
from model_repository.triton.triton_metrics import TritonMetricsPublisher


def copied_arrays(request, names: Iterable[str]) -> dict[str, np.ndarray]:
    """Copies of the request's tensors: work that outlives execute() must not read the
    request's shared memory after Triton releases the request."""
    out = {}
    for name in names:
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is not None:
            out[name] = np.array(tensor.as_numpy(), copy=True)
    return out


def tensors(arrays: Mapping[str, object]) -> list:
    """Triton tensors of arrays; Triton tensors pass as they are (an engine's logits may live
    in GPU memory and are never copied through numpy)."""
    return [
        value if isinstance(value, pb_utils.Tensor) else pb_utils.Tensor(name, value) for name, value in arrays.items()
    ]


# What a relay in front of TensorRT-LLM can know: no KV-cache usage (TensorRT-LLM's own
# nv_trt_llm_kv_cache_block_metrics say it), no queue time (the executor's own).
RELAY_METRICS = tuple(m for m in metrics.ENGINE_METRICS if m not in (metrics.KV_CACHE_USAGE, metrics.QUEUE_TIME))

# Engine outputs a relay reads (small, CPU); the others are forwarded as Triton tensors.
READ_OUTPUTS = frozenset(
    {"output_ids", "sequence_length", "cum_log_probs", "output_log_probs", "batch_index", "sequence_index"}
)


def call(
    model: str,
    arrays: Mapping[str, np.ndarray],
    outputs: Iterable[str],
    request_id: str = "",
    trace=None,
    parameters: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """One request to a non-decoupled model; raises with the model's error message.  `trace`:
    the calling request's `request.trace()` (only while that request is alive, i.e. inside
    execute()); `parameters`: its W3C trace context (model_repository/triton/tracing.py)."""
    extra = {} if trace is None else {"trace": trace}
    response = pb_utils.InferenceRequest(
        model_name=model,
        inputs=tensors(arrays),
        request_id=request_id,
        requested_output_names=list(outputs),
        parameters=dict(parameters) if parameters else None,
        **extra,
    ).exec()
    if response.has_error():
        raise BlsError(response.error().message())
    return copied_outputs(response)


def copied_outputs(response) -> dict[str, np.ndarray]:
    """A BLS response's tensors as arrays that outlive the response."""
    return {t.name(): np.array(t.as_numpy(), copy=True) for t in response.output_tensors()}


class BlsError(RuntimeError):
    pass


class EngineStreams:
    """The relays' engine calls (model_repository/triton/engine_grpc.py says why over gRPC),
    each reply as a Python-backend response, so the relays handle them as any response."""

    def __init__(self, client: EngineClient) -> None:
        self.client = client

    def stream(
        self,
        model: str,
        arrays: Mapping[str, np.ndarray],
        outputs: Iterable[str],
        request_id: str,
        trace: Mapping[str, str] | None = None,
    ):
        """A streamed request to `model`: iterate it to the end."""
        for reply in self.client.stream(model, arrays, tuple(outputs), request_id, trace=trace):
            if reply.error is not None:
                yield pb_utils.InferenceResponse(output_tensors=[], error=engine_error(reply.error))
            else:
                yield pb_utils.InferenceResponse(
                    [pb_utils.Tensor(name, value) for name, value in reply.outputs.items()]
                )

    def cancel(self, model: str, request_id: str, _responses=None) -> None:
        """Stop a streamed request: TensorRT-LLM's stop request (same request id, stop=true),
        which every engine model of ours and the C++ backend honour (upstream row stop.lookup).
        The stream itself is read on to its end by its reader."""
        self.client.stop(model, stop_request_arrays(), request_id)


def engine_error(message: str):
    """A Triton error of an engine's error message: a model of ours leads it with its code
    (triton_io.error), which gRPC's stream carries only in the text; others are INTERNAL."""
    match = engine_errors.OUR_CODE.match(message)
    code = getattr(pb_utils.TritonError, match.group(1)) if match else pb_utils.TritonError.INTERNAL
    return pb_utils.TritonError(message, code)


class SenderSink:
    """A RelaySink over a request's ResponseChannel (the cancel watcher's queries and the relay
    thread's sends meet there) for a request of `rows` prompts; subclasses say what one engine
    response becomes (`outputs`)."""

    def __init__(self, channel, rows: int, streaming: bool):
        self.channel = channel
        self.rows = rows
        self.streaming = streaming
        self.sequences = {row: {0} for row in range(rows)}  # the samples each prompt answered with

    def outputs(self, engine: dict) -> dict:
        raise NotImplementedError

    def is_cancelled(self):
        return self.channel.is_cancelled()

    def forward(self, response, final=False):
        engine = {t.name(): t.as_numpy() if t.name() in READ_OUTPUTS else t for t in response.output_tensors()}
        engine = new_log_probs(engine, self.streaming)
        self.sequences.setdefault(row_of(engine), {0}).add(sequence_of(engine))
        self._send(self.outputs(engine), final)

    def _send(self, arrays, final):
        response = pb_utils.InferenceResponse(tensors(arrays))
        if final:
            self.channel.finish(response)
        else:
            self.channel.send(response)

    def forward_error(self, response):
        code, message = engine_errors.classify(response.error().message())
        if code is None:
            self.channel.finish(pb_utils.InferenceResponse(error=response.error()))
        else:
            triton_io.fail(self.channel, message, code)

    def fail(self, message, code):
        triton_io.fail(self.channel, message, code)

    def finish(self):
        if not self.streaming:
            self.channel.finish()
            return
        # a streamed request ends with a closing response per prompt and sample
        closing = [(row, sequence) for row in sorted(self.sequences) for sequence in sorted(self.sequences[row])]
        for i, (row, sequence) in enumerate(closing):
            self._send(self.outputs(closing_response(row, sequence)), final=i == len(closing) - 1)


class MeasuredSink:
    """Records one relayed request's time to first token, inter-token latency and tokens (the
    GPU path: TensorRT-LLM's backend records none of the llm_* metrics), then passes on."""

    def __init__(self, sink, recorder: MetricsRecorder) -> None:
        self._sink = sink
        self._recorder = recorder
        self._last = time.monotonic()
        self._first = True

    def forward(self, response, final=False):
        count = pb_utils.get_output_tensor_by_name(response, "sequence_length")
        count = int(count.as_numpy().sum()) if count is not None else 0
        if count:
            now = time.monotonic()
            self._recorder.on_tokens(self._first, now - self._last, count)
            self._first, self._last = False, now
        self._sink.forward(response, final)

    def __getattr__(self, name):  # is_cancelled, forward_error, fail, finish
        return getattr(self._sink, name)


@dataclass(frozen=True)
class RelayModel:
    """What a model that relays to an engine (engine_relay, tensorrt_llm_bls) starts with."""

    params: EngineRelayParameters
    pool: RelayPool
    engines: EngineStreams
    decoupled: bool  # false: NVIDIA's decoupled_mode false (one response per request)
    recorder: MetricsRecorder | None = None  # the llm_* metrics, in front of TensorRT-LLM
    publisher: TritonMetricsPublisher | None = None

    def shutdown(self) -> None:
        if self.publisher is not None:
            self.publisher.stop()
        self.pool.shutdown()
        self.engines.client.close()
        # Whatever cyclic garbage still holds a response sender is freed now: freed by the
        # interpreter's last collection (Py_FinalizeEx), after the stub has unmapped its shared
        # memory, a sender's destructor segfaults the stub (2.51's ~ResponseSender -> PbCancel,
        # measured on the BLS stub of a draft-target layout: at 2 stops of 2 before, none of 2 after).
        gc.collect()

    def refusal(self, streaming: bool, batch_size: int) -> str | None:
        """What a non-decoupled deployment cannot serve, in TensorRT-LLM's words (upstream
        table rows error.streaming_needs_decoupled, error.batch_needs_decoupled)."""
        if self.decoupled:
            return None
        semantics = backend_semantics(SUPPORTED_VERSIONS[0])  # the texts are the same in every supported version
        if streaming:
            return semantics.error("error.streaming_needs_decoupled").render()
        if batch_size > 1:
            return semantics.error("error.batch_needs_decoupled").render()
        return None

    def sink(self, sink):
        sink = sink if self.decoupled else SingleResponse(sink)
        return sink if self.recorder is None else MeasuredSink(sink, self.recorder)

    def serve(
        self, channel, request_id: str, engine: dict, sink_for, id_prefix: str, trace: Mapping[str, str] | None = None
    ) -> None:
        """Relay `engine` (the engine's inputs) to the target under the client's request id,
        or refuse what this deployment cannot serve; `sink_for(streaming)` makes the sink."""
        streaming = bool(np.asarray(engine.get("streaming", False)).reshape(-1)[0])
        refusal = self.refusal(streaming, len(engine["input_ids"]))
        if refusal:
            triton_io.fail(channel, refusal)
            return
        relay_stream(
            self.pool,
            self.engines,
            self.params.target_model,
            without_base_adapter(engine),
            self.sink(sink_for(streaming)),
            request_id,
            id_prefix,
            trace,
        )

    def serve_draft_target(self, channel, request_id: str, engine: dict, drafts: int, sink, id_prefix: str) -> None:
        """The draft loop (model_repository/engines/relay/draft_target.py) on a pool worker, as
        one relayed request: the client's cancellation and `stop` reach the call in flight."""
        request_id = request_id or f"{id_prefix}-{uuid.uuid4().hex}"
        loop = DraftLoopStream(self.engines, self.params, without_base_adapter(engine), drafts, request_id)
        relay = Relay(
            request_id, self.sink(sink), lambda: loop, functools.partial(self.engines.cancel, self.params.target_model)
        )
        answered = weakref.ref(relay)  # weak: a relay <-> loop cycle would keep its sender until shutdown()
        loop.on_answer = lambda: setattr(answered(), "responded", True)  # the engines answer: no first-token timeout
        self.pool.submit(relay)

    def stop(self, channel, request) -> None:
        triton_io.answer_stop(channel, request.request_id(), self.pool.cancel_id, decoupled=self.decoupled)


class DraftLoopStream:
    """A draft loop as a relay's response stream: one response (the whole answer) or the
    error of the engine call that failed; cancel() ends the loop and cancels the call in flight."""

    def __init__(
        self, engines: EngineStreams, params: EngineRelayParameters, engine: dict, drafts: int, request_id: str
    ) -> None:
        self._engines = engines
        self._request_id = request_id
        self._engine = engine
        self._lock = threading.Lock()
        self._in_flight: str | None = None  # the model of the engine call in flight
        self.on_answer = lambda: None
        self.loop = DraftLoop(engine, drafts, self._call, params.draft_model, params.target_model, self._cancel_call)

    def _call(self, model: str, arrays: dict) -> dict:
        responses = self._engines.stream(model, arrays, requested_outputs(arrays), self._request_id)
        with self._lock:
            self._in_flight = model
        answer, error = None, None
        try:
            for response in responses:  # to the end: the call ends with the server's status
                if error is None and response.has_error():
                    error = response.error().message()
                elif error is None and response.output_tensors():
                    answer = copied_outputs(response)
        finally:
            with self._lock:
                self._in_flight = None
        if error is not None:
            raise BlsError(error)
        if answer is None:
            raise BlsError(f"{model} ended the request without a response")
        self.on_answer()
        return answer

    def _cancel_call(self) -> None:
        with self._lock:
            in_flight = self._in_flight
        if in_flight is not None:
            self._engines.cancel(in_flight, self._request_id)

    def cancel(self) -> bool:
        self.loop.cancel()
        return True

    def __iter__(self):
        try:
            result = self.loop.run()
        except LoopCancelled:
            return  # the relay answers the client
        except BlsError as e:
            yield pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
            return
        yield pb_utils.InferenceResponse(tensors(response_arrays(result, self._engine)))


def start_relays(model_name: str, args) -> RelayModel:
    """Initialize a model that relays to an engine: read its EngineRelayParameters, refuse an
    engine built by other runtime versions, start the worker threads and the cancel watcher."""
    triton_io.log_environment(model_name)
    params = triton_io.load_parameters(args, EngineRelayParameters)
    record = BuildRecord.read(params.engine_dir)
    check_runtime(record)  # refuses an engine built by other TensorRT-LLM / TensorRT versions
    config = triton_io.model_config(args)
    max_batch_size = int(config["max_batch_size"])
    decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled", False))

    def log_outcome(relay, outcome, seconds):
        if outcome != FINISHED:
            triton_io.logger().log_info(f"{model_name}: {relay.request_id} {outcome} after {seconds:.2f}s")

    triton_io.logger().log_info(
        f"{model_name}: -> {params.target_model}, engine {params.engine_dir} "
        f"({record.spec['precision']}, built with {record.versions}), "
        f"{'decoupled' if decoupled else 'one response per request'}"
    )
    recorder = MetricsRecorder() if params.record_metrics else None

    def done(relay, outcome, seconds):
        log_outcome(relay, outcome, seconds)
        if recorder is not None:
            recorder.on_finished(None, 0, outcome)

    try:
        engines = EngineStreams(EngineClient(own_server_target()))
    except RelayConfigError as e:
        raise pb_utils.TritonModelException(f"{model_name}: {e}") from None
    pool = RelayPool(
        max_workers=2 * max_batch_size,
        cancel_period_s=params.cancel_check_period_ms / 1000,
        on_done=done,
        first_token_timeout_s=params.first_token_timeout_s or None,
    )
    publisher = None
    if recorder is not None:

        def gauges():
            running, waiting = pool.counts()
            return {metrics.REQUESTS_RUNNING.name: running, metrics.REQUESTS_WAITING.name: waiting}

        publisher = TritonMetricsPublisher(config["name"], RELAY_METRICS, gauges, recorder)
        publisher.start()
    return RelayModel(params, pool, engines, decoupled, recorder, publisher)


def relay_stream(
    pool: RelayPool,
    engines: EngineStreams,
    target: str,
    arrays: Mapping[str, np.ndarray],
    sink,
    request_id: str,
    id_prefix: str,
    trace: Mapping[str, str] | None = None,
) -> None:
    """Stream `arrays` to the engine model `target` on a pool worker, the responses into
    `sink`, under the client's request id: a `stop` for that id (through the ensemble or to
    this model) reaches the engine request, whose backend keys stops by the Triton request
    id it received (upstream table row stop.lookup).  A request without an id gets a fresh
    one (it cannot be stopped by id, as upstream: row request_id.map)."""
    request_id = request_id or f"{id_prefix}-{uuid.uuid4().hex}"
    start = functools.partial(engines.stream, target, arrays, requested_outputs(arrays), request_id, trace)
    pool.submit(Relay(request_id, sink, start, functools.partial(engines.cancel, target)))
