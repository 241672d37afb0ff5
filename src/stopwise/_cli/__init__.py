"""The ``stopwise`` subcommands that inspect and settle recorded runs: ``show``, ``report``, ``approve``,
``reject``, ``terminate``, ``resume``, ``retry`` and ``fork``, and the filters and paging of ``runs``.
``stopwise.cli`` registers them and hands their parsed arguments here."""
