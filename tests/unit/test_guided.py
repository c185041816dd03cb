"""contract/guided.py: which guides the engines can enforce, and the words of a refusal."""

import json

import pytest

from contract.guided import guide_problems, schema_problems


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"]},
    {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 1, "maxItems": 2, "title": "t"},
    {"$defs": {"p": {"type": "string", "pattern": "^[a-z]+$"}}, "anyOf": [{"$ref": "#/$defs/p"}, {"type": "null"}]},
])
def test_supported_schemas_compile(schema):
    assert guide_problems("json_schema", json.dumps(schema)) == []


def test_unsupported_keywords_are_named_with_their_place():
    problems = schema_problems(json.dumps({"type": "object", "properties": {
        "tags": {"type": "array", "uniqueItems": True}, "n": {"type": "number", "multipleOf": 2}}}))
    assert any("'uniqueItems' (at #/properties/tags)" in p for p in problems)
    assert any("'multipleOf' (at #/properties/n)" in p for p in problems)


@pytest.mark.parametrize("kind,guide,words", [
    ("regex", "([a-", "Unclosed '['"),
    ("ebnf_grammar", "root ::= foo", 'Rule "foo" is not defined'),
    ("json_schema", '{"type": "foo"}', 'Unsupported type "foo"'),
    ("json_schema", "not json", "not valid JSON"),
])
def test_guides_that_do_not_compile_are_refused_in_the_compilers_words(kind, guide, words):
    problems = guide_problems(kind, guide)
    assert len(problems) == 1 and problems[0].startswith("'guided_decoding_guide'") and words in problems[0]
    assert "/project/" not in problems[0]  # the compiler's source location is dropped


def test_valid_regex_grammar_and_any_json():
    assert guide_problems("regex", "[1-9][0-9]?") == []
    assert guide_problems("ebnf_grammar", 'root ::= "yes" | "no"') == []
    assert guide_problems("json", "") == []
