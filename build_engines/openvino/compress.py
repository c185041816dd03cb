"""Data-aware int4 weight compression of an exported (float) OpenVINO IR, with NNCF.

Run as a child process by the build (`python -m build_engines.openvino.compress`), so its
memory is returned when it ends.  The calibration text is standard-library source, never the
fidelity report's evaluation text (build_engines/fidelity/texts.py).  The recipe is a spec
field (`openvino.int4`) and is recorded in build.json; its defaults were chosen by measuring
mean KL divergence against the float32 checkpoint (docs/examples/fidelity/).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

IR_MODEL_FILE = "openvino_model.xml"
# int4_asym / int4_sym: NNCF (integer zero point), with the data-aware methods below;
# int4_float_zp: a float zero point per group, data-free (build_engines/openvino/int4_float_zp.py).
MODES = ("int4_asym", "int4_sym", "int4_float_zp")
SENSITIVITY_METRICS = (
    "weight_quantization_error",
    "hessian_input_activation",
    "mean_activation_variance",
    "max_activation_variance",
    "mean_activation_magnitude",
)


@dataclass(frozen=True)
class Int4Recipe:
    # Default measured on the default model (docs/examples/fidelity/): a float zero point per group
    # of 32 gave mean KLD 0.0013; NNCF int4_asym with AWQ + scale estimation 0.117 (group 32,
    # every layer int4) and data-free 0.28 (group 64).  For another checkpoint measure both:
    # --int4-mode int4_asym --int4-awq --int4-scale-estimation is NNCF's data-aware recipe.
    mode: str = "int4_float_zp"
    group_size: int = 32  # must divide every compressed layer's input dimension (hidden 576: 64, 32, 16)
    ratio: float = 1.0  # share of layers (by parameters) in int4; the rest int8 by sensitivity
    sensitivity_metric: str = "hessian_input_activation"
    awq: bool = False
    scale_estimation: bool = False
    gptq: bool = False
    calibration_samples: int = 64  # token windows of the calibration text
    calibration_tokens: int = 512  # tokens per window

    def validate(self, dims: tuple[int, ...] = ()) -> list[str]:
        problems = []
        if self.mode not in MODES:
            problems.append(f"'int4.mode' must be one of {list(MODES)}, got {self.mode!r}")
        if self.group_size < 8 or any(d % self.group_size for d in dims):
            problems.append(
                f"'int4.group_size' {self.group_size} must divide the model's dimensions {list(dims)} "
                f"(e.g. {[g for g in (128, 64, 32, 16) if all(d % g == 0 for d in dims)]})"
            )
        if not 0.0 < self.ratio <= 1.0:
            problems.append(f"'int4.ratio' must be in (0, 1], got {self.ratio}")
        if self.sensitivity_metric not in SENSITIVITY_METRICS:
            problems.append(f"'int4.sensitivity_metric' must be one of {list(SENSITIVITY_METRICS)}")
        if self.calibration_samples < 1 or self.calibration_tokens < 16:
            problems.append("'int4.calibration_samples' must be >= 1 and 'int4.calibration_tokens' >= 16")
        if self.awq and self.gptq:
            problems.append("'int4.awq' and 'int4.gptq' are exclusive in NNCF; pick one")
        if self.mode == "int4_float_zp" and (self.awq or self.scale_estimation or self.gptq or self.ratio < 1.0):
            problems.append(
                "'int4.mode' int4_float_zp is data-free, every layer int4: NNCF's AWQ, scale estimation, "
                "GPTQ and mixed precision produce integer zero points (--no-int4-awq "
                "--no-int4-scale-estimation --no-int4-gptq, ratio 1)"
            )
        return problems

    @property
    def data_free(self) -> bool:
        return not (self.awq or self.scale_estimation or self.gptq or self.ratio < 1.0)


def calibration_windows(checkpoint: Path, samples: int, tokens: int) -> list[list[int]]:
    """`samples` windows of `tokens` tokens, taken in turn from each calibration text."""
    from transformers import AutoTokenizer

    from build_engines.fidelity.texts import calibration_texts

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    per_text = [tokenizer(t.text, add_special_tokens=False)["input_ids"] for t in calibration_texts()]
    out: list[list[int]] = []
    offset = 0
    while len(out) < samples:
        progressed = False
        for ids in per_text:
            if offset + tokens <= len(ids) and len(out) < samples:
                out.append(ids[offset : offset + tokens])
                progressed = True
        if not progressed:
            break
        offset += tokens
    if not out:
        raise ValueError("the calibration texts are shorter than one window")
    return out


def _inputs(ids: list[int]) -> dict:
    import numpy as np

    n = len(ids)
    return {
        "input_ids": np.asarray([ids], dtype=np.int64),
        "attention_mask": np.ones((1, n), dtype=np.int64),
        "position_ids": np.arange(n, dtype=np.int64)[None],
        "beam_idx": np.zeros(1, dtype=np.int32),
    }


def compress(ir_dir: Path, checkpoint: Path, recipe: Int4Recipe) -> dict:
    """Compress ir_dir/openvino_model.xml in place; returns what was done (for build.json)."""
    import nncf
    import openvino as ov

    t0 = time.monotonic()
    model = ov.Core().read_model(str(ir_dir / IR_MODEL_FILE))
    if recipe.mode == "int4_float_zp":
        from build_engines.openvino.int4_float_zp import compress_matmuls

        vocab = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
        # Decoder layers int4; the token embedding and the LM head (vocab rows) int8, as NNCF does.
        layers = compress_matmuls(model, recipe.group_size, skip_output_dims=(vocab,))
        save_ir(nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM), ir_dir)
        return {
            "recipe": asdict(recipe),
            "nncf": nncf.__version__,
            "int4_layers": layers,
            "seconds": round(time.monotonic() - t0, 1),
        }
    kwargs = dict(
        mode=nncf.CompressWeightsMode(recipe.mode),
        group_size=recipe.group_size,
        ratio=recipe.ratio,
        backup_mode=nncf.BackupMode.INT8_ASYM,
    )
    if not recipe.data_free:
        windows = calibration_windows(checkpoint, recipe.calibration_samples, recipe.calibration_tokens)
        kwargs |= dict(
            dataset=nncf.Dataset(windows, _inputs),
            subset_size=len(windows),
            awq=recipe.awq,
            scale_estimation=recipe.scale_estimation,
            gptq=recipe.gptq,
            sensitivity_metric=nncf.SensitivityMetric(recipe.sensitivity_metric),
        )
    save_ir(nncf.compress_weights(model, **kwargs), ir_dir)
    return {"recipe": asdict(recipe), "nncf": nncf.__version__, "seconds": round(time.monotonic() - t0, 1)}


def save_ir(model, ir_dir: Path, compress_to_fp16: bool = True) -> None:
    """Replace ir_dir's IR with `model` (written beside it first)."""
    import openvino as ov

    tmp = ir_dir / "compressed.xml"
    ov.save_model(model, str(tmp), compress_to_fp16=compress_to_fp16)
    tmp.replace(ir_dir / IR_MODEL_FILE)
    tmp.with_suffix(".bin").replace(ir_dir / "openvino_model.bin")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ir-dir", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--recipe", default="{}", help="Int4Recipe fields as JSON")
    parser.add_argument("--record", type=Path, help="write what was done here (JSON)")
    args = parser.parse_args(argv)
    result = compress(args.ir_dir, args.checkpoint, Int4Recipe(**json.loads(args.recipe)))
    if args.record:
        args.record.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
