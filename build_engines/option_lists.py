"""A list of click options as one decorator, and what the list declares: click's own parameters,
each with its name, its flags and its default.  The build spec's options are such lists, the
common ones in build_engines/cli_options.py and each engine's in its folder's cli_options.py;
the defaults fill in what a make_spec caller leaves out, and the flags name what one engine
refuses of another's."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import click

Option = Callable[[Callable], Callable]  # what click.option(...) returns


def apply(options: Sequence[Option], f: Callable) -> Callable:
    """`f` decorated with `options`, the first listed first in --help."""
    for option in reversed(options):
        f = option(f)
    return f


def declared(options: Sequence[Option]) -> list[click.Parameter]:
    """The click parameters `options` declare, in their order."""

    def nothing(**_: Any) -> None: ...

    return click.command()(apply(options, nothing)).params


def given_flags(params: Sequence[click.Parameter], values: Mapping[str, Any]) -> list[str]:
    """The flag of each parameter whose value in `values` is not its default (of an on/off pair
    the one given: --no-x for a default that is on)."""
    flags = []
    for param in params:
        value = values.get(param.name or "", param.default)
        if value != param.default:
            switch_off = value is False and getattr(param, "secondary_opts", None)
            flags.append(param.secondary_opts[0] if switch_off else param.opts[0])
    return flags


EXISTING_DIR = click.Path(exists=True, file_okay=False, path_type=Path)  # a checkpoint, heads or adapters


def choice(enum_cls: type[enum.Enum]) -> click.Choice:
    """The values of `enum_cls` as a click choice."""
    return click.Choice([m.value for m in enum_cls])


def enum_option(*decls: str, default: enum.Enum, **declaration: Any) -> Option:
    """An option whose values are those of `default`'s enum, `default` when not given."""
    return click.option(*decls, type=choice(type(default)), default=default.value, **declaration)
