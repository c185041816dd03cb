"""Triton adapter of the `tensorrt_llm` stand-in: the C++ backend's request semantics over the
CPU engine (see the package docstring).  This file only converts pb_utils objects; every
response sender goes through a ResponseChannel (model_repository.triton.response_channel)."""

import json

import triton_python_backend_utils as pb_utils

from contract import guided
from contract.build_record import BuildRecord, check_runtime
from model_repository.engine_step.periodic import Periodic
from model_repository.triton import triton_io
from standins.trtllm import lora_cache, upstream
from standins.trtllm.engine import start_engine
from standins.trtllm.executor import ExecutorLimits, StandinExecutor
from standins.trtllm.metrics import iteration_stats, series
from standins.trtllm.publisher import StandinMetricsPublisher
from standins.trtllm.request import is_stop, parse_request
from standins.trtllm.responder import Responder, requested_outputs
from standins.trtllm.settings import engine_limits, load_settings


def _response(arrays):
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, a) for name, a in arrays.items()])


def _error(code, message):
    """Upstream's text as it is (no code prefix: the C++ backend adds none)."""
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message, getattr(pb_utils.TritonError, code)))


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("tensorrt_llm stand-in")
        config = json.loads(args["model_config"])
        self.sem = upstream.semantics()
        self.settings = s = load_settings(self.sem, config)
        if s.guided_decoding:
            guided.warm_up()
        check_runtime(BuildRecord.read(s.gpt_model_path))  # the CPU engine's versions
        limits = engine_limits(s.gpt_model_path)
        self.lora = lora_cache.for_engine(self.sem, s.lora_prefetch_dir, s.gpt_model_path)
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        self.runner, self.books = start_engine(s.gpt_model_path, limits, self.lora.adapters)
        self.executor = StandinExecutor(self.sem, self.runner, ExecutorLimits(
            max_active=limits.max_batch_size, max_queue_size=s.max_queue_size,
            max_input_len=limits.max_input_len(self.sem, s.enable_chunked_context), max_seq_len=limits.max_seq_len,
            vocab_size_padded=limits.vocab_size_padded, max_beam_width=s.max_beam_width,
            guard_streaming=s.batch_scheduler_policy == "max_utilization" and not s.enable_chunked_context,
            lora_tasks=self.lora.engine_keys(), max_draft_len=s.max_draft_len))
        self.canceller = Periodic(s.cancellation_check_period_ms / 1000, self.executor.poll_cancelled,
                                  "standin-cancel").start()
        self.metrics = StandinMetricsPublisher(pb_utils.MetricFamily, args["model_name"], str(args["model_version"]),
                                               series(self.sem), self._stats, s.stats_check_period_ms / 1000)
        self.metrics.start()
        triton_io.logger().log_info(
            f"tensorrt_llm stand-in (TensorRT-LLM {self.sem.version} semantics): engine {s.gpt_model_path}, "
            f"max_input_len {self.executor.limits.max_input_len}, max_queue_size {s.max_queue_size}, "
            f"decoupled {s.decoupled}, LoRA tasks {sorted(self.lora.tasks) if s.lora_prefetch_dir else 'off'}")

    def execute(self, requests):
        for request in requests:
            self._enqueue(request)
        return None

    def _enqueue(self, request):
        channel = triton_io.response_channel(request)
        triton_id = request.request_id() or ""
        arrays = {}
        for name in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                arrays[name] = tensor.as_numpy()
        if is_stop(arrays):  # handled first (row stop.detect)
            self._stop(triton_id, channel)
            return
        responder = Responder(self.sem, channel, requested_outputs(request.requested_output_names(), self.outputs),
                              _response, _error, self.metrics.observe_request)
        try:
            rows = parse_request(self.sem, arrays, decoupled=self.settings.decoupled,
                                 exclude_input_default=self.settings.exclude_input_in_output,
                                 guided=self.settings.guided_decoding,
                                 lora=self.settings.lora_prefetch_dir is not None)
            self.executor.enqueue(rows, responder, triton_id)
        except (upstream.UpstreamError, upstream.StandinLimitation) as e:  # row error.enqueue_exception
            channel.finish(_error(e.code, e.message))

    def _stop(self, triton_id, channel):
        """Rows stop.empty_id, stop.lookup, stop.reply: one final response, no tensors."""
        if not triton_id:
            e = upstream.error(self.sem, "stop.empty_id")
            channel.finish(_error(e.code, e.message))
            return
        self.executor.stop(triton_id)
        channel.finish(pb_utils.InferenceResponse(output_tensors=[]))

    def _stats(self):
        executor = self.executor.stats()
        scheduled = int(self.runner.backend_stats.get("scheduled_requests", executor.active))  # OpenVINO's last step
        return iteration_stats(executor, self.books.sequences(), iteration=self.runner.steps, scheduled=scheduled)

    def finalize(self):
        self.canceller.stop()
        self.metrics.stop()
        self.executor.shutdown()
        self.runner.shutdown()
        self.lora.close()
