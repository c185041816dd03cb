"""Triton model 'openvino_llm': model.py is the adapter; the repository's copy imports it."""
