"""Reading sessions from a JSON or JSONL file for `deltamem add`.

Accepted shapes: one session object, a JSON list of them, or JSONL with one per
line. A session object is {user_id?, session_id?, agent_id?, timestamp?,
expires_at?, messages: [{role, content, timestamp?, name?}]}; a bare list of
messages is one session. Problems are reported with the file, line or item they are
in. `jsonl_lines` reads a JSONL file a line at a time for `deltamem
import-sessions`, a bad line reported and the others kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 512 * 1024 * 1024


class SessionFileError(ValueError):
    pass


@dataclass
class SessionInput:
    where: str  # "file.jsonl:3" or "file.json[2]"
    user_id: str | None
    session_id: str | None
    agent_id: str | None
    timestamp: str | None
    messages: Any
    expires_at: str | None = None


def _session(obj: Any, where: str) -> SessionInput:
    if isinstance(obj, list):
        obj = {"messages": obj}
    if not isinstance(obj, dict):
        raise SessionFileError(f"{where}: a session must be an object or a list of messages")
    if "messages" not in obj:
        raise SessionFileError(f"{where}: session has no 'messages'")

    def text(key: str) -> str | None:
        v = obj.get(key)
        return None if v is None else str(v)

    return SessionInput(
        where,
        text("user_id"),
        text("session_id"),
        text("agent_id"),
        text("timestamp"),
        obj["messages"],
        text("expires_at"),
    )


def read_sessions(path: Path) -> list[SessionInput]:
    if not path.is_file():
        raise SessionFileError(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SessionFileError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = raw[: exc.start].count(b"\n") + 1
        raise SessionFileError(f"{path}:{at}: not valid UTF-8 ({exc.reason})") from exc
    text = text.removeprefix("\ufeff")  # a BOM (Windows editors) is not part of the JSON
    stripped = text.lstrip()
    if not stripped:
        raise SessionFileError(f"{path}: the file is empty")
    if path.suffix == ".jsonl" or (stripped[0] == "{" and "\n{" in stripped):
        out = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SessionFileError(f"{path}:{n}: invalid JSON: {exc.msg}") from exc
            out.append(_session(obj, f"{path.name}:{n}"))
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionFileError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
    if isinstance(data, dict) and "sessions" in data:
        data = data["sessions"]
    if isinstance(data, list) and data and all(isinstance(x, dict) for x in data):
        if all("role" in x for x in data):  # a bare list of messages
            return [_session(data, path.name)]
        return [_session(x, f"{path.name}[{i}]") for i, x in enumerate(data)]
    return [_session(data, path.name)]


def jsonl_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, the line's JSON value) of each non-blank line of a JSONL file,
    read a line at a time; a line that is not UTF-8 or not JSON gives a
    SessionFileError (naming the line) as its value instead."""
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            if n == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a BOM is not part of the JSON
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield n, SessionFileError(f"{path.name}:{n}: not valid UTF-8 ({exc.reason})")
                continue
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                yield n, SessionFileError(f"{path.name}:{n}: invalid JSON: {exc.msg}")
