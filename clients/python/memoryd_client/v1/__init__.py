"""Generated protobuf and gRPC modules for memoryd.v1 (do not edit)."""
