"""``python -m stopwise``: the same as the ``stopwise`` command."""

from stopwise.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
