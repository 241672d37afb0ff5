"""Views of a recorded run for people: the timeline read from the log, and its terminal and HTML renderings.

User-surface code (the top layer of docs/architecture.md): the core never imports it.
"""
