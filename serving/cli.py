"""`python -m serving`: up (foreground or --detach), down, run -- CMD, status."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import click

from contract import names, telemetry
from contract.request_ids import LOG_FORMATS
from contract.supervision import SUPERVISION_FILE_ENV
from serving import ports
from serving.canary import Canary, CanarySettings
from serving.launch_record import PID_FILE, LaunchRecord, RecordError
from serving.launcher import ServerFailed, ServerSettings, TritonServer
from serving.openai_process import OpenAiFront, served_model_name, served_tokenizer_dir
from serving.stop_signals import StopSignals
from serving.supervisor import GaveUp, RestartPolicy, Supervisor
from serving.teardown import StillRunning, launcher_process, stop_recorded


def server_options(f):
    options = [
        click.option(
            "--repository",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("build/repository"),
            show_default=True,
        ),
        click.option(
            "--host", default=names.DEFAULT_HOST, show_default=True, help="Address to bind (loopback by default)."
        ),
        click.option("--http-port", type=int, default=names.DEFAULT_HTTP_PORT, show_default=True),
        click.option("--grpc-port", type=int, default=names.DEFAULT_GRPC_PORT, show_default=True),
        click.option("--metrics-port", type=int, default=names.DEFAULT_METRICS_PORT, show_default=True),
        click.option(
            "--log-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=Path("build/logs/tritonserver.log"),
            show_default=True,
        ),
        click.option("--log-verbose", type=int, default=0, show_default=True),
        click.option(
            "--exit-timeout",
            "exit_timeout_s",
            type=int,
            default=30,
            show_default=True,
            help="Seconds in-flight requests get to finish on shutdown.",
        ),
        click.option("--ready-timeout", "ready_timeout_s", type=float, default=600.0, show_default=True),
        click.option(
            "--openai-port",
            type=int,
            default=0,
            show_default=True,
            help="Also serve the OpenAI-compatible API on this port (0 = off).",
        ),
        click.option(
            "--openai-log-format",
            envvar="OPENAI_LOG_FORMAT",
            type=click.Choice(LOG_FORMATS),
            default=LOG_FORMATS[0],
            show_default=True,
            help="The OpenAI front's log lines (build/logs/openai_front.log): text, or one JSON object per line; "
            "each carries the request id and trace id.",
        ),
        click.option(
            "--trace-endpoint",
            envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
            default=None,
            help="OTLP/HTTP collector (http://host:4318): Triton's spans, our models' and the OpenAI "
            "front's are exported there (docs/tracing.md); unset: no tracing.",
        ),
        click.option(
            "--trace-rate",
            "trace_ratio",
            envvar="OTEL_TRACES_SAMPLER_ARG",
            type=click.FloatRange(0, 1),
            default=telemetry.DEFAULT_SAMPLE_RATIO,
            show_default=True,
            help="Ratio of requests traced (a client's sampled traceparent is always followed by our spans).",
        ),
        click.option(
            "--trace-service",
            envvar="KIT_TRACE_SERVICE",
            default="triton-server",
            show_default=True,
            help="service.name of Triton's own spans.",
        ),
        click.option(
            "--admin-key-file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help=f"Key of Triton's admin APIs (or ${ADMIN_KEY_ENV}); unset: a random key, APIs locked.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
_CANARY = CanarySettings()


def canary_options(f):
    options = [
        click.option(
            "--canary/--no-canary",
            "canary",
            default=True,
            show_default=True,
            help="Send a one-token request through each entry model every --canary-period seconds; "
            "not ready while one gets no answer, restart when one is wedged (serving/canary.py).",
        ),
        click.option("--canary-period", "canary_period_s", type=float, default=_CANARY.period_s, show_default=True),
        click.option(
            "--canary-deadline",
            "canary_deadline_s",
            type=float,
            default=_CANARY.deadline_s,
            show_default=True,
            help="Seconds an entry whose engine takes priorities has to answer.",
        ),
        click.option(
            "--canary-deadline-unprioritized",
            "canary_unprioritized_deadline_s",
            type=float,
            default=_CANARY.unprioritized_deadline_s,
            show_default=True,
            help="The same for engines without priorities (TensorRT-LLM): above their first-token timeout.",
        ),
        click.option(
            "--canary-failures",
            "canary_failures",
            type=int,
            default=_CANARY.failures_to_wedge,
            show_default=True,
            help="Failed canaries in a row that make an entry wedged (a restart).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _canary_settings(kwargs: dict) -> CanarySettings:
    settings = CanarySettings(
        kwargs["canary_deadline_s"],
        kwargs["canary_unprioritized_deadline_s"],
        kwargs["canary_period_s"],
        kwargs["canary_failures"],
    )
    try:
        settings.validate()
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return settings


def entry_models(repository: Path) -> tuple[str, ...]:
    """The entry models a client calls: the ensemble, and the BLS where the repository has one."""
    return tuple(m for m in (names.ENSEMBLE, names.LLM_BLS) if (repository / m / "config.pbtxt").is_file())


def _settings(kwargs: dict, record_file: Path | None = None) -> ServerSettings:
    keys = ("repository", "host", "http_port", "grpc_port", "metrics_port", "log_file", "log_verbose", "exit_timeout_s")
    key_file = kwargs.get("admin_key_file")
    admin_key = key_file.read_text().strip() if key_file else os.environ.get(ADMIN_KEY_ENV) or None
    supervision = ((SUPERVISION_FILE_ENV, str(supervision_file(kwargs["log_file"]))),)
    trace = _trace_settings(kwargs)
    return ServerSettings(
        **{k: kwargs[k] for k in keys},
        admin_key=admin_key,
        record_file=record_file,
        environment=supervision,
        trace=trace,
    )


def _trace_settings(kwargs: dict) -> telemetry.TraceSettings | None:
    """Triton's and our processes' tracing (serving/trace_config.py); the OpenAI front this
    launcher starts inherits it through the environment."""
    if not kwargs.get("trace_endpoint"):
        return None
    trace = telemetry.TraceSettings.from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": kwargs["trace_endpoint"], "OTEL_TRACES_SAMPLER_ARG": str(kwargs["trace_ratio"])}
    )
    os.environ.update(trace.environment())
    return dataclasses.replace(trace, service_name=kwargs["trace_service"])


def supervision_file(log_file: Path) -> Path:
    """Where `up` keeps its SupervisionRecord (beside the server's log)."""
    return log_file.with_name("supervision.json")


def _ensure_ports_free(settings: ServerSettings, openai_port: int) -> None:
    """Every port this launch needs, checked before anything starts (Triton's alone fail later)."""
    try:
        ports.ensure_free(
            settings.host, [*settings.named_ports(), ports.NamedPort("OpenAI", "--openai-port", openai_port)]
        )
    except ports.PortUnavailable as e:
        raise click.ClickException(str(e)) from None


def _echo_err(message: str) -> None:
    click.echo(message, err=True)


def _banner(s: ServerSettings, openai_url: str | None = None) -> str:
    openai = f"  OpenAI   {openai_url}/v1\n" if openai_url else ""
    return (
        f"Triton is serving {s.repository} (ensemble ready)\n"
        f"  gRPC     {s.grpc_url}\n  HTTP     {s.http_url}\n  metrics  {s.metrics_url}\n{openai}"
        f"  log      {s.log_file}\n"
        f"Try: python -m client --url {s.grpc_url} generate \"Tell me a story about a brave knight.\" --stream"
    )


def _start(
    settings: ServerSettings,
    ready_timeout_s: float,
    openai_port: int,
    stop: threading.Event,
    openai_log_format: str = LOG_FORMATS[0],
) -> tuple[TritonServer, OpenAiFront | None]:
    """Triton, ready; then the OpenAI front if asked.  Exits with a clear message on failure
    (a port taken, the server failing or exiting, `stop` set by a signal)."""
    _ensure_ports_free(settings, openai_port)
    server = TritonServer(settings, stop=stop, report=_echo_err)
    front = None
    try:
        server.start()
        server.wait_ready(ready_timeout_s)
        if openai_port:
            front = OpenAiFront(
                settings.grpc_url,
                settings.host,
                openai_port,
                served_model_name(settings.repository),
                settings.log_file.with_name("openai_front.log"),
                tokenizer_dir=served_tokenizer_dir(settings.repository),
                log_format=openai_log_format,
            )
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
@canary_options
@click.option("--detach", is_flag=True, help=f"Return once ready; the server keeps running (pid in {PID_FILE}).")
@click.option(
    "--record-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    hidden=True,
    help="Where to record the server's pid and readiness (set by --detach).",
)
def up(
    detach: bool,
    record_file: Path | None,
    ready_timeout_s: float,
    openai_port: int,
    openai_log_format: str,
    canary: bool,
    **kwargs,
) -> None:
    """Start the server and stay in the foreground until Ctrl-C / SIGTERM / SIGHUP; restart it when
    it dies, a stub dies, or an entry model stops answering (the canary)."""
    canary_settings = _canary_settings(kwargs)
    settings = _settings(kwargs, record_file)
    if detach:
        _up_detached(settings, ready_timeout_s, openai_port)
        return
    with StopSignals() as signals:
        server, front = _start(settings, ready_timeout_s, openai_port, signals.event, openai_log_format)
        click.echo(_banner(settings, front.url if front else None))
        probe = (
            Canary(
                settings.grpc_url,
                entry_models(settings.repository),
                front.url if front else None,
                settings=canary_settings,
            )
            if canary
            else None
        )
        supervisor = Supervisor(
            server,
            RestartPolicy(ready_timeout_s=ready_timeout_s),
            report=_echo_err,
            canary=probe,
            record_file=supervision_file(settings.log_file),
        )
        supervisor.started()
        code = 0
        try:
            supervisor.watch(signals.event)
        except (GaveUp, ServerFailed) as e:
            if not signals.received:  # else: a signal cut a restart short, as asked
                _echo_err(f"{e}; last log lines:\n{server.log_tail()}")
                code = 1
        if front:
            front.stop()
        _echo_err("stopping (in-flight requests are drained) ...")
        stopped = server.stop()
    sys.exit(code or stopped or 0)


def _up_detached(settings: ServerSettings, ready_timeout_s: float, openai_port: int) -> None:
    """Start `up` in the background; return once *that* launcher records its server ready."""
    if PID_FILE.is_file():
        running = launcher_process(_read_record().launcher_pid)
        if running:
            raise click.ClickException(
                f"a detached server already runs (launcher pid {running.pid}, {PID_FILE}): `make stop` stops it"
            )
    _ensure_ports_free(settings, openai_port)
    args = [a for a in sys.argv[1:] if a != "--detach"] + ["--record-file", str(PID_FILE)]
    launcher_log = settings.log_file.with_suffix(".launcher.log")
    launcher_log.parent.mkdir(parents=True, exist_ok=True)
    with open(launcher_log, "ab") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "serving", *args], start_new_session=True, stdout=subprocess.DEVNULL, stderr=err
        )
    LaunchRecord(child.pid).write(PID_FILE)  # the child's own record comes after its imports and port check
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = "\n".join(launcher_log.read_text(errors="replace").splitlines()[-15:])
            raise click.ClickException(f"the server exited ({child.returncode}); {launcher_log} says:\n{tail}")
        record = _read_record()
        if record.ready and record.launcher_pid == child.pid:
            openai = f"http://{settings.host}:{openai_port}" if openai_port else None
            click.echo(_banner(settings, openai))
            return
        time.sleep(0.5)
    raise click.ClickException(
        f"not ready after {ready_timeout_s:.0f}s (the launcher keeps trying; `make stop` "
        f"stops it); see {settings.log_file}"
    )


