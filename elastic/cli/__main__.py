"""``python -m elastic.cli``."""

from __future__ import annotations

import sys

from elastic.cli import main

sys.exit(main())
