"""``python -m udtconf.frtp send|recv`` (:mod:`.cli`)."""

from .cli import main

raise SystemExit(main())
