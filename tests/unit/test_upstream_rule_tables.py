"""The shape the backend-semantics and LLM API tables share (contract/upstream/rule_tables.py):
a table per version, refused for an unlisted one, rows as rules, lookups that name what is missing."""

import pytest

from contract.upstream.citation import UpstreamTableError
from contract.upstream.rule_tables import RuleTables

TABLES = RuleTables(
    "backend semantics",
    "trtllm_backend_semantics_",
    ("1.1.0", "1.2.1"),
    structural=frozenset({"id", "topic", "rule", "cite", "also"}),
)


def test_a_listed_version_loads_its_own_table():
    table = TABLES.load("1.2.1")
    assert table.name == "trtllm_backend_semantics_1.2.1" and table.upstream_version == "1.2.1"


def test_an_unlisted_version_is_refused_with_the_listed_ones():
    message = r"^no backend semantics table for TensorRT-LLM 9\.9 \(have 1\.1\.0, 1\.2\.1\)$"
    with pytest.raises(UpstreamTableError, match=message):
        TABLES.load("9.9")


def test_a_row_becomes_a_rule_with_its_other_fields_as_extra():
    table = TABLES.load("1.1.0")
    row = next(r for r in table.rows if r["id"] == "request_id.map")
    rule = TABLES.rule(row, table.citation(row))
    assert (rule.id, rule.topic, rule.rule) == (row["id"], row["topic"], row["rule"])
    assert rule.citation == table.citation(row)
    assert rule.extra == {k: v for k, v in row.items() if k not in {"id", "topic", "rule", "cite", "also"}}
    assert rule.extra["key"] == "mTritonRequestIdToRequestIds"


def test_find_names_the_version_what_was_looked_for_and_the_table():
    assert TABLES.find({"a": 1}, "a", "1.1.0", "rule") == 1
    message = r"^TensorRT-LLM 1\.1\.0: no error rule 'b' in the backend semantics table$"
    with pytest.raises(UpstreamTableError, match=message):
        TABLES.find({"a": 1}, "b", "1.1.0", "error rule")
