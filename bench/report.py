"""The benchmark report: Markdown with ratios against the baselines, PNG plots, raw JSON."""

from __future__ import annotations

import json
from pathlib import Path

from bench.cost import Pricing, cost_comparison, fmt, run_cost, summary_line
from bench.genai_perf import RunResult


def _ms(x: float) -> str:
    return f"{x * 1000:.0f}"


def results_table(results: list[RunResult], pricing: Pricing | None = None) -> list[str]:
    cost_head, cost_rule = (" $/1M out tok | $/1M good out tok |", "---:|---:|") if pricing else ("", "")
    lines = [
        "| target | generator | workload | load | out tok/s | req/s | goodput req/s | SLO met | TTFT p50/p99 ms | ITL "
        "p50/p99 ms | latency p50/p99 ms |" + cost_head,
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|" + cost_rule,
    ]
    for r in results:
        line = (
            f"| {r.target} | {r.generator or '-'} | {r.workload} | {r.load} | {r.output_tokens_per_s:.0f} | "
            f"{r.requests_per_s:.2f} | "
            f"{r.goodput_rps:.2f} | {r.slo_met_fraction:.0%} | {_ms(r.ttft_s['p50'])} / {_ms(r.ttft_s['p99'])} | "
            f"{_ms(r.itl_s['p50'])} / {_ms(r.itl_s['p99'])} | {_ms(r.latency_s['p50'])} / {_ms(r.latency_s['p99'])} |"
        )
        if pricing:
            cost = run_cost(r, pricing)
            line += f" {fmt(cost.usd_per_m_output)} | {fmt(cost.usd_per_m_good_output)} |"
        lines.append(line)
    return lines


def plot_cost(results: list[RunResult], pricing: Pricing, path: Path) -> None:
    """$/1M output tokens (all, and within the SLO) at each load level of the sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(r, run_cost(r, pricing)) for r in results]
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [r.load for r, _ in points]
    for key, label, marker in (
        ("usd_per_m_output", "all output tokens", "o"),
        ("usd_per_m_good_output", "tokens of requests within the SLO", "s"),
    ):
        ys = [getattr(c, key) if getattr(c, key) is not None else float("nan") for _, c in points]
        ax.plot(labels, ys, "-" + marker, label=label)
    ax.set(
        title=f"Cost per 1M output tokens (${pricing.replica_hour_usd:.4g} per replica-hour)",
        xlabel="load level",
        ylabel="USD per 1M output tokens",
        yscale="log",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_latency_vs_throughput(results: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, marker in (("c", "o"), ("r", "s")):
        points = sorted((r for r in results if r.load.startswith(mode)), key=lambda r: r.output_tokens_per_s)
        if not points:
            continue
        label = "concurrency sweep" if mode == "c" else "request-rate sweep"
        x = [r.output_tokens_per_s for r in points]
        for ax, key in ((ax1, "ttft_s"), (ax2, "itl_s")):
            for q, style in (("p50", "-"), ("p99", "--")):
                ax.plot(x, [getattr(r, key)[q] * 1000 for r in points], style + marker, label=f"{label} {q}")
            for r in points:
                ax.annotate(r.load, (r.output_tokens_per_s, getattr(r, key)["p50"] * 1000), fontsize=7)
    ax1.set(title="Time to first token vs throughput", xlabel="output tokens/s", ylabel="TTFT (ms)")
    ax2.set(title="Inter-token latency vs throughput", xlabel="output tokens/s", ylabel="ITL (ms)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_ttft_cdf(results: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        if not r.ttfts_s:
            continue
        xs = [t * 1000 for t in r.ttfts_s]
        ax.step(
            xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=f"{r.target} {r.workload} {r.load}"
        )
    ax.set(title="TTFT CDF", xlabel="time to first token (ms)", ylabel="fraction of requests", xscale="log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(
    out: Path,
    summary: dict,
    results: list[RunResult],
    notes: list[str],
    pricing: Pricing | None = None,
    gpu_hour_usd: float | None = None,
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    sweep = [r for r in results if r.target == "triton-ensemble" and r.workload == summary["workload"]]
    plot_latency_vs_throughput(sweep, out / "latency_vs_throughput.png")
    plot_ttft_cdf([r for r in results if r.load in ("c1", "c16")], out / "ttft_cdf.png")
    (out / "results.json").write_text(
        json.dumps({"summary": summary, "runs": [r.to_dict() for r in results]}, indent=2) + "\n"
    )
    lines = [
        f"# Benchmark: {summary['model']} on the {summary['engine']} engine",
        "",
        f"Machine: {summary['machine']}. SLO for goodput: TTFT <= {summary['slo']['ttft_ms']} ms and "
        f"ITL <= {summary['slo']['itl_ms']} ms. Every number below was measured in this run, side by side.",
        "",
        "## Against the baselines",
        "",
    ]
    lines += [f"- {line}" for line in summary["ratios"]]
    if pricing:
        plot_cost(sweep, pricing, out / "cost_per_token.png")
        lines += [f"- {summary_line(sweep, pricing)}"]
    for title, body in summary.get("sections", []):
        lines += ["", f"## {title}", "", *body]
    lines += ["", "## Cost per 1M output tokens", ""]
    lines += cost_comparison(sweep, pricing, gpu_hour_usd, summary["model"], summary["machine"])
    lines += ["", "## All runs", ""] + results_table(results, pricing)
    lines += ["", "![latency vs throughput](latency_vs_throughput.png)", "", "![TTFT CDF](ttft_cdf.png)", ""]
    if pricing:
        lines += ["![cost per token](cost_per_token.png)", ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    lines += [
        "Raw per-run data: results.json; genai-perf / perf_analyzer and AIPerf artifacts: the `runs/` folders "
        "(the generator column says which tool produced each row)."
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
