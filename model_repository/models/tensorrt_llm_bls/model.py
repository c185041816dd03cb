"""Triton adapter of tensorrt_llm_bls: the ensemble's inputs and outputs, preprocessing -> engine ->
postprocessing as BLS calls, so that a client's cancellation reaches the engine.  The logic
is model_repository.engines.relay.bls_pipeline and model_repository.engines.relay.relay; this file only converts
Triton objects."""

import triton_python_backend_utils as pb_utils

from contract import names
from contract.tensors import BLS_INPUTS, PREPROCESSING_OUTPUTS
from model_repository.engines.relay import draft_target
from model_repository.engines.relay.bls_pipeline import (
    POSTPROCESSING_OUTPUT_NAMES,
    client_outputs,
    engine_request,
    postprocessing_request,
)
from model_repository.triton import bls_calls, tracing, triton_io

BLS_INPUT_NAMES = tuple(t.name for t in BLS_INPUTS)
PREPROCESSING_OUTPUT_NAMES = tuple(t.name for t in PREPROCESSING_OUTPUTS)


class PipelineSink(bls_calls.SenderSink):
    """Each engine response goes through postprocessing before it reaches the client."""

    def __init__(self, channel, detokenize_params, streaming, request_id="", trace=None):
        super().__init__(channel, len(detokenize_params), streaming)
        self._detokenize_params = detokenize_params
        self._request_id, self._trace = request_id, trace  # carried to postprocessing (tracing.py)

    def outputs(self, engine):
        post = bls_calls.call(
            names.POSTPROCESSING,
            postprocessing_request(engine, self._detokenize_params),
            POSTPROCESSING_OUTPUT_NAMES,
            self._request_id,
            parameters=self._trace,
        )
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
            rid = request.request_id()
            span = tracing.start(request, "llm.bls", "tensorrt_llm_bls")  # model_repository/triton/tracing.py
            trace = tracing.carrier_of(request, span)
            problems = triton_io.parameter_problems(request)
            if problems:
                triton_io.fail(channel, "; ".join(problems))
                tracing.end_with_error(span, "INVALID_ARG", "; ".join(problems))
                continue
            arrays = bls_calls.copied_arrays(request, BLS_INPUT_NAMES)
            try:  # preprocessing checks every input (and keeps its errors and their codes as they are)
                preprocessed = bls_calls.call(
                    names.PREPROCESSING,
                    arrays,
                    PREPROCESSING_OUTPUT_NAMES,
                    rid,
                    trace=request.trace(),
                    parameters=trace,
                )
            except bls_calls.BlsError as e:
                channel.finish(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
                tracing.end_with_error(span, tracing.error_code(str(e)), str(e))
                continue
            engine, detokenize_params = engine_request(preprocessed, arrays)
            drafts = draft_target.num_draft_tokens(arrays)
            if drafts:  # preprocessing let it through: the deployment has a draft model
                problem = draft_target.refusal(arrays, engine, self.relays.params.max_draft_len)
                if problem:
                    triton_io.fail(channel, problem)
                    tracing.end_with_error(span, "INVALID_ARG", problem)
                else:
                    self.relays.serve_draft_target(
                        channel,
                        rid,
                        engine,
                        drafts,
                        tracing.RelaySpanSink(PipelineSink(channel, detokenize_params, False, rid, trace), span),
                        "bls",
                    )
                continue
            self.relays.serve(
                channel,
                rid,
                engine,
                lambda streaming, p=detokenize_params, c=channel, s=span, t=trace, r=rid: tracing.RelaySpanSink(
                    PipelineSink(c, p, streaming, r, t), s
                ),
                "bls",
                trace,
            )
        return None

    def finalize(self):
        self.relays.shutdown()
