"""The peer a CPU user would pick instead: `transformers serve` (continuous batching,
OpenAI API) on the same checkpoint, in its own venv."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.environments import BUILD


def native_dtype(cpuinfo: str | None = None) -> str:
    """The peer's best dtype on this CPU: bfloat16 where it computes bf16 natively (AVX512-BF16,
    AMX), float32 elsewhere - emulated bf16 runs several times slower and would flatter us."""
    text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "bfloat16" if {"avx512_bf16", "amx_bf16"} & set(flags) else "float32"


class PeerServer:
    def __init__(self, venv: Path, checkpoint: Path, port: int, log_file: Path, *, kv_blocks: int = 256,
                 max_batch_tokens: int = 512, dtype: str | None = None) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.model = str(checkpoint.resolve())  # transformers serve names models by path
        self.dtype = dtype or native_dtype()
        self._cmd = [str(venv / "bin" / "transformers"), "serve", self.model, "--continuous-batching",
                     "--device", "cpu", "--dtype", self.dtype, "--cb-num-blocks", str(kv_blocks),
                     "--cb-max-batch-tokens", str(max_batch_tokens), "--host", "127.0.0.1", "--port", str(port)]
        self._log_file = log_file
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "PeerServer":
        hub = BUILD / "hf-home" / "hub"
        hub.mkdir(parents=True, exist_ok=True)  # /v1/models answers 500 without it
        env = dict(os.environ, HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1")
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_file, "wb") as log:
            self.process = subprocess.Popen(self._cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({self.process.returncode}); see {self._log_file}")
            try:
                if urllib.request.urlopen(self.url + "/v1/models", timeout=2).status == 200:
                    self._warm_up()
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(1)
        self.__exit__()
        raise RuntimeError(f"transformers serve was not ready in 180 s; see {self._log_file}")

    def _warm_up(self) -> None:
        """The first request loads the model; do not bill that to the benchmark."""
        import json

        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
        request = urllib.request.Request(self.url + "/v1/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=300).read()

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
