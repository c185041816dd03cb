"""LLM: the constructor, generate_async, get_stats_async and shutdown, each with the table's
signature (checked at import: tensorrt_llm._upstream.check_signature) and upstream's checks
and texts, in the order upstream makes them (BaseLLM.generate_async, _prepare_sampling_params,
_check_arguments: rows llm.shutting_down, llm.inputs.kinds, llm.sampling_params.type,
llm.end_id.setup, llm.max_num_tokens_check).

Generation: the CPU engine (cpu_engine.py), or the toy model (toy_model.py) when the
checkpoint's config.json says so.  Results stream as upstream's (executor/result.py); the
iteration stats follow the executor's singleton IterationResult (executor.py 238-250,
319-332 at ed53795b): created by the first generate_async, re-armed by every later one."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from .._upstream import API, StandinLimitation, ValidationError, check_signature, error
from ..executor.result import IterationResult, no_stats
from . import cpu_engine, samplers, toy_model
from .kv_cache_config import KvCacheConfig
from .request_output import RequestOutput
from .sampling_params import SamplingParams

# GenerationExecutor.aget_stats before any request (executor.py at ed53795b, 325-329), printed by
# print_colored in yellow (its writer, stderr, not read: assumed)
STATS_NOT_YET = (
    "Iteration statistics are not available yet. To collect runtime statistics, please call get_stats_async() in "
    "async coroutine or the /metrics endpoint (if you're using trtllm-serve) AFTER prompts have been submitted.\n"
)
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
        self.sampler = samplers.resolve(args["sampler_type"])  # row sampler.TorchSampler: instantiate_sampler
        self._ids = itertools.count()
        self._shut_down = False
        self._iter_stats: IterationResult | None = None
        max_batch_size = args["max_batch_size"] or 8
        stats = bool(args["enable_iter_perf_stats"])  # the PyTorch backend records them only then
        toy = toy_model.settings(json.loads((self.model / "config.json").read_text()))
        if toy is not None:
            self._generator = toy_model.ToyModel(toy, max_batch_size, self._stat, stats, self.sampler)
            return
        # row llm.lora: the adapters of lora_config.lora_dir, served by the CPU engine's own LoRA
        adapters = cpu_engine.adapters(args.get("lora_config"))
        runner = cpu_engine.start_runner(max_batch_size, args["max_num_tokens"], kv.enable_block_reuse, adapters)
        self._generator = cpu_engine.CpuGenerator(runner, max_batch_size, adapters, self._stat, stats, self.sampler)

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
        extras = dict(prompt_adapter_request=prompt_adapter_request,
                      kv_cache_retention_config=kv_cache_retention_config, disaggregated_params=disaggregated_params,
                      _postproc_params=_postproc_params, scheduling_params=scheduling_params, cache_salt=cache_salt)
        if any(v is not None for v in extras.values()):
            raise StandinLimitation(f"generate_async({[k for k, v in extras.items() if v is not None]})")
        max_num_tokens = self.args["max_num_tokens"]
        if not self.args["enable_chunked_prefill"] and max_num_tokens and len(prompt) > max_num_tokens:
            raise ValueError(error("llm.max_num_tokens_check", prompt_len_over_cp=len(prompt) / 1, query_len=0,
                                   max_num_tokens=max_num_tokens))
        # executor.py 138, 238-250: every request re-arms the iteration stats
        if self._iter_stats is None:
            self._iter_stats = IterationResult()
        else:
            self._iter_stats.mark_undone()
        output = RequestOutput(next(self._ids), prompt, sampling_params, streaming, abort_request=self._generator.abort)
        self._generator.submit(output, prompt, sampling_params, lora_request)
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
        """Row llm.get_stats_async: the executor's IterationResult (executor.py aget_stats, 319-332):
        nothing before the first request, then one iterable shared by every call - done after its
        first timeout until a new request re-arms it (RESULT IterationResult)."""
        if self._iter_stats is None:  # EXECUTOR 325-329: print_colored(..., "yellow"), every call
            sys.stderr.write(f"\x1b[33m{STATS_NOT_YET}\x1b[0m")
            return no_stats()
        self._iter_stats.set_timeout(timeout)
        return self._iter_stats

    def _stat(self, data: str) -> None:
        """An iteration stat from the generator's thread (row stats.iteration_json)."""
        if self._iter_stats is not None and not self._shut_down:
            try:
                self._iter_stats.put(data)
            except RuntimeError:  # its loop has closed
                pass

    def shutdown(self) -> None:
        self._shut_down = True
        self._generator.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        return False


for _method, _name in ((LLM.__init__, "LLM.__init__"), (LLM.generate_async, "LLM.generate_async"),
                       (LLM.get_stats_async, "LLM.get_stats_async")):
    check_signature(_method, _name)
