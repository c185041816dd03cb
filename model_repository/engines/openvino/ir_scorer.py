"""The CPU engine's logits outside the pipeline: its IR compiled with the engine's numerics
(engine_properties), run over one sequence at a time with the IR's own stateful KV cache.

The continuous-batching pipeline returns one log prob per position; this is where the top-k
alternatives (input top_logprobs) and the fidelity report's logits come from.  Tokens are fed
in chunks, so earlier tokens' keys and values are read back from the KV cache in its configured
precision, as when served.  The kernels are not the pipeline's (the IR's own attention over its
stateful cache, not paged attention), so the numbers differ slightly: measured on the default
int8 engine, the greedy tokens' log probs within 0.08 nats of the pipeline's over 32 tokens
(0.03 over 16 on another prompt) and the greedy token the scorer's top one at 31 of 32
positions (the other a near-tie: 0.03 nats apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

IR_MODEL_FILE = "openvino_model.xml"


def scoring_problems(options) -> list[str]:
    """What the scorer cannot answer (options: GenerationOptions: top_logprobs, prompt_logprobs): it
    runs the base model only."""
    asked = [
        n for n, on in (("top_logprobs", options.top_logprobs > 0), ("prompt_logprobs", options.scores_prompt)) if on
    ]
    if asked and options.lora_task_id:
        return [
            f"'{name}' is not available with a LoRA adapter on the CPU engine (its scorer runs the "
            "base model's IR; OpenVINO GenAI applies adapters inside the pipeline only)"
            for name in asked
        ]
    return []


class IrScoring:
    """One sequence on one infer request (alternatives.Scoring)."""

    def __init__(self, request, prompt: Sequence[int], chunk: int, release: Callable[[object], None]) -> None:
        self._request, self._chunk, self._release = request, chunk, release
        self._pending = [int(t) for t in prompt]  # fed with the next extend()
        self._position = 0
        request.reset_state()

    def extend(self, ids: Sequence[int]) -> np.ndarray:
        """[len(ids), vocab]: the logits of the positions that predicted each of `ids` (the
        first predicted by the prompt, each later one by the token before it)."""
        if not len(ids):
            return np.zeros((0, 0), dtype=np.float32)
        feed = self._pending + [int(t) for t in ids[:-1]]
        skip = len(self._pending) - 1  # rows before it predict tokens already known
        rows = []
        for a in range(0, len(feed), self._chunk):
            part = feed[a : a + self._chunk]
            start = self._position
            self._position += len(part)
            self._request.infer(
                {
                    "input_ids": np.asarray([part], dtype=np.int64),
                    "attention_mask": np.ones((1, self._position), dtype=np.int64),
                    "position_ids": np.arange(start, self._position, dtype=np.int64)[None],
                    "beam_idx": np.zeros(1, dtype=np.int32),
                }
            )
            if a + len(part) > skip:
                logits = self._request.get_tensor("logits").data[0]
                rows.append(np.array(logits[max(0, skip - a) : len(part)], dtype=np.float32))
        self._pending = [int(ids[-1])]
        return np.concatenate(rows)

    def close(self) -> None:
        if self._request is not None:
            self._release(self._request)
            self._request = None


class IrScorer:
    """alternatives.Scorer over the engine's IR; infer requests (one KV state each) are reused."""

    def __init__(self, engine_dir: Path, properties: dict[str, object], chunk: int = 256) -> None:
        import openvino as ov

        self.compiled = ov.Core().compile_model(str(Path(engine_dir) / IR_MODEL_FILE), "CPU", dict(properties))
        self._chunk = chunk  # [chunk, vocab] float32 logits per infer: 48 MiB at 256 for a 49k vocabulary
        self._free: list = []

    def start(self, prompt: Sequence[int]) -> IrScoring:
        request = self._free.pop() if self._free else self.compiled.create_infer_request()
        return IrScoring(request, prompt, self._chunk, self._free.append)
