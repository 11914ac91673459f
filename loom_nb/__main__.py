"""``python -m loom_nb`` runs the ``loom-nb`` command."""

from loom_nb.cli import main

raise SystemExit(main())
