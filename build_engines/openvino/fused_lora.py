"""LoRA adapters for an engine with fused projections (build_engines/openvino/fusion.py).

OpenVINO GenAI finds the MatMul an adapter tensor belongs to by name: the tensor's module path
("model.layers.0.self_attn.q_proj", from PEFT's "...q_proj.lora_A.weight") must be a substring
of the node's friendly name (openvinotoolkit/openvino.genai, src/cpp/src/lora/adapter.cpp,
LoRAWeightGetterDefault; read on the main branch, not at the 2026.4.1 tag).  A fused node is
named after its group ("...self_attn.k_proj+q_proj+v_proj/aten::linear/MatMul"), so an
adapter is rewritten for it: per layer and group, A stacked [A_k; A_q; A_v] (ranks add up) and
B block-diagonal, B_k in the k rows and k's rank columns, and so on, zero elsewhere (a member
without an adapter gets only zero rows).  B·A·x is then each member's own B·A·x, stacked as the
fused weight stacks the outputs.  Measured (default model, int8, a q_proj+v_proj adapter,
greedy, 32 tokens): the fused engine with the stacked adapter answered 4 of 4 prompts as the
unfused engine with the original adapter.
"""

from __future__ import annotations

import re
from pathlib import Path

from contract.lora import LoraAdapter, LoraError

_PEFT_TENSOR = re.compile(r"^(?P<prefix>.*)\.(?P<module>\w+)\.lora_(?P<part>[AB])\.weight$")
_LORA_MODULE = re.compile(r"(?:^|\.)(\w+)\.lora_[AB]\b")  # the module a LoRA tensor adapts, any suffix


def stacked_adapter(weights: Path, fusion: dict, name: str) -> bytes | None:
    """The adapter file rewritten for the fused groups of `fusion` (build.json's record), as
    safetensors bytes; None when it adapts no fused module (served as it is); LoraError naming
    `name` where it cannot be rewritten."""
    import torch
    from safetensors.torch import load, save

    rows: dict[str, list[int]] = fusion.get("rows", {})
    group_of = {m: g for g, sizes in rows.items() if sizes for m in g.split("+")}
    fused = set(fusion.get("fused_modules", ()))
    tensors = load(Path(weights).read_bytes())
    if not any((m := _LORA_MODULE.search(key)) and m.group(1) in fused for key in tensors):
        return None
    out: dict[str, torch.Tensor] = {}
    parts: dict[tuple[str, str], dict[str, dict[str, torch.Tensor]]] = {}  # (prefix, group) -> module -> A/B
    for key, tensor in tensors.items():
        m = _PEFT_TENSOR.match(key)
        if m is None and any(f".{module}." in key for module in fused):
            raise LoraError(
                f"'lora_dir': adapter {name!r}: tensor {key!r} adapts a fused module in a form "
                "this kit cannot stack; build the engine again with --no-fuse-projections"
            )
        if m is None or m["module"] not in fused:
            out[key] = tensor
            continue
        if m["module"] not in group_of:
            raise LoraError(
                f"'lora_dir': adapter {name!r} adapts {m['module']}, fused without a row record; build the engine again"
            )
        parts.setdefault((m["prefix"], group_of[m["module"]]), {}).setdefault(m["module"], {})[m["part"]] = tensor
    for (prefix, group), modules in parts.items():
        members = group.split("+")
        for module, ab in modules.items():
            n = rows[group][members.index(module)]
            if set(ab) != {"A", "B"} or ab["B"].shape[0] != n or ab["B"].shape[1] != ab["A"].shape[0]:
                raise LoraError(
                    f"'lora_dir': adapter {name!r}: {prefix}.{module} needs lora_A [r, in] and lora_B [{n}, r]"
                )
        ranks = [modules[m]["A"].shape[0] if m in modules else 0 for m in members]
        a = torch.cat([modules[m]["A"] for m in members if m in modules])
        b = torch.zeros(sum(rows[group]), sum(ranks), dtype=a.dtype)
        row = rank = 0
        for module, n, r in zip(members, rows[group], ranks):
            if r:
                b[row : row + n, rank : rank + r] = modules[module]["B"]
            row, rank = row + n, rank + r
        out[f"{prefix}.{group}.lora_A.weight"] = a.contiguous()
        out[f"{prefix}.{group}.lora_B.weight"] = b
    return save(out)


def for_fused_engine(
    adapters: list[LoraAdapter],
    fusion: dict,
    directory: Path,
) -> tuple[list[LoraAdapter], dict[str, bytes]]:
    """(the adapters as the engine model loads them, the rewritten files by name relative to
    the engine model's directory).  Adapters of unfused modules only are served as they are;
    `directory`: where the engine model's directory will be once the repository is in place."""
    served, files = [], {}
    for adapter in adapters:
        content = stacked_adapter(Path(adapter.weights), fusion, adapter.name)
        if content is None:
            served.append(adapter)
            continue
        relative = f"lora/{adapter.name}.safetensors"
        files[relative] = content
        served.append(LoraAdapter(adapter.name, adapter.task_id, str(directory / relative), adapter.alpha))
    return served, files
