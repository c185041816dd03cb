"""`bench speculative`'s table: the speed-up against plain decoding as deployed, and equality
against plain decoding with prompt lookup's own numerics (not the deployed ones)."""

from bench.speculative import SpecRound, SpecRun, markdown


def _run(lookup: bool, kv: str, seconds: float, steps: int, answers) -> SpecRun:
    return SpecRun(lookup, kv, 1, 120, seconds, steps, tuple(tuple(a) for a in answers))


def test_equality_is_counted_against_plain_with_the_same_numerics():
    rounds = [SpecRound(deployed=_run(False, "u8", 2.0, 120, [[1, 2], [3, 4]]),  # u8 answers differ: not counted
                        same_numerics=_run(False, "f32", 2.0, 120, [[1, 2], [3, 5]]),
                        lookup=_run(True, "f32", 1.0, 40, [[1, 2], [3, 5]])),
              SpecRound(deployed=_run(False, "u8", 3.0, 120, [[7], [8]]),
                        same_numerics=_run(False, "f32", 3.0, 120, [[7], [8]]),
                        lookup=_run(True, "f32", 2.0, 60, [[7], [9]]))]
    header, _, row = markdown(rounds, num_assistant_tokens=5)
    assert "prompt lookup (KV f32) / plain as deployed (KV u8)" in header
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "1" and cells[1] == "2.00, 1.50" and cells[2] == "**1.75x**"
    assert cells[3] == "1.75x" and cells[4] == "2.50" and cells[5] == "30%"
    assert cells[6] == "3/4"
