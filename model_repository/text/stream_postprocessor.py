"""Postprocessing logic: per-request state that turns each engine response (new token ids)
into a text delta, a finish reason and token counts.

The ensemble calls postprocessing once per engine response and tells it nothing about
which responses belong together or which is last, so preprocessing gives every request a
`stream_id`, and the end is recognised here: an end id, `max_tokens` reached, a stop
string, a response without tokens, or - for non-streaming requests - the single response.
Of these only the stop string is decided here (on the text, which no engine sees); the
others are the engine's decision, read from what TensorRT-LLM's output contract carries
(it has no finish-reason tensor).  docs/contract.md, "Where a stream ends".  States whose end never
comes (the client cancelled) are dropped after `ttl_s` idle seconds.  Requests of one
stream must arrive in order: the postprocessing model runs a single instance.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from contract.finish import FinishReason, tokens_end
from model_repository.text.detokenizer import Detokenizer
from model_repository.text.postprocess_params import PostprocessParams
from model_repository.text.stop_strings import StopStringMatcher


@dataclass(frozen=True)
class StepOutput:
    text: str
    finish_reason: FinishReason
    num_input_tokens: int
    num_output_tokens: int


class _Stream:
    def __init__(self, params: PostprocessParams, detokenizer: Detokenizer) -> None:
        self.params = params
        self.detok = detokenizer
        self.stops = StopStringMatcher(params.stop_strings)
        self.end_ids = frozenset(params.end_ids)
        self.generated = 0
        self.echo_pending = bool(params.echo_text)

    def step(self, ids: Sequence[int]) -> tuple[str, FinishReason]:
        room = self.params.max_tokens - self.generated
        end = tokens_end(ids, self.end_ids, room)
        take, finish = list(ids[: end.text_ids]), end.finish
        self.generated += min(end.counted, room)
        if finish == FinishReason.NONE and (not self.params.streaming or not ids):
            # The single response of a non-streaming request is the last; so is a response
            # without tokens (engines send one only to end a stream: TensorRT-LLM leaves the
            # end id out of its output, model_repository/engines/relay/bls_pipeline.py closing_response).
            finish = FinishReason.STOP
        final = finish != FinishReason.NONE
        delta = self.detok.push(take) + (self.detok.flush() if final else "")
        result = self.stops.feed(delta, final=final)
        if result.stopped:
            finish = FinishReason.STOP
        text = result.text
        if self.echo_pending:
            text, self.echo_pending = self.params.echo_text + text, False
        return text, finish


class StreamPostprocessor:
    def __init__(
        self,
        make_detokenizer: Callable[[bool], Detokenizer],
        ttl_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_detok = make_detokenizer
        self._ttl = ttl_s
        self._clock = clock
        self._live: OrderedDict[str, tuple[_Stream, float]] = OrderedDict()
        # Finished streams: later responses of theirs (tokens the engine made past a stop
        # string) yield no text but repeat the outcome.
        self._ended: OrderedDict[str, tuple[FinishReason, int, int, float]] = OrderedDict()
        self._lock = threading.Lock()  # the metrics thread asks too

    def __len__(self) -> int:
        return len(self._live)

    def live_streams(self) -> int:
        """Streams with state, after dropping the expired ones."""
        with self._lock:
            self._evict(self._clock())
            return len(self._live)

    def process(self, params_json: str | bytes, ids: Sequence[int], sequence: int = 0) -> StepOutput:
        """`sequence`: which of the request's num_return_sequences samples (each its own stream)."""
        with self._lock:
            return self._process(params_json, ids, sequence)

    def _process(self, params_json: str | bytes, ids: Sequence[int], sequence: int) -> StepOutput:
        stream_id = _stream_id(params_json) + (f"#{sequence}" if sequence else "")
        now = self._clock()
        self._evict(now)
        if stream_id in self._ended:
            reason, n_in, n_out, _ = self._ended[stream_id]
            self._ended[stream_id] = (reason, n_in, n_out, now)
            self._ended.move_to_end(stream_id)
            return StepOutput("", reason, n_in, n_out)
        entry = self._live.pop(stream_id, None)
        if entry is None:
            params = PostprocessParams.from_json(params_json)
            stream = _Stream(params, self._make_detok(params.skip_special_tokens))
        else:
            stream = entry[0]
        text, finish = stream.step(ids)
        n_in, n_out = stream.params.num_input_tokens, stream.generated
        if finish == FinishReason.NONE:
            self._live[stream_id] = (stream, now)
        else:
            self._ended[stream_id] = (finish, n_in, n_out, now)
        return StepOutput(text, finish, n_in, n_out)

    def _evict(self, now: float) -> None:
        _evict_older(self._live, now, self._ttl)
        _evict_older(self._ended, now, self._ttl)


def _stream_id(params_json: str | bytes) -> str:
    """The stream id without parsing the whole document (it is serialized first)."""
    text = params_json.decode() if isinstance(params_json, bytes) else params_json
    prefix = '{"stream_id":"'
    if text.startswith(prefix):
        end = text.find('"', len(prefix))
        if end > 0:
            return text[len(prefix) : end]
    return PostprocessParams.from_json(text).stream_id


_Entry = TypeVar("_Entry", bound=tuple)


def _evict_older(table: OrderedDict[str, _Entry], now: float, ttl: float) -> None:
    """Drop the oldest entries (last item: when last used) that are more than `ttl` old."""
    while table:
        key, value = next(iter(table.items()))
        if now - value[-1] <= ttl:
            break
        del table[key]
