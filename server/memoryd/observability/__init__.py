"""What memoryd tells operators beyond its logs: Prometheus metrics (memoryd.observability.
metrics, served by memoryd.serving.metrics_endpoint) and OpenTelemetry traces
(memoryd.observability.tracing). Every layer records into them; they import nothing of the
server's but its settings and errors."""
