"""The real client libraries against a live front (issue 37): the openai SDK, langchain-openai,
litellm and instructor, each at a pinned release in a side environment (requirements/
client-compat.lock; instructor in its own, client-compat-instructor.lock: its jiter pin clashes
with the newer openai's).  Each library's checks run in ONE subprocess
(tests/integration/client_compat.py): text, structured output, tools auto / required / named
with a round trip, streaming helpers, the Responses API, errors.

The client x feature table is printed and written to build/client-compat-report/table.md, with the
LangChain agent loop's transcript (the model chooses the tool, the tool runs, the model answers
from its result) in build/client-compat-report/agent-loop.md.  The first run makes the two
environments (about a minute, both at once); later runs reuse them while the locks stand."""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.environments import BUILD, ROOT, ensure_venv
from tests.integration.client_compat import FEATURES
from tests.integration.openai_front_process import MODEL

pytestmark = [pytest.mark.server, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("client_compat.py")
LOCKS = {"client-compat": ROOT / "requirements" / "client-compat.lock",
         "client-compat-instructor": ROOT / "requirements" / "client-compat-instructor.lock"}
LIBRARIES = {"openai": "client-compat", "langchain-openai": "client-compat", "litellm": "client-compat",
             "instructor": "client-compat-instructor"}
RUN_TIMEOUT_S = 300
OUT = BUILD / "client-compat-report"


@pytest.fixture(scope="module")
def environments() -> dict[str, Path]:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(LOCKS)) as pool:
        venvs = dict(zip(LOCKS, pool.map(lambda item: ensure_venv(*item), LOCKS.items())))
    print(f"\nclient-compat environments ready in {time.monotonic() - started:.1f} s")
    return venvs


@pytest.fixture(scope="module")
def table(request):
    """library -> {feature: result}; written out (and printed) when the module's tests end."""
    rows: dict[str, dict[str, str]] = {}
    yield rows
    if not rows:
        return
    lines = ["| client | " + " | ".join(FEATURES) + " |", "|---" * (len(FEATURES) + 1) + "|"]
    for library, results in rows.items():
        cells = [results.get(f, "not run").split(":")[0] for f in FEATURES]
        lines.append(f"| {library} | " + " | ".join(cells) + " |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "table.md").write_text("\n".join(lines) + "\n")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # shown whatever the capture mode
        print(f"\nclient-compat ({OUT / 'table.md'}):\n" + "\n".join(lines), flush=True)


def _run(venv: Path, library: str, base: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "NO_PROXY": "127.0.0.1,localhost"}
    done = subprocess.run([str(venv / "bin" / "python"), str(SCRIPT), library, base, MODEL], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"stderr": done.stderr}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_client_library(library, environments, agent_front, table):
    started = time.monotonic()
    report = _run(environments[LIBRARIES[library]], library, agent_front)
    print(f"\n{library}: {time.monotonic() - started:.1f} s")
    table[library] = report["results"]
    if report["transcript"]:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "agent-loop.md").write_text("\n".join(f"- {line}" for line in report["transcript"]) + "\n")
    failed = {f: r for f, r in report["results"].items() if r.startswith("fail")}
    assert not failed, json.dumps(failed, indent=1) + "\n" + report["stderr"][-3000:]
