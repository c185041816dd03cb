"""The real client libraries against a live front (issue 37): the openai SDK, langchain-openai,
litellm and instructor, each at a pinned release in a side environment (requirements/
client-compat.lock; instructor in its own, client-compat-instructor.lock: its jiter pin clashes
with the newer openai's), and the anthropic SDK against /v1/messages (client-compat-anthropic.lock).
Each library's checks run in ONE subprocess
(tests/integration/client_compat.py): text, structured output, tools auto / required / named
with a round trip, streaming helpers, the Responses API, errors.

The client x feature table (with the ecosystem tools' rows of the same session: compat_table.py)
is printed and written to build/client-compat-report/table.md, with the
LangChain agent loop's transcript (the model chooses the tool, the tool runs, the model answers
from its result) in build/client-compat-report/agent-loop.md.  The first run makes the two
environments (about a minute, both at once); later runs reuse them while the locks stand.

By default the front is the one over the CPU layout (`agent_front`).  KIT_COMPAT_LAYOUTS, a comma-
separated list of tests/integration/conftest.py LAYOUTS (e.g. `server,pytorch_server`), runs the
same checks through a front over each listed layout instead, with the tokenizer the layout's
preprocessing uses (as `make serve` starts it); opt-in, so `make test` pays for the CPU layout
only.  A layout other than the CPU one writes its table to build/client-compat-report/
table-<layout>.md."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bench.environments import BUILD, ensure_test_environments, pinned
from tests.integration.client_compat import FEATURES
from tests.integration.compat_table import CLIENT
from tests.integration.conftest import layouts_from
from tests.integration.openai_front_process import MODEL, running_front

pytestmark = [pytest.mark.server, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("client_compat.py")
LIBRARIES = {"openai": "client-compat", "langchain-openai": "client-compat", "litellm": "client-compat",
             "instructor": "client-compat-instructor", "anthropic": "client-compat-anthropic"}
RUN_TIMEOUT_S = 300
OUT = BUILD / "client-compat-report"
LAYOUTS_ENV = "KIT_COMPAT_LAYOUTS"
CPU_LAYOUT = "server"


def compat_layouts() -> tuple[str, ...]:
    """The layouts KIT_COMPAT_LAYOUTS names (the CPU one when unset)."""
    return layouts_from(LAYOUTS_ENV, (CPU_LAYOUT,))


@pytest.fixture(scope="module")
def environments() -> dict[str, Path]:
    started = time.monotonic()
    venvs = ensure_test_environments(tuple(sorted(set(LIBRARIES.values()))))
    print(f"\nclient-compat environments ready in {time.monotonic() - started:.1f} s")
    return venvs


@pytest.fixture(scope="module", params=compat_layouts())
def front(request, tmp_path_factory):
    """(layout, base URL): the shared `agent_front` for the CPU layout, else a front of its own
    over the layout's server, with the tokenizer its preprocessing uses."""
    if request.param == CPU_LAYOUT:
        yield request.param, request.getfixturevalue("agent_front")
        return
    from serving.openai_process import served_tokenizer_dir

    server = request.getfixturevalue(request.param)
    tokenizer = served_tokenizer_dir(server.settings.repository) or request.getfixturevalue("default_engine")
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp(f"compat-front-{request.param}"),
                       "--tokenizer", str(tokenizer)) as base:
        yield request.param, base


@pytest.fixture(scope="module")
def table(compat_table):
    """The session's PASS/FAIL table (tests/integration/compat_table.py), one per layout: each
    library's row; written to build/client-compat-report/table[-<layout>].md with the tools' rows
    when the session ends."""
    return compat_table


def _run(venv: Path, library: str, base: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "NO_PROXY": "127.0.0.1,localhost"}
    done = subprocess.run([str(venv / "bin" / "python"), str(SCRIPT), library, base, MODEL], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, env=env, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"stderr": done.stderr}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_client_library(library, environments, front, table):
    layout, base = front
    started = time.monotonic()
    report = _run(environments[LIBRARIES[library]], library, base)
    print(f"\n{layout} {library}: {time.monotonic() - started:.1f} s")
    table.table(layout).add(f"{library} {pinned(LIBRARIES[library], library)}", report["results"], CLIENT, FEATURES)
    if report["transcript"] and layout == CPU_LAYOUT:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "agent-loop.md").write_text("\n".join(f"- {line}" for line in report["transcript"]) + "\n")
    failed = {f: r for f, r in report["results"].items() if r.startswith("fail")}
    assert not failed, json.dumps(failed, indent=1) + "\n" + report["stderr"][-3000:]
