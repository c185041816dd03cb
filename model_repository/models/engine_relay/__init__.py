"""Triton model 'engine_relay': model.py is the adapter; the repository's copy imports it."""
