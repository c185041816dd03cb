"""The recorded fast decisions (build_engines/openvino/numerics_decisions.json) and the key a
build matches them by."""

from pathlib import Path

import pytest

from build_engines.openvino.numerics import candidates
from build_engines.openvino.numerics_decisions import isa_level, matching_decision, recorded_decisions

ROOT = Path(__file__).resolve().parents[2]
ISA_FLAGS = {  # the flags an instruction-set level implies (what candidates() looks at)
    "avx2": ["avx2", "fma"],
    "avx512_core_bf16": ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"],
    "avx512_core_amx": ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"],
}


@pytest.mark.parametrize(("flags", "level"), [
    (["avx2", "fma", "f16c"], "avx2"),  # the AVX2-only EPYC
    (["avx2", "avx_vnni"], "avx2_vnni"),
    (["avx2", "avx512f"], "avx512_core"),
    (["avx2", "avx512f", "avx512_vnni"], "avx512_core_vnni"),
    (["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni"], "avx512_core_bf16"),  # Zen 4
    (["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_fp16"], "avx512_core_amx"),
    ([], "below_avx2"),
])
def test_isa_level(flags, level):
    assert isa_level(flags) == level


def test_every_recorded_decision_is_one_its_host_could_choose_and_cites_its_page():
    decisions = recorded_decisions()
    assert decisions
    assert len({d.key for d in decisions}) == len(decisions)
    for d in decisions:
        settings = [s for s, selectable in candidates(d.key.kv_cache_precision, ISA_FLAGS[d.key.isa]) if selectable]
        assert d.fast in settings, d
        page = d.source.split()[0]
        assert page.startswith("docs/results/") and (ROOT / page).is_file(), d.source
        assert matching_decision(d.key, decisions) == d
