"""Use cases that combine domain rules with storage."""
