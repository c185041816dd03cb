"""`python -m openai_front serve`: the OpenAI-compatible front on uvicorn."""

from __future__ import annotations

import os
from pathlib import Path

import click

from contract import names, tool_formats
from contract.request_ids import LOG_FORMATS
from openai_front import response_store
from openai_front.bodies import DEFAULT_MAX_BODY_BYTES

API_KEY_ENV = "OPENAI_FRONT_API_KEY"
DEFAULT_PORT = 9000


@click.group()
def main() -> None:
    """OpenAI-compatible HTTP front for the Triton ensemble."""


@main.command()
@click.option("--grpc-url", default=names.DEFAULT_GRPC_URL, show_default=True, help="Triton gRPC address.")
@click.option("--host", default=names.DEFAULT_HOST, show_default=True)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True)
@click.option("--model-name", default="default", show_default=True, help="The model id clients use.")
@click.option(
    "--api-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help=f"File holding the API key (or set ${API_KEY_ENV}); unset = no authentication.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Bodies over this get a 413 naming it, before they are read whole.",
)
@click.option(
    "--tokenizer",
    "tokenizer_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Directory with the served checkpoint's tokenizer.json (token texts of logprobs).",
)
@click.option("--request-timeout", "request_timeout_s", type=float, default=600.0, show_default=True)
@click.option(
    "--tool-call-format",
    type=click.Choice(["auto", *tool_formats.FORMATS]),
    default="auto",
    show_default=True,
    help="How the model writes tool calls (tool_choice auto): auto = recorded in or detected from the "
    "--tokenizer directory's build.json / chat template, else the generic json format; none = "
    "refuse tool_choice auto.",
)
@click.option(
    "--response-store",
    "store_mode",
    type=click.Choice(response_store.MODES),
    default="memory",
    show_default=True,
    help="Where /v1/responses keeps responses for previous_response_id, GET and "
    "DELETE: this process's memory, or off (several replicas, no shared store).",
)
@click.option(
    "--response-store-max-entries",
    "store_max_entries",
    type=click.IntRange(min=1),
    default=response_store.DEFAULT_MAX_ENTRIES,
    show_default=True,
    help="Responses kept at most (the oldest goes first).",
)
@click.option(
    "--response-store-ttl",
    "store_ttl_s",
    type=click.FloatRange(min=0, min_open=True),
    default=response_store.DEFAULT_TTL_S,
    show_default=True,
    help="Seconds a stored response is kept.",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default=LOG_FORMATS[0],
    show_default=True,
    help="Log lines as text or one JSON object per line; each carries the request id and trace id.",
)
def serve(
    grpc_url,
    host,
    port,
    model_name,
    api_key_file,
    max_body_bytes,
    tokenizer_dir,
    request_timeout_s,
    tool_call_format,
    store_mode,
    store_max_entries,
    store_ttl_s,
    log_format,
) -> None:
    import uvicorn

    from contract.request_ids import configure_logging

    configure_logging(json_lines=log_format == "json")

    from openai_front.app import FrontSettings, create_app

    api_key = api_key_file.read_text().strip() if api_key_file else os.environ.get(API_KEY_ENV) or None
    settings = FrontSettings(
        grpc_url=grpc_url,
        model_name=model_name,
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        request_timeout_s=request_timeout_s,
        tokenizer_dir=tokenizer_dir,
        tool_call_format=None if tool_call_format == "auto" else tool_call_format,
        response_store=response_store.StoreSettings(store_mode, store_max_entries, store_ttl_s),
    )
    click.echo(
        f"OpenAI-compatible API on http://{host}:{port}/v1 (model {model_name!r}, "
        f"authentication {'on' if api_key else 'off'}, tool calls {settings.resolved_tool_call_format()}) "
        f"-> Triton {grpc_url}",
        err=True,
    )
    uvicorn.run(create_app(settings), host=host, port=port, log_level="warning", timeout_graceful_shutdown=30)
