"""The served engine's IR driven in the test process by OpenVINO GenAI, with the served
scheduler settings and numerics and prefix caching off: the reference a served answer must equal."""

from __future__ import annotations

from pathlib import Path

import numpy as np

EOS = 2


def served_parameters(repository: Path):
    from build_engines.render import read_config
    from contract.model_configs import OpenVinoEngineParameters
    from contract.model_parameters import from_parameters

    config = read_config(repository / "openvino_llm" / "config.pbtxt")
    return from_parameters(OpenVinoEngineParameters, "openvino_llm",
                           {k: {"string_value": v.string_value} for k, v in config.parameters.items()})


def direct_pipeline(engine_dir: Path, params):
    import openvino_genai as og

    from model_repository.engines.openvino.openvino_backend import engine_properties

    sc = og.SchedulerConfig()
    sc.cache_size, sc.max_num_seqs, sc.max_num_batched_tokens = params.kv_cache_size_gb, params.max_num_seqs, params.max_num_batched_tokens
    sc.dynamic_split_fuse, sc.enable_prefix_caching = True, False
    return og.ContinuousBatchingPipeline(str(engine_dir), sc, "CPU", engine_properties(params))


def chat_ids(tok, messages) -> list[int]:
    """The prompt ids the served preprocessing makes of chat messages (ChatMessage), for the reference."""
    return tok.apply_chat_template([{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True,
                                   tokenize=True, return_dict=True)["input_ids"]


def greedy(pipe, request_id: int, ids: list[int], max_tokens: int) -> list[int]:
    """One request alone, greedy, stopping at EOS."""
    import openvino as ov
    import openvino_genai as og

    gc = og.GenerationConfig()
    gc.max_new_tokens, gc.do_sample, gc.stop_token_ids, gc.eos_token_id = max_tokens, False, {EOS}, EOS
    handle = pipe.add_request(request_id, ov.Tensor(np.array([ids], dtype=np.int64)), gc)
    tokens = []
    while pipe.has_non_finished_requests():
        pipe.step()
        while handle.can_read():
            for o in handle.read().values():
                tokens.extend(o.generated_ids)
    return tokens
