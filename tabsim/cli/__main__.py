"""``python -m tabsim.cli``: the ``tabsim`` command."""
from tabsim.cli import entry

entry()
