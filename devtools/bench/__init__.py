"""The `depthtui bench` benchmarks; each prints ratios against a baseline measured in the same run.

sandbox.py        per-call round trip beside the peers' shells (sandbox_peers.py)
oracle.py         the safety oracle's check and full hash beside `find` + `sha256sum`
engine.py         episodes per minute, overhead by phase, beside the Docker floor (engine_floor.py)
ray.py            `bench engine --executor ray`: the local executor beside the Ray executor
search.py         the protocol's cap search beside bisection on simulated tasks
tui.py            the TUI on a generated 10,000-episode store, in-process and in a real terminal
"""
