"""Triton adapter of tensorrt_llm_bls: the ensemble's inputs and outputs, preprocessing -> engine ->
postprocessing as BLS calls, so that a client's cancellation reaches the engine.  The logic
is model_repository.engines.relay.bls_pipeline and model_repository.engines.relay.relay; this file only converts
Triton objects."""

import triton_python_backend_utils as pb_utils

from contract import names
from contract.tensors import BLS_INPUTS, PREPROCESSING_OUTPUTS
from model_repository.triton import bls_calls
from model_repository.triton import triton_io
from model_repository.engines.relay import draft_target
from model_repository.engines.relay.bls_pipeline import (POSTPROCESSING_OUTPUT_NAMES, client_outputs, engine_request,
                                           postprocessing_request)

BLS_INPUT_NAMES = tuple(t.name for t in BLS_INPUTS)
PREPROCESSING_OUTPUT_NAMES = tuple(t.name for t in PREPROCESSING_OUTPUTS)


class PipelineSink(bls_calls.SenderSink):
    """Each engine response goes through postprocessing before it reaches the client."""

    def __init__(self, channel, detokenize_params, streaming):
        super().__init__(channel, len(detokenize_params), streaming)
        self._detokenize_params = detokenize_params

    def outputs(self, engine):
        post = bls_calls.call(names.POSTPROCESSING, postprocessing_request(engine, self._detokenize_params),
                              POSTPROCESSING_OUTPUT_NAMES)
        return client_outputs(engine, post)


class TritonPythonModel:
    def initialize(self, args):
        self.relays = bls_calls.start_relays("tensorrt_llm_bls", args)

    def execute(self, requests):
        for request in requests:
            channel = triton_io.response_channel(request)
            if triton_io.is_stop(request):
                self.relays.stop(channel, request)
                continue
            problems = triton_io.parameter_problems(request)
            if problems:
                triton_io.fail(channel, "; ".join(problems))
                continue
            arrays = bls_calls.copied_arrays(request, BLS_INPUT_NAMES)
            try:  # preprocessing checks every input (and keeps its errors and their codes as they are)
                preprocessed = bls_calls.call(names.PREPROCESSING, arrays, PREPROCESSING_OUTPUT_NAMES)
            except bls_calls.BlsError as e:
                channel.finish(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
                continue
            engine, detokenize_params = engine_request(preprocessed, arrays)
            drafts = draft_target.num_draft_tokens(arrays)
            if drafts:  # preprocessing let it through: the deployment has a draft model
                problem = draft_target.refusal(arrays, engine, self.relays.params.max_draft_len)
                if problem:
                    triton_io.fail(channel, problem)
                else:
                    self.relays.serve_draft_target(channel, request.request_id(), engine, drafts,
                                                   PipelineSink(channel, detokenize_params, False), "bls")
                continue
            self.relays.serve(channel, request.request_id(), engine,
                              lambda streaming: PipelineSink(channel, detokenize_params, streaming), "bls")
        return None

    def finalize(self):
        self.relays.shutdown()
