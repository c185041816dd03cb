"""The options several bench commands take, declared once: the served repository, an output
folder or file, the concurrency levels and the goodput SLO."""

from __future__ import annotations

from pathlib import Path

import click


def repository(help: str | None = None):
    return click.option(
        "--repository",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=Path("build/repository"),
        show_default=True,
        help=help,
    )


def out_dir(default: str):
    return click.option(
        "--out", type=click.Path(file_okay=False, path_type=Path), default=Path(default), show_default=True
    )


def out_file(default: str):
    return click.option(
        "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path(default), show_default=True
    )


def levels(default: tuple[int, ...]):
    return click.option("--concurrency", "levels", multiple=True, type=int, default=default, show_default=True)


def slo(command):
    """--slo-ttft-ms and --slo-itl-ms (goodput), in milliseconds."""
    command = click.option(
        "--slo-itl-ms", type=float, default=60.0, show_default=True, help="Goodput: inter-token latency at most."
    )(command)
    return click.option(
        "--slo-ttft-ms", type=float, default=1000.0, show_default=True, help="Goodput: time to first token at most."
    )(command)
