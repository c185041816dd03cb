"""Build the CPU engine: export a Llama checkpoint to OpenVINO IR with weight compression,
measure its fidelity against the checkpoint, and publish it only if it passes the gate.

The export itself is optimum-intel's (`optimum-cli export openvino`); int4 is exported as
float and then compressed data-aware by NNCF (build_engines/openvino/compress.py); the
fidelity report is build_engines/fidelity.  Each runs as a child process so its memory is
returned when it ends.  The engine directory is written under a temporary name and renamed
when complete, so a half-built (or rejected) engine never looks usable.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo, checkpoint_hash, copy_tokenizer_files
from build_engines.engine_dir import finish_engine, staging_dir, validated_checkpoint
from build_engines.openvino.numerics import EXACT, MeasuredRow, Numerics, NumericsMode, choose_fast, round_gains
from build_engines.openvino.numerics_decisions import (
    DecisionKey,
    DecisionSource,
    RecordedDecision,
    isa_level,
    matching_decision,
    recorded_decisions,
)
from build_engines.openvino.scorer_agreement import LogprobAgreement
from build_engines.process import BuildError, run_streaming
from build_engines.progress import StepProgress
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, Precision
from contract.build_record import BUILD_RECORD_FILE, BuildRecord, installed_versions
from contract.model_configs import DRAFT_SUBDIR

BUILD_PACKAGES = (
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
    "optimum-intel",
    "optimum",
    "nncf",
    "transformers",
    "torch",
)
IR_MODEL_FILE = "openvino_model.xml"
FIDELITY_FILE = "fidelity.json"
FUSION_FILE = "fusion.json"
NUMERICS_FILE = "numerics.json"
LOGPROBS_FILE = "logprob_agreement.json"
REJECTED_SUFFIX = ".rejected"

__all__ = ["BuildError", "build_openvino_engine", "compress_command", "engine_is_built", "export_command"]


def export_command(spec: BuildSpec, info: CheckpointInfo, out_dir: Path, checkpoint: Path | None = None) -> list[str]:
    """The exact optimum-cli invocation for this spec (int4: float32, compressed afterwards).
    `checkpoint`: another one to export the same way (the draft model; int4: int8)."""
    if checkpoint is not None:
        weight_format = "int8" if spec.precision == Precision.INT4 else spec.precision.value
    else:
        weight_format = "fp32" if spec.precision == Precision.INT4 else spec.precision.value
    return [
        sys.executable,
        "-m",
        "optimum.commands.optimum_cli",
        "export",
        "openvino",
        "--model",
        str(checkpoint or spec.checkpoint),
        "--task",
        "text-generation-with-past",
        "--weight-format",
        weight_format,
        str(out_dir),
    ]


def draft_problems(checkpoint: Path, draft: Path) -> list[str]:
    """A draft model must speak the target's tokens: the same vocabulary, id for id."""
    from transformers import AutoTokenizer

    if not (draft / "config.json").is_file():
        return [f"'draft_checkpoint' {draft} is not a Hugging Face checkpoint (no config.json)"]
    if AutoTokenizer.from_pretrained(draft).get_vocab() != AutoTokenizer.from_pretrained(checkpoint).get_vocab():
        return [
            f"'draft_checkpoint' {draft} has another tokenizer vocabulary than {checkpoint}; "
            "a draft model must share the target's tokenizer"
        ]
    return []


def compress_command(spec: BuildSpec, ir_dir: Path) -> list[str]:
    """int4: NNCF's data-aware compression of the exported IR, with the spec's recipe."""
    return [
        sys.executable,
        "-m",
        "build_engines.openvino.compress",
        "--ir-dir",
        str(ir_dir),
        "--checkpoint",
        str(spec.checkpoint),
        "--recipe",
        json.dumps(asdict(spec.openvino.int4)),
        "--record",
        str(ir_dir / "compression.json"),
    ]


def fusion_command(ir_dir: Path, drafting: bool) -> list[str]:
    """Fused projections in the engine's IR (and its draft's); the record of the engine's."""
    drafts = ["--draft-dir", str(ir_dir / DRAFT_SUBDIR)] if drafting else []
    return [
        sys.executable,
        "-m",
        "build_engines.openvino.fusion",
        "--ir-dir",
        str(ir_dir),
        *drafts,
        "--record",
        str(ir_dir / FUSION_FILE),
    ]


