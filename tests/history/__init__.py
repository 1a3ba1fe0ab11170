"""Conversation history: appending, listing, searching, ingesting, transcripts, sessions and
scopes."""
