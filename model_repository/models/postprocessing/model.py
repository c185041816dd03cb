"""Triton adapter of postprocessing: new token ids -> text delta, finish reason, counts.
The logic is model_repository.text.stream_postprocessor; this file only converts tensors."""

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer

from contract import metrics
from contract.model_configs import PostprocessingParameters
from contract.tensors import POSTPROCESSING_INPUTS, POSTPROCESSING_OUTPUTS
from model_repository.text.detokenizer import DetokenizerFactory
from model_repository.text.stream_postprocessor import StreamPostprocessor
from model_repository.triton import tracing, triton_io
from model_repository.triton.supervision_metrics import publish_supervision
from model_repository.triton.triton_metrics import TritonMetricsPublisher


class TritonPythonModel:
    def initialize(self, args):
        triton_io.log_environment("postprocessing")
        params = triton_io.load_parameters(args, PostprocessingParameters)
        factory = DetokenizerFactory(Tokenizer.from_file(str(params.tokenizer_dir / "tokenizer.json")))
        self.streams = StreamPostprocessor(factory, ttl_s=params.stream_state_ttl_s)
        self.metrics = TritonMetricsPublisher(args["model_name"], metrics.POSTPROCESSING_METRICS, self._gauges)
        self.metrics.start()
        self.supervision = publish_supervision(args["model_instance_name"])
        triton_io.logger().log_info(f"postprocessing: {factory.strategy} detokenizer")

    def _gauges(self):
        return {metrics.POSTPROCESSING_STREAMS.name: self.streams.live_streams()}

    def finalize(self):
        self.metrics.stop()
        self.supervision.clear()  # while the stub's shared memory exists (triton_metrics.py says why)

    def execute(self, requests):
        return [tracing.traced(request, "llm.postprocess", "postprocessing", self._one) for request in requests]

    def _one(self, request):
        try:
            arrays = triton_io.read_inputs(request, POSTPROCESSING_INPUTS)
            ids = arrays["output_ids"]  # [1, beam, tokens]
            count = int(arrays["sequence_length"].reshape(-1)[0])
            tokens = ids.reshape(-1, ids.shape[-1])[0, :count].tolist() if ids.size else []
            index = arrays.get("sequence_index")
            sequence = int(index.reshape(-1)[0]) if index is not None and index.size else 0
            out = self.streams.process(arrays["detokenize_params"].reshape(-1)[0], tokens, sequence)
        except Exception as e:
            triton_io.logger().log_error(tracing.log_line(request, f"postprocessing failed: {e!r}"))
            return triton_io.error_response(f"postprocessing failed: {e}", "INTERNAL")
        return pb_utils.InferenceResponse(
            triton_io.output_tensors(
                {
                    "text_output": triton_io.text_array(out.text),
                    "num_input_tokens": np.array([[out.num_input_tokens]], dtype=np.int32),
                    "num_output_tokens": np.array([[out.num_output_tokens]], dtype=np.int32),
                    "finish_reason": triton_io.text_array(out.finish_reason.value),
                },
                POSTPROCESSING_OUTPUTS,
            )
        )
