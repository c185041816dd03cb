"""The Triton models' source.

`preprocessing/`, `postprocessing/`, `openvino_llm/` hold thin `model.py` adapters (copied
into the rendered repository); the logic they call lives in the modules of this package,
importable and testable without a server.
"""