def _read_record() -> LaunchRecord:
    try:
        return LaunchRecord.read(PID_FILE)
    except RecordError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True)
def down(timeout_s: float) -> None:
    """Stop a server started with `up --detach`, and anything it left behind."""
    if not PID_FILE.is_file():
        raise click.ClickException(f"no {PID_FILE}: no detached server")
    try:
        stop_recorded(_read_record(), timeout_s, report=click.echo)
    except StillRunning as e:
        raise click.ClickException(str(e)) from None
    PID_FILE.unlink(missing_ok=True)
    click.echo("stopped")


@main.command(context_settings={"ignore_unknown_options": True})
@server_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(command: tuple[str, ...], ready_timeout_s: float, openai_port: int, openai_log_format: str, **kwargs) -> None:
    """Start the server, run COMMAND once it is ready, stop the server; exit with COMMAND's status.
    SIGINT, SIGTERM or SIGHUP pass the signal on to COMMAND, then stop the server like `up`
    does (in-flight requests drained) and exit with 128 + the signal's number."""
    settings = _settings(kwargs)
    with StopSignals() as signals:
        server, front = _start(settings, ready_timeout_s, openai_port, signals.event, openai_log_format)
        _echo_err(_banner(settings, front.url if front else None))
        try:
            code = _run_until_done_or_stopped(list(command), signals, settings.exit_timeout_s)
        finally:
            if front:
                front.stop()
            if signals.received:
                _echo_err(f"{signals.received.name}: stopping (in-flight requests are drained) ...")
            server.stop()
    sys.exit(code)


