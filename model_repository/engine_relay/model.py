"""Triton adapter of the engine relay: the GPU ensemble's engine step.  It relays the
engine contract to `target_model` (the C++ `tensorrt_llm` model) as a streamed BLS call
and returns detokenize_params with every response.  The logic is model_repository.relay;
this file only converts Triton objects."""

import uuid

import numpy as np
import triton_python_backend_utils as pb_utils

from contract.build_record import BuildRecord, check_runtime
from contract.model_configs import EngineRelayParameters
from contract.tensors import DETOKENIZE_PARAMS, ENGINE_INPUTS
from model_repository import triton_io
from model_repository.relay import FORWARDED_INPUTS, REQUESTED_OUTPUTS, Relay, RelayPool, stop_request_arrays

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonRelaySink:
    def __init__(self, sender, echo):
        self._sender = sender
        self._echo = echo  # numpy array; a fresh Tensor per response

    def is_cancelled(self):
        return self._sender.is_cancelled()

    def forward(self, response):
        echo = pb_utils.Tensor(DETOKENIZE_PARAMS.name, self._echo)
        self._sender.send(pb_utils.InferenceResponse(output_tensors=response.output_tensors() + [echo]))

    def forward_error(self, response):
        self._sender.send(pb_utils.InferenceResponse(error=response.error()), flags=FINAL)

    def fail(self, message, code):
        self._sender.send(triton_io.error_response(message, code), flags=FINAL)

    def finish(self):
        self._sender.send(flags=FINAL)


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("engine_relay")
        self.params = triton_io.load_parameters(args, EngineRelayParameters)
        record = BuildRecord.read(self.params.engine_dir)
        check_runtime(record)  # refuses an engine built by other TensorRT-LLM / TensorRT versions
        max_batch_size = int(triton_io.model_config(args)["max_batch_size"])
        self.pool = RelayPool(max_workers=2 * max_batch_size, cancel_period_s=self.params.cancel_check_period_ms / 1000,
                              on_done=self._log_done)
        triton_io.logger().log_info(f"engine_relay: -> {self.params.target_model}, engine {self.params.engine_dir} "
                                    f"({record.spec['precision']}, built with {record.versions})")

    def execute(self, requests):
        for request in requests:
            request_id = f"relay-{uuid.uuid4().hex}"
            # Copies: the relay outlives execute(), and the request's tensors with it.
            arrays = {n: np.array(a, copy=True) for n, a in triton_io.read_inputs(request, ENGINE_INPUTS).items()}
            echo = arrays.pop(DETOKENIZE_PARAMS.name, triton_io.text_array(""))
            inputs = [pb_utils.Tensor(n, a) for n, a in arrays.items() if n in FORWARDED_INPUTS]
            sink = TritonRelaySink(request.get_response_sender(), echo)
            self.pool.submit(Relay(request_id, sink, lambda i=inputs, r=request_id: self._start(i, r), self._cancel))
        return None

    def _start(self, inputs, request_id):
        bls = pb_utils.InferenceRequest(model_name=self.params.target_model, inputs=inputs,
                                        requested_output_names=list(REQUESTED_OUTPUTS), request_id=request_id)
        return bls.exec(decoupled=True)

    def _cancel(self, request_id, stream):
        if hasattr(stream, "cancel"):  # python_backend >= r25.05
            stream.cancel()
            return
        stop = pb_utils.InferenceRequest(
            model_name=self.params.target_model, requested_output_names=[], request_id=request_id,
            inputs=[pb_utils.Tensor(name, array) for name, array in stop_request_arrays().items()])
        for _ in stop.exec(decoupled=True):
            pass

    @staticmethod
    def _log_done(relay, outcome, seconds):
        if outcome != "finished":
            triton_io.logger().log_info(f"engine_relay: {relay.request_id} {outcome} after {seconds:.2f}s")

    def finalize(self):
        self.pool.shutdown()
