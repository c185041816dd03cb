"""The CPU engine: OpenVINO GenAI continuous batching as a generation backend."""
