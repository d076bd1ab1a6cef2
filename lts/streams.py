"""The process's output streams, handled once at the top (``cli.main``): whatever the reader
does with them, lts ends with one line or none, never a traceback.

- A closed pipe (``lts models | head -1``, ``| true``): the reader has what it wanted; exit 0,
  quietly (click alone exits 1).
- Output that cannot be written (``> /dev/full``, an I/O error): one line on stderr, exit 1.
- Standard output closed before the start (``>&-``): one line on stderr, exit 1.
- An output encoding without the symbols lts prints (``PYTHONIOENCODING=ascii``, ``LANG=C``
  with UTF-8 mode off): each symbol written as its ASCII fallback (``×`` as ``x``, ``µ`` as
  ``u``), anything else as ``?``.
"""
from __future__ import annotations

import codecs
import errno
import os
import sys

# the symbols lts's own text uses (``grep -rhoP "[^\\x00-\\x7F]" lts/``) and their ASCII forms;
# rich draws its boxes in ASCII by itself where the encoding is not UTF
FALLBACKS = {"×": "x", "µ": "u", "÷": "/", "→": "->", "·": ".", "≤": "<=", "≥": ">=", "↑": "^",
             "§": "S", "—": "-", "–": "-", "…": "...", "²": "^2", "³": "^3", "±": "+/-", "≈": "~",
             "∞": "inf", "−": "-", "✓": "ok", "✗": "x", "•": "*"}


def _fallback(err: UnicodeEncodeError):
    """The ``lts-ascii`` codec error handler: each character the encoding lacks as its ASCII
    fallback; a box-drawing one as -, | or +; anything else as ?."""
    out = []
    for ch in err.object[err.start:err.end]:
        if ch in FALLBACKS:
            out.append(FALLBACKS[ch])
        elif "\u2500" <= ch <= "\u257f":
            name = ord(ch) - 0x2500
            out.append("-" if name in (0, 1, 4, 5, 8, 9, 0x4c, 0x4d, 0x50) else
                       "|" if name in (2, 3, 6, 7, 0xa, 0xb, 0x4e, 0x4f, 0x51) else "+")
        else:
            out.append("?")
    return "".join(out), err.end


codecs.register_error("lts-ascii", _fallback)


class OutputClosed(Exception):
    """The reader closed the pipe: stop writing, exit 0."""


class OutputFailed(Exception):
    """The output cannot be written (its reason as the message): exit 1."""


class _Guarded:
    """A text stream whose write and flush errors become OutputClosed / OutputFailed, which
    click does not catch (it turns a broken pipe into exit 1 and lets other OSErrors raise)."""

    def __init__(self, stream):
        self._stream = stream

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:
            raise OutputClosed() from None
        except OSError as e:
            if e.errno == errno.EPIPE:
                raise OutputClosed() from None
            raise OutputFailed(e.strerror or str(e)) from None

    def write(self, text):
        return self._guard(self._stream.write, text)

    def flush(self):
        return self._guard(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _quiet_exit(code: int) -> None:
    """Exit without Python's final flush of the dead stream raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(code)


def run(entry) -> None:
    """Call ``entry()`` (click's ``cli``, which exits) with the streams handled as above."""
    if sys.stdout is None:
        sys.stderr and sys.stderr.write("Error: standard output is closed: lts has nowhere "
                                        "to write its answer\n")
        sys.exit(1)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            enc = (stream.encoding or "").lower().replace("-", "").replace("_", "")
            if not enc.startswith("utf"):
                stream.reconfigure(errors="lts-ascii")
    sys.stdout = _Guarded(sys.stdout)
    try:
        entry()
    except OutputClosed:
        _quiet_exit(0)
    except OutputFailed as e:
        if sys.stderr is not None:
            sys.stderr.write(f"Error: cannot write the output: {e}\n")
            sys.stderr.flush()
        _quiet_exit(1)
    except SystemExit as e:
        try:
            sys.stdout.flush()
        except OutputClosed:
            _quiet_exit(0)
        except OutputFailed as err:
            sys.stderr.write(f"Error: cannot write the output: {err}\n")
            _quiet_exit(1)
        raise e
