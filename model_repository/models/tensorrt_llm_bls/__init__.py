"""Triton model 'tensorrt_llm_bls': model.py is the adapter; the repository's copy imports it."""
