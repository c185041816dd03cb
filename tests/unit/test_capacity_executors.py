"""Two executors on one GPU each take their fraction of the memory free when they load
(build_engines/gpu/capacity.py: pools_in_order, shared_pools); numbers checked by hand."""

import pytest

from build_engines.gpu.capacity import CapacityError, Executor, pools_in_order, shared_pools

# 80 GiB, a 16 GiB target and a 2 GiB draft at fraction 0.45 each, 2 GiB reserve per executor
TARGET, DRAFT = Executor("target", 16.0, 0.45), Executor("draft", 2.0, 0.45)


def test_the_first_to_load_takes_its_fraction_of_what_is_free_then():
    # target first: 80 - 16 - 2 = 62 free -> 27.9; then 62 - 27.9 - 2 - 2 = 30.1 free -> 13.545
    assert pools_in_order(80.0, (TARGET, DRAFT)) == pytest.approx({"target": 27.9, "draft": 13.545})
    # draft first: 80 - 2 - 2 = 76 free -> 34.2; then 76 - 34.2 - 16 - 2 = 23.8 free -> 10.71
    assert pools_in_order(80.0, (DRAFT, TARGET)) == pytest.approx({"draft": 34.2, "target": 10.71})


def test_each_is_planned_for_the_order_that_leaves_it_least():
    # the old plan gave the target half of 0.9 x (80 - 16 - 2) = 27.9 whatever loaded first
    assert shared_pools(80.0, (TARGET, DRAFT)) == pytest.approx({"target": 10.71, "draft": 13.545})


def test_an_executor_that_does_not_fit_beside_the_other_is_named():
    with pytest.raises(CapacityError, match="target's weights .* do not fit beside draft on 24 GiB"):
        pools_in_order(24.0, (Executor("draft", 2.0, 0.9), Executor("target", 16.0, 0.45)))


def test_the_pytorch_draft_shares_one_pool_token_for_token(tmp_path):
    """PyTorch draft-target: one executor loads both models, then takes the fraction of what is
    free once; each token holds the K and V of both (KvCacheCreator)."""
    from build_engines.gpu.capacity import (
        GIB,
        RUNTIME_RESERVE_GIB,
        estimate,
        kv_bytes_per_token_per_gpu,
        pytorch_capacity_spec,
        pytorch_draft,
        weight_bytes,
    )
    from build_engines.pytorch.spec import served_format
    from tests.unit.test_pytorch_build import validated
    from tests.unit.trtllm_fixtures import LLAMA_8B, info_of, llama_8b_checkpoint

    target = llama_8b_checkpoint(tmp_path / "llama")
    draft = llama_8b_checkpoint(tmp_path / "draft", dict(LLAMA_8B, num_hidden_layers=2))
    spec = validated(target, pt_speculative_decoding="draft_target", max_draft_len=4, speculative_model_dir=draft)
    plain = validated(target)
    info, small = info_of(target), pytorch_draft(spec)
    assert small is not None and small.num_layers == 2 and pytorch_draft(plain) is None
    effective, fp8_kv = served_format(spec.precision.value, spec.pytorch, info)
    cap_spec = pytorch_capacity_spec(spec, effective, fp8_kv)
    cap = estimate(info, cap_spec, small)
    m, f = cap_spec.trtllm.gpu.memory_gib, cap_spec.trtllm.engine_kv_cache_fraction
    both = weight_bytes(info, effective) / GIB + weight_bytes(small, "bf16") / GIB
    assert cap.kv_pool_gib_per_gpu == pytest.approx((m - both - RUNTIME_RESERVE_GIB) * f)
    # 32 + 2 layers of K and V per token: the draft's 2 layers cost 2/32 of the target's
    assert cap.kv_bytes_per_token_per_gpu == pytest.approx(kv_bytes_per_token_per_gpu(info, cap_spec) * 34 / 32)
    line = next(x for x in cap.lines(cap_spec) if x.startswith("KV cache:"))
    assert "one executor, one pool, each token's K and V of both models" in line


def test_plan_prints_both_pools_for_draft_target_on_two_h100s(tmp_path):
    """Llama-3-8B fp16 TP=2 (~7.48 GiB per GPU) with a 2-layer draft (~1.38 GiB), 80 GiB, 0.45 each:
    target second: (80 - 1.38 - 2) x 0.45 = 34.48 taken first, then (42.14 - 7.48 - 2) x 0.45 = 14.70;
    draft second: (80 - 7.48 - 2) x 0.45 = 31.73 taken first, then (38.79 - 1.38 - 2) x 0.45 = 15.93."""
    from click.testing import CliRunner

    from build_engines.cli import main
    from tests.unit.trtllm_fixtures import LLAMA_8B, llama_8b_checkpoint

    target = llama_8b_checkpoint(tmp_path / "target")
    draft = llama_8b_checkpoint(tmp_path / "draft", {**LLAMA_8B, "num_hidden_layers": 2})
    result = CliRunner().invoke(main, ["plan", "--checkpoint", str(target), "--backend", "tensorrt_llm", "--gpu",
                                       "H100-SXM", "--image", "25.12", "--tp", "2", "--speculative-decoding",
                                       "draft_tokens_external", "--draft-checkpoint", str(draft)])
    assert result.exit_code == 0, result.output
    (kv,) = [line for line in result.output.splitlines() if line.startswith("KV cache:")]
    assert "pool ~14.7 GiB per GPU at kv_cache_free_gpu_mem_fraction=0.45 of what is free when it loads" in kv
    assert "after the draft engine's ~1.38 GiB weights" in kv and "gets ~15.9 GiB" in kv
