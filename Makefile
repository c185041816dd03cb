# Triton + TensorRT-LLM deployment kit for Llama.  `make help` lists the targets.
#
# The virtualenv must be made by the same CPython whose libpython the Triton Python-backend
# stub embeds (Debian's /usr/bin/python3.11 for the nvidia-pytriton 0.7.0 stub): the stub
# loads the venv's standard library, and another patch release's C modules do not link.

PYTHON ?= /usr/bin/python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

MODEL ?=
PRECISION ?=
TP ?=
PP ?=
# A GPU build when asked for (GPU=1, TP/PP, or a GPU-only precision), the CPU engine otherwise.  `gpu`
# takes TensorRT-LLM's PyTorch backend where the image (.env) has it, the recommended path for new
# deployments, and the TensorRT-engine flow on images without it or for what only it builds
# (build_engines/gpu/path.py); BACKEND=tensorrt_llm or tensorrt_llm_pytorch picks one by hand.
GPU ?=
TRT_PRECISIONS := bf16 fp8 int8_sq int8_wo int4_awq nvfp4
BACKEND ?= $(if $(or $(GPU),$(TP),$(PP),$(filter $(TRT_PRECISIONS),$(PRECISION))),gpu,openvino)
ENGINE_ARGS ?=
PROMPT ?= Tell me a story about a brave knight.
OPENAI_PORT ?= 9000
PYTEST_ARGS ?=
VALUES ?=
ENGINE_DIR ?=
# make bench: USD per instance-hour (adds $/1M output tokens to the report) and the GPU split.
PRICE_PER_HOUR ?=
GPU_PRICE_PER_HOUR ?=
GPUS_PER_REPLICA ?= 1
GPUS_PER_INSTANCE ?= 1
# make serve-cluster: replicas behind NVIDIA Dynamo (cluster/); ROUTER: kv | round-robin | least-loaded | random.
REPLICAS ?= 2
ROUTER ?= kv

# Nothing is cached outside the repository, and nothing is fetched from a model hub.
export HF_HOME := $(CURDIR)/build/hf-home
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_NO_CACHE_DIR := 1

CHECKPOINT_ARG := $(if $(MODEL),--checkpoint $(MODEL),)
PRECISION_ARG := $(if $(PRECISION),--precision $(PRECISION),)
CHART_ARGS := $(foreach f,$(VALUES),-f $(f)) $(if $(ENGINE_DIR),--engine-dir $(ENGINE_DIR),)

.PHONY: help venv image-venv test-image test-image-ci eval-quality eval-harness build-engine build-engine-openvino build-engine-gpu build-engine-tensorrt_llm build-engine-tensorrt_llm_pytorch compose-config test-gpu gpu-check gpu-check-dry-run serve serve-detached stop serve-cluster serve-cluster-detached stop-cluster demo client bench bench-throughput chart-check chart-template test test-unit clean

