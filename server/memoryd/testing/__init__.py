"""Test utilities shipped with memoryd, for its own tests and for adapters' tests."""
