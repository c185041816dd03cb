# Measurement script for docs/examples/fidelity/README.md (run from the repository root with the venv).
"""Peak RSS of one CPU engine process: the served backend (OpenVinoBackend) loaded, warmed up and
answering one 96-token request (bench.offline.run_offline with the engine's recorded numerics)."""
import resource, sys
from pathlib import Path
from bench.offline import run_offline
from contract.build_record import BuildRecord
from contract.model_configs import OpenVinoEngineParameters
ed = Path(f"build/engines/SmolLM2-135M-Instruct-openvino-{sys.argv[1]}")
ov = BuildRecord.read(ed).spec["openvino"]
params = OpenVinoEngineParameters(engine_dir=ed, max_num_seqs=1, max_num_batched_tokens=512,
    activation_precision=ov["activation_precision"], kv_cache_precision=ov["kv_cache_precision"])
res = run_offline(params, [[1] + list(range(100, 140))], 96, 1)
print(sys.argv[1], "peak RSS MiB", round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), res)
