"""`python -m memoryd` is the `memoryd` command."""

from memoryd.cli.main import main

raise SystemExit(main())
