"""The stand-in's toy model: a generator for unit tests that need no built CPU engine.

An LLM(model=dir) whose dir/config.json holds a "standin_toy_model" object generates with
this instead of the CPU engine.  What it computes is made up (each position's logits are a
fixed pseudo-random function of the previous token and the position); how it runs follows
the executor, so the LLM API's result stream is upstream's:

- one background thread runs iterations; each running sequence gains one token per
  iteration, and each sequence answers with its own response (responses.RequestResults,
  LlmRequest::createResult), in creation order: the parent request, then its children;
- a request runs best_of sequences.  The sampler is the LLM's (samplers.py): with
  TRTLLMSampler sequence i is seeded seed + i (responses.sequence_seed) and its draws follow
  its seed, and the penalties and single-token bad words change the logits; with TorchSampler
  (the default) every sequence draws from one generator seeded 42, in iteration order, and the
  penalties, bad words, seeds and min_p are silently ignored - as 1.2.1 does (rows pytorch.* of
  contract/upstream/data/sampling_support_1.2.1.json; fixed upstream after 1.2.1 by PRs
  #16485, #16052, #17172, #16590); min_p with TRTLLMSampler is refused (not read upstream);
- logprobs = K: with TorchSampler the K most likely tokens of each position, ranked, from the
  log_softmax before temperature / top-k / top-p; the sampled token is not added when outside
  them (row result.logprobs.top_k, sampled_token_included false).  With TRTLLMSampler the
  sampled token's log prob only (of the penalized logits), rank 1, whatever K is;
- a stop token id or the end id ends a sequence (not before min_tokens) and stays in its
  tokens (the LLM API trims stop words: result.py 416-424; that the end id stays is not
  confirmed upstream); max_tokens ends it with LENGTH;
- an aborted request's sequences end at the next iteration with CANCELLED;
- every iteration queues one iteration stat (row stats.iteration_json) when
  enable_iter_perf_stats is set; no iteration runs, and no stat comes, while nothing runs.
  An iteration's stat counts the blocks of every sequence that took part in it, finished
  ones too (not read upstream: when PyExecutor takes the stat relative to freeing blocks)."""

from __future__ import annotations

import json
import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..executor.responses import FinishReason, RequestResults, sequence_count, sequence_seed
from ..executor.result import Logprob
from . import samplers

CONFIG_KEY = "standin_toy_model"


@dataclass(frozen=True)
class ToySettings:
    vocab_size: int
    tokens_per_block: int = 4
    max_num_blocks: int = 1000
    iteration_s: float = 0.0005  # how long one iteration takes


def logits_at(previous: int, position: int, vocab_size: int) -> list[float]:
    """The toy model's logits over the vocabulary for one position."""
    rng = random.Random(previous * 1_000_003 + position)
    return [rng.gauss(0.0, 2.0) for _ in range(vocab_size)]


def log_probs_at(previous: int, position: int, vocab_size: int) -> list[float]:
    """The toy model's log_softmax over the vocabulary for one position."""
    return samplers.log_softmax(logits_at(previous, position, vocab_size))


def sample(lps: list[float], params, rng: random.Random, temperature: Optional[float] = None) -> int:
    """Greedy as row sampling.greedy says; otherwise temperature, then top-k, then top-p."""
    if params.is_greedy:
        return max(range(len(lps)), key=lambda t: (lps[t], -t))
    if temperature is None:
        temperature = params.temperature if params.temperature is not None else 1.0
    ranked = sorted(range(len(lps)), key=lambda t: (-lps[t], t))[:params.top_k or len(lps)]
    weights = [math.exp(lps[t] / temperature) for t in ranked]
    total, kept, mass = sum(weights), [], 0.0
    for t, w in zip(ranked, weights):
        kept.append((t, w))
        mass += w / total
        if params.top_p is not None and mass >= params.top_p:
            break
    draw = rng.random() * sum(w for _, w in kept)
    for t, w in kept:
        draw -= w
        if draw < 0:
            return t
    return kept[-1][0]


