"""Triton model 'preprocessing': model.py is the adapter; the repository's copy imports it."""
