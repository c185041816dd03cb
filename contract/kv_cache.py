"""The KV cache's block size, one value for the GPU plan (build_engines/gpu/capacity.py: blocks in
the pool; build_engines/trtllm/plan.py: trtllm-build's flag) and the stand-in of the C++
backend (standins/trtllm/engine.py: its KV-block metrics)."""

TOKENS_PER_BLOCK = 32  # trtllm-build --tokens_per_block default (plugin.py); KvCacheConfig.tokens_per_block's too