@dataclass
class _Sequence:
    request_id: int
    index: int
    output: object  # the RequestOutput its responses go to
    results: RequestResults
    params: object
    prompt: list
    rng: random.Random
    tokens: list = field(default_factory=list)
    cum: float = 0.0
    done: bool = False

    def blocks(self, tokens_per_block: int) -> int:
        return -(-(len(self.prompt) + len(self.tokens)) // tokens_per_block)


class ToyModel:
    def __init__(self, settings: ToySettings, max_batch_size: int, on_stat: Callable[[str], None],
                 iteration_stats: bool, sampler: str = samplers.TORCH) -> None:
        self._settings = settings
        self._sampler = sampler
        self._shared_rng = random.Random(samplers.TORCH_GLOBAL_SEED)  # TorchSampler's one generator
        self._max_batch = max_batch_size
        self._on_stat = on_stat if iteration_stats else None
        self._cond = threading.Condition()
        self._sequences: list[_Sequence] = []  # admission order: parent, then children
        self._aborted: set[int] = set()
        self._stall_s = 0.0
        self._iteration = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="standin-toy-model", daemon=True)
        self._thread.start()

    def submit(self, output, prompt: list, params, lora_request=None) -> None:
        if lora_request is not None:
            raise NotImplementedError("tensorrt_llm stand-in (toy model): LoRA adapters")
        unread = samplers.unread_fields(params, self._sampler)
        if unread:
            raise NotImplementedError(f"tensorrt_llm stand-in (toy model): SamplingParams {unread} on {self._sampler} "
                                      "(not read upstream)")
        results = RequestResults(output.request_id, params, output._streaming)
        with self._cond:
            for index in range(sequence_count(params)):
                seed = sequence_seed(params, index)
                self._sequences.append(_Sequence(output.request_id, index, output, results, params, list(prompt),
                                                 random.Random(seed if seed is not None else 0)))
            self._cond.notify()

    def abort(self, request_id: int) -> None:
        with self._cond:
            self._aborted.add(request_id)
            self._cond.notify()

    def stall(self, seconds: float) -> None:
        """Tests: the next iteration takes this long (a slow prefill, a busy GPU)."""
        self._stall_s = seconds

    def counts(self) -> tuple[int, int]:
        with self._cond:
            running = min(len(self._sequences), self._max_batch)
            return running, len(self._sequences) - running

    def shutdown(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._sequences and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                batch = self._sequences[:self._max_batch]
                aborted = set(self._aborted)
            stall, self._stall_s = self._stall_s, 0.0
            time.sleep(self._settings.iteration_s + stall)
            for seq in batch:
                self._advance(seq, seq.request_id in aborted)
            self._iteration += 1
            if self._on_stat is not None:
                self._on_stat(self._stat(batch))
            with self._cond:
                self._sequences = [s for s in self._sequences if not s.done]
                waiting = {s.request_id for s in self._sequences}
                self._aborted &= waiting
                for seq in self._sequences[self._max_batch:]:  # aborted while waiting: end now
                    if seq.request_id in self._aborted:
                        self._advance(seq, True)
                self._sequences = [s for s in self._sequences if not s.done]

    def _advance(self, seq: _Sequence, aborted: bool) -> None:
        if aborted:
            reason, new, entries = FinishReason.CANCELLED, [], []
        else:
            new, entries, reason = self._next_token(seq)
        seq.done = reason is not FinishReason.NOT_FINISHED
        response = seq.results.advance(seq.index, new, entries, seq.cum, reason)
        if response is not None:
            seq.output.post(response)

    def _next_token(self, seq: _Sequence) -> tuple[list, list, FinishReason]:
        p = seq.params
        context = seq.prompt + seq.tokens
        logits = logits_at(context[-1] if context else 0, len(context), self._settings.vocab_size)
        if self._sampler == samplers.TRTLLM:  # the C++ decoder: penalties, bad words, the request's seed
            lps = samplers.log_softmax(samplers.penalized(logits, p, context, self._sampler))
            token = sample(lps, p, seq.rng, temperature=1.0)  # 1/temperature already applied
            entries = [{token: Logprob(lps[token], rank=1)}] if p.logprobs else []
        else:  # TorchSampler: none of them; one generator for every request
            lps = samplers.log_softmax(logits)
            token = sample(lps, p, self._shared_rng)
            entries = [self._top(lps, p.logprobs)] if p.logprobs else []
        seq.tokens.append(token)
        seq.cum += lps[token]
        allowed = len(seq.tokens) >= (p.min_tokens or 0)
        if allowed and token == p.end_id:
            return [token], entries, FinishReason.END_ID
        if allowed and token in (p.stop_token_ids or ()):
            return [token], entries, FinishReason.STOP_WORDS
        if len(seq.tokens) >= p.max_tokens:
            return [token], entries, FinishReason.LENGTH
        return [token], entries, FinishReason.NOT_FINISHED

    @staticmethod
    def _top(lps: list[float], k: int) -> dict:
        ranked = sorted(range(len(lps)), key=lambda t: (-lps[t], t))[:k]
        return {t: Logprob(lps[t], rank=r + 1) for r, t in enumerate(ranked)}

    def _stat(self, batch: list[_Sequence]) -> str:
        s = self._settings
        used = min(s.max_num_blocks, sum(seq.blocks(s.tokens_per_block) for seq in batch))
        return json.dumps({"iter": self._iteration, "numActiveRequests": len(batch), "numQueuedRequests": 0,
                           "kvCacheStats": {"maxNumBlocks": s.max_num_blocks, "usedNumBlocks": used,
                                            "freeNumBlocks": s.max_num_blocks - used,
                                            "tokensPerBlock": s.tokens_per_block}})


def settings(config: dict) -> Optional[ToySettings]:
    """The toy model's settings from a checkpoint's config.json, None when it is not one."""
    toy = config.get(CONFIG_KEY)
    return None if toy is None else ToySettings(vocab_size=config["vocab_size"], **toy)
