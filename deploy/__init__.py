"""Kubernetes deployment of the GPU server: the Helm chart in deploy/helm/llama-triton, and the
tools that feed it from an engine's build.json, render it with Helm's own engine and check the
result against the Kubernetes schemas (`python -m deploy`)."""
