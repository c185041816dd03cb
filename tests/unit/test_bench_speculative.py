"""`bench speculative`'s table: each pair's speed-up, tokens per step, the estimated acceptance
and how many greedy answers equal plain decoding's."""

from bench.speculative import SpecRun, markdown


def _run(lookup: bool, seconds: float, steps: int, answers) -> SpecRun:
    return SpecRun(lookup, 1, 120, seconds, steps, tuple(tuple(a) for a in answers))


def test_the_table_counts_each_pair():
    pairs = [(_run(False, 2.0, 120, [[1, 2], [3, 4]]), _run(True, 1.0, 40, [[1, 2], [3, 5]])),
             (_run(False, 3.0, 120, [[7], [8]]), _run(True, 2.0, 60, [[7], [8]]))]
    _, _, row = markdown(pairs, num_assistant_tokens=5)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "1" and cells[1] == "2.00, 1.50" and cells[2] == "**1.75x**"
    assert cells[3] == "2.50" and cells[4] == "30%" and cells[5] == "3/4"
