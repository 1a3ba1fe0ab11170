"""SQLite storage: connection policy, migrations, the single writer, readers and repositories."""
