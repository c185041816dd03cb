"""`python -m cluster.worker`: the Dynamo worker of one Triton replica.  It registers the replica's
model with Dynamo's discovery (tokens in: Dynamo's frontend applies the chat template and
tokenizes), and streams each request's token ids to the replica's engine model over Triton's gRPC
API (cluster/replica_engine.py), in TensorRT-LLM's engine contract: the same worker fronts the C++
backend, the PyTorch backend and the CPU engine.

It runs in Dynamo's environment (build/dynamo, requirements/dynamo.lock), with this checkout on
PYTHONPATH.  It waits for its replica to be ready before it registers, and exits (status 3) when
the replica stops answering, after failing its in-flight requests with EngineShutdown, which
Dynamo's frontend migrates to another worker (--migration-limit): the launcher restarts it, and
it registers again once the replica is back (cluster/launcher.py).

A thin adapter: the request mapping (cluster/dynamo_request.py) and the chunks
(cluster/dynamo_output.py) are pure and unit-tested."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from cluster.dynamo_names import ENDPOINT, REPLICA_GONE_EXIT
from cluster.dynamo_output import ChunkMaker, TokenText
from cluster.dynamo_request import engine_arrays, engine_request
from cluster.replica_engine import EngineError, ErrorKind, ReplicaEngine
from cluster.replica_model import ReplicaModel
from contract.params import InvalidParameter

log = logging.getLogger("cluster.worker")


@dataclass(frozen=True)
class WorkerSettings:
    replica_grpc: str  # host:port of the replica's gRPC endpoint
    repository: Path  # the repository the replica serves
    model_name: str  # the name clients send
    endpoint: str = ENDPOINT
    ready_timeout_s: float = 600.0
    health_period_s: float = 1.0
    failures_to_leave: int = 2  # health checks in a row the replica may miss before the worker leaves
    drain_timeout_s: float = 30.0  # on SIGTERM, in-flight requests get this long


def token_texts(checkpoint_dir: Path) -> TokenText:
    """A token id's text, for top_logprobs entries (Dynamo's frontend does not fill them in)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(checkpoint_dir / "tokenizer.json"))
    return lambda token: tokenizer.decode([token], skip_special_tokens=False)


class ReplicaWorker:
    def __init__(
        self, settings: WorkerSettings, replica: ReplicaModel, engine: ReplicaEngine, exceptions, token_text: TokenText
    ) -> None:
        self.settings = settings
        self.replica = replica
        self.engine = engine
        self._x = exceptions  # dynamo.llm.exceptions (imported in serve)
        self._token_text = token_text
        self.replica_gone = asyncio.Event()

    async def generate(self, request, context):
        try:
            mapped = engine_request(request, self.replica)
        except InvalidParameter as e:
            raise self._x.InvalidArgument(str(e)) from None
        if self.replica_gone.is_set():
            raise self._x.EngineShutdown(f"replica {self.settings.replica_grpc} is not serving")
        call = self.engine.start(engine_arrays(mapped), context.id())
        maker = ChunkMaker(mapped, self._token_text)
        stopped = asyncio.ensure_future(context.async_killed_or_stopped())
        stopped.add_done_callback(lambda f: None if f.cancelled() else call.stop())
        try:
            async for outputs in call.replies():
                for chunk in maker.chunks(outputs):
                    yield chunk
            for chunk in maker.closing():
                yield chunk
        except EngineError as e:
            raise self._dynamo_error(e) from None
        finally:
            stopped.cancel()
            if not call.ended:  # the client left, or the frontend stopped reading: free the engine slot
                call.stop()

    def _dynamo_error(self, e: EngineError) -> Exception:
        """Dynamo's category of an engine error.  EngineShutdown (a replica that is gone) and
        WorkerUnavailable (a full engine) are ones Dynamo's frontend migrates to another worker."""
        if e.kind == ErrorKind.REPLICA_GONE:
            self.replica_gone.set()
            return self._x.EngineShutdown(str(e))
        if e.kind == ErrorKind.BAD_REQUEST:
            return self._x.InvalidArgument(str(e))
        if e.kind == ErrorKind.OVERLOADED:
            return self._x.WorkerUnavailable(str(e))
        return self._x.Unknown(str(e))

    async def watch_replica(self) -> None:
        """Returns once the replica has missed `failures_to_leave` health checks in a row, or a
        request found it gone."""
        missed = 0
        while missed < self.settings.failures_to_leave and not self.replica_gone.is_set():
            try:
                await asyncio.wait_for(self.replica_gone.wait(), self.settings.health_period_s)
            except asyncio.TimeoutError:
                pass
            missed = 0 if await self.engine.ready() else missed + 1
        self.replica_gone.set()


