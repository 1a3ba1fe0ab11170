"""What memoryd tells operators beyond its logs: Prometheus metrics (memoryd.observability.
metrics, served by memoryd.observability.scrape) and OpenTelemetry traces
(memoryd.observability.tracing)."""