def fidelity_command(spec: BuildSpec, engine_dir: Path, out: Path) -> list[str]:
    ov = spec.openvino
    return [
        sys.executable,
        "-m",
        "build_engines.fidelity",
        "--engine-dir",
        str(engine_dir),
        "--checkpoint",
        str(spec.checkpoint),
        "--activation-precision",
        ov.activation_precision,
        "--kv-cache-precision",
        ov.kv_cache_precision,
        "--dynamic-quantization-group-size",
        str(ov.dynamic_quantization_group_size),
        "--evaluation",
        spec.fidelity.evaluation,
        "--inference-threads",
        str(ov.inference_threads),
        "--out",
        str(out),
    ]


def numerics_sweep_command(spec: BuildSpec, engine_dir: Path, out: Path, only: tuple[Numerics, ...] = ()) -> list[str]:
    """Every candidate numerics setting measured (accuracy and speed): what `fast` chooses from;
    `only`: these settings' fidelity, no speed (a recorded decision reused)."""
    ov = spec.openvino
    only_args = [a for s in only for a in ("--only", json.dumps(s.to_dict()))]
    return [
        sys.executable,
        "-m",
        "build_engines.fidelity.numerics_sweep",
        "--engine-dir",
        str(engine_dir),
        "--checkpoint",
        str(spec.checkpoint),
        "--kv-cache-precision",
        ov.kv_cache_precision,
        "--evaluation",
        spec.fidelity.evaluation,
        "--inference-threads",
        str(ov.inference_threads),
        "--max-num-batched-tokens",
        str(spec.limits.max_num_tokens),
        "--out",
        str(out),
        *only_args,
    ]


def logprob_agreement_command(spec: BuildSpec, engine_dir: Path, setting: Numerics, out: Path) -> list[str]:
    """Whether top_logprobs under `setting` describe the sampled tokens on this host."""
    return [
        sys.executable,
        "-m",
        "build_engines.fidelity.logprob_agreement",
        "--engine-dir",
        str(engine_dir),
        "--tokenizer",
        str(spec.checkpoint),
        "--numerics",
        json.dumps(setting.to_dict()),
        "--inference-threads",
        str(spec.openvino.inference_threads),
        "--max-num-batched-tokens",
        str(spec.limits.max_num_tokens),
        "--out",
        str(out),
    ]


def decision_key(spec: BuildSpec, checkpoint_digest: str) -> DecisionKey:
    """What a recorded fast decision must match (build_engines/openvino/numerics_decisions.py)."""
    from build_engines.fidelity.evaluate import cpu_flags, cpu_vendor

    return DecisionKey(
        checkpoint_hash=checkpoint_digest,
        precision=spec.precision.value,
        kv_cache_precision=spec.openvino.kv_cache_precision,
        openvino=installed_versions(("openvino-genai",))["openvino-genai"],
        isa=isa_level(cpu_flags()),
        vendor=cpu_vendor(),
        cores=os.cpu_count() or 0,
    )


def measures_numerics(spec: BuildSpec) -> bool:
    """fast: the build measures every candidate (and its engine serves exact too, without a rebuild);
    exact and custom: the one setting they name."""
    return spec.openvino.numerics == NumericsMode.FAST.value


def engine_is_built(engine_dir: Path) -> bool:
    return (engine_dir / BUILD_RECORD_FILE).is_file() and (engine_dir / IR_MODEL_FILE).is_file()