help:
	@echo "make demo          build the default model's engine, start Triton, stream a completion, stop"
	@echo "make build-engine  [MODEL=/hf/llama/dir] [PRECISION=int8|int4|fp16] build the CPU engine + model repository"
	@echo "make build-engine  GPU=1 MODEL=/hf/llama/dir [PRECISION=fp16|bf16|fp8|int4_awq|nvfp4|int8_sq|int8_wo] [TP=n] [PP=n]"
	@echo "                   TensorRT-LLM: its PyTorch backend where the image has it (26.04-26.07, recommended), else"
	@echo "                   the TensorRT-engine flow; here inside the GPU image, else in the compose builder service"
	@echo "make build-engine  BACKEND=tensorrt_llm|tensorrt_llm_pytorch MODEL=...   one GPU flow by hand"
	@echo "make eval-quality  [ENGINE_DIR=build/engines/...] [PRECISION=int4] [FULL=1] accuracy vs the float32 checkpoint"
	@echo "                   (PPL, KL divergence, top-1, greedy agreement), stored in the engine's build.json"
	@echo "make eval-harness  [LM_EVAL_ARGS='--tasks kit_capitals'] lm-evaluation-harness against the OpenAI front"
	@echo "make serve         build, then run Triton in the foreground (Ctrl-C stops it)"
	@echo "make serve-detached / make stop   the same in the background"
	@echo "make client PROMPT='...'          stream a completion from a running server"
	@echo "make serve-cluster [REPLICAS=2] [ROUTER=kv|round-robin|least-loaded|random]  N Triton replicas behind"
	@echo "                   NVIDIA Dynamo (KV-aware routing, request migration), OpenAI API on OPENAI_PORT"
	@echo "make serve-cluster-detached / make stop-cluster   the same in the background; python -m cluster scale N"
	@echo "make bench         gRPC (perf_analyzer) and HTTP (AIPerf) sweeps + baselines (offline engine, one-at-a-time, transformers serve): build/bench/report"
	@echo "                   [PRICE_PER_HOUR=usd GPUS_PER_REPLICA=n GPUS_PER_INSTANCE=n] adds \$$/1M output tokens"
	@echo "                   [GPU_PRICE_PER_HOUR=usd] prices NVIDIA's published GPU figures beside them"
	@echo "make bench-throughput          output tok/s at concurrency 1 and 16 (in-flight batching speed-up)"
	@echo "make chart-check   [VALUES='a.yaml b.yaml'] [ENGINE_DIR=...] helm lint + render + Kubernetes schema check"
	@echo "make chart-template [VALUES=...] [ENGINE_DIR=...]  the Kubernetes manifests (like helm template)"
	@echo "make test          install everything and run the whole test suite"
	@echo "make test-image    IMAGE=25.12|26.07-low|26.07-high [IMAGE_TESTS=...] the tests under a GPU image's"
	@echo "                   Python packages (.venv-image-IMAGE, CPython 3.12; docs/testing.md)"
	@echo "make test-gpu      (GPU host) build a small TensorRT-LLM engine and run the end-to-end tests on it"
	@echo "make gpu-check     [GPU_IMAGE=26.07] (GPU host) driver check, then per image (default: the PyTorch backend"
	@echo "                   on 26.07, then the engine flow on 25.12) build it and check the default model at fp16"
	@echo "                   (+fp8 on Hopper): GPU suites, a short benchmark; build/gpu-check/report.{md,json}"
	@echo "make gpu-check-dry-run            every gpu-check step that needs no GPU, here (no Docker engine)"

venv: $(STAMP)

