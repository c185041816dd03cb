"""Triton adapter of preprocessing: request tensors -> GenerateRequest per prompt -> engine
inputs ([n, ...] for a request of n prompts).  The logic is model_repository.text.preprocessor;
this file only converts tensors."""

import triton_python_backend_utils as pb_utils

from contract.model_configs import PreprocessingParameters
from contract.params import InvalidParameter
from contract.tensors import PREPROCESSING_INPUTS, PREPROCESSING_OUTPUTS
from model_repository.engine_step.engine_inputs import stack
from model_repository.text.generate_request import parse_generate_requests
from model_repository.text.preprocessor import Preprocessor
from model_repository.triton import tracing, triton_io


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("preprocessing")
        self.preprocess = Preprocessor(triton_io.load_parameters(args, PreprocessingParameters))

    def execute(self, requests):
        return [tracing.traced(request, "llm.preprocess", "preprocessing", self._one) for request in requests]

    def _one(self, request):
        problems = triton_io.parameter_problems(request)
        if problems:
            return triton_io.error_response("; ".join(problems))
        try:
            rows = [
                self.preprocess(req)
                for req in parse_generate_requests(triton_io.read_inputs(request, PREPROCESSING_INPUTS))
            ]
        except InvalidParameter as e:
            return triton_io.error_response(str(e))
        except Exception as e:  # a bug must fail this request only, loudly
            triton_io.logger().log_error(tracing.log_line(request, f"preprocessing failed: {e!r}"))
            return triton_io.error_response(f"preprocessing failed: {e}", "INTERNAL")
        return pb_utils.InferenceResponse(triton_io.output_tensors(stack(rows), PREPROCESSING_OUTPUTS))