def build_openvino_engine(spec: BuildSpec, engine_dir: Path, *, log_file: Path | None = None) -> BuildRecord:
    compressing = spec.precision == Precision.INT4
    evaluating = spec.fidelity.evaluation != "off"
    drafting = bool(spec.openvino.draft_checkpoint)
    fusing = spec.openvino.fuse_projections
    progress = StepProgress(total=3 + compressing + evaluating + drafting + fusing)
    with progress.step(f"inspect checkpoint {spec.checkpoint}"):
        info = validated_checkpoint(spec, EngineBackend.OPENVINO)
        digest = checkpoint_hash(spec.checkpoint)
        problems = draft_problems(spec.checkpoint, Path(spec.openvino.draft_checkpoint)) if drafting else []
        if problems:
            raise BuildError("; ".join(problems))

    staging = staging_dir(engine_dir)
    t0 = time.monotonic()
    fmt = "float32 weights, compressed next" if compressing else f"{spec.precision.value} weights"
    with progress.step(f"export to OpenVINO IR ({fmt})"):
        run_streaming(export_command(spec, info, staging), log_file, what="export")
        if not (staging / IR_MODEL_FILE).is_file():
            raise BuildError(f"the exporter finished but wrote no {IR_MODEL_FILE} in {staging}")
        copy_tokenizer_files(spec.checkpoint, staging)
    if drafting:
        draft = Path(spec.openvino.draft_checkpoint)
        with progress.step(f"export the draft model {draft}"):
            run_streaming(export_command(spec, info, staging / DRAFT_SUBDIR, draft), log_file, what="draft export")
    compression = {}
    if compressing:
        r = spec.openvino.int4
        how = "data-free" if r.data_free else f"ratio {r.ratio}, calibrated on stdlib text"
        with progress.step(f"compress to int4 ({r.mode}, group {r.group_size}, {how})"):
            run_streaming(compress_command(spec, staging), log_file, what="int4 compression")
            compression = json.loads((staging / "compression.json").read_text())
    fusion = {}
    if fusing:
        with progress.step("fuse the q/k/v and gate/up projections"):
            run_streaming(fusion_command(staging, drafting), log_file, what="projection fusion")
            fusion = json.loads((staging / FUSION_FILE).read_text())
    fidelity: dict = {}
    numerics: dict = {}
    if evaluating and measures_numerics(spec):
        auto = spec.openvino.numerics_decision == DecisionSource.AUTO.value
        decision = matching_decision(decision_key(spec, digest), recorded_decisions()) if auto else None
        what = (
            f"measure the fidelity of the recorded fast choice ({decision.fast.label}) and of exact vs the float32 "
            f"checkpoint ({spec.fidelity.evaluation})"
            if decision
            else f"measure each numerics setting's fidelity vs the float32 checkpoint ({spec.fidelity.evaluation}) "
            "and speed"
        )
        with progress.step(what):
            fidelity, numerics = choose_numerics(spec, staging, log_file, decision)
            fast = Numerics.from_dict(numerics["fast"])
            if spec.openvino.top_logprobs and fast != EXACT:
                out = staging / LOGPROBS_FILE
                run_streaming(logprob_agreement_command(spec, staging, fast, out), log_file, what="logprob agreement")
                measured = LogprobAgreement.from_dict(json.loads(out.read_text()))
                numerics["logprobs"] = {"numerics": fast.to_dict()} | measured.to_dict()
            (staging / FIDELITY_FILE).write_text(json.dumps(fidelity, indent=2) + "\n")  # the spec's own setting's
            _gate(spec, fidelity, staging, engine_dir)
    elif evaluating:
        with progress.step(f"measure fidelity vs the float32 checkpoint ({spec.fidelity.evaluation})"):
            run_streaming(fidelity_command(spec, staging, staging / FIDELITY_FILE), log_file, what="fidelity report")
            fidelity = json.loads((staging / FIDELITY_FILE).read_text())
            _gate(spec, fidelity, staging, engine_dir)

    with progress.step(f"write {BUILD_RECORD_FILE} and move into place"):
        record = finish_engine(staging, engine_dir, spec, info, digest, installed_versions(BUILD_PACKAGES), t0)
        if fidelity or compression or fusion:
            record = replace(record, fidelity=fidelity, compression=compression, fusion=fusion, numerics=numerics)
            record.write(engine_dir)
    return record


