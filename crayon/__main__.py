"""``python -m crayon``: the ``crayon`` command."""

from crayon.cli import main

main()
