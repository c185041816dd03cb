"""OpenAI-compatible HTTP front (/v1/completions, /v1/chat/completions, /v1/models, /health)
that talks gRPC to the same ensemble, so it works unchanged in front of the GPU deployment."""
