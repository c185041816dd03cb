"""LLM: the constructor, generate_async, get_stats_async and shutdown, each with the table's
signature (checked at import: tensorrt_llm._upstream.check_signature) and upstream's checks
and texts, in the order upstream makes them (BaseLLM.generate_async, _prepare_sampling_params,
_check_arguments: rows llm.shutting_down, llm.inputs.kinds, llm.sampling_params.type,
llm.end_id.setup, llm.max_num_tokens_check)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tensorrt_llm._upstream import API, StandinLimitation, ValidationError, check_signature, error
from tensorrt_llm.llmapi import cpu_engine
from tensorrt_llm.llmapi.kv_cache_config import KvCacheConfig
from tensorrt_llm.llmapi.request_output import RequestOutput
from tensorrt_llm.llmapi.sampling_params import SamplingParams

# LlmArgs keywords beyond the constructor's named parameters (row llm.args.fields).
_ARGS = {k: v for k, v in API.rule("llm.args.fields").extra["fields"].items()}
_NAMED = set(API.signature("LLM.__init__").names())


class LLM:
    def __init__(self, model, tokenizer=None, tokenizer_mode="auto", skip_tokenizer_init=False,
                 trust_remote_code=False, tensor_parallel_size=1, dtype="auto", revision=None,
                 tokenizer_revision=None, **kwargs):
        unknown = sorted(set(kwargs) - set(_ARGS) - _NAMED)
        if unknown:  # TorchLlmArgs forbids extra keywords (row llm.args.fields)
            raise ValidationError(error("llm.args.fields", field=unknown[0]))
        args = {k: v for k, v in _ARGS.items() if k not in _NAMED} | kwargs
        if not (Path(model) / "config.json").is_file():
            raise StandinLimitation(f"model {model!r}: only a local Hugging Face checkpoint directory")
        if tensor_parallel_size != 1 or args["pipeline_parallel_size"] != 1:
            raise StandinLimitation("one CPU engine: tensor_parallel_size and pipeline_parallel_size must be 1")
        kv = args["kv_cache_config"]
        if not isinstance(kv, KvCacheConfig):
            raise ValidationError(error("llm.args.fields", field="kv_cache_config"))
        backend = args.get("guided_decoding_backend")
        if backend is not None:  # row llm.guided.tokenizer: the executor builds the decoder from the tokenizer
            if backend != "xgrammar":
                raise (StandinLimitation(f"guided_decoding_backend {backend!r}") if backend == "llguidance"
                       else ValueError(f"Unsupported guided decoding backend {backend}"))
            assert not skip_tokenizer_init, "tokenizer is not None"
        self.model = Path(model)
        self.tokenizer = None if skip_tokenizer_init else StandinLimitation  # never used: see generate_async
        self.args = args
        self._vocab_size = json.loads((self.model / "config.json").read_text())["vocab_size"]
        self._ids = itertools.count()
        self._shut_down = False
        max_batch_size = args["max_batch_size"] or 8
        # row llm.lora: the adapters of lora_config.lora_dir, served by the CPU engine's own LoRA
        self._adapters = cpu_engine.adapters(args.get("lora_config"))
        self._runner = cpu_engine.start_runner(max_batch_size, args["max_num_tokens"], kv.enable_block_reuse,
                                               self._adapters)
        self._admission = cpu_engine.Admission(self._runner, max_batch_size)

    def generate_async(self, inputs, sampling_params=None, lora_request=None, prompt_adapter_request=None,
                       streaming=False, kv_cache_retention_config=None, disaggregated_params=None,
                       _postproc_params=None, scheduling_params=None, cache_salt=None):
        if self._shut_down:
            raise RuntimeError(error("llm.shutting_down"))
        if sampling_params is None:
            sampling_params = SamplingParams()
        elif not isinstance(sampling_params, SamplingParams):
            raise TypeError(error("llm.sampling_params.type", type=type(sampling_params)))
        if sampling_params.end_id is None:
            if self.tokenizer is None:
                raise ValueError(error("llm.end_id.setup"))
            raise StandinLimitation("end_id from a tokenizer")
        prompt = self._prompt(inputs)
        task_id = cpu_engine.task_of(self._adapters, lora_request)
        extras = dict(prompt_adapter_request=prompt_adapter_request,
                      kv_cache_retention_config=kv_cache_retention_config, disaggregated_params=disaggregated_params,
                      _postproc_params=_postproc_params, scheduling_params=scheduling_params, cache_salt=cache_salt)
        if any(v is not None for v in extras.values()):
            raise StandinLimitation(f"generate_async({[k for k, v in extras.items() if v is not None]})")
        max_num_tokens = self.args["max_num_tokens"]
        if not self.args["enable_chunked_prefill"] and max_num_tokens and len(prompt) > max_num_tokens:
            raise ValueError(error("llm.max_num_tokens_check", prompt_len_over_cp=len(prompt) / 1, query_len=0,
                                   max_num_tokens=max_num_tokens))
        request = cpu_engine.engine_request(prompt, sampling_params, task_id)
        output = RequestOutput(next(self._ids), prompt, sampling_params, streaming,
                               withdraw=self._admission.withdraw)
        self._admission.submit(request, output.sink)
        return output

    def _prompt(self, inputs) -> list:
        """Row llm.inputs.kinds: a token-id list or {'prompt_token_ids': [...]}."""
        if isinstance(inputs, dict) and "prompt_token_ids" in inputs:
            inputs = inputs["prompt_token_ids"]
        if isinstance(inputs, str):
            raise StandinLimitation("text prompts (the stand-in has no tokenizer)")
        if isinstance(inputs, (list, tuple)) and all(isinstance(t, int) for t in inputs):
            return list(inputs)
        raise TypeError(error("llm.inputs.kinds", type=type(inputs)))

    def get_stats_async(self, timeout=2):
        """Row llm.get_stats_async: iteration stats as JSON strings (row stats.iteration_json),
        recorded only with enable_iter_perf_stats.  OpenVINO has no KV blocks: the stand-in
        reports its KV-cache usage as used/max of 1000 blocks."""
        stats = []
        if self.args["enable_iter_perf_stats"]:
            running, waiting = self._admission.counts()
            used = round(1000 * self._runner.backend_stats.get("kv_cache_usage", 0.0))
            stats.append(json.dumps({"iter": self._runner.steps, "numActiveRequests": running,
                                     "numQueuedRequests": waiting,
                                     "kvCacheStats": {"maxNumBlocks": 1000, "usedNumBlocks": used,
                                                      "freeNumBlocks": 1000 - used, "tokensPerBlock": 32}}))

        async def iterate():
            for stat in stats:
                yield stat
        return iterate()

    def shutdown(self) -> None:
        self._shut_down = True
        self._runner.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        return False


for _method, _name in ((LLM.__init__, "LLM.__init__"), (LLM.generate_async, "LLM.generate_async"),
                       (LLM.get_stats_async, "LLM.get_stats_async")):
    check_signature(_method, _name)
