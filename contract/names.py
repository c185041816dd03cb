"""Model names of the rendered repository and default network settings."""

from __future__ import annotations

ENSEMBLE = "ensemble"
PREPROCESSING = "preprocessing"
POSTPROCESSING = "postprocessing"
# Engine step names: the GPU one keeps NVIDIA's name so their docs and tools apply.
TRTLLM_ENGINE = "tensorrt_llm"
# The draft engine of draft-target speculative decoding (NVIDIA's name in their Triton workflow).
TRTLLM_DRAFT = "tensorrt_llm_draft"
OPENVINO_ENGINE = "openvino_llm"
# The GPU engine step of TensorRT-LLM's PyTorch backend: a decoupled Python model owning one
# `tensorrt_llm.LLM` that serves the engine contract itself (no relay, no C++ model).
PYTORCH_ENGINE = "tensorrt_llm_pytorch"
# The GPU ensemble's engine step: a Python model that relays the engine contract to
# `tensorrt_llm` (BLS, streamed) and echoes detokenize_params with every response.
ENGINE_RELAY = "engine_relay"
# The ensemble as one decoupled Python model (NVIDIA's BLS inputs and outputs, and NVIDIA's
# name, so their clients and docs apply): the entry point whose client cancellation reaches
# the engine at once (an ensemble's needs the client's `stop`).
LLM_BLS = "tensorrt_llm_bls"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
DEFAULT_GRPC_URL = f"{DEFAULT_HOST}:{DEFAULT_GRPC_PORT}"
