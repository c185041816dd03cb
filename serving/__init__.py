"""Run the Triton Inference Server on a rendered model repository: locate the binary,
start it with explicit ports, wait for readiness, forward signals, stop it cleanly."""
