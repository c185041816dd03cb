"""Triton adapter of the engine relay: the GPU ensemble's engine step.  It relays the
engine contract to `target_model` (the C++ `tensorrt_llm` model) as a streamed BLS call
and returns detokenize_params with every response.  The logic is model_repository.engines.relay.relay;
this file only converts Triton objects."""

from contract.tensors import DETOKENIZE_PARAMS
from model_repository.engines.relay.bls_pipeline import relay_outputs
from model_repository.engines.relay.relay import FORWARDED_INPUTS, OWN_INPUTS, forwarded
from model_repository.triton import bls_calls, tracing, triton_io


class TritonRelaySink(bls_calls.SenderSink):
    def __init__(self, channel, echo, streaming):
        super().__init__(channel, len(echo), streaming)
        self._echo = echo  # [n, 1]: the row of each response is its batch_index

    def outputs(self, engine):
        return relay_outputs(engine, self._echo)


class TritonPythonModel:
    def initialize(self, args):
        self.relays = bls_calls.start_relays("engine_relay", args)

    def execute(self, requests):
        for request in requests:
            channel = triton_io.response_channel(request)
            if triton_io.is_stop(request):
                self.relays.stop(channel, request)
                continue
            arrays = bls_calls.copied_arrays(request, FORWARDED_INPUTS + OWN_INPUTS + (DETOKENIZE_PARAMS.name,))
            echo = arrays.pop(DETOKENIZE_PARAMS.name, triton_io.text_array(""))
            span = tracing.start(request, "llm.relay", "engine_relay")  # model_repository/triton/tracing.py
            self.relays.serve(
                channel,
                request.request_id(),
                forwarded(arrays),
                lambda streaming, c=channel, e=echo, s=span: tracing.RelaySpanSink(TritonRelaySink(c, e, streaming), s),
                "relay",
                tracing.carrier_of(request, span),
            )
        return None

    def finalize(self):
        self.relays.shutdown()
