"""The repository layouts bench renders for a load run (soak, stress) of the default model: the
CPU engine, and the GPU wiring in front of it (the engine relay), both rendered by the product
(build_engines.repository).  Any other repository - the stand-in layouts of the tests
(tests/layouts.py), a GPU engine's - is rendered elsewhere and served with --repository and the
--server-env it needs."""

from __future__ import annotations

import shutil
from enum import Enum
from pathlib import Path


class Layout(str, Enum):
    CPU = "server"
    RELAY = "relay_server"


def render_layout(layout: Layout, engine: Path, out: Path) -> Path:
    """Render `layout` of `engine` into `out`, replaced if it exists."""
    from build_engines.repository import render_repository

    if out.exists():
        shutil.rmtree(out)
    render_repository(engine, out, relay=layout is Layout.RELAY)
    return out


def server_environment(pairs: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """NAME=VALUE pairs (--server-env) as the server's environment."""
    parsed = tuple(tuple(pair.split("=", 1)) for pair in pairs)
    bad = [pair for pair, p in zip(pairs, parsed) if len(p) != 2 or not p[0]]
    if bad:
        raise ValueError(f"not NAME=VALUE: {', '.join(bad)}")
    return parsed  # type: ignore[return-value]
