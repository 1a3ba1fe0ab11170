"""The numbered SQL migrations, shipped inside the memoryd package as memoryd.migrations."""
