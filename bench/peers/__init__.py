"""Peers measured beside Kadence in one run (``python -m bench --only peers``): DBOS on
PostgreSQL (issue 45). Their software is not Kadence's: ``setup`` installs it for the bench only
(a virtualenv of its own under ``bench/peers/.venv``, pinned in ``requirements.txt``; PostgreSQL
from Debian's packages when it is missing and the bench runs as root)."""
