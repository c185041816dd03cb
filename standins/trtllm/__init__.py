"""A CPU stand-in for the C++ `tensorrt_llm` Triton backend (TensorRT-LLM 1.1.0 / 1.2.1).

It serves the same rendered config.pbtxt as the real model (only `backend` differs) and
reproduces the backend's request semantics as read in its source, generating with the CPU
engine (model_repository.engines.openvino and model_repository.engine_step.runner).  Every
behaviour comes from a row of the cited table
contract/upstream/data/trtllm_backend_semantics_<version>.json, read at run time where it
is a text, a default or a limit; the row ids are named where they are used.

    upstream.py   the table of the version stood in for; errors with upstream's codes/texts
    settings.py   `parameters` and the queue bound read as upstream reads them; engine limits
    request.py    one Triton request -> executor requests (upstream's input parsing)
    registry.py   Triton request id -> executor ids (the key of `stop`)
    results.py    what one executor result holds and the tensors it becomes
    executor.py   queue bound, admission, validation at fetch, cancellation, finals
    engine.py     the CPU engine behind the executor, with KV-block accounting for metrics
                  (the block size is contract/kv_cache.py's, the GPU plan's)
    lora_cache.py the LoRA cache: lora_prefetch_dir's tasks as PEFT adapters for the CPU engine
    responder.py  one Triton request's responses (final flag when all its rows are final)
    metrics.py    the backend's nv_trt_llm_* metric families from the table
    publisher.py  the metrics on Triton's /metrics (handed pb_utils.MetricFamily by model.py)
    model.py      the thin Triton adapter: the one module here that imports Triton
    repository.py the GPU repository layout with this stand-in as `tensorrt_llm` (test servers)
    hf_lora_convert.py  NVIDIA's LoRA converting script, for the prefetch directory it reads

The cancellation-poll and stats threads are model_repository.engine_step.periodic's.
"""
