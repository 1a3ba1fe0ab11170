"""The server as a program: configuration, set-up, life cycle, logs, packaging, docs, layers and
benchmarks."""
