"""``python -m udtconf run --stack PATH …`` and ``python -m udtconf build`` (:mod:`udtconf.run`)."""

import sys

from .run import main

sys.exit(main())
