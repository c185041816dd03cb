"""The only module of this kit that imports `tensorrt_llm`; it runs only inside the pinned
TensorRT-LLM image.  Importing the package (not just reading pip metadata) proves the
runtime loads: PyPI's `tensorrt_llm` without the NVIDIA wheel index is a stub.

`python -m build_engines.trtllm.probe` prints the versions as JSON and exits 0, or exits 1
saying what is missing; `make build-engine` uses it to decide where to build.
"""

from __future__ import annotations

import json
import sys


def runtime_versions() -> dict[str, str]:
    import tensorrt  # noqa: F401  (the TensorRT Python bindings TensorRT-LLM builds with)
    import tensorrt_llm

    return {"tensorrt_llm": tensorrt_llm.__version__, "tensorrt": tensorrt.__version__}


def main() -> int:
    try:
        versions = runtime_versions()
    except Exception as e:  # ImportError, or a CUDA/driver error while loading the libraries
        print(f"TensorRT-LLM is not usable here: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(versions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
