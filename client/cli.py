"""`python -m client`: generate (streamed or whole), chat, health and metadata."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from client.errors import ClientError
from client.sync_client import LlmClient
from client.types import ChatMessage, Guide, SamplingParams
from contract import names


def sampling_options(f):
    options = [
        click.option(
            "--max-tokens", type=int, default=None, help="Maximum generated tokens (server default if unset)."
        ),
        click.option("--temperature", type=float, default=None, help="0 = greedy."),
        click.option("--top-p", type=float, default=None),
        click.option("--top-k", type=int, default=None),
        click.option("--min-tokens", type=int, default=None),
        click.option("--seed", type=int, default=None),
        click.option("--repetition-penalty", type=float, default=None),
        click.option("--presence-penalty", type=float, default=None),
        click.option("--frequency-penalty", type=float, default=None),
        click.option("--stop", multiple=True, help="Stop string (repeatable)."),
        click.option("-n", "--n", "n", type=int, default=None, help="Independent samples per prompt."),
        click.option(
            "--logprobs",
            "return_log_probs",
            is_flag=True,
            default=None,
            help="Return each token's log prob (shown with --json).",
        ),
        click.option(
            "--top-logprobs",
            type=int,
            default=None,
            help="Also the K most likely tokens at each position, with log probs (0-20; shown with --json).",
        ),
        click.option("--json-schema", default=None, help="Guided decoding: a JSON schema (text or @file)."),
        click.option("--json-object", is_flag=True, default=False, help="Guided decoding: any JSON object."),
        click.option("--regex", default=None, help="Guided decoding: the answer matches this regex."),
        click.option("--grammar", default=None, help="Guided decoding: an EBNF grammar (text or @file)."),
        click.option(
            "--priority",
            type=float,
            default=None,
            help="0-1, higher is admitted first when the engine is full (default 0.5).",
        ),
        click.option("--lora-task-id", type=int, default=None, help="A served LoRA adapter's id (0: the base model)."),
        click.option(
            "--timeout", "timeout_s", type=float, default=None, help="Seconds; the request is cancelled after."
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _text_or_file(value: str) -> str:
    return Path(value[1:]).read_text() if value.startswith("@") else value


def _guide(kwargs: dict) -> Guide | None:
    given = {k: kwargs[k] for k in ("json_schema", "json_object", "regex", "grammar") if kwargs.get(k)}
    if len(given) > 1:
        raise click.UsageError(f"give one of --json-schema, --json-object, --regex, --grammar; got {sorted(given)}")
    if "json_schema" in given:
        return Guide("json_schema", _text_or_file(given["json_schema"]))
    if "json_object" in given:
        return Guide.json_schema({"type": "object"})
    if "regex" in given:
        return Guide("regex", given["regex"])
    if "grammar" in given:
        return Guide("ebnf_grammar", _text_or_file(given["grammar"]))
    return None


def _sampling(kwargs: dict) -> SamplingParams:
    fields = {f.name for f in dataclasses.fields(SamplingParams)}
    values = {k: v for k, v in kwargs.items() if k in fields and v is not None}
    values["stop"] = tuple(kwargs.get("stop") or ())
    values["guide"] = _guide(kwargs)
    return SamplingParams(**values)


@click.group()
@click.option("--url", default=names.DEFAULT_GRPC_URL, show_default=True, help="Triton gRPC address.")
@click.option("--model", default=names.ENSEMBLE, show_default=True)
@click.pass_context
def main(ctx: click.Context, url: str, model: str) -> None:
    """Query the deployed Llama ensemble."""
    ctx.obj = {"url": url, "model": model}
    from contract import telemetry  # spans of each request when OTEL_EXPORTER_OTLP_* is set (docs/tracing.md)

    if telemetry.setup("llm-client"):
        ctx.call_on_close(telemetry.flush)


def _client(ctx: click.Context) -> LlmClient:
    return LlmClient(ctx.obj["url"], ctx.obj["model"])


@main.command()
@click.argument("prompt", required=False)
@click.option(
    "--file",
    "prompt_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="One prompt per line; generated one after another.",
)
@click.option("--stream/--no-stream", default=False, help="Print text as it is generated.")
@click.option(
    "--chat/--raw",
    "as_chat",
    default=True,
    show_default=True,
    help="Send the prompt as a user chat message (the model's chat template applies) or as raw text.",
)
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
                if stream and not as_json and sampling.n == 1:
                    for chunk in client.stream(request, sampling, timeout_s=timeout_s):
                        click.echo(chunk.text, nl=False)
                    click.echo()
                    continue
                results = client.generate_n(request, sampling, timeout_s=timeout_s, stream=stream)
                for index, result in enumerate(results):
                    if as_json:
                        record = {
                            "prompt": text,
                            "text": result.text,
                            "finish_reason": result.finish_reason,
                            "prompt_tokens": result.prompt_tokens,
                            "completion_tokens": result.completion_tokens,
                            # Without --stream the answer comes in one response: no first-token time to report.
                            "ttft_s": None if result.ttft_s is None else round(result.ttft_s, 4),
                            "latency_s": round(result.latency_s, 4),
                        }
                        if sampling.n > 1:
                            record["index"] = index
                        if sampling.return_log_probs or sampling.top_logprobs:
                            record |= {"token_ids": result.token_ids, "log_probs": result.log_probs}
                        if sampling.top_logprobs:
                            record["top_logprobs"] = [
                                [list(pair) for pair in position] for position in result.top_logprobs
                            ]
                        click.echo(json.dumps(record, ensure_ascii=False))
                    else:
                        click.echo(f"[{index}] {result.text}" if sampling.n > 1 else result.text)
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
    if sampling.n != 1:
        raise click.UsageError("chat keeps one history: -n must be 1 (use generate -n N)")
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
