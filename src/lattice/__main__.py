"""``python -m lattice`` runs the command line."""

from __future__ import annotations

import sys

from lattice.cli import main

sys.exit(main())
