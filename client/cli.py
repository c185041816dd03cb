"""`python -m client`: generate (streamed or whole), chat, health and metadata."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from client.errors import ClientError
from client.sync_client import LlmClient
from client.types import ChatMessage, SamplingParams
from contract import names


def sampling_options(f):
    options = [
        click.option("--max-tokens", type=int, default=None, help="Maximum generated tokens (server default if unset)."),
        click.option("--temperature", type=float, default=None, help="0 = greedy."),
        click.option("--top-p", type=float, default=None),
        click.option("--top-k", type=int, default=None),
        click.option("--min-tokens", type=int, default=None),
        click.option("--seed", type=int, default=None),
        click.option("--repetition-penalty", type=float, default=None),
        click.option("--presence-penalty", type=float, default=None),
        click.option("--frequency-penalty", type=float, default=None),
        click.option("--stop", multiple=True, help="Stop string (repeatable)."),
        click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds; the request is cancelled after."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _sampling(kwargs: dict) -> SamplingParams:
    fields = {f.name for f in dataclasses.fields(SamplingParams)}
    values = {k: v for k, v in kwargs.items() if k in fields and v is not None}
    values["stop"] = tuple(kwargs.get("stop") or ())
    return SamplingParams(**values)


@click.group()
@click.option("--url", default=names.DEFAULT_GRPC_URL, show_default=True, help="Triton gRPC address.")
@click.option("--model", default=names.ENSEMBLE, show_default=True)
@click.pass_context
def main(ctx: click.Context, url: str, model: str) -> None:
    """Query the deployed Llama ensemble."""
    ctx.obj = {"url": url, "model": model}


def _client(ctx: click.Context) -> LlmClient:
    return LlmClient(ctx.obj["url"], ctx.obj["model"])


@main.command()
@click.argument("prompt", required=False)
@click.option("--file", "prompt_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="One prompt per line; generated one after another.")
@click.option("--stream/--no-stream", default=False, help="Print text as it is generated.")
@click.option("--chat/--raw", "as_chat", default=True, show_default=True,
              help="Send the prompt as a user chat message (the model's chat template applies) or as raw text.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per prompt (text, counts, timings).")
@sampling_options
@click.pass_context
def generate(ctx, prompt, prompt_file, stream, as_chat, as_json, timeout_s, **kwargs):
    """Generate text for PROMPT (or every line of --file)."""
    prompts = [prompt] if prompt else []
    if prompt_file:
        prompts += [line for line in prompt_file.read_text().splitlines() if line.strip()]
    if not prompts:
        raise click.UsageError("give a PROMPT or --file")
    sampling = _sampling(kwargs)
    try:
        with _client(ctx) as client:
            for text in prompts:
                request = [ChatMessage("user", text)] if as_chat else text
                if stream and not as_json:
                    for chunk in client.stream(request, sampling, timeout_s=timeout_s):
                        click.echo(chunk.text, nl=False)
                    click.echo()
                    continue
                result = client.generate(request, sampling, timeout_s=timeout_s, stream=stream)
                if as_json:
                    click.echo(json.dumps({
                        "prompt": text, "text": result.text, "finish_reason": result.finish_reason,
                        "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
                        # Without --stream the answer comes in one response: no first-token time to report.
                        "ttft_s": None if result.ttft_s is None else round(result.ttft_s, 4),
                        "latency_s": round(result.latency_s, 4),
                    }, ensure_ascii=False))
                else:
                    click.echo(result.text)
    except ClientError as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from None
    except KeyboardInterrupt:
        click.echo("\n[cancelled]", err=True)
        sys.exit(130)


@main.command()
@click.option("--system", default=None, help="System prompt.")
@sampling_options
@click.pass_context
def chat(ctx, system, timeout_s, **kwargs):
    """Interactive chat with history (empty line or Ctrl-D to quit; Ctrl-C stops an answer)."""
    sampling = _sampling(kwargs)
    history: list[ChatMessage] = [ChatMessage("system", system)] if system else []
    with _client(ctx) as client:
        while True:
            try:
                line = input("you> ")
            except EOFError:
                break
            if not line.strip():
                break
            history.append(ChatMessage("user", line))
            parts = []
            click.echo("assistant> ", nl=False)
            try:
                for chunk in client.stream(history, sampling, timeout_s=timeout_s):
                    parts.append(chunk.text)
                    click.echo(chunk.text, nl=False)
            except KeyboardInterrupt:
                click.echo(" [stopped]", nl=False)
            except ClientError as e:
                click.echo(f"\n[error] {e}", err=True)
                history.pop()
                continue
            click.echo()
            history.append(ChatMessage("assistant", "".join(parts)))


@main.command()
@click.pass_context
def health(ctx):
    """Exit 0 when the server and the ensemble are ready."""
    with _client(ctx) as client:
        ready = client.is_ready()
    click.echo("ready" if ready else "not ready")
    sys.exit(0 if ready else 1)


@main.command()
@click.pass_context
def metadata(ctx):
    """Server and ensemble metadata as JSON."""
    try:
        with _client(ctx) as client:
            click.echo(json.dumps(client.metadata(), indent=2))
    except ClientError as e:
        raise click.ClickException(str(e)) from None
