"""The CPU engine behind the stand-in's executor: model_repository.engine_step.runner's step loop over
OpenVINO GenAI, with the per-sequence bookkeeping the backend's metrics need.

OpenVINO does not expose KV-cache blocks, so the stand-in models TensorRT-LLM's paged cache:
a running sequence of L tokens holds ceil(L / tokens_per_block) blocks (no reuse), and the
pool is what the CPU engine may hold at most: max_batch_size sequences of max_seq_len.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from contract.build_record import BuildRecord
from contract.kv_cache import TOKENS_PER_BLOCK
from contract.lora import LoraAdapter, to_parameter
from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.runner import EngineRunner, GenerationBackend, Handle, HandleStatus
from model_repository.engine_step.engine_inputs import EngineInputs
from standins.trtllm.settings import EngineLimits

# Upstream streams every iteration's tokens at once (row output.token_window).
STREAM_EVERY_STEP = 1


@dataclass(frozen=True)
class SequenceStats:
    running: int
    in_context: int  # no token produced yet (context phase)
    context_tokens: int  # prompt tokens of those
    used_blocks: int
    max_blocks: int
    tokens_per_block: int


class _CountingHandle:
    def __init__(self, handle: Handle, books: "AccountingBackend", key: int) -> None:
        self._handle, self._books, self._key = handle, books, key

    def read(self):
        ids, lps = self._handle.read()
        self._books.produced(self._key, len(ids))
        return ids, lps

    def read_sequences(self):  # num_return_sequences > 1 (model_repository/engine_step/sequences.py)
        out = self._handle.read_sequences()
        self._books.produced(self._key, sum(len(ids) for ids, _ in out.values()))
        return out

    def status(self) -> HandleStatus:
        status = self._handle.status()
        if status != HandleStatus.RUNNING:
            self._books.ended(self._key)
        return status

    def stop(self) -> None:
        self._handle.stop()

    def cancel(self) -> None:
        self._handle.cancel()
        self._books.ended(self._key)


class AccountingBackend:
    """A GenerationBackend that counts each running sequence's tokens (thread-safe reads)."""

    def __init__(self, backend: GenerationBackend, limits: EngineLimits, tokens_per_block: int = TOKENS_PER_BLOCK) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._live: dict[int, list[int]] = {}  # key -> [prompt tokens, generated tokens]
        self.tokens_per_block = tokens_per_block
        self.max_blocks = limits.max_batch_size * math.ceil(limits.max_seq_len / tokens_per_block)

    def add(self, request_id: int, request: EngineInputs) -> Handle:
        handle = self._backend.add(request_id, request)
        with self._lock:
            self._live[request_id] = [len(request.input_ids), 0]
        return _CountingHandle(handle, self, request_id)

    def produced(self, key: int, count: int) -> None:
        with self._lock:
            if key in self._live:
                self._live[key][1] += count

    def ended(self, key: int) -> None:
        with self._lock:
            self._live.pop(key, None)

    @property
    def guides_every_sequence(self) -> bool:  # EngineRunner asks (guided decoding with n > 1)
        return getattr(self._backend, "guides_every_sequence", True)

    def step(self) -> None:
        self._backend.step()

    def has_unfinished(self) -> bool:
        return self._backend.has_unfinished()

    def stats(self) -> dict[str, float]:
        return self._backend.stats()

    def sequences(self) -> SequenceStats:
        with self._lock:
            live = [tuple(v) for v in self._live.values()]
        context = [p for p, g in live if g == 0]
        used = sum(math.ceil((p + g) / self.tokens_per_block) for p, g in live)
        return SequenceStats(len(live), len(context), sum(context), used, self.max_blocks, self.tokens_per_block)


def openvino_parameters(engine_dir: Path, limits: EngineLimits, adapters: Sequence[LoraAdapter] = ()) -> OpenVinoEngineParameters:
    """The CPU engine run with the engine's own limits (and its recorded CPU options), serving
    the LoRA cache's adapters.  enable_kv_cache_reuse is not mapped to prefix caching: reuse
    changes speed, not tokens."""
    options = BuildRecord.read(engine_dir).spec.get("openvino", {})
    return OpenVinoEngineParameters(
        engine_dir=engine_dir, max_num_seqs=limits.max_batch_size, max_num_batched_tokens=limits.max_num_tokens,
        kv_cache_size_gb=options.get("kv_cache_size_gb", 0), inference_threads=options.get("inference_threads", 0),
        lora_adapters=to_parameter(list(adapters)) if adapters else "",
        **{k: options[k] for k in ("activation_precision", "kv_cache_precision",
                                                 "dynamic_quantization_group_size") if k in options})


def start_engine(engine_dir: Path, limits: EngineLimits,
                 adapters: Sequence[LoraAdapter] = ()) -> tuple[EngineRunner, AccountingBackend]:
    """The OpenVINO pipeline (warmed up) behind the runner.  Cancellation reaches it only
    through EngineRunner.stop (the executor's), never through the runner's own sink checks,
    and there is no queue bound or first-token timeout here: upstream's executor has neither
    in the runner's sense (the stand-in's executor bounds its own queue)."""
    from model_repository.engines.openvino.openvino_backend import OpenVinoBackend

    backend = OpenVinoBackend(openvino_parameters(engine_dir, limits, adapters))
    backend.warm_up()
    books = AccountingBackend(backend, limits)
    runner = EngineRunner(books, stream_interval=STREAM_EVERY_STEP)
    runner.start()
    return runner, books
