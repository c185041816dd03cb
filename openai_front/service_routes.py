"""The routes that answer about the service: /live, /health and /v1/models."""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from openai_front.served import Served


def register(app: FastAPI, served: Served) -> None:
    @app.get("/live")
    async def live():  # the process answers: the liveness probe (readiness is /health, Triton's too)
        return {"status": "ok"}

    @app.get("/health")
    async def health():
        ready = await served.client.is_ready()
        return JSONResponse({"status": "ok" if ready else "unavailable"}, status_code=200 if ready else 503)

    @app.get("/v1/models", dependencies=[Depends(served.authorized)])
    async def models():
        model = served.model_name
        return {
            "object": "list",
            "data": [
                {
                    "id": i,
                    "object": "model",
                    "created": 0,
                    "owned_by": "llama-triton-kit",
                    **({"parent": model} if i != model else {}),
                }
                for i in [model, *(await served.adapters())]
            ],
        }
