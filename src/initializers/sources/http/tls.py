"""TLS over a socket, decrypted in memory. Why not `ssl.SSLSocket`: OpenSSL, as Python sets it up, reads each record
with two system calls (its 5-byte header, then its body) and hands back one record (16 KiB at most) per read, so a GB
costs 130 000 reads and 65 000 trips through the caller's loop (a write, a hash, progress). Here one `recv` takes all
that has arrived (up to `GULP`), one `recv_into` decrypts as many records as the caller's buffer holds.
"""

from __future__ import annotations

import contextlib
import mmap
import socket
import ssl

#: The most ciphertext one read of the socket takes: what a loopback or a fast network delivers between two reads.
GULP = 256 * 1024


class TlsSocket:
    """A connected socket wrapped in TLS (handshake done), with the few calls our HTTP/1.1 client makes of a socket.
    Blocking or not as the socket is: when it is not, reads raise `BlockingIOError` once nothing more has arrived."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        # Mapped rather than allocated: only the pages a connection's answers reach are resident.
        self._gulp = memoryview(mmap.mmap(-1, GULP))
        try:
            self._handshake()
        except BaseException:
            with contextlib.suppress(OSError):  # the alert saying why (a certificate refused), so the server stops
                self._flush()  # waiting for the rest of the handshake
            sock.close()
            raise

    def _handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._receive():
                    raise ssl.SSLEOFError("the server closed the connection during the TLS handshake") from None
        self._flush()

    def recv_into(self, view: memoryview) -> int:
        """Decrypt into `view` all that has arrived, as much as it holds: waits (when blocking) only if nothing has;
        0 once the server has closed the connection."""
        count = 0
        while count < len(view):
            try:
                decrypted = self._tls.read(len(view) - count, view[count:])
            except ssl.SSLWantReadError:
                if count:
                    break
                if not self._receive():
                    return 0
                continue
            except ssl.SSLZeroReturnError:  # the server's close_notify
                break
            if not decrypted:  # the server's close_notify, as OpenSSL reports it once it has been read
                break
            count += decrypted
        self._flush()  # what reading may have to answer (a key update)
        return count

    def recv(self, size: int) -> bytes:
        buffer = bytearray(size)
        return bytes(buffer[: self.recv_into(memoryview(buffer))])

    def sendall(self, data: bytes) -> None:
        self._tls.write(data)
        self._flush()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def fileno(self) -> int:
        return self._sock.fileno()

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()

    def _receive(self) -> int:
        """Ciphertext from the socket into TLS: how much arrived (0: the server closed the connection)."""
        count = self._sock.recv_into(self._gulp)
        if count:
            self._incoming.write(self._gulp[:count])
        else:
            self._incoming.write_eof()
        return count

    def _flush(self) -> None:
        if self._outgoing.pending:
            self._sock.sendall(self._outgoing.read())
