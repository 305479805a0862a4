"""The PostgreSQL frontend/backend protocol, version 3: framing, and the messages dpsql sends and reads.

Only the codec lives here (bytes in, bytes out); what a message means for a session is
`dpsql.interfaces.server.client`'s business. Reference: the PostgreSQL documentation, chapter
"Frontend/Backend Protocol" (message formats).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

PROTOCOL_3 = 196608  # 3.0
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_MESSAGE = 64 << 20  # the longest message accepted from a client (bytes)
MAX_STARTUP = 10_000


class ProtocolError(Exception):
    """The client broke the protocol (a malformed or oversized message)."""


class Closed(Exception):
    """The client closed the connection."""


def read_exact(sock, n: int) -> bytes:
    """`n` bytes from the socket, or Closed if it ends first."""
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise Closed()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_startup(sock) -> tuple[int, bytes]:
    """A length-prefixed message without a type byte (the first a client sends): (code, rest)."""
    (length,) = struct.unpack("!i", read_exact(sock, 4))
    if not 8 <= length <= MAX_STARTUP:
        raise ProtocolError(f"invalid startup packet length {length}")
    body = read_exact(sock, length - 4)
    return struct.unpack("!i", body[:4])[0], body[4:]


def startup_parameters(body: bytes) -> dict[str, str]:
    """The key/value pairs of a StartupMessage."""
    parts = body.split(b"\0")
    if len(parts) < 2 or parts[-1] != b"" or len(parts) % 2 != 0:
        raise ProtocolError("malformed startup parameters")
    pairs = parts[:-2] if parts[-2] == b"" else parts[:-1]
    try:
        return {pairs[i].decode(): pairs[i + 1].decode() for i in range(0, len(pairs) - 1, 2)}
    except UnicodeDecodeError:
        raise ProtocolError("startup parameters are not UTF-8") from None


def read_message(sock) -> tuple[bytes, bytes]:
    """One typed message: (type byte, payload)."""
    kind = read_exact(sock, 1)
    (length,) = struct.unpack("!i", read_exact(sock, 4))
    if not 4 <= length <= MAX_MESSAGE:
        raise ProtocolError(f"invalid message length {length}")
    return kind, read_exact(sock, length - 4)


class Reader:
    """Reads the fields of one message's payload, raising ProtocolError when it runs short."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("message ended early")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack("!h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack("!i", self._take(4))[0]

    def byte(self) -> bytes:
        return self._take(1)

    def bytes(self, n: int) -> bytes:
        return self._take(n)

    def cstring(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolError("unterminated string in message")
        raw = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolError("a string in the message is not UTF-8") from None

    def rest(self) -> bytes:
        return self._take(len(self.data) - self.pos)


# --- what a client sends ---------------------------------------------------------------------

@dataclass
class Parse:
    name: str
    query: str
    param_types: list[int]


@dataclass
class Bind:
    portal: str
    statement: str
    param_formats: list[int]
    params: list[bytes | None]
    result_formats: list[int]


def parse_parse(payload: bytes) -> Parse:
    r = Reader(payload)
    name, query = r.cstring(), r.cstring()
    return Parse(name, query, [r.int32() for _ in range(r.int16())])


def parse_bind(payload: bytes) -> Bind:
    r = Reader(payload)
    portal, statement = r.cstring(), r.cstring()
    formats = [r.int16() for _ in range(r.int16())]
    params = []
    for _ in range(r.int16()):
        length = r.int32()
        params.append(None if length == -1 else r.bytes(length))
    return Bind(portal, statement, formats, params, [r.int16() for _ in range(r.int16())])


def parse_target(payload: bytes) -> tuple[str, str]:
    """Describe / Close: ('S' statement or 'P' portal, name)."""
    r = Reader(payload)
    kind = r.byte().decode("latin-1")
    if kind not in ("S", "P"):
        raise ProtocolError(f"expected S or P, got {kind!r}")
    return kind, r.cstring()


def parse_execute(payload: bytes) -> tuple[str, int]:
    r = Reader(payload)
    return r.cstring(), r.int32()


# --- what the server sends ---------------------------------------------------------------------

def message(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def authentication(code: int, data: bytes = b"") -> bytes:
    """AuthenticationOk (0), MD5Password (5, salt), SASL (10), SASLContinue (11), SASLFinal (12)."""
    return message(b"R", struct.pack("!i", code) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", _cstr(name) + _cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!ii", pid, secret))


def ready_for_query(status: str) -> bytes:
    return message(b"Z", status.encode())


@dataclass(frozen=True)
class Field:
    name: str
    type_oid: int
    type_size: int = -1
    format: int = 0


def row_description(fields: Sequence[Field]) -> bytes:
    out = [struct.pack("!h", len(fields))]
    for f in fields:
        out.append(_cstr(f.name) + struct.pack("!ihihih", 0, 0, f.type_oid, f.type_size, -1, f.format))
    return message(b"T", b"".join(out))


def data_row(values: Iterable[bytes | None]) -> bytes:
    values = list(values)
    out = [struct.pack("!h", len(values))]
    for v in values:
        out.append(struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v)
    return message(b"D", b"".join(out))


def command_complete(tag: str) -> bytes:
    return message(b"C", _cstr(tag))


def notice_fields(severity: str, sqlstate: str, text: str, detail: str = "", routine: str = "") -> bytes:
    """The fields of an ErrorResponse or NoticeResponse (a detail and PostgreSQL's routine name when given)."""
    fields = [b"S" + _cstr(severity), b"V" + _cstr(severity), b"C" + _cstr(sqlstate), b"M" + _cstr(text)]
    fields += [b"D" + _cstr(detail)] if detail else []
    fields += [b"R" + _cstr(routine)] if routine else []
    return b"".join(fields + [b"\0"])


def error_response(sqlstate: str, text: str, severity: str = "ERROR", detail: str = "", routine: str = "") -> bytes:
    return message(b"E", notice_fields(severity, sqlstate, text, detail, routine))


def notice_response(text: str) -> bytes:
    return message(b"N", notice_fields("NOTICE", "00000", text))


def parameter_description(oids: Sequence[int]) -> bytes:
    return message(b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!i", o) for o in oids))


def copy_out_response(columns: int) -> bytes:
    """CopyOutResponse: text format (0) for the whole copy and each column."""
    return message(b"H", struct.pack("!bh", 0, columns) + struct.pack("!h", 0) * columns)


def copy_data(data: bytes) -> bytes:
    return message(b"d", data)


COPY_DONE = message(b"c")
PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")
SSL_REFUSED = b"N"
SSL_ACCEPTED = b"S"
