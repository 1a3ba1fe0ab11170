"""memoryd: the long-term memory of conversational agents, as a gRPC service over SQLite."""

__version__ = "0.1.0"
