"""`python -m bench`: benchmarks against the served ensemble, a module per command group: the
load sweeps (sweeps.py), the robustness loads (robustness.py), what the stack costs (costs.py)
and what a serving feature buys (features.py); options.py holds the options they share."""

from __future__ import annotations

import click

from bench.cli import costs, features, robustness, sweeps


@click.group()
def main() -> None:
    """Benchmarks of the served ensemble."""


for _group in (sweeps, robustness, costs, features):
    for _command in _group.COMMANDS:
        main.add_command(_command)
