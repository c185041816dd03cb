"""What the bench commands share, declared once: the command itself (its --help shows every
option's default), the served repository, an output folder or file, the concurrency levels and
the goodput SLO."""

from __future__ import annotations

from pathlib import Path

import click


def command(name: str | None = None):
    """A bench command: its --help shows each option's default (an option with none shows nothing)."""
    return click.command(name, context_settings={"show_default": True})


def repository(help: str | None = None):
    return click.option(
        "--repository",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=Path("build/repository"),
        help=help,
    )


def out_dir(default: str):
    return click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path(default))


def out_file(default: str):
    return click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path(default))


def levels(default: tuple[int, ...]):
    return click.option("--concurrency", "levels", multiple=True, type=int, default=default)


def slo(command):
    """--slo-ttft-ms and --slo-itl-ms (goodput), in milliseconds."""
    ttft = click.option("--slo-ttft-ms", type=float, default=1000.0, help="Goodput: time to first token at most.")
    itl = click.option("--slo-itl-ms", type=float, default=60.0, help="Goodput: inter-token latency at most.")
    return ttft(itl(command))


def chats(users: int):
    """--users, --turns, --answer-tokens: the multi-turn shared-prefix chats of multiturn and cluster."""

    def declare(command):
        command = click.option("--answer-tokens", type=int, default=32)(command)
        command = click.option("--turns", type=int, default=4)(command)
        return click.option("--users", type=int, default=users, help="Conversations at once.")(command)

    return declare
