"""The numbered SQL migrations, one line for both engines, shipped inside the memoryd package as
memoryd.migrations (memoryd.storage.migrations reads them)."""
