"""What a server process serves beside its gRPC API, over its Runtime: the HTTP listeners
(listeners.py: the HTTP/JSON API with the console and /metrics, the metrics' own port), /metrics
itself (metrics_endpoint.py, with the gauges read at scrape time in levels.py), and reloaded
tokens applied in each kind of process (token_reloads.py)."""
