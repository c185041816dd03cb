"""Build engines from Hugging Face Llama checkpoints and render the Triton model repository."""
