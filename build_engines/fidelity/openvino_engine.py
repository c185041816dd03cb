"""The CPU engine under test, run in this process with the precision it is served with.

Logits come from the exported IR itself (its `logits` output; stateful KV cache), fed in
chunks of the serving step size, so scored tokens read earlier tokens' keys and values back
from the KV cache in its configured precision, as when served.  Greedy answers come from the
serving path: OpenVINO GenAI's ContinuousBatchingPipeline with the same properties.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from build_engines.openvino.numerics import Numerics
from model_repository.engines.openvino.ir_scorer import IR_MODEL_FILE, IrScorer


def compile_properties(engine_dir: Path, numerics: Numerics, inference_threads: int) -> dict[str, object]:
    """The OpenVINO properties the served engine model compiles with for `numerics`, checked as it
    checks them (model_repository/engines/openvino/openvino_backend.py: engine_properties)."""
    from contract.model_configs import OpenVinoEngineParameters
    from model_repository.engines.openvino.openvino_backend import engine_properties

    params = OpenVinoEngineParameters(
        engine_dir=engine_dir,
        max_num_seqs=1,
        max_num_batched_tokens=512,
        inference_threads=inference_threads,
        activation_precision=numerics.activation_precision,
        kv_cache_precision=numerics.kv_cache_precision,
        dynamic_quantization_group_size=numerics.dynamic_quantization_group_size,
    )
    params.validate()
    return engine_properties(params)


def serving_pipeline(engine_dir: Path, properties: dict[str, object], max_num_seqs: int, chunk: int):
    """OpenVINO GenAI's ContinuousBatchingPipeline as the engine model steps it (dynamic split-fuse
    in chunks of `chunk` tokens, the KV pool grown on demand), prefix caching off: what the greedy
    answers and the numerics sweep's speed runs go through."""
    import openvino_genai as og

    scheduler = og.SchedulerConfig()
    scheduler.cache_size, scheduler.max_num_seqs, scheduler.max_num_batched_tokens = 0, max_num_seqs, chunk
    scheduler.dynamic_split_fuse, scheduler.enable_prefix_caching = True, False
    return og.ContinuousBatchingPipeline(str(engine_dir), scheduler, "CPU", properties)


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

        pipe = serving_pipeline(self.engine_dir, self.properties, 4, self.chunk)
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
