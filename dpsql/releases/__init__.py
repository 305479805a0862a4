"""Releases outside a workload's plan, each charged through `Executor.charged` like every other.

`continual`: counts released window by window over a stream; `dropped_rows`: how many rows
bounding left out; `keys`: the keys of a column nobody declared (partition selection); `synth`: a
synthetic copy of a protected table (AIM, MST or RAP).
"""
