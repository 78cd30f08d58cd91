"""``python -m controller.cli``: the same as the ``tablectl`` console script."""

from __future__ import annotations

from controller.cli import main

raise SystemExit(main())
