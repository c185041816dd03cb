"""Every upstream table loads, and every row of it cites an upstream file at a ref."""

import pytest

from contract.upstream.citation import load_table, table_names


@pytest.mark.parametrize("name", table_names())
def test_every_row_cites_upstream(name):
    table = load_table(name)
    assert table.rows, f"{name} is empty"
    for row in table.rows:
        citation = table.citation(row)
        assert citation.source.repo.count("/") == 1 and citation.source.ref and citation.source.path
        assert citation.confirmed or citation.note, f"{name}: an unconfirmed row must say why: {row}"
