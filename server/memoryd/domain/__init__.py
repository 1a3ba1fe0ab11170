"""Pure rules of memoryd: no grpc, no protobuf, no apsw, no openai imports here."""
