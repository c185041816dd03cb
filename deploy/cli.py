"""`python -m deploy`: values from an engine, render the chart, check it (lint + schemas)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from contract.build_record import BuildRecordError
from deploy import chart, schema_check
from deploy.engine_values import EngineValuesError, engine_values
from deploy.parallelism import ParallelismError

values_option = click.option(
    "-f",
    "--values",
    "values_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Values file (repeatable; later files win, as with helm -f).",
)
engine_option = click.option(
    "--engine-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Take the GPU count from this engine's build.json (applied after the values files).",
)
release_option = click.option("--release", default=chart.DEFAULT_RELEASE, show_default=True)
namespace_option = click.option("--namespace", default=chart.DEFAULT_NAMESPACE, show_default=True)


@click.group()
def main() -> None:
    """The Kubernetes deployment: the Helm chart in deploy/helm/llama-triton."""


@main.command("values")
@click.option("--engine-dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
def values_cmd(engine_dir: Path, out: Path | None) -> None:
    """Values an engine dictates (its TP/PP sizes), for `helm install -f`."""
    text = f"# From {engine_dir}/build.json (python -m deploy values)\n" + yaml.safe_dump(_engine_values(engine_dir))
    if out:
        out.write_text(text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)


@main.command()
@values_option
@engine_option
@release_option
@namespace_option
def template(values_files: tuple[Path, ...], engine_dir: Path | None, release: str, namespace: str) -> None:
    """Render the chart (like `helm template`) to stdout."""
    click.echo(chart.to_yaml(_render(_values(values_files, engine_dir), release, namespace)), nl=False)


@main.command("check")
@values_option
@engine_option
def check_cmd(values_files: tuple[Path, ...], engine_dir: Path | None) -> None:
    """helm lint --strict, render, and check every object against the Kubernetes schemas.

    Without -f/--engine-dir: the default values and each deploy/helm/llama-triton/ci/*-values.yaml.
    """
    if values_files or engine_dir:
        cases = {" + ".join(map(str, values_files)) or str(engine_dir): _values(values_files, engine_dir)}
    else:
        cases = {"default values": {}} | {p.name: chart.load_values([p]) for p in ci_values_files()}
    versions = schema_check.kube_versions()
    failed = 0
    for name, values in cases.items():
        problems = list(chart.lint(values).errors)
        rendered = _render(values, chart.DEFAULT_RELEASE, chart.DEFAULT_NAMESPACE)
        problems += [str(p) for p in schema_check.check(rendered, versions)]
        count = sum(len(r.documents) for r in rendered)
        status = "ok" if not problems else f"{len(problems)} problem(s)"
        click.echo(f"{name}: {count} objects, lint + Kubernetes {'/'.join(versions)} schemas: {status}")
        for problem in problems:
            click.echo(f"  {problem}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


@main.command()
def dashboard() -> None:
    """Regenerate the Grafana dashboard (deploy/grafana/llm-serving.json) from contract/metrics.py."""
    from deploy.dashboard import write

    click.echo(write())


@main.command()
def alerts() -> None:
    """Regenerate the SLO alert rules (deploy/helm/llama-triton/files/llm-alerts.rules.yaml) from deploy/alerts.py."""
    from deploy.alerts import write

    click.echo(write())


def ci_values_files() -> list[Path]:
    return sorted(chart.CI_VALUES_DIR.glob("*-values.yaml"))


def _engine_values(engine_dir: Path) -> dict:
    try:
        return engine_values(engine_dir)
    except (BuildRecordError, EngineValuesError, ParallelismError) as e:
        raise click.ClickException(str(e)) from None


def _values(values_files: tuple[Path, ...], engine_dir: Path | None) -> dict:
    try:
        values = chart.load_values(values_files)
    except chart.ChartError as e:
        raise click.ClickException(str(e)) from None
    return chart.merge_values(values, _engine_values(engine_dir)) if engine_dir else values


def _render(values: dict, release: str, namespace: str) -> list[chart.RenderedTemplate]:
    try:
        return chart.render(values, release, namespace)
    except chart.ChartError as e:
        raise click.ClickException(str(e)) from None
