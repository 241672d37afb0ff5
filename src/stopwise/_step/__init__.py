"""The phases of one step, apart from the loop that sequences them (``stopwise._loop``)."""
