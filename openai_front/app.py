"""The ASGI app: OpenAI routes over one gRPC client to the ensemble."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from client import AsyncLlmClient
from contract import telemetry
from openai_front import chat_routes, error_handlers, messages_routes, responses_routes, service_routes
from openai_front.bodies import BodyLimit, CheckedBodyRoute
from openai_front.metrics import FrontMetrics, MetricsMiddleware
from openai_front.observability import RequestContext
from openai_front.served import Served
from openai_front.settings import FrontSettings


def create_app(settings: FrontSettings) -> FastAPI:
    served = Served(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        served.client = AsyncLlmClient(settings.grpc_url)
        yield
        await served.client.close()

    app = FastAPI(title="Llama on Triton - OpenAI-compatible API", lifespan=lifespan)
    app.router.route_class = CheckedBodyRoute  # every route after this: bodies checked first (bodies.py)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=FrontMetrics())  # counts 413s too
    app.add_middleware(RequestContext)  # outermost: request id + span (openai_front/observability.py)
    telemetry.setup("openai-front")  # contract/telemetry.py: exports when OTEL_EXPORTER_OTLP_* is set
    error_handlers.install(app)
    service_routes.register(app, served)
    chat_routes.register(app, served)  # the routes that answer through the chat path
    messages_routes.register(app, served)
    responses_routes.register(app, served)
    return app
