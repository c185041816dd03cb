"""The OpenAI front as the tests run it: `python -m openai_front serve` against a test server,
on a free loopback port, its log in a temporary folder; stopped (draining) when done."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from serving.launcher import free_loopback_port

MODEL = "SmolLM2-135M-Instruct"
START_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 40.0  # uvicorn drains open connections first


@contextlib.contextmanager
def running_front(grpc_url: str, log_dir: Path, *extra_args: str) -> Iterator[str]:
    """Start the front, wait for /health, yield its base URL, stop it (killed if it does not drain)."""
    port = free_loopback_port()
    with open(log_dir / "front.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "openai_front", "serve", "--grpc-url", grpc_url,
                                 "--port", str(port), "--model-name", MODEL, *extra_args],
                                stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(base + "/health", timeout=2).status == 200:
                break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError(f"the OpenAI front did not come up; see {log_dir / 'front.log'}")
    try:
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(DRAIN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
