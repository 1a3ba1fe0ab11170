"""Generated protobuf and gRPC modules for memoryd.v2 (do not edit)."""
