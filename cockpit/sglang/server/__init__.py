"""The running server: its log lines, its readiness from every source, its start-up phases,
its ranks, where it listens and its /metrics."""
