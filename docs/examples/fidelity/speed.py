# Measurement script for docs/examples/fidelity/README.md (run from the repository root with the venv).
"""Single-stream decode speed of built CPU engines, alternating engines round by round, with the
kit's own in-process driver (bench.offline.run_offline) and each engine's recorded numerics."""
import json, sys, time
from dataclasses import replace
from pathlib import Path
from bench.offline import run_offline
from contract.build_record import BuildRecord
from contract.model_configs import OpenVinoEngineParameters
from build_engines.fidelity.evaluate import chat_prompt_ids
from transformers import AutoTokenizer

configs = []  # (label, engine_dir, overrides)
for arg in sys.argv[2:]:
    label, _, over = arg.partition(":")
    prec = label.split("+")[0]
    ov = dict(kv.split("=") for kv in over.split(",") if kv)
    configs.append((label, Path(f"build/engines/SmolLM2-135M-Instruct-openvino-{prec}"), ov))
rounds = int(sys.argv[1])
tok = AutoTokenizer.from_pretrained("build/checkpoints/SmolLM2-135M-Instruct")
prompts = chat_prompt_ids(tok, 2)
results = {c[0]: [] for c in configs}
for r in range(rounds):
    for label, ed, over in configs:
        spec = BuildRecord.read(ed).spec["openvino"]
        params = OpenVinoEngineParameters(engine_dir=ed, max_num_seqs=1, max_num_batched_tokens=512,
            activation_precision=over.get("act", spec["activation_precision"]),
            kv_cache_precision=over.get("kv", spec["kv_cache_precision"]),
            dynamic_quantization_group_size=int(over.get("dq", spec["dynamic_quantization_group_size"])))
        res = run_offline(params, prompts, 96, 1)
        results[label].append(res.output_tokens_per_s)
        print(r, label, res, flush=True)
base = configs[0][0]
for label, vals in results.items():
    ratios = [v / b for v, b in zip(vals, results[base])]
    print(f"{label}: tok/s {vals}, ratio to {base} per round {[round(x, 2) for x in ratios]}")
