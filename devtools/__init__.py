"""Development tools: benchmarks and the test doubles they share, outside the product packages.

Nothing in depthtui/, engine/ or store/ imports this package, except `depthtui bench`, which
loads a benchmark only when its command runs. It may import all three.

scripted_server.py  a scripted OpenAI-compatible model server on loopback (tests, benchmarks)
synthetic.py        generated stores: TUI test fixtures and the 10,000-episode `bench tui` store
bench/              the `depthtui bench` benchmarks, each `measure(**options)` and `render(result)`
"""
