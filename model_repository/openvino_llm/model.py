"""Triton adapter of the CPU engine: a decoupled model with TensorRT-LLM's tensor contract,
served by OpenVINO GenAI continuous batching on a background step thread.
The logic is model_repository.cpu_engine; this file only converts tensors."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from contract import features, metrics
from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import OpenVinoEngineParameters
from contract.tensors import ENGINE_CORE_INPUTS, ENGINE_INPUTS, ENGINE_OUTPUTS, by_name
from model_repository import triton_io
from model_repository.cpu_engine.openvino_backend import OpenVinoBackend
from model_repository.cpu_engine.request_check import EngineRequestCheck
from model_repository.cpu_engine.runner import EngineRunner, FailCode
from model_repository.engine_inputs import EngineInputs
from model_repository.engine_metrics import MetricsRecorder
from model_repository.response_channel import SharedChannel
from model_repository.triton_metrics import TritonMetricsPublisher

CORE_NAMES = frozenset(t.name for t in ENGINE_CORE_INPUTS)
# What this engine sends (of ENGINE_OUTPUTS): no logits, no perf metrics.
SENT_OUTPUTS = tuple(by_name(ENGINE_OUTPUTS)[n] for n in (
    "output_ids", "sequence_length", "cum_log_probs", "output_log_probs", "batch_index", "sequence_index",
    "detokenize_params"))


class TritonSink:
    """Sends one prompt's responses (the runner's ResponseSink)."""

    def __init__(self, channel, detokenize_params, batch_index):
        self._channel = channel
        self._echo = triton_io.text_array(detokenize_params)
        self._batch_index = np.array([[batch_index]], dtype=np.int32)

    def is_cancelled(self):
        return self._channel.is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final):
        n = len(ids)
        tensors = triton_io.output_tensors({
            "output_ids": np.asarray(ids, dtype=np.int32).reshape(1, 1, n),
            "sequence_length": np.array([[n]], dtype=np.int32),
            "cum_log_probs": np.array([[cum_log_prob]], dtype=np.float32),
            "output_log_probs": np.asarray(log_probs, dtype=np.float32).reshape(1, 1, n),
            "batch_index": self._batch_index,
            "sequence_index": np.zeros((1, 1), dtype=np.int32),
            "detokenize_params": self._echo,
        }, SENT_OUTPUTS)
        self._channel.send(pb_utils.InferenceResponse(tensors), final=final)

    def fail(self, message, code=FailCode.INTERNAL):
        triton_io.fail(self._channel, message, code.value)


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("openvino_llm")
        params = triton_io.load_parameters(args, OpenVinoEngineParameters)
        record = BuildRecord.read(params.engine_dir)
        check_runtime(record)  # refuses an engine built by other OpenVINO versions
        limits = record.spec["limits"]
        vocab_size = json.loads((params.engine_dir / "config.json").read_text())["vocab_size"]
        self.check = EngineRequestCheck(limits["max_input_len"], limits["max_seq_len"], vocab_size)
        backend = OpenVinoBackend(params)
        backend.warm_up()
        recorder = MetricsRecorder()
        queue_timeout = params.queue_timeout_s if params.queue_timeout_s > 0 else None
        self.runner = EngineRunner(backend, observer=recorder, capacity=params.max_num_seqs + params.max_queue_size,
                                   queue_timeout_s=queue_timeout, stream_interval=params.stream_interval)
        self.runner.start()
        self.metrics = TritonMetricsPublisher(args["model_name"], metrics.ENGINE_METRICS, self._gauges, recorder)
        self.metrics.start()
        triton_io.logger().log_info(
            f"openvino_llm: {record.spec['precision']} engine from {params.engine_dir}, "
            f"max_num_seqs={params.max_num_seqs}, kv_cache="
            + (f"{params.kv_cache_size_gb}GB" if params.kv_cache_size_gb else "on demand")
        )

    def execute(self, requests):
        for request in requests:
            channel = triton_io.response_channel(request)
            if triton_io.is_stop(request):  # TensorRT-LLM's cancel-by-request-id, same reply
                triton_io.answer_stop(channel, request.request_id(), self.runner.stop)
                continue
            arrays = triton_io.read_inputs(request, ENGINE_INPUTS)
            try:
                rows = EngineInputs.rows({k: v for k, v in arrays.items() if k in CORE_NAMES})
            except ValueError as e:
                triton_io.fail(channel, str(e), "INVALID_ARG")
                continue
            problems = triton_io.parameter_problems(request)
            problems += [f"'{name}' {reason}" for name, reason in
                         features.refusals(arrays, features.CPU_ENGINE, features.ENGINE_INPUT_FEATURES)]
            problems += [p for row in rows for p in self.check.problems(row)]
            if problems:
                triton_io.fail(channel, "; ".join(dict.fromkeys(problems)), "INVALID_ARG")
                continue
            shared = SharedChannel(channel, len(rows))
            for index, row in enumerate(rows):
                self.runner.submit(row, TritonSink(shared.row(), row.detokenize_params, index), request.request_id())
        return None

    def _gauges(self):
        running, waiting = self.runner.counts()
        return {metrics.REQUESTS_RUNNING.name: running, metrics.REQUESTS_WAITING.name: waiting,
                metrics.KV_CACHE_USAGE.name: self.runner.backend_stats.get("kv_cache_usage", 0.0)}

    def finalize(self):
        self.metrics.stop()
        self.runner.shutdown()
