"""Fused projections for the CPU engine: the matmuls that read the same activations (a layer's
q/k/v projections, its MLP's gate/up projections) become one matmul over their weights stacked
along the output dimension, followed by a split, as TensorRT-LLM's checkpoints fuse QKV and
gate/up.

Why: at one stream the CPU engine is bound by the weight reads, and OpenVINO's CPU plugin pays a
fixed cost per fully-connected node on top of them.  Measured on the default model (int8, f32
activations, 2-core AMD EPYC Zen 4, OpenVINO 2026.4.1, per-node profiling counters): a node cost
~7.5 us plus its weight bytes at ~20 GB/s (k_proj, 110 KB: 13 us; q_proj, 332 KB: 24 us; gate_proj,
885 KB: 50 us), 211 such nodes per token.  Fused, there are 121.  Served at concurrency 1 the
ensemble streamed 1.07x the output tok/s (8 alternating pairs, 0.92-1.12; in-process 1.05-1.21x);
at 16 streams, where the batch amortizes the per-node cost, within noise (median 1.03x).

Exact: each output element is the same dot product over the same input, and the logits of the
fused and unfused int8 engines were bit-equal (f32 activations, prompts of 1-300 tokens).

The weight subgraph each matmul reads (Constant -> Convert -> Subtract zero point -> Multiply
scale [-> Reshape] -> Convert, as NNCF and build_engines/openvino/int4_float_zp.py emit it; a float16
Constant -> Convert for fp16 weights) is rebuilt once with each constant stacked, so the CPU
plugin still sees a compressed fully-connected layer.  Matmuls whose subgraphs differ in shape or
structure are left alone.

LoRA: OpenVINO GenAI finds the MatMul an adapter tensor belongs to by the node's name, so an
adapter of a fused module must be rewritten for the fused node (a q_proj adapter used as it is
failed: "Can not clone with new dims ... {960, ?} ... {576, 8}"); the repository renderer does
that (build_engines/openvino/fused_lora.py) from the `rows` this step records.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

_WEIGHT_OPS = frozenset({"Convert", "Subtract", "Multiply", "Reshape"})
_MODULE = re.compile(r"\.(\w+)/aten::linear/MatMul$")  # the exporter's node name -> the module


class _NotFusable(Exception):
    pass


@dataclass(frozen=True)
class FusionRecord:
    """What fusion did to one IR (build.json's `fusion`)."""

    groups: dict[str, int]  # "k_proj+q_proj+v_proj" -> how many layers (names in sorted order)
    matmuls_before: int
    matmuls_after: int
    # Each group's output rows per member, in order (LoRA stacking: build_engines/openvino/fused_lora.py);
    # [] where layers differ.
    rows: dict[str, list[int]]

    @property
    def fused_modules(self) -> tuple[str, ...]:
        return tuple(sorted({m for g in self.groups for m in g.split("+")}))

    def to_dict(self) -> dict:
        return asdict(self) | {"fused_modules": list(self.fused_modules)}


def module_name(matmul) -> str:
    m = _MODULE.search(matmul.get_friendly_name())
    return m.group(1) if m else matmul.get_friendly_name()


def _weight_root(matmul):
    """The top of a matmul's constant weight subgraph, or None (activations on both sides)."""
    attrs = matmul.get_attributes()
    if attrs.get("transpose_a") or not attrs.get("transpose_b"):
        return None
    root = matmul.input_value(1).get_node()
    return root if _constant_only(root) else None


def _constant_only(node) -> bool:
    if node.get_type_name() == "Constant":
        return True
    return node.get_type_name() in _WEIGHT_OPS and all(_constant_only(v.get_node()) for v in node.input_values())


def _stacked_constant(nodes, rows: list[int]):
    """One constant: the members' stacked along axis 0 where each holds one row per output
    channel, else their common value."""
    import openvino as ov

    shapes = [tuple(n.get_output_shape(0)) for n in nodes]
    etype = nodes[0].get_output_element_type(0)
    if any(n.get_output_element_type(0) != etype for n in nodes):
        raise _NotFusable("element types differ")
    if all(len(s) >= 1 and s[0] == r for s, r in zip(shapes, rows)):
        if any(s[1:] != shapes[0][1:] for s in shapes):
            raise _NotFusable("constant shapes differ beyond the output dimension")
        if any(int(np.prod(s)) * etype.bitwidth % 8 for s in shapes):
            raise _NotFusable("a sub-byte constant does not end on a byte")
        tensor = ov.Tensor(etype, ov.Shape([sum(rows), *shapes[0][1:]]))
        # Row-major bytes, member after member (u4 packs two values a byte: checked above).
        packed = np.concatenate([np.ascontiguousarray(n.get_data()).view(np.uint8).ravel() for n in nodes])
        tensor.data.view(np.uint8).ravel()[:] = packed
        return ov.op.Constant(tensor)
    first = nodes[0].get_data()
    if any(s != shapes[0] or not np.array_equal(n.get_data(), first) for n, s in zip(nodes[1:], shapes[1:])):
        raise _NotFusable("a shared constant differs")
    return nodes[0]


def _stacked(nodes, rows: list[int]):
    """The members' weight subgraphs rebuilt once over stacked constants (node by node in step)."""
    import openvino.opset13 as ops

    kind = nodes[0].get_type_name()
    if any(n.get_type_name() != kind for n in nodes):
        raise _NotFusable("weight subgraphs differ")
    if kind == "Constant":  # (its attributes are its shape and value)
        return _stacked_constant(nodes, rows)
    if any(n.get_attributes() != nodes[0].get_attributes() for n in nodes):
        raise _NotFusable("weight subgraph attributes differ")
    if kind == "Reshape":  # to [rows, in]: the target's leading dimension is the stacked rows
        targets = [tuple(int(v) for v in n.input_value(1).get_node().get_data()) for n in nodes]
        if any(t[0] != r or t[1:] != targets[0][1:] for t, r in zip(targets, rows)):
            raise _NotFusable("reshape targets differ")
        shape = ops.constant(np.asarray([sum(rows), *targets[0][1:]], dtype=np.int64))
        return ops.reshape(
            _stacked([n.input_value(0).get_node() for n in nodes], rows),
            shape,
            nodes[0].get_attributes()["special_zero"],
        )
    if kind == "Convert":
        return ops.convert(
            _stacked([n.input_value(0).get_node() for n in nodes], rows), nodes[0].get_output_element_type(0)
        )
    a, b = (_stacked([n.input_value(i).get_node() for n in nodes], rows) for i in range(2))
    return ops.subtract(a, b) if kind == "Subtract" else ops.multiply(a, b)


def fuse_projections(model) -> FusionRecord:
    """Fuse, in place, every set of two or more weight-constant matmuls reading one output."""
    import openvino.opset13 as ops

    by_input = defaultdict(list)
    matmuls = [op for op in model.get_ordered_ops() if op.get_type_name() == "MatMul"]
    for mm in matmuls:
        root = _weight_root(mm)
        if root is not None and mm.get_output_partial_shape(0)[-1].is_static:
            source = mm.input_value(0)
            by_input[(source.get_node().get_friendly_name(), source.get_index())].append((mm, root))
    groups: Counter[str] = Counter()
    member_rows: dict[str, list[int]] = {}
    fused_away = 0
    for members in by_input.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda member: module_name(member[0]))  # a stable order for the record
        rows = [mm.get_output_partial_shape(0)[-1].get_length() for mm, _ in members]
        try:
            weight = _stacked([root for _, root in members], rows)
        except _NotFusable:
            continue
        first = members[0][0]
        names = [module_name(mm) for mm, _ in members]
        fused = ops.matmul(
            first.input_value(0), weight, False, True, name=first.get_friendly_name().replace(names[0], "+".join(names))
        )
        split = ops.variadic_split(fused, ops.constant(np.int64(-1)), ops.constant(np.asarray(rows, dtype=np.int64)))
        for i, (mm, _) in enumerate(members):
            for target in list(mm.output(0).get_target_inputs()):
                target.replace_source_output(split.output(i))
        group = "+".join(names)
        groups[group] += 1
        member_rows[group] = rows if member_rows.get(group, rows) == rows else []
        fused_away += len(members) - 1
    model.validate_nodes_and_infer_types()
    return FusionRecord(
        groups=dict(groups), matmuls_before=len(matmuls), matmuls_after=len(matmuls) - fused_away, rows=member_rows
    )


def fuse_ir(ir_dir: Path) -> FusionRecord:
    """Fuse ir_dir/openvino_model.xml in place."""
    import openvino as ov

    from build_engines.openvino.compress import IR_MODEL_FILE, save_ir

    model = ov.Core().read_model(str(ir_dir / IR_MODEL_FILE))
    record = fuse_projections(model)
    save_ir(model, ir_dir, compress_to_fp16=False)  # the constants exactly as they were
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ir-dir", type=Path, required=True)
    parser.add_argument("--draft-dir", type=Path, help="the draft model's IR too (speculative decoding)")
    parser.add_argument("--record", type=Path, help="write what was done here (JSON)")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    result = fuse_ir(args.ir_dir).to_dict()
    if args.draft_dir:
        result["draft"] = fuse_ir(args.draft_dir).to_dict()
    result["seconds"] = round(time.monotonic() - t0, 1)
    if args.record:
        args.record.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
