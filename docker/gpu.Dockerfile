# The GPU image: the pinned NGC Triton + TensorRT-LLM image, plus this kit.  The same image
# builds engines (compose `builder`) and serves them (compose `triton`), so the TensorRT-LLM
# and TensorRT versions of build and serve are the same by construction.
#
# The image and its TensorRT-LLM version have one source: .env (TRITON_IMAGE, TRTLLM_VERSION),
# passed by docker compose.  A bare `docker build` must pass both as --build-arg.
ARG TRITON_IMAGE
FROM ${TRITON_IMAGE}

ARG TRITON_IMAGE
ARG TRTLLM_VERSION
# Fail the image build, not a later engine build, if the base image is not the pinned release.
RUN test -n "${TRTLLM_VERSION}" || { echo "TRTLLM_VERSION is not set: build through docker compose (.env)"; exit 1; }; \
    python3 -c "import importlib.metadata as m, sys; v = m.version('tensorrt_llm'); \
sys.exit(0 if v == '${TRTLLM_VERSION}' else f'tensorrt_llm {v} in the base image, expected ${TRTLLM_VERSION}')"
# build_engines reads the target from here inside the image (build_engines/trtllm/versions.py).
ENV TRITON_IMAGE=${TRITON_IMAGE} TRTLLM_VERSION=${TRTLLM_VERSION}

# The image's Python 3.12: the system one in 25.12 - 26.03 (pip may install into it), the venv
# /opt/venv-tritonserver first on PATH from 26.04 (tensorrtllm_backend's Dockerfile); python3 is
# whichever the image puts first, the one the server's Python-backend stubs use.
ENV PIP_BREAK_SYSTEM_PACKAGES=1
# What the kit needs beyond the image: requirements/gpu-image.txt (resolved with dependencies) and
# requirements/gpu-image-nodeps.txt (tritonclient and the default model's GGUF, --no-deps).
# The image's own packages (grpcio, protobuf, click, numpy, ... that TensorRT-LLM and the server
# need) must not change: every installed package is pinned as a constraint, and the build fails
# if the package set afterwards differs from the base image's in any package it already had.
# tests/unit/test_image_packages.py replays these exact lines through pip's resolver against each
# supported image's package set (contract/upstream/data/image_packages_<release>.json).
# No image ships tritonclient, and no tritonclient release's [grpc] extra accepts both images'
# grpcio/protobuf, so it comes --no-deps over the image's own grpcio/protobuf, and the import
# below (what the Python-backend models import) proves the pair works before the image exists.
COPY requirements /opt/kit/requirements
ARG BASE_PACKAGES=/opt/kit/base-packages.txt
RUN python3 -m pip list --format=freeze | sort > ${BASE_PACKAGES} \
 && python3 -m pip install --no-cache-dir -c ${BASE_PACKAGES} -r /opt/kit/requirements/gpu-image.txt \
 && python3 -m pip install --no-cache-dir -c ${BASE_PACKAGES} --no-deps -r /opt/kit/requirements/gpu-image-nodeps.txt \
 && python3 -c "import grpc, google.protobuf, tritonclient.grpc, tritonclient.grpc.service_pb2, tritonclient.grpc.service_pb2_grpc, tritonclient.grpc.model_config_pb2, tritonclient.utils, click, fastapi, uvicorn, jinja2, gguf, opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter" \
 && python3 -m pip list --format=freeze | sort > /tmp/after-packages.txt \
 && comm -23 ${BASE_PACKAGES} /tmp/after-packages.txt > /tmp/changed-packages.txt \
 && if [ -s /tmp/changed-packages.txt ]; then \
        echo "installing the kit would change these packages of the base image:"; cat /tmp/changed-packages.txt; exit 1; \
    fi \
 && rm /tmp/after-packages.txt /tmp/changed-packages.txt

# The PyTorch-backend flow quantizes with ModelOpt's hf_ptq.py (examples/llm_ptq), which the image's
# nvidia-modelopt package does not ship: fetch the examples of the ModelOpt release this TensorRT-LLM
# pins (contract/upstream/data/modelopt_hf_ptq_<version>.json: 0.37.0 for TensorRT-LLM 1.2.1), and
# fail the image build if the installed ModelOpt is another release.  Empty for the engine-flow images.
ARG MODELOPT_EXAMPLES_REF=""
ENV MODELOPT_EXAMPLES_DIR=/opt/modelopt/examples
RUN if [ -n "${MODELOPT_EXAMPLES_REF}" ]; then \
      python3 -c "import importlib.metadata as m, sys; v = m.version('nvidia-modelopt'); \
sys.exit(0 if v.rsplit('.', 1)[0] == '${MODELOPT_EXAMPLES_REF}'.rsplit('.', 1)[0] else \
f'nvidia-modelopt {v} in the image, the examples are ${MODELOPT_EXAMPLES_REF}')" \
      && mkdir -p /opt/modelopt/examples \
      && python3 -c "import io, tarfile, urllib.request; \
data = urllib.request.urlopen('https://github.com/NVIDIA/Model-Optimizer/archive/refs/tags/${MODELOPT_EXAMPLES_REF}.tar.gz').read(); \
t = tarfile.open(fileobj=io.BytesIO(data)); \
members = [m for m in t.getmembers() if '/examples/llm_ptq/' in m.name]; \
[setattr(m, 'name', 'llm_ptq/' + m.name.split('/examples/llm_ptq/', 1)[1]) for m in members]; \
t.extractall('/opt/modelopt/examples', members=members, filter='data')" \
      && test -f /opt/modelopt/examples/llm_ptq/hf_ptq.py; \
    fi

COPY contract /opt/kit/contract
COPY build_engines /opt/kit/build_engines
COPY model_repository /opt/kit/model_repository
COPY serving /opt/kit/serving
COPY client /opt/kit/client
COPY bench /opt/kit/bench
COPY openai_front /opt/kit/openai_front
# On PYTHONPATH rather than pip-installed: the Python-backend stubs inherit the server's
# environment, so the models import the same code as the CLIs.
ENV PYTHONPATH=/opt/kit

WORKDIR /workspace
ENV TRTLLM_EXAMPLES_DIR=/app/examples
CMD ["python3", "-m", "serving", "gpu-up", "--repository", "/workspace/build/repository"]
