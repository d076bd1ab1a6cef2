"""Request traces for ``lts simulate --trace``: when each request arrives and how long its
prompt and output are, read from the public formats (docs/simulate.md):

- **plain CSV** with a header naming ``arrival_s`` (or ``timestamp_s``), ``isl`` (or
  ``input_tokens``) and ``osl`` (or ``output_tokens``);
- **Mooncake's JSONL** (kvcache-ai/Mooncake ``FAST25-release/traces``: one object a line with
  ``timestamp`` in milliseconds, ``input_length``, ``output_length``, ``hash_ids``);
- **the Azure LLM inference trace** (Azure/AzurePublicDataset ``AzureLLMInferenceTrace_*.csv``:
  ``TIMESTAMP`` as a date and time, ``ContextTokens``, ``GeneratedTokens``).

Every reader returns ((arrival s from the first, isl, osl), ...) in arrival order; a bad line is
one ``SpecError`` naming the file, the line and the value.
"""
from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from pathlib import Path

from ..specs import read_text
from ..specs.errors import SpecError, cut_quoted, decimal
from ..specs.model import check_json_containers, parse_json
from ..specs.limits import MAX_SIM_REQUESTS, MAX_TOKENS

MAX_TRACE_BYTES = 64 * 2**20      # a trace file (a million requests of plain CSV is ~25 MB)
PLAIN = (("arrival_s", "timestamp_s"), ("isl", "input_tokens"), ("osl", "output_tokens"))
AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def read_trace(path) -> tuple:
    """The requests of a trace file, in whichever of the three formats it is."""
    file = str(path)
    text = read_text(Path(path), "a trace file", max_bytes=MAX_TRACE_BYTES)
    head = text.lstrip()[:1]
    if head in ('[', '"'):
        raise SpecError(file, "", "not a trace: JSON that is not one object a line (Mooncake's "
                                  "trace), nor a CSV")
    rows = _jsonl(file, text) if head == "{" else _csv(file, text)
    if not rows:
        raise SpecError(file, "", "holds no requests")
    if len(rows) > MAX_SIM_REQUESTS:
        raise SpecError(file, "", f"{len(rows):,} requests: at most {MAX_SIM_REQUESTS:,} a run")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    return tuple((t - t0, i, o) for t, i, o in rows)


def _number(value, text: bool) -> float:
    """A trace's number: a CSV cell (``text``) as ``decimal`` reads it (ASCII: not '１٠٠٠'), or
    a JSON number (not true, and not text: "1000" in JSON is a string); nan where it is not."""
    try:
        if isinstance(value, str) and text:
            return decimal(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    except (ValueError, OverflowError):     # (an integer of hundreds of digits)
        pass
    return math.nan


def _why(value, text: bool) -> str:
    """What is wrong with a number's spelling, where that is the problem ("" else)."""
    if isinstance(value, str) and not text:
        return " (a JSON string: write the number bare)"
    if isinstance(value, str) and (not value.isascii() or "_" in value):
        return " (ASCII digits, no _)"
    return ""


def _tokens(file, where, name, value, text: bool = True) -> int:
    x = _number(value, text)
    if not (math.isfinite(x) and x == int(x) and 1 <= x <= MAX_TOKENS):
        raise SpecError(file, where, f"{name}: {cut_quoted(value)} is not a whole number of "
                                     f"tokens from 1 to {MAX_TOKENS:,}{_why(value, text)}")
    return int(x)


def _seconds(file, where, name, value, scale=1.0, text: bool = True) -> float:
    x = _number(value, text) * scale
    if not (math.isfinite(x) and x >= 0):
        raise SpecError(file, where, f"{name}: {cut_quoted(value)} is not a time >= 0"
                                     f"{_why(value, text)}")
    return x


def _jsonl(file, text) -> list:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {n}"
        check_json_containers(file, where, line)      # (each line parsed and dropped in turn)
        try:
            obj = parse_json(file, where, line, "a trace line needs 1")
        except json.JSONDecodeError as e:
            raise SpecError(file, where, f"not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise SpecError(file, where, "not a JSON object (Mooncake's trace: one object a "
                                         "line with timestamp, input_length, output_length)")
        for k in ("timestamp", "input_length", "output_length"):
            if k not in obj:
                raise SpecError(file, where, f"{k}: missing (Mooncake's trace: timestamp in ms, "
                                             "input_length, output_length)")
        out.append((_seconds(file, where, "timestamp", obj["timestamp"], 1e-3, text=False),
                    _tokens(file, where, "input_length", obj["input_length"], text=False),
                    _tokens(file, where, "output_length", obj["output_length"], text=False)))
        if len(out) > MAX_SIM_REQUESTS:
            break
    return out


def _csv(file, text) -> list:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lstrip("\ufeff") for h in next(reader)]
    except (StopIteration, csv.Error) as e:
        raise SpecError(file, "header", f"not a trace ({e or 'empty'})") from None
    if all(c in header for c in AZURE):
        cols, azure = [header.index(c) for c in AZURE], True
    else:
        cols, azure = [], False
        for names in PLAIN:
            hit = [h for h in names if h in header]
            if not hit:
                raise SpecError(file, "header", f"{names[0]}: missing column (a trace is a CSV "
                                f"with arrival_s, isl, osl; Mooncake's JSONL; or the Azure LLM "
                                f"inference CSV with {', '.join(AZURE)})")
            cols.append(header.index(hit[0]))
    out = []
    try:
        for n, row in enumerate(reader, 1):
            if not row:
                continue
            where = f"row {n}"
            if len(row) != len(header):
                raise SpecError(file, where, f"has {len(row)} fields: expected {len(header)}")
            t, i, o = (row[c].strip() for c in cols)
            if azure:
                try:
                    stamp = datetime.fromisoformat(t[:26]).timestamp()
                except ValueError:
                    raise SpecError(file, where, f"TIMESTAMP: {t[:40]!r} is not a date and "
                                                 "time") from None
                out.append((stamp, _tokens(file, where, AZURE[1], i),
                            _tokens(file, where, AZURE[2], o)))
            else:
                out.append((_seconds(file, where, header[cols[0]], t),
                            _tokens(file, where, header[cols[1]], i),
                            _tokens(file, where, header[cols[2]], o)))
            if len(out) > MAX_SIM_REQUESTS:
                break
    except csv.Error as e:
        raise SpecError(file, "", f"not CSV ({e})") from None
    return out
