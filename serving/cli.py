"""`python -m serving`: up (foreground or --detach), down, run -- CMD, status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from contract import names
from serving.launcher import ServerFailed, ServerSettings, TritonServer
from serving.openai_process import OpenAiFront, served_model_name
from serving.supervisor import GaveUp, RestartPolicy, Supervisor

PID_FILE = Path("build/tritonserver.pid")


def server_options(f):
    options = [
        click.option("--repository", type=click.Path(file_okay=False, path_type=Path), default=Path("build/repository"),
                     show_default=True),
        click.option("--host", default=names.DEFAULT_HOST, show_default=True, help="Address to bind (loopback by default)."),
        click.option("--http-port", type=int, default=names.DEFAULT_HTTP_PORT, show_default=True),
        click.option("--grpc-port", type=int, default=names.DEFAULT_GRPC_PORT, show_default=True),
        click.option("--metrics-port", type=int, default=names.DEFAULT_METRICS_PORT, show_default=True),
        click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
                     default=Path("build/logs/tritonserver.log"), show_default=True),
        click.option("--log-verbose", type=int, default=0, show_default=True),
        click.option("--exit-timeout", "exit_timeout_s", type=int, default=30, show_default=True,
                     help="Seconds in-flight requests get to finish on shutdown."),
        click.option("--ready-timeout", "ready_timeout_s", type=float, default=600.0, show_default=True),
        click.option("--openai-port", type=int, default=0, show_default=True,
                     help="Also serve the OpenAI-compatible API on this port (0 = off)."),
        click.option("--admin-key-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help=f"Key of Triton's admin APIs (or ${ADMIN_KEY_ENV}); unset: a random key, APIs locked."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"


def _settings(kwargs: dict) -> ServerSettings:
    keys = ("repository", "host", "http_port", "grpc_port", "metrics_port", "log_file", "log_verbose", "exit_timeout_s")
    key_file = kwargs.get("admin_key_file")
    admin_key = key_file.read_text().strip() if key_file else os.environ.get(ADMIN_KEY_ENV) or None
    return ServerSettings(**{k: kwargs[k] for k in keys}, admin_key=admin_key)


def _banner(s: ServerSettings, front: OpenAiFront | None = None) -> str:
    openai = f"  OpenAI   {front.url}/v1\n" if front else ""
    return (f"Triton is serving {s.repository} (ensemble ready)\n"
            f"  gRPC     {s.grpc_url}\n  HTTP     {s.http_url}\n  metrics  {s.metrics_url}\n{openai}"
            f"  log      {s.log_file}\n"
            f"Try: python -m client --url {s.grpc_url} generate \"Tell me a story about a brave knight.\" --stream")


def _start(settings: ServerSettings, ready_timeout_s: float, openai_port: int) -> tuple[TritonServer, OpenAiFront | None]:
    """Triton, ready; then the OpenAI front if asked.  Exits with a clear message on failure."""
    server = TritonServer(settings)
    front = None
    try:
        server.start()
        server.wait_ready(ready_timeout_s)
        if openai_port:
            front = OpenAiFront(settings.grpc_url, settings.host, openai_port, served_model_name(settings.repository),
                                settings.log_file.with_name("openai_front.log"))
            front.start()
    except (ServerFailed, RuntimeError) as e:
        if front:
            front.stop()
        server.stop()
        raise click.ClickException(str(e)) from None
    return server, front


@click.group()
def main() -> None:
    """Run tritonserver on the rendered model repository."""


@main.command()
@server_options
@click.option("--detach", is_flag=True, help=f"Return once ready; the server keeps running (pid in {PID_FILE}).")
def up(detach: bool, ready_timeout_s: float, openai_port: int, **kwargs) -> None:
    """Start the server and stay in the foreground until Ctrl-C / SIGTERM."""
    settings = _settings(kwargs)
    if detach:
        _up_detached(settings, ready_timeout_s)
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server, front = _start(settings, ready_timeout_s, openai_port)
    click.echo(_banner(settings, front))
    supervisor = Supervisor(server, RestartPolicy(ready_timeout_s=ready_timeout_s),
                            report=lambda message: click.echo(message, err=True))
    supervisor.started()
    code = 0
    try:
        supervisor.watch(stop)
    except GaveUp as e:
        click.echo(f"{e}; last log lines:\n{server.log_tail()}", err=True)
        code = 1
    if front:
        front.stop()
    click.echo("stopping (in-flight requests are drained) ...", err=True)
    stopped = server.stop()
    sys.exit(code or stopped or 0)


def _up_detached(settings: ServerSettings, ready_timeout_s: float) -> None:
    args = [a for a in sys.argv[1:] if a != "--detach"]
    PID_FILE.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-m", "serving", *args], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=open(settings.log_file.with_suffix(".launcher.log"), "ab"))
    PID_FILE.write_text(str(child.pid))
    probe = TritonServer(settings)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise click.ClickException(f"the server exited ({child.returncode}); see {settings.log_file}")
        if probe.is_ready():
            click.echo(_banner(settings))
            return
        time.sleep(0.5)
    raise click.ClickException(f"not ready after {ready_timeout_s:.0f}s; see {settings.log_file}")


@main.command()
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True)
def down(timeout_s: float) -> None:
    """Stop a server started with `up --detach`."""
    if not PID_FILE.is_file():
        raise click.ClickException(f"no {PID_FILE}: no detached server")
    pid = int(PID_FILE.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        PID_FILE.unlink()
        click.echo("not running")
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            PID_FILE.unlink()
            click.echo("stopped")
            return
        time.sleep(0.3)
    raise click.ClickException(f"pid {pid} still running after {timeout_s}s")


@main.command(context_settings={"ignore_unknown_options": True})
@server_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(command: tuple[str, ...], ready_timeout_s: float, openai_port: int, **kwargs) -> None:
    """Start the server, run COMMAND once it is ready, stop the server; exit with COMMAND's status."""
    settings = _settings(kwargs)
    server, front = _start(settings, ready_timeout_s, openai_port)
    click.echo(_banner(settings, front), err=True)
    try:
        code = subprocess.call(list(command))
    finally:
        if front:
            front.stop()
        server.stop()
    sys.exit(code)


