"""`python -m cluster`: up (foreground, or --detach), down, status, scale N, environment.

`up` starts N Triton replicas of the rendered repository, a Dynamo worker each and Dynamo's
frontend (OpenAI API on --port), keeps every process running, and stops them all on Ctrl-C /
SIGTERM.  `scale` changes the number of replicas of a running cluster (the `up` process adds or
removes them within a second)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from cluster.launcher import Cluster, ClusterFailed, get_json
from cluster.topology import DEFAULT_BASE_PORT, DEFAULT_FRONTEND_PORT, ClusterSpec, RouterMode
from contract import names
from serving.openai_process import served_model_name
from serving.side_environments import dynamo_venv
from serving.stop_signals import StopSignals
from serving.supervisor import GaveUp

STATE_DIR = Path("build/cluster")
RECORD = "cluster.json"  # the running `up`: its pid, spec and readiness
WANTED = "replicas.wanted"  # `scale` writes the number of replicas here


def _record(state_dir: Path) -> dict | None:
    try:
        return json.loads((state_dir / RECORD).read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _running(state_dir: Path) -> dict | None:
    """The record of the `up` that runs now, if one does."""
    record = _record(state_dir)
    return record if record and _alive(record["pid"]) else None


@click.group()
def main() -> None:
    """Many Triton replicas behind NVIDIA Dynamo's frontend, KV-aware router and request migration."""


@main.command()
def environment() -> None:
    """Make (or check) build/dynamo, Dynamo's environment (requirements/dynamo.lock)."""
    click.echo(dynamo_venv())


@main.command()
@click.option(
    "--repository",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option("--replicas", type=click.IntRange(1), default=2, show_default=True)
@click.option(
    "--router-mode",
    type=click.Choice([m.value for m in RouterMode]),
    default=RouterMode.KV.value,
    show_default=True,
    help="Dynamo's routing: by KV-cache overlap and load, or blind to the caches.",
)
@click.option(
    "--migration-limit",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="Times a request moves to another replica when its replica dies mid-stream.",
)
@click.option("--host", default=names.DEFAULT_HOST, show_default=True, help="Address every process binds.")
@click.option(
    "--port",
    "frontend_port",
    type=int,
    default=DEFAULT_FRONTEND_PORT,
    show_default=True,
    help="The OpenAI API (Dynamo's frontend).",
)
@click.option(
    "--base-port",
    type=int,
    default=DEFAULT_BASE_PORT,
    show_default=True,
    help="Replica i serves HTTP on base+10i, gRPC on +1, metrics on +2.",
)
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=STATE_DIR, show_default=True)
@click.option("--ready-timeout", "ready_timeout_s", type=float, default=600.0, show_default=True)
@click.option("--detach", is_flag=True, help="Return once ready; the cluster keeps running (`down` stops it).")
def up(
    repository: Path,
    replicas: int,
    router_mode: str,
    migration_limit: int,
    host: str,
    frontend_port: int,
    base_port: int,
    state_dir: Path,
    ready_timeout_s: float,
    detach: bool,
) -> None:
    """Start the cluster and keep it running until Ctrl-C / SIGTERM."""
    record = _running(state_dir)
    if record:
        raise click.ClickException(f"a cluster is running already (pid {record['pid']}): python -m cluster down")
    if detach:
        _detach(state_dir, ready_timeout_s)
        return
    spec = ClusterSpec(
        repository=repository,
        model_name=served_model_name(repository),
        replicas=replicas,
        router_mode=RouterMode(router_mode),
        migration_limit=migration_limit,
        host=host,
        frontend_port=frontend_port,
        base_port=base_port,
        state_dir=state_dir,
        dynamo_python=dynamo_venv() / "bin" / "python",
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / WANTED).unlink(missing_ok=True)
    with StopSignals() as signals:
        cluster = Cluster(spec, report=lambda m: click.echo(m, err=True))
        try:
            _write_record(state_dir, spec, ready=False)
            cluster.start()
            waited = cluster.wait_ready(ready_timeout_s)
            _write_record(state_dir, spec, ready=True)
            click.echo(_banner(spec, waited))
            while not signals.event.wait(1.0):
                if cluster.failure is not None:
                    raise cluster.failure
                _scale_to_wanted(cluster, state_dir)
        except (ClusterFailed, GaveUp) as e:
            raise click.ClickException(str(e)) from None
        finally:
            click.echo("stopping the cluster ...", err=True)
            cluster.stop()
            (state_dir / RECORD).unlink(missing_ok=True)
    sys.exit(signals.exit_status)


