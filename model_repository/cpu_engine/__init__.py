"""The CPU engine: the engine step's contract served by OpenVINO GenAI continuous batching."""
