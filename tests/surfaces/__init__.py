"""What callers meet: HTTP/JSON, MCP, the console, grpcurl, the clients, errors, metrics and
traces."""
