"""Which numerics the CPU engine is served with: measured at build time, chosen by accuracy and speed.

A setting is the three OpenVINO properties that change the engine's arithmetic without changing
its IR: INFERENCE_PRECISION_HINT (activations), KV_CACHE_PRECISION and
DYNAMIC_QUANTIZATION_GROUP_SIZE (int8 activations, in groups, for the matmuls with int8/int4
weights).  Every build measures each candidate this host can run against the float32 checkpoint
(KLD, PPL, top-1, greedy agreement: build_engines/fidelity/numerics_sweep.py) and for speed (output
tok/s at one stream and at 16, in-process, alternating rounds), and records the table in build.json.

The spec's mode picks one at render time:

- fast (the default): the fastest setting within the weight precision's fidelity gate, as the
  field's servers default to speed (vLLM's and SGLang's batch invariance is opt-in too); only
  this mode's build measures every candidate (its engine also serves exact without a rebuild);
- exact: f32 activations and KV cache, no dynamic quantization: greedy answers do not change with
  the batch, the prefix cache or speculative decoding (build_engines/openvino/precision.py);
  what the tests that compare answers with references pin;
- custom: the activation precision and dynamic-quantization group given by hand (one fidelity
  report, of that setting).

A u8 KV cache is a candidate too (OpenVINO's own CPU default; a quarter of f32's memory, so `plan`
sizes the pool with the served precision once the build has chosen).  A KV cache precision given
by hand other than f32 (`--kv-cache-precision u8`) is kept: every candidate then uses it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass
from typing import Any

from build_engines.openvino.precision import default_kv_cache_precision, exactness_line
from build_engines.openvino.scorer_agreement import LogprobAgreement


class NumericsMode(str, enum.Enum):
    FAST = "fast"
    EXACT = "exact"
    CUSTOM = "custom"


NUMERICS_MODES = tuple(m.value for m in NumericsMode)
DYNAMIC_QUANTIZATION_GROUPS = (32, 64)  # measured; 128 was over the int8 gate (docs/examples/fidelity/)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # the CPU computes bf16 natively: OpenVINO's bf16 kernels
# A candidate must beat exact by more than run-to-run noise on this kind of host to be chosen.
MIN_GAIN = 1.03


@dataclass(frozen=True)
class Numerics:
    activation_precision: str = "f32"
    kv_cache_precision: str = "f32"
    dynamic_quantization_group_size: int = 0

    def values(self) -> tuple[str, str, int]:
        return self.activation_precision, self.kv_cache_precision, self.dynamic_quantization_group_size

    @property
    def label(self) -> str:
        dq = self.dynamic_quantization_group_size
        return (
            f"{self.activation_precision} activations, {self.kv_cache_precision} KV cache, "
            f"dynamic quantization {dq or 'off'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Numerics":
        return cls(
            **{k: data[k] for k in ("activation_precision", "kv_cache_precision", "dynamic_quantization_group_size")}
        )


EXACT = Numerics()


def candidates(kv_cache_precision: str, cpu_flags: list[str]) -> list[tuple[Numerics, bool]]:
    """(setting, selectable) of everything a build measures on this host: exact first; dynamic
    quantization with each group worth having; bf16 activations where the CPU computes bf16
    natively; a u8 KV cache.  The spec's own KV cache precision when it is not f32 (exact is then
    measured as the reference but not selectable)."""
    f32 = Numerics("f32", kv_cache_precision, 0)
    rows = [(EXACT, True)] if kv_cache_precision == "f32" else [(EXACT, False), (f32, True)]
    rows += [(Numerics("f32", kv_cache_precision, g), True) for g in DYNAMIC_QUANTIZATION_GROUPS]
    if any(flag in cpu_flags for flag in BF16_FLAGS):
        kv = default_kv_cache_precision("bf16") if kv_cache_precision == "f32" else kv_cache_precision
        rows += [(Numerics("bf16", kv, 0), True), (Numerics("bf16", kv, DYNAMIC_QUANTIZATION_GROUPS[0]), True)]
    if kv_cache_precision == "f32":
        rows.append((Numerics("f32", "u8", 0), True))
    return rows


@dataclass(frozen=True)
class MeasuredRow:
    numerics: Numerics
    selectable: bool
    mean_kld: float
    p99_kld: float
    ppl_change_pct: float
    same_top1_pct: float
    greedy_equal: str  # "3/3": greedy answers equal to the checkpoint's
    tok_s_1: float | None  # output tok/s, one stream (None: not measured)
    tok_s_16: float | None  # output tok/s, 16 streams
    problems: tuple[str, ...] = ()  # beyond the gate (empty: within)
    not_applied: bool = False  # the baseline's logits to the last bit: this host ignores the setting
    round_gains: tuple[float, ...] = ()  # speed over the baseline in each alternating round (round_gains())

    @property
    def faster_every_round(self) -> bool:
        return bool(self.round_gains) and min(self.round_gains) > 1

    @property
    def within_gate(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "numerics": self.numerics.to_dict(),
            "problems": list(self.problems),
            "round_gains": list(self.round_gains),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MeasuredRow":
        return cls(
            **(
                data
                | {
                    "numerics": Numerics.from_dict(data["numerics"]),
                    "problems": tuple(data["problems"]),
                    "round_gains": tuple(data.get("round_gains", ())),
                }
            )
        )


def round_gains(runs: dict[str, list[float]], baseline: dict[str, list[float]]) -> tuple[float, ...]:
    """A setting's speed over the baseline in each round of the sweep (the two were measured next to
    each other), the geometric mean over the loads: `runs` maps each load to its tok/s per round."""
    rounds = min(len(v) for v in runs.values())
    return tuple(
        round(math.prod(runs[load][n] / baseline[load][n] for load in runs) ** (1 / len(runs)), 3)
        for n in range(rounds)
    )


def speed_score(row: MeasuredRow, baseline: MeasuredRow) -> float:
    """How much faster than the baseline: the geometric mean of the two loads' output tok/s ratios
    (a setting that gains at 16 streams but loses at one is not simply faster)."""
    assert row.tok_s_1 and row.tok_s_16 and baseline.tok_s_1 and baseline.tok_s_16, "speeds are measured"
    return math.sqrt((row.tok_s_1 / baseline.tok_s_1) * (row.tok_s_16 / baseline.tok_s_16))


def choose_fast(rows: list[MeasuredRow]) -> tuple[Numerics, str]:
    """The fastest selectable setting within the gate, and why; the spec's unquantized setting
    (the first selectable row) unless another beats it by MIN_GAIN or more on the medians and was
    faster in every round (a host's noise alone does not move the default)."""
    selectable = [r for r in rows if r.selectable]
    baseline = selectable[0]
    others = [r for r in selectable[1:] if r.within_gate]
    eligible = [r for r in others if r.faster_every_round]
    best = max(eligible, key=lambda r: speed_score(r, baseline), default=None)
    if best is not None and speed_score(best, baseline) >= MIN_GAIN:
        assert best.tok_s_1 and best.tok_s_16 and baseline.tok_s_1 and baseline.tok_s_16
        return best.numerics, (
            f"{best.tok_s_16 / baseline.tok_s_16:.2f}x the output tok/s of {baseline.numerics.label} at 16 "
            f"streams and {best.tok_s_1 / baseline.tok_s_1:.2f}x at one, faster in each of "
            f"{len(best.round_gains)} rounds ({_gains(best)}); mean KLD {best.mean_kld:.4f}, top-1 "
            f"{best.same_top1_pct:.1f}% (within the gate)"
        )
    reasons = [f"no other setting within the gate was {MIN_GAIN:.2f}x faster or more and faster in every round"]
    for what, which in (
        ("not faster in every round", [r for r in others if r.round_gains and not r.faster_every_round]),
        ("beyond the gate", [r for r in selectable[1:] if not r.within_gate]),
        ("not applied on this host", [r for r in rows if r.not_applied]),
    ):
        if which:
            reasons.append(
                f"{what}: " + ", ".join(r.numerics.label + (f" ({_gains(r)})" if r.round_gains else "") for r in which)
            )
    return baseline.numerics, "; ".join(reasons)


def _gains(row: MeasuredRow) -> str:
    return "rounds " + ", ".join(f"{g:.2f}x" for g in row.round_gains)


def served_numerics(mode: str, pinned: Numerics, record_numerics: dict[str, Any]) -> Numerics:
    """The setting an engine is served with: the spec's own (custom, or fast where the build
    measured nothing: `--fidelity off`), exact, or the build's fast choice."""
    if mode == NumericsMode.EXACT.value:
        return EXACT
    chosen = record_numerics.get("fast") if mode == NumericsMode.FAST.value else None
    return Numerics.from_dict(chosen) if chosen else pinned


def table_lines(rows: list[MeasuredRow], chosen: Numerics | None = None) -> list[str]:
    """The measured table, one line per setting, as `plan` and `inspect` print it."""
    if not rows:
        return []
    base = next(r for r in rows if r.selectable)
    lines = [
        "  setting                                                   mean KLD  p99 KLD  dPPL%   top-1%  greedy"
        "  tok/s@1  tok/s@16  vs exact@1/@16"
    ]
    for r in rows:
        mark = "*" if chosen is not None and r.numerics == chosen else " "
        note = "" if r.within_gate else "  beyond gate"
        if r.not_applied:
            note += "  not applied on this host (the first row's logits to the last bit)"
        elif not r.selectable:
            note += "  (reference only: the spec's KV cache precision, --kv-cache-precision)"
        if r.tok_s_1 and r.tok_s_16 and base.tok_s_1 and base.tok_s_16:
            ratios = f"{r.tok_s_1 / base.tok_s_1:.2f}x/{r.tok_s_16 / base.tok_s_16:.2f}x"
            speed = f"{r.tok_s_1:7.1f}  {r.tok_s_16:8.1f}  {ratios:>11}"
        else:
            speed = f"{'-':>7}  {'-':>8}  {'-':>11}"
        lines.append(
            f"{mark} {r.numerics.label:<56}  {r.mean_kld:8.4f}  {r.p99_kld:7.4f}  {r.ppl_change_pct:+5.2f}  "
            f"{r.same_top1_pct:6.1f}  {r.greedy_equal:>6}  {speed}{note}"
        )
    return lines


def numerics_lines(options: Any, measuring: bool, measured: dict[str, Any], cpu_flags: list[str]) -> list[str]:
    """What `plan` and `inspect` say about the served numerics: the mode, the setting (the build's
    choice once built) and why, whether greedy answers stay exact, and the measured table.
    `options`: the spec's OpenVinoOptions; `measuring`: the build measures (fidelity on)."""
    mode = options.numerics
    if mode == NumericsMode.FAST.value and not measured and measuring:
        settings = [s.label for s, selectable in candidates(options.kv_cache_precision, cpu_flags) if selectable]
        return [
            "numerics (fast): the fastest setting within the gate, measured by the build on this host among: "
            + "; ".join(settings)
            + " (`--numerics exact` serves the first)"
        ]
    served = served_numerics(mode, options.pinned_numerics(), measured)
    why = None
    if mode == NumericsMode.FAST.value:  # a measured record always says why
        why = measured.get("why") or "the spec's own: nothing measured (--fidelity off)"
        if measured.get("chosen_by", {}).get("path") == "measured":
            why += f" (measured by this build, {measured['chosen_by']['measured']})"
    lines = [
        f"numerics ({mode}): {served.label} (INFERENCE_PRECISION_HINT, KV_CACHE_PRECISION, "
        "DYNAMIC_QUANTIZATION_GROUP_SIZE)" + (f"; chosen: {why}" if why else ""),
        exactness_line(*served.values()),
    ]
    result = served_agreement(served, measured)
    if result is not None:
        lines.append(
            f"top_logprobs: {'served' if result.agrees else 'refused'} under this setting, measured at build: "
            + result.describe()
            + ("" if result.agrees else " (`--numerics exact` serves them)")
        )
    rows = [MeasuredRow.from_dict(r) for r in measured.get("rows", [])]
    if rows:
        speed, host = measured["speed_settings"], measured["host"]
        chosen_by = measured.get("chosen_by", {})
        how = (
            f"output tok/s in-process, {speed['output_tokens']} tokens per request, median of {speed['rounds']} "
            "alternating rounds"
            if speed
            else f"speed not measured: the choice recorded {chosen_by.get('measured')} on {chosen_by.get('host')}"
        )
        lines.append(
            f"measured at build on {host['cpu']} ({host['cores']} cores): accuracy vs the float32 checkpoint; "
            f"{how} (* = served; `--numerics exact` serves the first without a rebuild)"
        )
        lines += table_lines(rows, served)
    return lines


def served_agreement(served: Numerics, measured: dict[str, Any]) -> LogprobAgreement | None:
    """The build's top_logprobs agreement measurement (LogprobAgreement) if it was of `served`, else None."""
    agreement = measured.get("logprobs")
    if not agreement or Numerics.from_dict(agreement["numerics"]) != served:
        return None
    return LogprobAgreement.from_dict(agreement)


def top_logprobs_problem(served: Numerics, measured: dict[str, Any]) -> str:
    """Why the engine must not serve top_logprobs under `served` ('' when it may): the alternatives
    come from a second pass (engines/openvino/ir_scorer.py) that agrees with the pipeline's sampled
    tokens under exact numerics; any other setting must have been measured to agree on the build host
    (build_engines/fidelity/logprob_agreement.py)."""
    if served == EXACT:
        return ""
    result = served_agreement(served, measured)
    if result is None:
        return f"under {served.label} the alternatives' agreement with the sampled tokens was not measured"
    return (
        ""
        if result.agrees
        else f"under {served.label} the alternatives disagree with the sampled tokens: " + (result.describe())
    )
