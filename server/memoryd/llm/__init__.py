"""Model access: the provider chain over the openai client."""
