"""The OpenAI-compatible front as a child process of the launcher."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from build_engines.render import read_config
from contract import names
from contract.build_record import BuildRecord
from contract.request_ids import LOG_FORMATS
from serving.stop_signals import die_with_parent


def served_model_name(repository: Path) -> str:
    """The checkpoint's directory name, from the engine's build record."""
    try:
        config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
        engine_dir = Path(config.parameters["tokenizer_dir"].string_value)
        return Path(BuildRecord.read(engine_dir).spec["checkpoint"]).name
    except (OSError, KeyError, ValueError, RuntimeError):
        return "default"


def served_tokenizer_dir(repository: Path) -> Path | None:
    """The directory of the tokenizer.json preprocessing uses (the front's token texts of logprobs)."""
    try:
        config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
        path = Path(config.parameters["tokenizer_dir"].string_value)
    except (OSError, KeyError, ValueError, RuntimeError):
        return None
    return path if (path / "tokenizer.json").is_file() else None


class OpenAiFront:
    def __init__(
        self,
        grpc_url: str,
        host: str,
        port: int,
        model_name: str,
        log_file: Path,
        tokenizer_dir: Path | None = None,
        log_format: str = LOG_FORMATS[0],
    ) -> None:
        self.url = f"http://{host}:{port}"
        self._cmd = [
            sys.executable,
            "-m",
            "openai_front",
            "serve",
            "--grpc-url",
            grpc_url,
            "--host",
            host,
            "--port",
            str(port),
            "--model-name",
            model_name,
            "--log-format",
            log_format,
        ]
        if tokenizer_dir is not None:
            self._cmd += ["--tokenizer", str(tokenizer_dir)]
        self._log_file = log_file
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_file, "ab") as log:
            self.process = subprocess.Popen(die_with_parent(self._cmd), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the OpenAI front exited ({self.process.returncode}); see {self._log_file}")
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=2).status == 200:
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the OpenAI front was not ready after {timeout_s:.0f}s; see {self._log_file}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(35)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
