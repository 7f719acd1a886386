"""TLS read in gulps (`TlsSocket`) against a real TLS server on loopback: one read decrypts every record that has
arrived, non-blocking reads say when nothing has, both ways a server ends a connection read as its end, and a
certificate that does not verify fails the handshake as `ssl.SSLSocket` would."""

from __future__ import annotations

import fcntl
import socket
import ssl
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devkit.relay import self_signed_certificate, serving_context
from initializers.sources.http.tls import TlsSocket

RECORD = 16 * 1024  # the most plaintext one TLS record carries


class TlsServer:
    """Accepts one connection, does the handshake, then runs `script` on the TLS socket."""

    def __init__(self, certificate: tuple[Path, Path], script: Callable[[ssl.SSLSocket], None]) -> None:
        self._context = serving_context(*certificate)
        self._script = script
        self.error: OSError | None = None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = self._listener.getsockname()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _ = self._listener.accept()
        try:
            with self._context.wrap_socket(connection, server_side=True) as tls:
                self._script(tls)
        except OSError as error:  # a client that hung up, or refused the certificate
            self.error = error

    def join(self) -> None:
        self._thread.join(10)
        assert not self._thread.is_alive(), "the server is still waiting for its client"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


def connect(server: TlsServer, certificate: Path) -> tuple[TlsSocket, socket.socket]:
    raw = socket.create_connection(server.address, timeout=10)
    context = ssl.create_default_context(cafile=str(certificate))
    return TlsSocket(raw, context, "127.0.0.1"), raw


def arrived(raw: socket.socket) -> int:
    """Bytes waiting in the socket's receive queue, not yet read."""
    return int.from_bytes(fcntl.ioctl(raw.fileno(), termios.FIONREAD, b"\0\0\0\0"), "little")


def wait_for_arrival(raw: socket.socket, at_least: int) -> None:
    deadline = time.monotonic() + 10
    while arrived(raw) < at_least:
        assert time.monotonic() < deadline, f"only {arrived(raw)} bytes arrived"
        time.sleep(0.01)


def read_all(tls: TlsSocket, size: int) -> Iterator[int]:
    """The count of each read until the server's end."""
    buffer = memoryview(bytearray(size))
    while count := tls.recv_into(buffer):
        yield count


def test_one_read_decrypts_every_record_that_has_arrived(certificate: tuple[Path, Path]) -> None:
    body = bytes(range(256)) * (6 * RECORD // 256)  # six records
    sent = threading.Event()

    def send(tls: ssl.SSLSocket) -> None:
        tls.sendall(body)
        sent.set()
        tls.recv(1)  # until the client hangs up

    server = TlsServer(certificate, send)
    tls, raw = connect(server, certificate[0])
    sent.wait(10)
    wait_for_arrival(raw, len(body))  # the ciphertext is larger still: every record is in
    buffer = memoryview(bytearray(len(body)))
    assert tls.recv_into(buffer) == len(body)  # one read, where an ssl.SSLSocket hands back one record per read
    assert buffer.tobytes() == body
    tls.close()
    server.join()


def test_a_read_returns_what_has_arrived_without_waiting_for_the_buffer_to_fill(
    certificate: tuple[Path, Path],
) -> None:
    more = threading.Event()

    def send(tls: ssl.SSLSocket) -> None:
        tls.sendall(b"first")
        more.wait(10)
        tls.sendall(b"second")
        tls.unwrap()  # close_notify

    server = TlsServer(certificate, send)
    tls, _raw = connect(server, certificate[0])
    buffer = memoryview(bytearray(1 << 20))
    assert buffer[: tls.recv_into(buffer)].tobytes() == b"first"
    more.set()
    assert buffer[: tls.recv_into(buffer)].tobytes() == b"second"
    assert tls.recv_into(buffer) == 0  # close_notify: the end
    tls.close()
    server.join()


def test_non_blocking_reads_say_when_nothing_has_arrived_and_keep_what_did(certificate: tuple[Path, Path]) -> None:
    go = threading.Event()

    def send(tls: ssl.SSLSocket) -> None:
        go.wait(10)
        tls.sendall(b"x" * (3 * RECORD))
        tls.recv(1)

    server = TlsServer(certificate, send)
    tls, raw = connect(server, certificate[0])
    tls.settimeout(0.0)
    buffer = memoryview(bytearray(RECORD))  # smaller than what comes: the rest waits decrypted or not
    with pytest.raises(BlockingIOError):
        tls.recv_into(buffer)
    go.set()
    wait_for_arrival(raw, 3 * RECORD)
    received = sum(read for read in _until_blocked(tls, buffer))
    assert received == 3 * RECORD
    with pytest.raises(BlockingIOError):
        tls.recv_into(buffer)
    tls.close()
    server.join()


def _until_blocked(tls: TlsSocket, buffer: memoryview) -> Iterator[int]:
    while True:
        try:
            yield tls.recv_into(buffer)
        except BlockingIOError:
            return


def test_a_server_that_closes_without_close_notify_ends_the_stream(certificate: tuple[Path, Path]) -> None:
    def send_and_drop(tls: ssl.SSLSocket) -> None:
        tls.sendall(b"partial")
        raw = socket.socket(fileno=tls.detach())  # the TCP connection, closed without TLS's goodbye
        raw.close()

    server = TlsServer(certificate, send_and_drop)
    tls, _raw = connect(server, certificate[0])
    assert sum(read_all(tls, 1024)) == len(b"partial")  # then 0: the caller judges a body cut short
    tls.close()
    server.join()


def test_requests_and_answers_both_ways(certificate: tuple[Path, Path]) -> None:
    def echo(tls: ssl.SSLSocket) -> None:
        while data := tls.recv(65536):
            tls.sendall(data.upper())
            if data.endswith(b"\n"):
                break
        tls.unwrap()

    server = TlsServer(certificate, echo)
    tls, _raw = connect(server, certificate[0])
    tls.sendall(b"get /\n")
    answer = b""
    buffer = memoryview(bytearray(64))
    while count := tls.recv_into(buffer):
        answer += buffer[:count]
    assert answer == b"GET /\n"
    tls.close()
    server.join()


def test_a_certificate_that_does_not_verify_fails_the_handshake(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    other, _key = self_signed_certificate(tmp_path)  # trusting another certificate than the server's
    server = TlsServer(certificate, lambda tls: None)
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(server, other)
    server.join()  # the client said why and hung up: the server's handshake ends, rather than waiting for the rest
    assert isinstance(server.error, ssl.SSLError) and "unknown ca" in str(server.error).lower()
