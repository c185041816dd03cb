"""Dynamo's environment (requirements/dynamo.lock): pinned, installable without the aisimulate
placeholder, and enough for the worker - every third-party module the worker imports at module
level, through the kit's modules it imports, is in the lock (read with ast, nothing imported)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from serving.side_environments import DYNAMO_LOCK

ROOT = Path(__file__).resolve().parents[2]
KIT = ("contract", "model_repository", "build_engines", "serving", "cluster", "client", "openai_front", "deploy",
       "bench")
# distribution -> the module it installs, where they differ
MODULES = {"grpcio": "grpc", "protobuf": "google", "pyzmq": "zmq", "ai-dynamo": "dynamo",
           "ai-dynamo-runtime": "dynamo", "PyYAML": "yaml", "python-rapidjson": "rapidjson"}


def pins() -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)$", DYNAMO_LOCK.read_text(), re.M))


def test_dynamo_is_pinned_and_aisimulate_left_out():
    p = pins()
    assert p["ai-dynamo"] == "1.6.1" and p["ai-dynamo-runtime"] == "1.6.1"
    assert "aisimulate" not in p
    assert p["tritonclient"] == "2.51.0" and p["protobuf"].startswith("4.")  # tritonclient 2.51: protobuf < 5
    assert int(p["pydantic"].split(".")[1]) <= 13  # ai-dynamo-runtime 1.6.1: pydantic <= 2.13.5
    assert all("@" not in line for line in DYNAMO_LOCK.read_text().splitlines() if not line.startswith("#"))


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in tree.body:  # module level only: what importing the module needs
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def worker_third_party_imports() -> set[str]:
    seen, todo, third = set(), ["cluster.worker"], set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        top = module.split(".")[0]
        if top in KIT:
            path = _module_file(module)
            if path is not None:
                todo += sorted(_top_level_imports(path))
            parent = module.rpartition(".")[0]
            if parent:
                todo.append(parent)
        elif top not in sys.stdlib_module_names and top != "__future__":
            third.add(top)
    return third


def test_everything_the_worker_imports_is_in_dynamos_environment():
    installed = {MODULES.get(name, name.replace("-", "_").lower()) for name in pins()}
    needed = worker_third_party_imports()
    assert {"grpc", "numpy", "tritonclient", "click", "google"} <= needed
    assert needed <= installed, f"the worker imports {sorted(needed - installed)}, which requirements/dynamo.lock lacks"
