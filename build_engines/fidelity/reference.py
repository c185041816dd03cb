"""The float32 reference: the checkpoint itself in torch, on the CPU (or a GPU if asked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class TorchReference:
    def __init__(self, checkpoint: Path, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self._torch = torch
        self.device = device
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
        # transformers types PreTrainedModel.to (a wrapped nn.Module.to) as taking the model itself: its typing gap
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        self.describe = {"engine": "torch", "dtype": "float32", "device": device, "torch": torch.__version__}

    def logits(self, ids: list[int], first: int) -> np.ndarray:
        """Logits of positions first-1 .. len(ids)-2, i.e. the predictions of ids[first:].  [T, V]"""
        torch = self._torch
        with torch.no_grad():
            out = self.model(torch.tensor([ids], device=self.device)).logits[0, first - 1 : len(ids) - 1]
        return out.float().cpu().numpy()

    def greedy(self, prompt_ids: list[int], max_new_tokens: int, eos_ids: set[int]) -> list[int]:
        torch = self._torch
        x = torch.tensor([prompt_ids], device=self.device)
        with torch.no_grad():
            out = self.model.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=sorted(eos_ids),
                pad_token_id=sorted(eos_ids)[0],
            )
        tokens = out[0, len(prompt_ids) :].tolist()
        return _cut_at_eos(tokens, eos_ids)


def _cut_at_eos(tokens: list[int], eos_ids: set[int]) -> list[int]:
    for i, t in enumerate(tokens):
        if t in eos_ids:
            return tokens[: i + 1]
    return tokens
