# The Dynamo image: NVIDIA Dynamo 1.6.1 (its OpenAI frontend, KV-aware router and request
# migration: `python -m dynamo.frontend ...`) and the kit's Dynamo worker of one Triton replica
# (`python -m cluster.worker ...`, cluster/worker.py), for the compose `cluster` profiles and the
# chart's `dynamo` section (docs/kubernetes.md, "Many replicas behind Dynamo").  No GPU, no
# Triton: the worker talks to its replica over Triton's gRPC API.
#
# Its Python packages are requirements/dynamo.lock, installed with --no-deps exactly as the
# kit's own Dynamo environment is (build/dynamo): ai-dynamo 1.6.1 without the aisimulate
# placeholder, which downloads its real wheel from a host outside PyPI and which only Dynamo's
# planner imports (the lock's header says why; `pip check` names it as the one missing package,
# so the build checks the imports instead).  CPython 3.11, as the lock was resolved for.
FROM python:3.11.14-slim-bookworm

# Nothing from a model hub: Dynamo's frontend takes the tokenizer, chat template and config from
# the files the workers register (the same paths, mounted read-only into every container).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

COPY requirements/dynamo.lock /opt/kit/requirements/dynamo.lock
RUN python -m pip install --no-deps -r /opt/kit/requirements/dynamo.lock \
 && python -c "import dynamo.frontend, dynamo.llm, dynamo.runtime, dynamo.llm.exceptions, uvloop, click, grpc, numpy, tokenizers, tritonclient.grpc.service_pb2_grpc"

# The kit's packages the worker imports (cluster -> contract, model_repository, build_engines),
# on PYTHONPATH as in the GPU image.
COPY contract /opt/kit/contract
COPY model_repository /opt/kit/model_repository
COPY build_engines /opt/kit/build_engines
COPY cluster /opt/kit/cluster
ENV PYTHONPATH=/opt/kit
RUN python -c "import cluster.worker, cluster.replica_engine, cluster.replica_model, cluster.dynamo_request, cluster.dynamo_output"

# Non-root, uid 1000 like the NGC image's triton-server user (the chart's podSecurityContext).
# Dynamo keeps its model-card cache under $HOME/.cache/dynamo; /var/lib/dynamo is the mount
# point of compose's shared file-discovery volume (a new named volume takes this owner).
RUN useradd --create-home --uid 1000 --user-group dynamo \
 && mkdir -p /var/lib/dynamo/discovery \
 && chown -R dynamo:dynamo /var/lib/dynamo
USER 1000:1000
WORKDIR /home/dynamo

# The OpenAI API (the frontend's --http-port as compose and the chart set it).
EXPOSE 9000
CMD ["python", "-m", "dynamo.frontend", "--help"]
