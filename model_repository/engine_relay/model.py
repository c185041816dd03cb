"""Triton adapter of the engine relay: the GPU ensemble's engine step.  It relays the
engine contract to `target_model` (the C++ `tensorrt_llm` model) as a streamed BLS call
and returns detokenize_params with every response.  The logic is model_repository.relay;
this file only converts Triton objects."""

import numpy as np
import triton_python_backend_utils as pb_utils

from contract.tensors import DETOKENIZE_PARAMS
from model_repository import bls_calls, triton_io
from model_repository.bls_pipeline import row_of
from model_repository.relay import FORWARDED_INPUTS


class TritonRelaySink(bls_calls.SenderSink):
    def __init__(self, channel, echo):
        super().__init__(channel)
        self._echo = echo  # [n, 1]: the row of each response is its batch_index

    def forward(self, response, final=False):
        tensors = response.output_tensors()
        engine = {t.name(): t.as_numpy() for t in tensors}
        row = row_of(engine)
        extra = [pb_utils.Tensor(DETOKENIZE_PARAMS.name, self._echo[row:row + 1])]
        if "batch_index" not in engine:  # TensorRT-LLM sends it only for a batched request
            extra.append(pb_utils.Tensor("batch_index", np.array([[row]], dtype=np.int32)))
        if "sequence_index" not in engine:
            extra.append(pb_utils.Tensor("sequence_index", np.zeros((1, 1), dtype=np.int32)))
        self._send(pb_utils.InferenceResponse(output_tensors=tensors + extra), final)


class TritonPythonModel:
    def initialize(self, args):
        self.relays = bls_calls.start_relays("engine_relay", args)

    def execute(self, requests):
        for request in requests:
            channel = triton_io.response_channel(request)
            if triton_io.is_stop(request):
                self.relays.stop(channel, request)
                continue
            arrays = bls_calls.copied_arrays(request, FORWARDED_INPUTS + (DETOKENIZE_PARAMS.name,))
            refusal = self.relays.refusal(bool(arrays.get("streaming", [[False]])[0][0]), len(arrays["input_ids"]))
            if refusal:
                triton_io.fail(channel, refusal)
                continue
            echo = arrays.pop(DETOKENIZE_PARAMS.name, triton_io.text_array(""))
            bls_calls.relay_stream(self.relays.pool, self.relays.params.target_model, arrays,
                                   self.relays.sink(TritonRelaySink(channel, echo)), request.request_id(), "relay")
        return None

    def finalize(self):
        self.relays.pool.shutdown()
