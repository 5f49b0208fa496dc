"""The pre-registration error, in a module of its own so the command line can catch it without
loading the schema."""


class PreregError(ValueError):
    """A pre-registration is malformed, unlocked, or does not match its lock (the message names fields)."""
