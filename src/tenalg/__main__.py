"""``python -m tenalg ...``: the same as the ``tenalg`` command."""

import sys

from .cli import main

sys.exit(main())
