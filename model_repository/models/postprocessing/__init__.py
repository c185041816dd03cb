"""Triton model 'postprocessing': model.py is the adapter; the repository's copy imports it."""
