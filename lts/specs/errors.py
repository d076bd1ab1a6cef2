"""User-facing errors. Library code raises these; only ``cli.py`` turns them into exit codes.

Imports nothing from lts.
"""
import difflib
import unicodedata


class LtsError(Exception):
    """Base class: the message is shown to the user as one line, exit status 1."""


class SpecError(LtsError):
    """A model, topology or measurement file is unreadable or wrong.

    The message names the file, the key, the value and what was expected.
    """

    def __init__(self, file, key, message):
        self.file, self.key = plain(str(file)), key
        shown = cut(plain(str(key)), keep=60, limit=100)    # (a file's own key can be 50 KB)
        where = f"{self.file}: {shown}: " if key else f"{self.file}: "
        super().__init__(where + message)


# characters a name never shows raw: control (C0, C1: terminal escapes), format (the
# bidirectional overrides and isolates U+202A-202E, U+2066-2069, zero widths: they reorder or
# hide what a terminal shows) and line or paragraph separators
HIDDEN = frozenset(("Cc", "Cf", "Zl", "Zp"))


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds a character of ``HIDDEN``'s categories."""
    return any(unicodedata.category(ch) in HIDDEN for ch in text)


def cut(text: str, keep: int = 40, limit: int = 60) -> str:
    """``text`` as a message shows it: whole up to ``limit`` characters, else its first
    ``keep`` and its length (a value from a file can be a 400-digit number or a megabyte)."""
    return text if len(text) <= limit else f"{text[:keep]}... ({len(text):,} characters)"


def cut_quoted(value) -> str:
    """A value as a message shows it: text quoted (``repr``), anything else as ``repr`` writes
    it, a long one cut (its length said: the text's own, without the quotes)."""
    if isinstance(value, int) and value.bit_length() > 13_000:   # (repr of 4,300 digits raises)
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    if not isinstance(value, str):
        return cut(repr(value))
    return repr(value) if len(value) <= 60 else repr(value[:40]) + \
        f"... ({len(value):,} characters)"


def count_problem(text: str, maximum: int) -> str:
    """Why ``text`` (a flag's part or a file's cell) is not a whole number from 1 to
    ``maximum`` ("" where it is one): ASCII digits only, and a text of more than 40 digits
    refused before ``int()`` (4,300 digits and more raise), its length said."""
    if not (text.isascii() and text.isdigit()) or int(text[:40] or "0") < 1:
        return f"{cut_quoted(text)} is not a positive integer"
    if len(text) > 40:
        return f"{text[:12]}... ({len(text):,} digits) is above the maximum {maximum:,}"
    if int(text) > maximum:
        return f"{text} is above the maximum {maximum:,}"
    return ""


def suggestion(name: str, names, cutoff: float = 0.6) -> str:
    """"did you mean X?" for the one of ``names`` nearest ``name`` (difflib's ratio at least
    ``cutoff``), else "": the hint of every unknown-name message."""
    near = difflib.get_close_matches(str(name).lower(), list(names), 1, cutoff)
    return f"did you mean {near[0]}?" if near else ""


def decimal(text: str) -> float:
    """``float(text)`` for a number as a file's cell or a flag writes it: ASCII, without "_"
    (Python's float, and NumPy's, also read '٨٤٠', '１０' and '8_40' as numbers); ValueError
    otherwise. Spaces around it, an exponent, inf and nan are float's to judge."""
    if not isinstance(text, str) or not text.isascii() or "_" in text:
        raise ValueError(f"{text!r} is not a decimal number")
    return float(text)


def hidden_problem(value: str) -> str:
    """The one message for a text value holding ``HIDDEN`` characters ("" when it holds
    none)."""
    return f"{cut_quoted(value)} contains control or bidirectional formatting characters " \
        "(expected plain text)" if has_hidden(value) else ""


def plain(text: str) -> str:
    """A name as typed, or its repr when it holds control or bidirectional formatting
    characters (``has_hidden``): shown escaped, never raw."""
    text = str(text)
    return repr(text) if has_hidden(text) else text     # (repr escapes every one of them)


class StrategyError(LtsError):
    """A ``--strategy`` string cannot be parsed (a bad flag: exit status 2)."""


class InfeasibleError(LtsError):
    """No strategy satisfies memory, SLO and budget."""


class FlagError(LtsError):
    """A flag's value refused (exit status 2, as click refuses one): ``hint`` names the flag as
    the message shows it ("'--gpus'", "'--isl' / '--osl'"), ``reason`` the rest."""

    def __init__(self, hint: str, reason: str):
        self.hint, self.reason = hint, reason
        super().__init__(f"Invalid value for {hint}: {reason}")


class UsageError(LtsError):
    """Flags that do not go together (exit status 2, as click's usage errors)."""
