"""The stand-in's generation: the project's CPU engine (model_repository.cpu_engine's step
loop over OpenVINO GenAI) on a built CPU engine, one request per generate_async call.

SamplingParams become the CPU engine's request (EngineInputs) by the table's rules: greedy as
row sampling.greedy says; temperature 1 when sampling without one; end_id -1 = no end id
(row executor.request); stop_token_ids = single-token stops.  What OpenVINO GenAI cannot do
(bad words, logit bias, beams, n > 1, ...) is refused as a stand-in limitation."""

from __future__ import annotations

import os
from pathlib import Path

from contract.model_configs import OpenVinoEngineParameters
from model_repository.cpu_engine.openvino_backend import OpenVinoBackend
from model_repository.cpu_engine.runner import EngineRunner
from model_repository.engine_inputs import EngineInputs
from tensorrt_llm._upstream import StandinLimitation

ENGINE_VARIABLE = "TRTLLM_STANDIN_OPENVINO_ENGINE"
# SamplingParams fields the CPU engine cannot honour: (field, value that asks for nothing).
UNSUPPORTED = (("bad_token_ids", None), ("bad", None), ("stop", None), ("embedding_bias", None),
               ("logits_processor", None), ("use_beam_search", False), ("n", 1), ("guided_decoding", None),
               ("prompt_logprobs", None), ("return_context_logits", False), ("return_generation_logits", False),
               ("lookahead_config", None), ("no_repeat_ngram_size", None), ("min_p", None))


def start_runner(max_batch_size: int, max_num_tokens: int, prefix_caching: bool) -> EngineRunner:
    engine = os.environ.get(ENGINE_VARIABLE)
    if not engine or not Path(engine).is_dir():
        raise StandinLimitation(f"set {ENGINE_VARIABLE} to a built CPU engine directory (the stand-in generates with it)")
    params = OpenVinoEngineParameters(engine_dir=Path(engine), max_num_seqs=max_batch_size,
                                      max_num_batched_tokens=max_num_tokens, enable_prefix_caching=prefix_caching)
    backend = OpenVinoBackend(params)
    backend.warm_up()
    runner = EngineRunner(backend, stream_interval=1)
    runner.start()
    return runner


def engine_request(prompt: list[int], p) -> EngineInputs:
    asked = [name for name, neutral in UNSUPPORTED if getattr(p, name) not in (neutral, None, [], ())]
    if asked:
        raise StandinLimitation(f"SamplingParams {asked} (OpenVINO GenAI cannot)")
    sampling = {"runtime_top_k": 1, "runtime_top_p": 0.0}
    if not p.is_greedy:
        sampling = {"runtime_top_k": p.top_k or 0, "runtime_top_p": p.top_p if p.top_p is not None else 1.0,
                    "temperature": p.temperature if p.temperature is not None else 1.0, "seed": p.seed or 0}
    return EngineInputs(
        input_ids=tuple(prompt), input_lengths=len(prompt), request_output_len=p.max_tokens,
        end_id=p.end_id, pad_id=p.pad_id if p.pad_id is not None else 0,
        stop_words_list=tuple((t,) for t in (p.stop_token_ids or ())),
        repetition_penalty=p.repetition_penalty if p.repetition_penalty is not None else 1.0,
        presence_penalty=p.presence_penalty or 0.0, frequency_penalty=p.frequency_penalty or 0.0,
        min_tokens=p.min_tokens or 0, return_log_probs=bool(p.logprobs), streaming=True, **sampling)
