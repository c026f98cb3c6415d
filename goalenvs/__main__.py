"""``python -m goalenvs`` is the ``goalenvs`` command."""

import sys

from goalenvs.cli import main

sys.exit(main())
