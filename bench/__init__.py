"""Benchmarks: measured in runs, reported as ratios against a baseline run side by side."""
