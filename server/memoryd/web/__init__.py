"""HTTP serving shared by every HTTP listener of memoryd (the HTTP/JSON API with the console and
/metrics, the metrics' own port, and `memoryd mcp --listen`): the listener that cannot be held
open or starved (`listener`), and the check of the names and origins a request may come
through (`hosts`). It knows nothing of what the applications it serves do."""