@main.command()
@server_options
def status(ready_timeout_s: float, openai_port: int, **kwargs) -> None:
    """Exit 0 if a server is ready at these ports."""
    ready = TritonServer(_settings(kwargs)).is_ready()
    click.echo("ready" if ready else "not ready")
    sys.exit(0 if ready else 1)


@main.command("gpu-up")
@click.option("--repository", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path("build/repository"), show_default=True)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address rank 0 binds (inside the container).")
@click.option("--http-port", type=int, default=names.DEFAULT_HTTP_PORT, show_default=True)
@click.option("--grpc-port", type=int, default=names.DEFAULT_GRPC_PORT, show_default=True)
@click.option("--metrics-port", type=int, default=names.DEFAULT_METRICS_PORT, show_default=True)
@click.option("--exit-timeout", "exit_timeout_s", type=int, default=30, show_default=True)
@click.option("--log-verbose", type=int, default=0, show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it.")
def gpu_up(dry_run: bool, **kwargs) -> None:
    """Serve a TensorRT-LLM repository in the NGC image: one MPI rank per GPU of the engine
    (TP x PP from its build.json); stays in the foreground and exits with the server's status."""
    from contract.build_record import BuildRecordError
    from serving.gpu_launcher import GpuServerSettings, LaunchError, prepare, supervise

    settings = GpuServerSettings(**kwargs)
    try:
        cmd = prepare(settings)
    except (LaunchError, BuildRecordError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(" ".join(cmd), err=True)
    if not dry_run:
        sys.exit(supervise(cmd, kill_after_s=settings.exit_timeout_s + 30))
