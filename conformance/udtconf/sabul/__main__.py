"""``python -m udtconf.sabul send|recv`` (:mod:`.cli`)."""

from .cli import main

raise SystemExit(main())
