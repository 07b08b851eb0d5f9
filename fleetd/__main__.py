"""``python -m fleetd`` is the ``fleetd`` command."""

import sys

from fleetd.cli import main

sys.exit(main())
