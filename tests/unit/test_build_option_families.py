"""The build options declared as families (build_engines/option_lists.py enum_option, the engine
limits of build_engines/cli_options.py, openvino's int4 recipe options): each declares what the
explicit declarations did, from its one source."""

import dataclasses

import click

from build_engines.cli_options import SPEC_OPTIONS
from build_engines.openvino import cli_options as openvino
from build_engines.openvino.compress import Int4Recipe
from build_engines.option_lists import declared, enum_option
from build_engines.spec_base import EngineLimits
from build_engines.trtllm.options import SpeculativeDecoding


def _params(options):
    return {p.name: p for p in declared(options)}


def test_an_enum_option_takes_the_enum_values_and_a_members_value_as_default():
    (param,) = declared([enum_option("--mode", default=SpeculativeDecoding.EAGLE, help="h")])
    assert isinstance(param.type, click.Choice)
    assert list(param.type.choices) == [m.value for m in SpeculativeDecoding]
    assert param.default == SpeculativeDecoding.EAGLE.value and param.help == "h"


def test_each_engine_limit_is_an_int_option_given_or_none_with_openvinos_default_in_its_help():
    params = _params(SPEC_OPTIONS)
    for name in ("max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens"):
        param = params[name]
        assert param.opts == ["--" + name.replace("_", "-")]
        assert param.type is click.INT and param.default is None
        assert f"Default: openvino {getattr(EngineLimits(), name)};" in param.help
        assert param.help.endswith("A value given here always wins (build_engines/gpu/limits.py).")


def test_the_int4_options_are_the_recipes_fields_with_its_defaults():
    params = _params(openvino.OPTIONS)
    recipe = Int4Recipe()
    fields = [f.name for f in dataclasses.fields(Int4Recipe) if f.name != "calibration_tokens"]
    for field in fields:
        param = params["int4_" + field]
        flag = "--int4-" + field.replace("_", "-")
        assert param.opts == [flag] and param.default == getattr(recipe, field)
        assert param.secondary_opts == (["--no-" + flag[2:]] if isinstance(param.default, bool) else [])
