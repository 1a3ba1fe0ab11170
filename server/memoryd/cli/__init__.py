"""The `memoryd` command line: `main` parses; `remote` is what the commands that call a running
server share (memory_commands, resource_commands, conversation_commands, search_commands,
transfer_commands); data_commands work on the data directory; `setup_commands` write and show
the configuration."""