def runtime_config(config_class, replica: ReplicaModel):
    """What the frontend should know of the replica's model: its context window (the engine's
    max_seq_len, shown on /v1/models) and its tool-call parser."""
    config = config_class()
    config.context_length = replica.max_seq_len
    config.tool_call_parser = replica.dynamo_tool_parser
    return config


async def wait_ready(engine: ReplicaEngine, timeout_s: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await engine.ready():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.5)
    return True


async def serve(settings: WorkerSettings) -> int:
    from dynamo.llm import ModelInput, ModelRuntimeConfig, ModelType, WorkerType, exceptions, register_model
    from dynamo.runtime import DistributedRuntime

    replica = ReplicaModel.read(settings.repository, settings.model_name)
    engine = ReplicaEngine(settings.replica_grpc, replica.engine_model)
    log.info("waiting for replica %s (%s) to be ready", settings.replica_grpc, replica.engine_model)
    if not await wait_ready(engine, settings.ready_timeout_s):
        log.error("replica %s was not ready within %.0fs", settings.replica_grpc, settings.ready_timeout_s)
        return REPLICA_GONE_EXIT
    worker = ReplicaWorker(settings, replica, engine, exceptions, token_texts(replica.checkpoint_dir))
    # the planes the launcher's environment names (cluster/topology.py: file discovery on one host;
    # the chart: kubernetes)
    runtime = DistributedRuntime(
        asyncio.get_running_loop(),
        os.environ.get("DYN_DISCOVERY_BACKEND", "file"),
        os.environ.get("DYN_REQUEST_PLANE", "tcp"),
        event_plane=os.environ.get("DYN_EVENT_PLANE", "zmq"),
    )
    endpoint = runtime.endpoint(settings.endpoint)
    await register_model(
        ModelInput.Tokens,
        ModelType.Chat | ModelType.Completions,
        endpoint,
        str(replica.checkpoint_dir),
        replica.served_name,
        worker_type=WorkerType.Aggregated,
        kv_cache_block_size=replica.kv_block_tokens,
        runtime_config=runtime_config(ModelRuntimeConfig, replica),
    )
    serving = asyncio.ensure_future(endpoint.serve_endpoint(worker.generate))
    watching = asyncio.ensure_future(worker.watch_replica())
    leaving = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, leaving.set)
    left = asyncio.ensure_future(leaving.wait())
    log.info("serving %s for replica %s on %s", replica.served_name, settings.replica_grpc, settings.endpoint)
    done, _ = await asyncio.wait({serving, watching, left}, return_when=asyncio.FIRST_COMPLETED)
    gone = watching in done
    log.info(
        "replica %s stopped answering: leaving the cluster" if gone else "leaving the cluster (replica %s)",
        settings.replica_grpc,
    )
    # Out of discovery first, so the router sends nothing new here; then Dynamo's graceful
    # shutdown lets the requests in flight finish (or, the replica gone, fail over).
    try:
        await endpoint.unregister_endpoint_instance()
    except Exception as e:  # noqa: BLE001 - leaving anyway; the discovery entry expires on its own
        log.warning("could not unregister from discovery: %s", e)
    runtime.shutdown()
    try:
        await asyncio.wait_for(serving, settings.drain_timeout_s)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - stopping
        pass
    for task in (watching, left):
        task.cancel()
    await engine.close()
    return REPLICA_GONE_EXIT if gone else 0


@click.command()
@click.option("--replica", "replica_grpc", required=True, help="host:port of the replica's Triton gRPC endpoint.")
@click.option(
    "--repository",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    required=True,
    help="The model repository the replica serves.",
)
@click.option("--model-name", required=True, help="The model name clients send.")
@click.option("--endpoint", default=ENDPOINT, show_default=True, help="Dynamo endpoint (namespace.component.name).")
@click.option("--ready-timeout", "ready_timeout_s", type=float, default=600.0, show_default=True)
def main(**kwargs) -> None:
    """Serve one Triton replica's engine to Dynamo's frontend."""
    import uvloop

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(uvloop.run(serve(WorkerSettings(**kwargs))))


if __name__ == "__main__":
    main()
