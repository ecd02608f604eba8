"""``python -m pycel``: the ``pycel`` command (see :mod:`pycel.cli`)."""

from pycel.cli import main

raise SystemExit(main())
