"""``python -m pycel``: the ``pycel`` command (see :mod:`pycel.cli`)."""

from .cli import main

raise SystemExit(main())
