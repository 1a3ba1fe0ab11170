"""Data leaving and arriving: export, import, clearing, purging and verified erasure."""
