"""User-facing errors. Library code raises these; only ``cli.py`` turns them into exit codes.

Imports nothing from lts.
"""


class LtsError(Exception):
    """Base class: the message is shown to the user as one line, exit status 1."""


class SpecError(LtsError):
    """A model, topology or measurement file is unreadable or wrong.

    The message names the file, the key, the value and what was expected.
    """

    def __init__(self, file, key, message):
        self.file, self.key = plain(str(file)), key
        where = f"{self.file}: {key}: " if key else f"{self.file}: "
        super().__init__(where + message)


def plain(text: str) -> str:
    """A name as typed, or its repr when it holds control characters (terminal escapes)."""
    return repr(text) if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in text) else text


class StrategyError(LtsError):
    """A ``--strategy`` string cannot be parsed (a bad flag: exit status 2)."""


class InfeasibleError(LtsError):
    """No strategy satisfies memory, SLO and budget."""
