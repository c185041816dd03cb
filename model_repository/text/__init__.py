"""Text processing (no Triton, no engine): request parsing, tokenization and word lists,
generation defaults, incremental detokenization, stop strings, per-stream postprocessing."""
