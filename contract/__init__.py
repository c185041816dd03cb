"""Names, dtypes and defaults shared by the renderer, the Triton models and the client."""
