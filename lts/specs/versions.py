"""Engine release numbers, read one way everywhere: the engine profiles' releases
(``engines.Engine.release_for``), the measured kernels' (``cost.kernels.pick_release``),
``--engine NAME@VERSION`` and a measurement's ``engine_version``.

Only ASCII digits count ("²" is no digit of a version), and a part of more than
``MAX_PART_DIGITS`` digits ends the numbers (a date, a hash or a pasted number is no release
number), so any text — a 5,000-digit one included — reads without error.
"""
from __future__ import annotations

import re

DIGITS = "0123456789"
MAX_PART_DIGITS = 9
_RC = re.compile(r"rc([0-9]{1,9})(?![0-9])")


def numbers(version) -> tuple:
    """The leading dotted integers of a version ("1.2.0rc2.post2" -> (1, 2, 0); "v0.12" ->
    (0, 12); "", "nightly" -> ())."""
    out = []
    text = str(version).strip().lower()
    text = text[1:] if text.startswith("v") and text[1:2] in tuple(DIGITS) else text
    for part in text.split("."):
        digits = ""
        for ch in part:
            if ch not in DIGITS:
                break
            digits += ch
        if not digits or len(digits) > MAX_PART_DIGITS:
            break
        out.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(out)


def order_key(version) -> tuple:
    """Three leading dotted integers (missing ones 0), then an rc number (1.3.0rc20 -> (1, 3,
    0, -1, 20); 0.5.6.post2 -> (0, 5, 6, 0, 0)): release candidates before their release."""
    nums = list(numbers(str(version).split("rc")[0]))[:3]
    rc = _RC.search(str(version))
    return tuple(nums + [0] * (3 - len(nums))) + ((-1, int(rc.group(1))) if rc else (0, 0))
