"""What `plan` says about the fidelity report a build will make and the gate it must pass."""

from __future__ import annotations

from build_engines.fidelity.evaluate import SETTINGS
from build_engines.fidelity.texts import windows


def fidelity_plan_lines(spec) -> list[str]:
    options = spec.fidelity
    if options.evaluation == "off":
        return ["fidelity: not evaluated (--fidelity off); no gate"]
    s = SETTINGS[options.evaluation]
    scored = sum(end - first for _, end, first in windows(s.max_tokens, s.window, s.stride))
    lines = [
        f"fidelity ({options.evaluation}): engine vs float32 checkpoint (torch) on {scored} tokens of Python's "
        f"pydoc_data/topics.py ({s.window}-token windows, stride {s.stride}) + {s.prompts} greedy answers of "
        f"{s.answer_tokens} tokens: PPL, mean/p99 KLD, top-1 and greedy agreement into build.json"
    ]
    limits = options.limits(spec.precision.value)
    if limits is None:
        lines.append("  gate: none for this precision (set --gate-max-mean-kld etc. to have one)")
    else:
        lines.append(
            f"  gate: mean KLD <= {limits.max_mean_kld:g}, PPL change <= +{limits.max_ppl_change_pct:g}%, "
            f"same top-1 >= {limits.min_same_top1_pct:g}%; beyond it the engine is not published"
        )
    return lines
