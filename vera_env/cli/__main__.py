"""``python -m vera_env.cli``."""

from vera_env.cli import main

raise SystemExit(main())
