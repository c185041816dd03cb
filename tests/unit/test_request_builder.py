"""The client's SamplingParams -> the ensemble's tensors, with the meaning our callers intend
under NVIDIA's sampling rule (temperature alone does not sample there)."""

import numpy as np
import pytest

from client.errors import InvalidRequestError
from client.request_builder import build_inputs, stop_inputs
from client.types import SamplingParams


def sent(sampling, stream=True):
    return {t.name(): t for t in build_inputs("Hello", sampling, stream)}


@pytest.mark.parametrize("sampling,top_p", [
    (SamplingParams(temperature=0.7), 1.0),  # "sample at 0.7" over the whole distribution
    (SamplingParams(temperature=0.7, top_p=0.9), 0.9),
    (SamplingParams(temperature=0.7, top_k=40), None),
    (SamplingParams(temperature=0.0), None),  # greedy
    (SamplingParams(), None),  # greedy
])
def test_a_temperature_means_sampling(sampling, top_p):
    tensors = sent(sampling)
    if top_p is None:
        assert "top_p" not in tensors
    else:
        tensor = tensors["top_p"]
        assert tensor.datatype() == "FP32" and tensor.shape() == [1, 1]
        assert np.frombuffer(tensor._raw_content, dtype=np.float32).tolist() == [pytest.approx(top_p)]


def test_out_of_range_values_are_refused_before_sending():
    with pytest.raises(InvalidRequestError, match="'top_p'"):
        build_inputs("Hello", SamplingParams(top_p=1.5), True)


def test_a_stop_request_is_the_stop_tensor_alone():
    (tensor,) = stop_inputs()
    assert (tensor.name(), tensor.datatype(), tensor.shape()) == ("stop", "BOOL", [1, 1])


def test_feature_options_become_nvidia_inputs():
    """n, log probs and guides (typed in SamplingParams, also the CLI's -n/--logprobs/--regex...)."""
    from click.testing import CliRunner

    from client.cli import _sampling, main
    from client.request_builder import build_inputs
    from client.types import Guide, SamplingParams

    sampling = _sampling({"n": 3, "return_log_probs": True, "regex": "[ab]+", "temperature": 1.0})
    assert (sampling.n, sampling.return_log_probs, sampling.guide) == (3, True, Guide("regex", "[ab]+"))
    inputs = {t.name(): t for t in build_inputs("hi", sampling, stream=True)}
    assert inputs["num_return_sequences"].datatype() == "INT32"
    assert inputs["guided_decoding_guide_type"].datatype() == "BYTES" and "guided_decoding_guide" in inputs
    assert "return_log_probs" in inputs
    assert "num_return_sequences" not in {t.name() for t in build_inputs("hi", SamplingParams(), stream=True)}
    json_object = _sampling({"json_object": True}).guide
    assert json_object.type == "json_schema" and '"object"' in json_object.guide
    result = CliRunner().invoke(main, ["generate", "hi", "--regex", "a", "--grammar", "b"])
    assert result.exit_code == 2 and "one of" in result.output
