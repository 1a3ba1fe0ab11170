"""gRPC transport: servicers validate and translate, then call the use cases."""
