"""The PyTorch-backend engine: our engine contract served by one `tensorrt_llm.LLM`.

    sampling.py    one engine request -> SamplingParams keywords, and what the LLM API cannot take
    llm_config.py  the model's parameters -> LLM(...) keywords (LlmArgs, KvCacheConfig)
    engine.py      the asyncio loop that owns the LLM: streams, stops, cancellation, queue bound, metrics
    outputs.py     what one streamed RequestOutput step holds for us (new ids, their log probs)
    outbox.py      the thread the responses leave by, in order
    mpi_world.py   how the model runs inside Triton's MPI world (one rank, or N ranks under mpirun)

Nothing here imports Triton or TensorRT-LLM: the LLM API classes are handed in, and tests
drive the engine with the stand-in `tensorrt_llm` (standins/llmapi) or fakes.  Every fact
about the LLM API cites a row of contract/upstream/data/llmapi_<version>.json.
"""
