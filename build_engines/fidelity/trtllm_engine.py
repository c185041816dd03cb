"""The same fidelity report for a TensorRT-LLM engine, from TensorRT-LLM's own logits (GPU only).

A served engine returns no prompt logits, so the report scores a twin engine compiled from the
*same* quantized TensorRT-LLM checkpoint (`build_trtllm_engine(..., keep_checkpoint=True)`) with
`trtllm-build --gather_context_logits` (TensorRT-LLM's `examples/summarize.py --eval_ppl` needs
the same flag): identical weights and kernels, plus the context logits output.  The API used
is the pinned runtime's: `tensorrt_llm.runtime.ModelRunnerCpp.from_dir(engine_dir, rank=...)`
and `generate(batch_input_ids, max_new_tokens, end_id, pad_id, return_dict=True,
output_sequence_lengths=True)`, whose dict carries `context_logits` when the engine gathers
them (tensorrt_llm/runtime/model_runner_cpp.py; read at NVIDIA/TensorRT-LLM 0383291).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from build_engines.process import run_streaming
from build_engines.trtllm.plan import BuildPaths, engine_step


def scoring_engine_command(spec, checkpoint_dir: Path, out_dir: Path) -> list[str]:
    """trtllm-build of the served engine's checkpoint, as planned for serving, plus the context
    logits output (the spec's limits keep one 1024-token window within max_input_len)."""
    argv = list(engine_step(spec, BuildPaths(checkpoint_dir, out_dir, Path("."))).argv)
    return argv + ["--gather_context_logits"]


def build_scoring_engine(spec, checkpoint_dir: Path, out_dir: Path, log_file: Path | None = None) -> Path:
    run_streaming(scoring_engine_command(spec, checkpoint_dir, out_dir), log_file, what="scoring engine")
    return out_dir


class TrtLlmScorer:
    def __init__(self, engine_dir: Path, end_id: int, pad_id: int) -> None:
        import tensorrt_llm
        import torch
        from tensorrt_llm.runtime import ModelRunnerCpp

        self._torch = torch
        self.end_id, self.pad_id = end_id, pad_id
        self.runner = ModelRunnerCpp.from_dir(str(engine_dir), rank=tensorrt_llm.mpi_rank())
        if not self.runner.gather_context_logits:
            raise ValueError(f"{engine_dir} was not built with --gather_context_logits (see scoring_engine_command)")
        self.describe = {"engine": "tensorrt_llm", "version": tensorrt_llm.__version__, "engine_dir": str(engine_dir)}

    def logits(self, ids: list[int], first: int) -> np.ndarray:
        """Logits of positions first-1 .. len(ids)-2 (the predictions of ids[first:]).  [T, V]"""
        torch = self._torch
        out = self.runner.generate(
            [torch.tensor(ids, dtype=torch.int32)],
            max_new_tokens=1,
            end_id=self.end_id,
            pad_id=self.pad_id,
            top_k=1,
            return_dict=True,
            output_sequence_lengths=True,
        )
        context = out["context_logits"][0]  # [len(ids), vocab_padded]
        vocab = self.runner.vocab_size
        return context[first - 1 : len(ids) - 1, :vocab].float().cpu().numpy()

    def greedy_answers(self, prompts: list[list[int]], max_new_tokens: int, eos_ids: set[int]) -> list[list[int]]:
        torch = self._torch
        answers = []
        for ids in prompts:
            out = self.runner.generate(
                [torch.tensor(ids, dtype=torch.int32)],
                max_new_tokens=max_new_tokens,
                end_id=min(eos_ids),
                pad_id=self.pad_id,
                top_k=1,
                return_dict=True,
                output_sequence_lengths=True,
            )
            n = int(out["sequence_lengths"][0, 0])
            tokens = out["output_ids"][0, 0, len(ids) : n].tolist()
            answers.append(tokens + [min(eos_ids)] if n - len(ids) < max_new_tokens else tokens)
        return answers
