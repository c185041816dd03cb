"""Cost per token in the bench report (bench/cost.py): the arithmetic, the SLO-meeting load,
the table columns and the plot."""

from __future__ import annotations

import pytest

from bench import cost, report
from bench.genai_perf import RunResult


def run(load: str, tok_s: float, met: float) -> RunResult:
    stats = {"p50": 0.1, "p99": 0.2}
    return RunResult("triton-ensemble", "isl128-osl128", load, 100, 10.0, int(tok_s * 10), tok_s, 1.0, met, met,
                     dict(stats), dict(stats), dict(stats))


def test_usd_per_million_output_tokens():
    # $3.60/h for 1000 tok/s = 3.6M tokens/h -> $1 per 1M
    assert cost.usd_per_million(1000.0, cost.Pricing(3.6)) == pytest.approx(1.0)
    # an 8-GPU $98.32/h instance, TP=2 replica: $24.58/h; at 5000 tok/s = 18M tok/h -> $1.3656
    pricing = cost.Pricing(98.32, gpus_per_replica=2, gpus_per_instance=8)
    assert pricing.replica_hour_usd == pytest.approx(24.58)
    assert cost.usd_per_million(5000.0, pricing) == pytest.approx(24.58 / 18.0)
    assert cost.usd_per_million(0.0, pricing) is None


def test_good_tokens_cost_more_when_requests_miss_the_slo():
    c = cost.run_cost(run("c16", 1000.0, 0.5), cost.Pricing(3.6))
    assert c.usd_per_m_output == pytest.approx(1.0) and c.usd_per_m_good_output == pytest.approx(2.0)
    assert cost.run_cost(run("c16", 1000.0, 0.0), cost.Pricing(3.6)).usd_per_m_good_output is None


def test_slo_meeting_load_is_the_fastest_run_within_the_slo():
    runs = [run("c1", 100.0, 1.0), run("c4", 350.0, 0.95), run("c16", 900.0, 0.4)]
    assert cost.slo_meeting_run(runs).load == "c4"
    assert cost.slo_meeting_run(runs, attainment=0.99).load == "c1"
    assert cost.slo_meeting_run([run("c16", 900.0, 0.4)]) is None
    line = cost.summary_line(runs, cost.Pricing(3.6))
    assert "(c4, 95% of requests" in line and f"${3.6 / (350 * 3600) * 1e6:.4g} per 1M output tokens" in line


@pytest.mark.parametrize("bad", [dict(instance_hour_usd=-1.0), dict(instance_hour_usd=1.0, gpus_per_replica=4, gpus_per_instance=2),
                                 dict(instance_hour_usd=1.0, gpus_per_replica=0)])
def test_impossible_pricing_is_refused(bad):
    with pytest.raises(ValueError):
        cost.Pricing(**bad)


def test_report_table_and_plot_carry_the_cost(tmp_path):
    runs = [run("c1", 100.0, 1.0), run("c16", 1000.0, 0.5)]
    table = report.results_table(runs, cost.Pricing(3.6))
    assert table[0].endswith("$/1M out tok | $/1M good out tok |")
    assert table[-1].endswith(" 1 | 2 |")
    assert "$/1M" not in report.results_table(runs)[0]  # no price, no cost columns
    report.plot_cost(runs, cost.Pricing(3.6), tmp_path / "cost.png")
    assert (tmp_path / "cost.png").stat().st_size > 1000


def test_report_states_the_cost_at_the_slo_meeting_load(tmp_path):
    runs = [run("c1", 100.0, 1.0), run("c4", 350.0, 0.95), run("c16", 900.0, 0.4)]
    summary = {"model": "m", "engine": "openvino int8", "machine": "x86_64", "slo": {"ttft_ms": 1000, "itl_ms": 60},
               "workload": "isl128-osl128", "ratios": []}
    text = report.write(tmp_path, summary, runs, [], cost.Pricing(3.6)).read_text()
    assert "cost at the SLO-meeting load (c4" in text and "![cost per token](cost_per_token.png)" in text
    assert (tmp_path / "cost_per_token.png").exists()


def test_the_report_prices_nvidias_published_gpu_figures_beside_this_run(tmp_path):
    runs = [run("c1", 100.0, 1.0), run("c16", 400.0, 0.95)]
    lines = cost.cost_comparison(runs, cost.Pricing(0.1), 3.0, "SmolLM2", "2-core host")
    text = "\n".join(lines)
    assert f"| SmolLM2, this run, SLO-meeting load | 2-core host | c16 | 400 | $0.1 | {0.1 / (400 * 3600) * 1e6:.4g} |" in text
    # H100 TP1 FP8 Llama-3.1-8B at 128/128: 28,312 tok/s (perf-overview.md @ 00f37686); $3/h -> $0.02943 per 1M
    assert f"| 28,312 | $3 x 1 GPU | {3.0 / (28312 * 3600) * 1e6:.4g} |" in text
    assert "00f37686" in text and "offline maximum throughput" in text
    unpriced = "\n".join(cost.cost_comparison(runs, None, None, "SmolLM2", "host"))
    assert "| 28,312 | - | - |" in unpriced and "| 400 | - | - |" in unpriced
