"""The CPU engine under test, run in this process with the precision it is served with.

Logits come from the exported IR itself (its `logits` output; stateful KV cache), fed in
chunks of the serving step size, so scored tokens read earlier tokens' keys and values back
from the KV cache in its configured precision, as when served.  Greedy answers come from the
serving path: OpenVINO GenAI's ContinuousBatchingPipeline with the same properties.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from model_repository.engines.openvino.ir_scorer import IR_MODEL_FILE, IrScorer


class OpenVinoScorer:
    def __init__(self, engine_dir: Path, properties: dict[str, object], chunk: int = 512) -> None:
        self.engine_dir = engine_dir
        self.properties = dict(properties)
        self.chunk = chunk
        self._scorer = IrScorer(engine_dir, self.properties, chunk)
        compiled = self._scorer.compiled
        self.describe = {
            "engine": "openvino",
            "ir": str(engine_dir / IR_MODEL_FILE),
            "properties": {k: str(v) for k, v in self.properties.items()},
            "effective": {
                k: str(compiled.get_property(k))
                for k in ("INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION", "DYNAMIC_QUANTIZATION_GROUP_SIZE")
            },
        }

    def logits(self, ids: list[int], first: int) -> np.ndarray:
        """Logits of positions first-1 .. len(ids)-2 (the predictions of ids[first:]).  [T, V]"""
        scoring = self._scorer.start(ids[:first])
        try:
            return scoring.extend(ids[first:])
        finally:
            scoring.close()

    def greedy_answers(self, prompts: list[list[int]], max_new_tokens: int, eos_ids: set[int]) -> list[list[int]]:
        """Greedy answers through the serving pipeline, one request at a time."""
        import openvino as ov
        import openvino_genai as og

        sc = og.SchedulerConfig()
        sc.cache_size, sc.max_num_seqs, sc.max_num_batched_tokens = 0, 4, self.chunk
        sc.dynamic_split_fuse, sc.enable_prefix_caching = True, False
        pipe = og.ContinuousBatchingPipeline(str(self.engine_dir), sc, "CPU", self.properties)
        answers = []
        for n, ids in enumerate(prompts):
            gc = og.GenerationConfig()
            gc.max_new_tokens, gc.do_sample = max_new_tokens, False
            gc.eos_token_id, gc.stop_token_ids = min(eos_ids), set(eos_ids)
            handle = pipe.add_request(n, ov.Tensor(np.asarray([ids], dtype=np.int64)), gc)
            tokens: list[int] = []
            while pipe.has_non_finished_requests():
                pipe.step()
                while handle.can_read():
                    for out in handle.read().values():
                        tokens.extend(out.generated_ids)
            answers.append(tokens)
        return answers
