"""PostgreSQL's numbered SQL migrations, shipped as memoryd.migrations.postgres."""
