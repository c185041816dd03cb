"""Triton plumbing shared by every model.py: request/response conversion, the close-once
response channel, custom metrics, BLS calls and the engine models' common execute() flow.
Only response_channel is importable outside the Python-backend stub."""