def _write_record(state_dir: Path, spec: ClusterSpec, ready: bool) -> None:
    record = {"pid": os.getpid(), "ready": ready, "frontend": spec.frontend_url, "router_mode": spec.router_mode.value}
    (state_dir / RECORD).write_text(json.dumps(record))


def _scale_to_wanted(cluster: Cluster, state_dir: Path) -> None:
    try:
        wanted = int((state_dir / WANTED).read_text())
    except (OSError, ValueError):
        return
    while len(cluster.replicas) < wanted:
        index = cluster.add_replica()
        click.echo(f"added replica {index} (gRPC {cluster.spec.ports(index).grpc})", err=True)
    while len(cluster.replicas) > max(wanted, 1):
        index = max(cluster.replicas)
        cluster.remove_replica(index)
        click.echo(f"removed replica {index}", err=True)


def _detach(state_dir: Path, ready_timeout_s: float) -> None:
    """Run `up` (this command line without --detach) in the background; return once it is ready."""
    state_dir.mkdir(parents=True, exist_ok=True)
    argv = [a for a in sys.argv[1:] if a != "--detach"]
    log = state_dir / "up.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cluster", *argv], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + ready_timeout_s + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException(f"the cluster did not start (exit {process.returncode}); see {log}")
        record = _record(state_dir)
        if record and record.get("ready") and record.get("pid") == process.pid:
            click.echo(
                f"cluster running (pid {process.pid}); OpenAI API {record['frontend']}/v1; "
                "stop it with: python -m cluster down"
            )
            return
        time.sleep(0.5)
    raise click.ClickException(f"the cluster was not ready in time; see {log}")


def _banner(spec: ClusterSpec, waited: float) -> str:
    rows = "\n".join(
        f"  replica {i}  gRPC {spec.host}:{spec.ports(i).grpc}  metrics {spec.ports(i).metrics}"
        for i in range(spec.replicas)
    )
    return (
        f"{spec.replicas} replicas of {spec.model_name} behind Dynamo ({spec.router_mode.value} routing, "
        f"migration limit {spec.migration_limit}), ready in {waited:.0f}s\n"
        f"  OpenAI   {spec.frontend_url}/v1\n{rows}\n  logs     {spec.state_dir / 'logs'}"
    )


@main.command()
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=STATE_DIR, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True)
def down(state_dir: Path, timeout_s: float) -> None:
    """Stop a running cluster (its `up` process stops every part, workers first)."""
    record = _running(state_dir)
    if not record:
        click.echo("no cluster is running")
        return
    os.kill(record["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(record["pid"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    if _alive(record["pid"]):
        raise click.ClickException(f"the cluster (pid {record['pid']}) did not stop in {timeout_s:.0f}s")
    click.echo("cluster stopped")


@main.command()
@click.argument("replicas", type=click.IntRange(1))
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=STATE_DIR, show_default=True)
def scale(replicas: int, state_dir: Path) -> None:
    """Set the number of replicas of the running cluster."""
    if not _running(state_dir):
        raise click.ClickException("no cluster is running: python -m cluster up")
    (state_dir / WANTED).write_text(str(replicas))
    click.echo(f"asked for {replicas} replicas")


@main.command()
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=STATE_DIR, show_default=True)
def status(state_dir: Path) -> None:
    """The running cluster and the workers its frontend routes to."""
    record = _running(state_dir)
    if not record:
        raise click.ClickException("no cluster is running")
    health = get_json(f"{record['frontend']}/health") or {}
    click.echo(
        f"cluster pid {record['pid']}, {'ready' if record['ready'] else 'starting'}, "
        f"{record['router_mode']} routing, OpenAI API {record['frontend']}/v1"
    )
    for instance in health.get("instances", []):
        click.echo(f"  worker {instance.get('instance_id')}  {instance.get('transport')}")
