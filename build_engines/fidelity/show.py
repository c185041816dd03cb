"""A fidelity report as a person reads it (`inspect`, `eval-quality`, docs/examples)."""

from __future__ import annotations


def report_lines(report: dict) -> list[str]:
    if not report:
        return [
            "fidelity: not measured (built with --fidelity off, or before fidelity reports existed): "
            "run `make eval-quality ENGINE_DIR=...`"
        ]
    lg, gr, text, eng = report["logits"], report.get("greedy") or {}, report["text"], report["engine"]
    lines = [
        f"fidelity ({report['settings']['name']}): engine vs {report['reference']['engine']} "
        f"{report['reference']['dtype']} on {lg['scored_tokens']} tokens of {text['name']} ({text['sha256'][:19]}...)",
        f"  engine: {eng.get('engine')} {', '.join(f'{k}={v}' for k, v in eng.get('properties', {}).items())}",
        f"  host: {report['host']['cpu']}, {report['host']['cores']} cores, flags "
        f"{' '.join(report['host']['cpu_flags'])}",
        f"  perplexity: engine {lg['engine_ppl']:.3f}, reference {lg['reference_ppl']:.3f} "
        f"({lg['ppl_change_pct']:+.2f}%)",
        f"  KL divergence: mean {lg['mean_kld']:.5f}, p99 {lg['p99_kld']:.4f}, max {lg['max_kld']:.3f}",
        f"  same top-1 token: {lg['same_top1_pct']:.1f}%",
    ]
    if gr:
        lines.append(
            f"  greedy answers ({gr['answer_tokens']} tokens): {gr['equal']}/{gr['prompts']} equal to the "
            f"reference; first differing token at {gr['first_difference_mean']:.1f} on average; "
            f"{gr['first_token_differs']} differ from the first token"
        )
    gate = report.get("gate")
    if gate:
        lines.append(
            f"  gate: mean KLD <= {gate['max_mean_kld']:g}, PPL change <= +{gate['max_ppl_change_pct']:g}%, "
            f"same top-1 >= {gate['min_same_top1_pct']:g}%: passed"
        )
    return lines


def markdown_row(name: str, report: dict) -> str:
    lg, gr = report["logits"], report.get("greedy") or {}
    greedy = f"{gr['equal']}/{gr['prompts']} | {gr['first_difference_mean']:.1f}" if gr else "- | -"
    return (
        f"| {name} | {lg['ppl_change_pct']:+.2f}% | {lg['mean_kld']:.2g} | {lg['p99_kld']:.2g} | "
        f"{lg['same_top1_pct']:.1f}% | {greedy} |"
    )


MARKDOWN_HEADER = (
    "| engine | PPL change | mean KLD | p99 KLD | same top-1 | greedy answers equal | first differing token (mean) |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)
