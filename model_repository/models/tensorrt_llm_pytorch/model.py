"""Triton adapter of tensorrt_llm_pytorch: TensorRT-LLM's PyTorch backend (one
`tensorrt_llm.LLM`) serving our engine contract, so the ensemble, tensorrt_llm_bls, the
client and the OpenAI front work unchanged.  The logic is model_repository.engines.pytorch,
the Triton side model_repository.triton.engine_adapter (shared with openvino_llm); this file only
wires them.  tensorrt_llm is imported in initialize(), after the MPI environment is settled
(model_repository/engines/pytorch/mpi_world.py)."""

import json
import os
from pathlib import Path
from typing import Any, Callable

from contract import features, lora, metrics
from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import PyTorchEngineParameters
from contract.upstream.llmapi import llmapi as llmapi_table
from model_repository.engine_step.engine_metrics import MetricsRecorder
from model_repository.engine_step.request_check import EngineRequestCheck
from model_repository.engines.pytorch import mpi_world, sampling
from model_repository.engines.pytorch.engine import EngineSettings, LlmEngine
from model_repository.engines.pytorch.llm_config import llm_kwargs
from model_repository.triton import triton_io
from model_repository.triton.engine_adapter import serve_requests
from model_repository.triton.triton_metrics import TritonMetricsPublisher


class TritonPythonModel:
    def initialize(self, args):
        self.engine = self.metrics = None
        triton_io.log_environment("tensorrt_llm_pytorch")
        params = triton_io.load_parameters(args, PyTorchEngineParameters)
        record = BuildRecord.read(params.engine_dir)
        check_runtime(record)  # refuses a build made for another TensorRT-LLM
        self.version = record.versions["tensorrt_llm"]
        self.sampler = params.sampler_type  # the plan's choice (build_engines/pytorch/sampler.py)
        # whether each position's log probs hold the sampled token (TorchSampler: row result.logprobs.top_k)
        self.sampled_log_probs = sampling.sampled_token_included(
            self.version, self.sampler, llmapi_table(self.version).rule("result.logprobs.top_k").extra
        )
        place = mpi_world.world(os.environ)
        if place.role == mpi_world.Role.SINGLE:
            mpi_world.clear_job_variables(os.environ)
        from tensorrt_llm import LLM, SamplingParams
        from tensorrt_llm.llmapi import KvCacheConfig

        if place.role == mpi_world.Role.WORKER:
            triton_io.logger().log_info(f"tensorrt_llm_pytorch: rank {place.rank} of {place.size} serves the leader")
            mpi_world.serve_as_worker()
            return
        import tensorrt_llm.llmapi as llmapi

        adapters = {a.task_id: a for a in lora.from_parameter(params.lora_adapters)}
        self.adapter_names = {task_id: a.name for task_id, a in adapters.items()}  # for request_problems
        lora_config: Any = None  # tensorrt_llm's LoraConfig class when serving adapters
        lora_request: Callable[[int], Any] | None = None
        if adapters:  # row llm.lora (module paths unconfirmed at the tag)
            from tensorrt_llm.executor.request import LoRARequest
            from tensorrt_llm.lora_helper import LoraConfig

            lora_config = LoraConfig

            def adapter_request(task_id: int) -> Any:
                adapter = adapters[task_id]
                return LoRARequest(adapter.name, task_id, str(Path(adapter.weights).parent))

            lora_request = adapter_request
        kwargs = llm_kwargs(params, KvCacheConfig, lambda name, **fields: getattr(llmapi, name)(**fields), lora_config)
        if place.role == mpi_world.Role.LEADER:
            kwargs["_mpi_session"] = mpi_world.leader_session(place.size)
        vocab_size = json.loads((params.model_dir / "config.json").read_text())["vocab_size"]
        self.check = EngineRequestCheck(params.max_input_len, params.max_seq_len, vocab_size)
        recorder = MetricsRecorder()
        settings = EngineSettings(
            max_batch_size=params.max_batch_size,
            capacity=params.max_batch_size + params.max_queue_size,
            queue_timeout_s=params.queue_timeout_s or None,
            cancel_period_s=params.cancel_check_period_ms / 1000,
            stats_period_s=params.stats_period_s,
        )
        self.features = features.pytorch_engine(self.version, self.sampler)
        guided: Any = None  # tensorrt_llm's GuidedDecodingParams class with a guided decoding backend
        if params.guided_decoding_backend:
            from tensorrt_llm.sampling_params import GuidedDecodingParams

            guided = GuidedDecodingParams

            self.features = features.with_guided_decoding(self.features)
        if adapters:
            self.features = features.with_lora(self.features)
        self.engine = LlmEngine(
            lambda: LLM(**kwargs), SamplingParams, settings, recorder, guided_params=guided, lora_request=lora_request
        )
        self.engine.start()
        self.metrics = TritonMetricsPublisher(
            args["model_name"], metrics.ENGINE_METRICS, self._gauges, recorder, aliases=True
        )
        self.metrics.start()
        triton_io.logger().log_info(
            f"tensorrt_llm_pytorch: LLM({params.model_dir}, TP={params.tensor_parallel_size}, "
            f"PP={params.pipeline_parallel_size}, max_batch_size={params.max_batch_size}, "
            f"max_num_tokens={params.max_num_tokens}, kv_cache={kwargs['kv_cache_config']!r}) "
            f"as {place.role.value} rank of {place.size}"
        )

    def execute(self, requests):
        if self.engine is None:  # an MPI worker rank: the leader serves
            for request in requests:
                triton_io.fail(
                    triton_io.response_channel(request),
                    "this rank is an MPI worker of rank 0; send requests to rank 0's server",
                    "UNAVAILABLE",
                )
            return None
        serve_requests(requests, self.engine, self.features, self._problems)
        return None

    def _problems(self, row):
        return (
            self.check.problems(row)
            + sampling.problems(row, self.version, self.sampler)
            + sampling.log_prob_problems(row, self.sampled_log_probs, self.version)
            + lora.request_problems(row.options.lora_task_id, self.adapter_names)
        )

    def _gauges(self):
        assert self.engine is not None  # the publisher starts after the engine
        running, waiting = self.engine.counts()
        return {
            metrics.REQUESTS_RUNNING.name: running,
            metrics.REQUESTS_WAITING.name: waiting,
            metrics.KV_CACHE_USAGE.name: self.engine.kv_cache_usage,
        }

    def finalize(self):
        if self.metrics is not None:
            self.metrics.stop()
        if self.engine is not None:
            self.engine.shutdown()
