"""`memoryd mcp`: memoryd's memory as Model Context Protocol tools and resources.

A client of a running memoryd (gRPC, with the CLI's address, token and TLS settings), holding no
state of its own: `tools` turns each tool call into memoryd RPCs, `app` serves them over stdio or
streamable HTTP with the prompt files as resources.
"""