def choose_numerics(
    spec: BuildSpec, staging: Path, log_file: Path | None, decision: RecordedDecision | None
) -> tuple[dict, dict]:
    """The spec's own setting's fidelity report and the record's `numerics`: from a recorded
    decision where one matches and its setting passes the gate here, else from the whole sweep."""
    out = staging / NUMERICS_FILE
    if decision is not None:
        only = (spec.openvino.pinned_numerics(), decision.fast)
        run_streaming(numerics_sweep_command(spec, staging, out, only), log_file, what="numerics")
        fidelity, numerics = numerics_record(spec, json.loads(out.read_text()), decision)
        if Numerics.from_dict(numerics["fast"]) == decision.fast:
            return fidelity, numerics
        print(f"    the recorded choice does not hold here ({numerics['why']}): measuring every setting", flush=True)
    run_streaming(numerics_sweep_command(spec, staging, out), log_file, what="numerics")
    return numerics_record(spec, json.loads(out.read_text()))


def numerics_record(spec: BuildSpec, measured: dict, decision: RecordedDecision | None = None) -> tuple[dict, dict]:
    """From the sweep's measurements: the fidelity report of the spec's own setting (what the gate
    checks and build.json's `fidelity` holds) and the record's `numerics` (the table, the fast
    choice, why, and which path chose it: `chosen_by`).  `decision`: the sweep measured only its
    setting and the spec's own, for fidelity; it is the fast choice if it passes the gate here."""
    from build_engines.fidelity.gate import gate_problems

    limits = spec.fidelity.limits(spec.precision.value)
    pinned = spec.openvino.pinned_numerics()
    rows, fidelity = [], {}
    baseline_runs: dict = next(
        (c["speed"]["runs"] for c in measured["candidates"] if c["selectable"] and c["speed"]), {}
    )
    for candidate in measured["candidates"]:
        setting, report = Numerics.from_dict(candidate["numerics"]), candidate["fidelity"]
        if setting == pinned:
            fidelity = report
        greedy = report.get("greedy") or {}
        rows.append(
            MeasuredRow(
                numerics=setting,
                selectable=candidate["selectable"],
                mean_kld=report["logits"]["mean_kld"],
                p99_kld=report["logits"]["p99_kld"],
                ppl_change_pct=report["logits"]["ppl_change_pct"],
                same_top1_pct=report["logits"]["same_top1_pct"],
                greedy_equal=f"{greedy.get('equal', 0)}/{greedy.get('prompts', 0)}",
                tok_s_1=candidate["speed"].get("tok_s_1"),
                tok_s_16=candidate["speed"].get("tok_s_16"),
                problems=tuple(gate_problems(report["logits"], limits)) if limits else (),
                not_applied=candidate.get("not_applied", False),
                round_gains=round_gains(candidate["speed"]["runs"], baseline_runs) if candidate["speed"] else (),
            )
        )
    today = time.strftime("%Y-%m-%d")
    if decision is None:
        fast, why = choose_fast(rows)
        chosen_by = {"path": "measured", "measured": today}
    else:
        row = next(r for r in rows if r.numerics == decision.fast)
        holds = row.selectable and row.within_gate and not row.not_applied
        fast = decision.fast if holds else pinned
        why = (
            decision.describe()
            if holds
            else f"{decision.fast.label}: " + ("; ".join(row.problems) or "not applied on this host")
        )
        chosen_by = {
            "path": "recorded",
            "measured": decision.measured,
            "host": decision.host,
            "source": decision.source,
        }
    return fidelity, {
        "rows": [r.to_dict() for r in rows],
        "fast": fast.to_dict(),
        "why": why,
        "chosen_by": chosen_by,
        "gate": limits.to_dict() if limits else None,
        "speed_settings": measured["speed_settings"],
        "host": measured["host"],
    }


def _gate(spec: BuildSpec, report: dict, staging: Path, engine_dir: Path) -> None:
    """Refuse to publish an engine beyond its precision's gate: it is kept aside, with its report."""
    from build_engines.fidelity.gate import FidelityGateError, check_gate

    limits = spec.fidelity.limits(spec.precision.value)
    if limits is None:
        return
    report["gate"] = limits.to_dict()
    try:
        check_gate(report, limits, f"the {spec.precision.value} engine")
    except FidelityGateError as e:
        rejected = engine_dir.with_name(engine_dir.name + REJECTED_SUFFIX)
        shutil.rmtree(rejected, ignore_errors=True)
        staging.rename(rejected)
        raise BuildError(f"{e}.  The engine and its {FIDELITY_FILE} are kept in {rejected}") from None
