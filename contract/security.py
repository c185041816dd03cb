"""Triton's administrative APIs that need a key (`--http-restricted-api`,
`--grpc-restricted-protocol`).  Inference, health, metadata, model configuration and
statistics stay open: clients and perf_analyzer read them; model control is off altogether
(`--model-control-mode=none`)."""

from __future__ import annotations

ADMIN_APIS = ("model-repository", "shared-memory", "trace", "logging")
ADMIN_KEY_HEADER = "triton-admin-key"  # gRPC clients send it as metadata "triton-grpc-protocol-<header>"


def restricted_api_flags(key: str) -> list[str]:
    apis = ",".join(ADMIN_APIS)
    return [
        f"--http-restricted-api={apis}:{ADMIN_KEY_HEADER}={key}",
        f"--grpc-restricted-protocol={apis}:{ADMIN_KEY_HEADER}={key}",
    ]
