"""Upstream's facts as data: what TensorRT-LLM and its Triton backend say, at a pinned tag,
each fact citing where it was read (repository, tag, path, lines).

The tables live in `data/*.json`; the modules beside this one load them into typed
dataclasses for the planner, the config renderer, the stand-ins and the tests.  A fact
that could not be confirmed at the exact tag says so in its citation (`confirmed: false`
with a note), never silently.
"""
