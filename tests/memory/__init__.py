"""Long-term memory: rows, recall, prompt files, resources, vectors and embeddings."""
