"""Triton adapter of the CPU engine: a decoupled model with TensorRT-LLM's tensor contract,
served by OpenVINO GenAI continuous batching on a background step thread.
The logic is model_repository.engine_step and engines.openvino, the Triton side model_repository.triton.engine_adapter
(shared with tensorrt_llm_pytorch); this file only wires them."""

import json

from contract import features, guided, lora, metrics
from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.engine_metrics import MetricsRecorder
from model_repository.engine_step.request_check import EngineRequestCheck
from model_repository.engine_step.runner import EngineRunner
from model_repository.engines.openvino.ir_scorer import scoring_problems
from model_repository.engines.openvino.openvino_backend import OpenVinoBackend, assisted_generation_problems
from model_repository.triton import triton_io
from model_repository.triton.engine_adapter import serve_requests
from model_repository.triton.response_channel import SendPump
from model_repository.triton.triton_metrics import TritonMetricsPublisher


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("openvino_llm")
        params = triton_io.load_parameters(args, OpenVinoEngineParameters)
        record = BuildRecord.read(params.engine_dir)
        check_runtime(record)  # refuses an engine built by other OpenVINO versions
        limits = record.spec["limits"]
        vocab_size = json.loads((params.engine_dir / "config.json").read_text())["vocab_size"]
        self.check = EngineRequestCheck(limits["max_input_len"], limits["max_seq_len"], vocab_size)
        guided.warm_up()
        self.params = params
        self.features = (
            features.CPU_ENGINE_PROMPT_LOOKUP
            if params.prompt_lookup
            else features.CPU_ENGINE_DRAFT_MODEL
            if params.draft_model
            else features.CPU_ENGINE
        )
        self.adapters = {a.task_id: a.name for a in lora.from_parameter(params.lora_adapters)}
        if self.adapters:
            self.features = features.with_lora(self.features)
        if params.top_logprobs:
            self.features = features.with_top_logprobs(self.features)
        recorder = MetricsRecorder()
        backend = OpenVinoBackend(params, on_prefix_lookup=recorder.on_prefix_lookup)
        backend.warm_up()
        self.scorer = backend.scorer  # prompt_logprobs (None unless top_logprobs is served)
        queue_timeout = params.queue_timeout_s if params.queue_timeout_s > 0 else None
        self.runner = EngineRunner(
            backend,
            observer=recorder,
            capacity=params.max_num_seqs + params.max_queue_size,
            queue_timeout_s=queue_timeout,
            stream_interval=params.stream_interval,
            max_running=params.max_num_seqs,
            aging_per_s=params.priority_aging_per_s,
            reserved_from_low_priority=params.reserved_from_low_priority,
            cancellation_check_period_s=params.cancel_check_period_ms / 1000,
        )
        self.runner.start()
        # Responses leave from a thread of their own: the step thread goes on to the next step
        # while Triton takes each (model_repository/triton/response_channel.py SendPump).
        self.pump = SendPump("openvino_llm-responses")
        self.metrics = TritonMetricsPublisher(
            args["model_name"],
            metrics.ENGINE_METRICS + metrics.PREFIX_CACHE_METRICS,
            self._gauges,
            recorder,
            aliases=True,
        )
        self.metrics.start()
        triton_io.logger().log_info(
            f"openvino_llm: {record.spec['precision']} engine from {params.engine_dir}, "
            f"max_num_seqs={params.max_num_seqs}, prefix caching {'on' if params.enable_prefix_caching else 'off'}, "
            f"prompt lookup {'on' if params.prompt_lookup else 'off'}, "
            f"draft model {params.draft_dir if params.draft_model else 'none'}, "
            f"LoRA adapters {self.adapters or 'none'}, kv_cache="
            + (f"{params.kv_cache_size_gb}GB" if params.kv_cache_size_gb else "on demand")
        )

    def execute(self, requests):
        serve_requests(
            requests,
            self.runner,
            self.features,
            lambda row: (
                self.check.problems(row)
                + lora.request_problems(row.options.lora_task_id, self.adapters)
                + scoring_problems(row.options)
                + assisted_generation_problems(row, self.params)
            ),
            scorer=self.scorer,
            pump=self.pump,
        )
        return None

    def _gauges(self):
        # Handed to the pipeline (at most max_num_seqs requests; the rest wait in the runner,
        # by priority) is not all running: its last step's batch is what runs.
        handed, incoming = self.runner.counts()
        stats = self.runner.backend_stats
        running = min(handed, int(stats.get("scheduled_requests", handed))) if handed else 0
        return {
            metrics.REQUESTS_RUNNING.name: running,
            metrics.REQUESTS_WAITING.name: incoming + handed - running,
            metrics.KV_CACHE_USAGE.name: stats.get("kv_cache_usage", 0.0),
        }

    def finalize(self):
        self.metrics.stop()
        self.runner.shutdown()
        self.pump.stop()  # after the runner's last responses