def _run_until_done_or_stopped(command: list[str], signals: StopSignals, grace_s: float) -> int:
    try:
        child = subprocess.Popen(command)
    except OSError as e:
        raise click.ClickException(f"cannot run {command[0]}: {e}") from None
    while child.poll() is None and not signals.event.wait(0.2):
        pass
    if child.poll() is None:
        assert signals.received is not None  # set with the event that ended the wait
        child.send_signal(signals.received)
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            _echo_err(f"{command[0]} still running {grace_s}s after {signals.received.name}: killing it")
            child.kill()
            child.wait()
    if signals.received:
        return signals.exit_status
    return child.returncode if child.returncode >= 0 else 128 - child.returncode  # killed by a signal


@main.command()
@server_options
def status(ready_timeout_s: float, openai_port: int, **kwargs) -> None:
    """Exit 0 if a server is ready at these ports."""
    ready = TritonServer(_settings(kwargs)).is_ready()
    click.echo("ready" if ready else "not ready")
    sys.exit(0 if ready else 1)


@main.command()
@click.option("--grpc-url", default=f"{names.DEFAULT_HOST}:{names.DEFAULT_GRPC_PORT}", show_default=True)
@click.option(
    "--model",
    "models",
    multiple=True,
    help="Entry model to probe (repeatable); default, unless --openai-url is given: the ensemble, and "
    "the BLS where the server has it.",
)
@click.option("--openai-url", default=None, help="Also probe the OpenAI front at this base URL (http://host:port).")
@click.option(
    "--openai-api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="Environment variable holding the front's API key, where it needs one.",
)
@click.option("--deadline", "deadline_s", type=float, default=_CANARY.deadline_s, show_default=True)
@click.option(
    "--deadline-unprioritized",
    "unprioritized_deadline_s",
    type=float,
    default=_CANARY.unprioritized_deadline_s,
    show_default=True,
)
def canary(
    grpc_url: str,
    models: tuple[str, ...],
    openai_url: str | None,
    openai_api_key_env: str,
    deadline_s: float,
    unprioritized_deadline_s: float,
) -> None:
    """One tiny generation through each entry of a running server (the chart's probes run this):
    exit 0 if every entry answered within its deadline, 1 if one did not (wedged or down)."""
    import tritonclient.grpc as grpcclient

    if not models and not openai_url:  # the server's own entries
        with grpcclient.InferenceServerClient(grpc_url) as client:
            models = tuple(m for m in (names.ENSEMBLE, names.LLM_BLS) if _model_ready(client, m))
    if not models and not openai_url:
        click.echo(f"no entry model is ready at {grpc_url}", err=True)
        sys.exit(1)
    settings = CanarySettings(deadline_s, unprioritized_deadline_s)
    results = Canary(grpc_url, models, openai_url, os.environ.get(openai_api_key_env) or None, settings).probe()
    for result in results:
        click.echo(
            f"{result.entry}: {'ok' if result.answered else 'FAILED'} in {result.seconds:.2f}s ({result.detail})"
        )
    sys.exit(0 if all(r.answered for r in results) else 1)


