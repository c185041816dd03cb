"""Every error the app answers, in the shape of the route's API (Anthropic's on /v1/messages:
openai_front/errors.py shaped)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from openai_front.errors import ApiError, shaped, validation_error_body


def error_response(request: Request, e: ApiError, headers=None) -> JSONResponse:
    body, status = shaped(e, request.url.path)
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return error_response(request, e)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, e: RequestValidationError):
        return error_response(request, validation_error_body(e.errors()[0]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        """Starlette's own refusals (no such route, wrong method) in the OpenAI shape."""
        message = f"Invalid URL ({request.method} {request.url.path})" if e.status_code == 404 else str(e.detail)
        kind = "invalid_request_error" if e.status_code < 500 else "server_error"
        return error_response(request, ApiError(e.status_code, message, type_=kind), getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception):
        """A bug still answers in the OpenAI shape (uvicorn logs the traceback)."""
        body = ApiError(500, f"internal error ({type(e).__name__}); see the front's log", type_="server_error")
        return error_response(request, body)
