"""``python -m tabsim``: the ``tabsim`` command."""
from tabsim.cli import entry

entry()