def _model_ready(client, model: str) -> bool:
    try:
        return bool(client.is_model_ready(model))
    except Exception:  # down, or no such model
        return False


@main.command("gpu-up")
@canary_options
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address rank 0 binds (inside the container).")
@click.option("--http-port", type=int, default=names.DEFAULT_HTTP_PORT, show_default=True)
@click.option("--grpc-port", type=int, default=names.DEFAULT_GRPC_PORT, show_default=True)
@click.option("--metrics-port", type=int, default=names.DEFAULT_METRICS_PORT, show_default=True)
@click.option("--exit-timeout", "exit_timeout_s", type=int, default=30, show_default=True)
@click.option("--log-verbose", type=int, default=0, show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it.")
def gpu_up(dry_run: bool, canary: bool, **kwargs) -> None:
    """Serve a TensorRT-LLM repository in the NGC image: one MPI rank per GPU of the engine
    (TP x PP from its build.json); stays in the foreground and exits with the server's status.
    With the canary (the default), an entry that stops answering stops the server (exit 75), for
    the container's restart policy to start it again."""
    from contract.build_record import BuildRecordError
    from serving.canary import CanaryWatch
    from serving.gpu_launcher import GpuServerSettings, LaunchError, prepare, supervise

    canary_settings = _canary_settings(kwargs)
    kwargs = {k: v for k, v in kwargs.items() if not k.startswith("canary_")}
    settings = GpuServerSettings(**kwargs)
    try:
        cmd = prepare(settings)
    except (LaunchError, BuildRecordError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(" ".join(cmd), err=True)
    if dry_run:
        return
    watch = None
    if canary:
        url = f"127.0.0.1:{settings.grpc_port}"
        ready = functools.partial(_server_ready, f"http://127.0.0.1:{settings.http_port}")
        watch = CanaryWatch(Canary(url, entry_models(settings.repository), settings=canary_settings), ready, _echo_err)
        watch.start()
    sys.exit(supervise(cmd, kill_after_s=settings.exit_timeout_s + 30, wedged=watch.wedged if watch else lambda: None))


def _server_ready(http_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http_url}/v2/health/ready", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False
