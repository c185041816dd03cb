"""The CPU engine (OpenVINO GenAI): the spec section, the numerics, the IR export, weight compression and fused
projections."""
