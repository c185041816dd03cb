"""Triton adapter of the CPU engine: a decoupled model with TensorRT-LLM's tensor contract,
served by OpenVINO GenAI continuous batching on a background step thread.
The logic is model_repository.cpu_engine; this file only converts tensors."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import OpenVinoEngineParameters
from contract.tensors import ENGINE_INPUTS, ENGINE_OUTPUTS, ENGINE_STOP
from model_repository import triton_io
from model_repository.cpu_engine.openvino_backend import UNSUPPORTED_MESSAGE, OpenVinoBackend, unsupported_fields
from model_repository.cpu_engine.request_check import EngineRequestCheck
from model_repository.cpu_engine.runner import EngineRunner
from model_repository.cpu_engine.stop_registry import StopRegistry
from model_repository.engine_inputs import EngineInputs

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _final_error(sender, message, code):
    sender.send(triton_io.error_response(message, code), flags=FINAL)


class TritonSink:
    """Sends one request's responses (the runner's ResponseSink)."""

    def __init__(self, sender, detokenize_params):
        self._sender = sender
        self._echo = triton_io.text_array(detokenize_params)

    def is_cancelled(self):
        return self._sender.is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final):
        n = len(ids)
        tensors = triton_io.output_tensors({
            "output_ids": np.asarray(ids, dtype=np.int32).reshape(1, 1, n),
            "sequence_length": np.array([[n]], dtype=np.int32),
            "cum_log_probs": np.array([[cum_log_prob]], dtype=np.float32),
            "output_log_probs": np.asarray(log_probs, dtype=np.float32).reshape(1, 1, n),
            "detokenize_params": self._echo,
        }, ENGINE_OUTPUTS)
        self._sender.send(pb_utils.InferenceResponse(tensors), flags=FINAL if final else 0)

    def fail(self, message, *, cancelled=False):
        _final_error(self._sender, message, "CANCELLED" if cancelled else "INTERNAL")


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("openvino_llm")
        params = triton_io.load_parameters(args, OpenVinoEngineParameters)
        record = BuildRecord.read(params.engine_dir)
        check_runtime(record)  # refuses an engine built by other OpenVINO versions
        limits = record.spec["limits"]
        vocab_size = json.loads((params.engine_dir / "config.json").read_text())["vocab_size"]
        self.check = EngineRequestCheck(limits["max_input_len"], limits["max_seq_len"], vocab_size)
        self.runner = EngineRunner(OpenVinoBackend(params))
        self.stops = StopRegistry()
        self.runner.start()
        triton_io.logger().log_info(
            f"openvino_llm: {record.spec['precision']} engine from {params.engine_dir}, "
            f"max_num_seqs={params.max_num_seqs}, kv_cache={params.kv_cache_size_gb}GB"
        )

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            stop = pb_utils.get_input_tensor_by_name(request, ENGINE_STOP.name)
            if stop is not None and bool(stop.as_numpy().reshape(-1)[0]):
                self.stops.stop(request.request_id())  # TensorRT-LLM's stop protocol
                sender.send(flags=FINAL)
                continue
            try:
                engine_request = EngineInputs.from_arrays(triton_io.read_inputs(request, ENGINE_INPUTS))
            except ValueError as e:
                _final_error(sender, str(e), "INVALID_ARG")
                continue
            problems = self.check.problems(engine_request)
            problems += [UNSUPPORTED_MESSAGE.format(field=f) for f in unsupported_fields(engine_request)]
            if problems:
                _final_error(sender, "; ".join(problems), "INVALID_ARG")
                continue
            sink = TritonSink(sender, engine_request.detokenize_params)
            self.runner.submit(engine_request, self.stops.register(request.request_id(), sink))
        return None

    def finalize(self):
        self.runner.shutdown()
