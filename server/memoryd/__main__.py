"""`python -m memoryd` is the `memoryd` command."""

from memoryd.cli import main

raise SystemExit(main())
