"""The `memoryd` command line: `main` parses, `remote_commands` call a running server,
`setup_commands` write and show the configuration."""
