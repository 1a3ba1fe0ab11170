"""`python -m memoryd` is the `memoryd` command."""

from memoryd.entry import main

raise SystemExit(main())
