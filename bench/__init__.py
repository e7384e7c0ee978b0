"""Benchmarks: our loop, fan-out, tool context and catalog scan, side by side with peers.

`python -m bench` runs the suite (see bench/README.md); each script also runs on its own.
"""
