"""A stand-in for TensorRT-LLM's examples/hf_lora_convert.py (the script the engine flow runs
in NVIDIA's container to fill the LoRA prefetch directory: build_engines/trtllm/lora.py),
reproducing what it writes for Llama adapters, from its source read at 05316d33 (lines cited;
row lora.tensor_layout of contract/upstream/data/trtllm_backend_semantics_<version>.json):

- keys `...layers.<N>.(self_attn|mlp).<module>.lora_(A|B).weight` (47-49; others skipped), A is
  "in", B is "out" (57); module names -> ids through hf_modules_to_trtllm_modules and
  LORA_MODULE_IDS (76-90; here: the row's `modules`);
- "in" stays [r, in] and "out" [out, r] (a matrix is transposed only when its smaller side is
  not where the reader expects it: 129, 133); PEFT's scale lora_alpha / r (lora_alpha /
  sqrt(r) with use_rslora: 105-109) is multiplied into "out" only (137); both are cast to the
  storage dtype (138), flattened and concatenated in then out (140);
- config rows [module_id, layer, r] (143); rows zero-padded to the longest (145-150); saved
  as model.lora_weights.npy [1, N, maxrow] and model.lora_config.npy int32 [1, N, 3] (151-168);
- bfloat16 storage: tensorrt_llm._utils.torch_to_numpy views bfloat16 as a 2-byte void dtype,
  so the .npy says '|V2' (row lora.prefetch_dtypes).

Test code only: the product runs NVIDIA's own script on the GPU host.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from contract.upstream.backend_semantics import BackendSemantics

_KEY = re.compile(r".*\.layers\.([0-9]+)\.(self_attn|mlp)\.([a-z_]+)\.lora_(A|B)\.weight.*")


def _stored(array: np.ndarray, storage: str) -> np.ndarray:
    if storage == "bfloat16":  # round to nearest even, as torch's .to(bfloat16) does
        bits = array.astype(np.float32).view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return rounded.view(np.dtype("V2"))
    return array.astype({"float16": np.float16, "float32": np.float32}[storage])


def convert(sem: BackendSemantics, adapter_dir: Path, out_dir: Path, storage: str = "float16") -> None:
    from safetensors.numpy import load_file

    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    scale = alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)
    ids = {m["hf"].split(".")[-1]: int(m["id"]) for m in sem.rule("lora.tensor_layout").extra["modules"]}
    found: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    for key, value in load_file(str(adapter_dir / "adapter_model.safetensors")).items():
        match = _KEY.match(key)
        if match:
            found.setdefault((int(match.group(1)), match.group(3)), {})["in" if match.group(4) == "A" else "out"] = value
    rows, configs = [], []
    for (layer, module), weights in found.items():
        a, b = weights["in"].astype(np.float32), weights["out"].astype(np.float32)
        r = a.shape[0]
        rows.append(np.concatenate([_stored(a, storage).reshape(-1), _stored(b * scale, storage).reshape(-1)]))
        configs.append([ids[module], layer, r])
    width = max(len(r) for r in rows)
    padded = np.zeros((len(rows), width), dtype=rows[0].dtype)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = row
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / "model.lora_weights.npy", padded[None])
    np.save(out_dir / "model.lora_config.npy", np.asarray(configs, dtype=np.int32)[None])
