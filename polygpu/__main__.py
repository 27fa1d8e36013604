"""``python -m polygpu`` is the ``polygpu`` command."""

import sys

from polygpu.cli import main

sys.exit(main())
