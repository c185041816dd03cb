"""`python -m build_engines.fidelity`: the fidelity report of a CPU engine, in a process of its own.

The build runs it on the engine it has just made (before publishing it); `make eval-quality`
and `python -m build_engines eval-quality` run it on any built engine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# Before torch is imported: the reference's greedy decoding is many tiny steps, and OpenMP's
# spinning threads lose most of them to any other load on a small host (DESIGN.md section 5).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from build_engines.fidelity.evaluate import SETTINGS  # noqa: E402
from contract.model_configs import OpenVinoEngineParameters as _Engine  # noqa: E402

DEFAULT_DQ_GROUP = _Engine.dynamic_quantization_group_size


def evaluate_openvino_engine(
    engine_dir: Path,
    checkpoint: Path,
    activation_precision: str,
    kv_cache_precision: str,
    evaluation: str,
    inference_threads: int = 0,
    log=print,
    dynamic_quantization_group_size: int = DEFAULT_DQ_GROUP,
) -> dict:
    from build_engines.fidelity.evaluate import fidelity_report
    from build_engines.fidelity.openvino_engine import OpenVinoScorer, compile_properties
    from build_engines.fidelity.reference import TorchReference
    from build_engines.openvino.numerics import Numerics

    numerics = Numerics(activation_precision, kv_cache_precision, dynamic_quantization_group_size)
    engine = OpenVinoScorer(engine_dir, compile_properties(engine_dir, numerics, inference_threads))
    return fidelity_report(checkpoint, TorchReference(checkpoint), engine, SETTINGS[evaluation], log=log)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m build_engines.fidelity", description=__doc__)
    parser.add_argument("--engine-dir", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the float checkpoint the engine was built from")
    parser.add_argument("--activation-precision", required=True)
    parser.add_argument("--kv-cache-precision", required=True)
    parser.add_argument("--dynamic-quantization-group-size", type=int, required=True)
    parser.add_argument("--evaluation", choices=sorted(SETTINGS), default="quick")
    parser.add_argument("--inference-threads", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="write the report here (JSON)")
    args = parser.parse_args(argv)
    report = evaluate_openvino_engine(
        args.engine_dir,
        args.checkpoint,
        args.activation_precision,
        args.kv_cache_precision,
        args.evaluation,
        args.inference_threads,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
        dynamic_quantization_group_size=args.dynamic_quantization_group_size,
    )
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