$(STAMP): requirements/lock.txt pyproject.toml
	@test -x $(PYTHON) || { echo "$(PYTHON) not found: install Debian's python3.11 and python3.11-venv, or set PYTHON=" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet --no-deps -r requirements/lock.txt
	@# The pinned torch is a CPU build only where pip finds one for this Python (the 3.11 wheel on
	@# this project's machines); elsewhere pip took the PyPI build, which is CUDA-linked and
	@# imports on a CPU only with its nvidia-* libraries: install them (~4 GB; torch.cuda stays off).
	@$(PY) -c "import torch" 2>/dev/null || { \
	  echo "torch $$($(PY) -m pip show torch | sed -n 's/^Version: //p') does not import without its dependencies: installing them (the PyPI build's CUDA libraries)"; \
	  $(PY) -m pip install --quiet -c requirements/lock.txt torch==2.13.0 && $(PY) -c "import torch"; }
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

build-engine: build-engine-$(BACKEND)

build-engine-openvino: venv
	$(PY) -m build_engines build --backend openvino $(CHECKPOINT_ARG) $(PRECISION_ARG) --skip-existing $(ENGINE_ARGS)

# The fidelity report of a built CPU engine (the one `make build-engine` made for PRECISION, or ENGINE_DIR).
FIDELITY_ENGINE = $(or $(ENGINE_DIR),build/engines/SmolLM2-135M-Instruct-openvino-$(or $(PRECISION),int8))
eval-quality: venv
	$(PY) -m build_engines eval-quality --engine-dir $(FIDELITY_ENGINE) $(if $(FULL),--full,)

# lm-evaluation-harness against the OpenAI front, on a generation task defined from a local file
# (build_engines/fidelity/lm_eval_tasks); its own pinned virtualenv (requirements/eval-harness.txt).
EVAL_VENV := build/eval-harness-venv
LM_EVAL_TASKS := $(CURDIR)/build_engines/fidelity/lm_eval_tasks
LM_EVAL_ARGS ?= --tasks kit_capitals

$(EVAL_VENV)/.installed: requirements/eval-harness.txt
	$(PYTHON) -m venv $(EVAL_VENV)
	$(EVAL_VENV)/bin/python -m pip install --quiet --no-deps -r requirements/eval-harness.txt
	@touch $@

eval-harness: build-engine $(EVAL_VENV)/.installed
	$(PY) -m serving run --openai-port $(OPENAI_PORT) -- /bin/sh -c 'cd $(LM_EVAL_TASKS) && HF_DATASETS_OFFLINE=1 \
		$(CURDIR)/$(EVAL_VENV)/bin/lm_eval --model local-chat-completions --apply_chat_template \
		--model_args model=SmolLM2-135M-Instruct,base_url=http://127.0.0.1:$(OPENAI_PORT)/v1/chat/completions,num_concurrent=4,tokenizer_backend=none \
		--include_path $(LM_EVAL_TASKS) --output_path $(CURDIR)/build/lm-eval $(LM_EVAL_ARGS)'

# Standard library only until it knows where to build (see build_engines/dispatch.py).
build-engine-gpu:
	PYTHONPATH=$(CURDIR) python3 -m build_engines.dispatch "$(MODEL)" --backend gpu $(PRECISION_ARG) --tp $(or $(TP),1) --pp $(or $(PP),1) --skip-existing $(ENGINE_ARGS)

build-engine-tensorrt_llm:
	PYTHONPATH=$(CURDIR) python3 -m build_engines.dispatch "$(MODEL)" $(PRECISION_ARG) --tp $(or $(TP),1) --pp $(or $(PP),1) --skip-existing $(ENGINE_ARGS)

# TensorRT-LLM's PyTorch backend (images 26.04 - 26.07): no engine compile; ModelOpt quantizes
# when PRECISION asks for it (fp8 | int4_awq | nvfp4), else the checkpoint is served as it is.
build-engine-tensorrt_llm_pytorch:
	PYTHONPATH=$(CURDIR) python3 -m build_engines.dispatch "$(MODEL)" --backend tensorrt_llm_pytorch $(PRECISION_ARG) --tp $(or $(TP),1) --pp $(or $(PP),1) --skip-existing $(ENGINE_ARGS)

# The GPU end-to-end tests, inside the GPU image on a GPU host (this checkout mounted at /workspace),
# through NVIDIA's entrypoint (/opt/nvidia/nvidia_entrypoint.sh runs its entrypoint.d scripts first).
test-gpu:
	docker compose --profile build run --rm -v "$(CURDIR):/workspace" -e PYTHONPATH=/workspace \
		--entrypoint /opt/nvidia/nvidia_entrypoint.sh builder python3 -m pytest tests/integration/test_gpu_pipeline.py $(PYTEST_ARGS)

# One check of a GPU host (bench/gpu_check_host.py, standard library only): the driver against each
# image's (nvidia-smi, before any build), then per image the kit's GPU image (pull/build timed apart)
# and in it the default model at fp16 (and fp8 on Hopper or newer) built, served and tested, with a
# short benchmark, offline.  By default the recommended path first (the PyTorch backend on 26.07),
# then the engine flow (25.12); GPU_IMAGE=26.07 checks one image, every setting derived from it.
# The time plan (15 minutes on one H100): `make gpu-check GPU_CHECK_ARGS=--plan`.
# Report: build/gpu-check/report.{md,json}.  gpu-check-dry-run: every step that needs no GPU, here.
GPU_IMAGE ?=
GPU_CHECK_ARGS ?=
GPU_CHECK = PYTHONPATH=$(CURDIR) python3 -m bench.gpu_check_host $(if $(GPU_IMAGE),--image $(GPU_IMAGE),)
gpu-check:
	$(GPU_CHECK) $(GPU_CHECK_ARGS)

gpu-check-dry-run:
	$(GPU_CHECK) --dry-run $(GPU_CHECK_ARGS)

compose-config:
	docker compose config --quiet 2>/dev/null || docker-compose config --quiet

serve: build-engine
	$(PY) -m serving up --openai-port $(OPENAI_PORT)

serve-detached: build-engine
	$(PY) -m serving up --detach --openai-port $(OPENAI_PORT)

stop: venv
	$(PY) -m serving down

CLUSTER_ARGS = --replicas $(REPLICAS) --router-mode $(ROUTER) --port $(OPENAI_PORT)
serve-cluster: build-engine
	$(PY) -m cluster up $(CLUSTER_ARGS)

serve-cluster-detached: build-engine
	$(PY) -m cluster up --detach $(CLUSTER_ARGS)

stop-cluster: venv
	$(PY) -m cluster down

client: venv
	$(PY) -m client generate "$(PROMPT)" --stream

# The default model card's sampling (HuggingFaceTB/SmolLM2-135M-Instruct: temperature 0.2,
# top_p 0.9): greedy decoding of a 135M model loops ("a fierce sense of honor and a fierce
# sense of duty" three times).  A fixed seed keeps the demo repeatable.
DEMO_SAMPLING ?= --temperature 0.2 --top-p 0.9 --seed 7

demo: build-engine
	$(PY) -m serving run -- $(PY) -m client generate "$(PROMPT)" --stream --max-tokens 200 $(DEMO_SAMPLING)

bench: build-engine
	$(PY) -m bench suite $(if $(PRICE_PER_HOUR),--price-per-hour $(PRICE_PER_HOUR) --gpus-per-replica $(GPUS_PER_REPLICA) --gpus-per-instance $(GPUS_PER_INSTANCE),) \
		$(if $(GPU_PRICE_PER_HOUR),--gpu-price-per-hour $(GPU_PRICE_PER_HOUR),)

bench-throughput: build-engine
	$(PY) -m serving run -- $(PY) -m bench throughput --concurrency 1 --concurrency 16

# The Helm chart (deploy/helm/llama-triton), rendered by Helm's Go SDK from the venv (no helm binary).
chart-check: venv
	$(PY) -m deploy check $(CHART_ARGS)

chart-template: venv
	@$(PY) -m deploy template $(CHART_ARGS)

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

# The GPU images' Python packages, here (issue 46): .venv-image-<IMAGE> is the project's virtualenv
# with every package the image carries at the image's version (requirements/image-<IMAGE>.lock, made
# from contract/upstream/data/image_packages_<release>.json by build_engines/images/image_env.py),
# under a CPython 3.12 with a shared libpython (the images run 3.12.3).  IMAGE: 25.12, 26.07-low or
# 26.07-high (26.07's table holds ranges: both ends).  IMAGE_TESTS: what runs (docs/testing.md).
IMAGE ?= 25.12
IMAGE_PYTHON ?= $(firstword $(wildcard /usr/bin/python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3))
IMAGE_VENV := .venv-image-$(IMAGE)
IMAGE_LOCK := requirements/image-$(IMAGE).lock
# Every test that needs no GPU and runs the kit's Python on these packages; not the suites of other
# tools' own environments (AIPerf, genai-perf, Dynamo, Helm) nor the CPU engine's export and
# numerics (torch/openvino, at the main lock's versions in every environment).
IMAGE_TESTS ?= tests/unit tests/integration \
	--ignore=tests/integration/test_gpu_pipeline.py --ignore=tests/integration/test_gpu_pytorch.py \
	--ignore=tests/integration/test_gpu_fidelity.py --ignore=tests/integration/test_cluster.py \
	--ignore=tests/integration/test_aiperf.py --ignore=tests/integration/test_genai_perf.py \
	--ignore=tests/integration/test_chart_on_triton.py --ignore=tests/integration/test_numerics_sweep.py \
	--ignore=tests/integration/test_draft_model.py --ignore=tests/integration/test_fused_projections.py \
	--deselect=tests/unit/test_bench_perf_analyzer.py::test_a_relative_out_dir_still_names_files_perf_analyzer_finds
# What .ci/run runs in each image environment (make test-image-ci): the unit tests of the front
# (fastapi, pydantic), the client's gRPC path and the model configs (tritonclient, grpcio,
# protobuf), the interpreter's, and the front's and client's integration suites; with
# IMAGE_CI_LIFECYCLE=1 (.ci/run: the last environment) also a server through the 3.12 stub drained
# on SIGTERM (~45 s of server start and drain, the same stub in every environment).
IMAGE_CI_TESTS ?= tests/unit/test_python_versions.py tests/unit/test_image_env.py \
	tests/unit/test_openai_translate.py tests/unit/test_openai_responses.py tests/unit/test_openai_tool_calls.py \
	tests/unit/test_openai_front_metrics.py tests/unit/test_engine_grpc.py tests/unit/test_request_builder.py \
	tests/unit/test_one_validation.py tests/unit/test_render.py \
	tests/integration/test_openai_front.py tests/integration/test_openai_responses.py \
	tests/integration/test_bad_requests.py tests/integration/test_streaming_text.py \
	$(if $(IMAGE_CI_LIFECYCLE),tests/integration/test_server_lifecycle.py -k "not lifecycle or sigterm",)
IMAGE_CI_LIFECYCLE ?=
# An image environment already made (its torch imports) whose torch and CUDA wheels a new one links
# rather than installs (build_engines/images/shared_packages.py); measured: 26.07-high after 25.12 adds
# 2.0 GB of disk (6.3 GB installed on its own) and downloads no CUDA wheel.
IMAGE_TORCH_FROM ?= $(firstword $(filter-out $(IMAGE_VENV),$(patsubst %/.installed,%,$(wildcard .venv-image-*/.installed))))
# The per-layout suites once, on the PyTorch-backend layout (the kit's own Python model for the
# recommended path; the packages, not the layout, differ from make test's run of every layout).
IMAGE_CI_LAYOUTS ?= pytorch_server

$(IMAGE_VENV)/.installed: $(IMAGE_LOCK) pyproject.toml
	@test -n "$(IMAGE_PYTHON)" && test -x "$(IMAGE_PYTHON)" || { echo "no CPython 3.12 here: set IMAGE_PYTHON= (one with a shared libpython)" >&2; exit 1; }
	$(IMAGE_PYTHON) -m venv $(IMAGE_VENV)
	$(IMAGE_VENV)/bin/python -m pip install --quiet --upgrade pip==26.3
	$(IMAGE_VENV)/bin/python -m pip install --quiet --no-deps -r $(IMAGE_LOCK)
	@$(IMAGE_VENV)/bin/python -c "import torch" 2>/dev/null || [ -z "$(IMAGE_TORCH_FROM)" ] || \
	  $(IMAGE_VENV)/bin/python -m build_engines.images.image_env link-torch $(IMAGE_TORCH_FROM) $(IMAGE_VENV)
	@$(IMAGE_VENV)/bin/python -c "import torch" 2>/dev/null || { \
	  echo "torch: the PyPI build for this Python imports only with its CUDA libraries: installing them"; \
	  $(IMAGE_VENV)/bin/python -m pip install --quiet -c $(IMAGE_LOCK) torch==2.13.0 && $(IMAGE_VENV)/bin/python -c "import torch"; }
	$(IMAGE_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(IMAGE_VENV)/bin/python -m build_engines.images.image_env pip-check $(IMAGE_VENV)/bin/python
	@touch $@

image-venv: $(IMAGE_VENV)/.installed

test-image: $(IMAGE_VENV)/.installed
	$(IMAGE_VENV)/bin/python -m pytest $(IMAGE_TESTS) $(PYTEST_ARGS)

test-image-ci: $(IMAGE_VENV)/.installed
	KIT_LAYOUTS=$(IMAGE_CI_LAYOUTS) $(IMAGE_VENV)/bin/python -m pytest $(IMAGE_CI_TESTS) $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf build
