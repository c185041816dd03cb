"""Relaying the engine contract to another model by BLS (engine_relay, tensorrt_llm_bls)."""
