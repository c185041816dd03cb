"""Test doubles of TensorRT-LLM, so the GPU paths run on a CPU: never part of the product.

    trtllm/   the C++ `tensorrt_llm` Triton backend on the CPU engine (its request semantics,
              metrics and LoRA cache), its Triton adapter (trtllm/model.py), the GPU repository
              layout around it (trtllm/repository.py) and NVIDIA's hf_lora_convert.py
              (trtllm/hf_lora_convert.py)
    llmapi/   the LLM API (PyTorch backend) as the top-level package `tensorrt_llm`, with the
              dist-info that makes importlib.metadata answer 1.2.1 (a path entry, not a package)
    links.py  how a test server's Triton stubs find them: links in the rendered model directories

The product (contract, model_repository, build_engines, serving, client, openai_front, deploy)
never imports this package, and no image copies it (tests/unit/test_product_boundaries.py
checks both).  It may import the product: the stand-ins reuse the engine step, the CPU engine
and the contract tables.  Tests import it from the checkout (pytest puts the repository root on
sys.path, as for `tests`); it is not in pyproject's packages, so no install carries it.
"""
