"""Our HTTP/1.1 client reads every body framing a server may choose, and keeps or drops the connection as told."""

from __future__ import annotations

import socket
import threading

import pytest

from initializers.sources.http.http1 import Connection, ProtocolError


class CannedServer:
    """Answers each request on a connection with the next canned reply; counts connections."""

    def __init__(self, replies: list[bytes]) -> None:
        self.replies = list(replies)
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.netloc = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.replies:
            client, _ = self._listener.accept()
            self.connections += 1
            with client:
                while self.replies:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        chunk = client.recv(65536)
                        if not chunk:
                            break
                        request += chunk
                    if not request:
                        break
                    reply = self.replies.pop(0)
                    client.sendall(reply)
                    if b"Connection: close" in reply or (b"Content-Length" not in reply and b"chunked" not in reply):
                        break


def body_of(connection: Connection) -> bytes:
    response = connection.get("/", {"host": "x"})
    buffer = memoryview(bytearray(7))  # small, so that reads cross chunk boundaries
    data = b""
    while count := response.readinto(buffer):
        data += buffer[:count]
    return data


def test_chunked_with_extensions_and_trailers_then_keep_alive():
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1a\r\n, chunked world and more!!\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
    server = CannedServer([chunked, plain])
    connection = Connection("http", server.netloc, 5.0, None)
    assert body_of(connection) == b"hello, chunked world and more!!"
    assert body_of(connection) == b"next"
    assert server.connections == 1  # the chunked body ended cleanly: the connection was reused


def test_a_body_delimited_by_close_and_a_server_that_closes():
    server = CannedServer([b"HTTP/1.1 200 OK\r\n\r\nuntil the end", b"HTTP/1.1 204 No Content\r\n\r\n"])
    connection = Connection("http", server.netloc, 5.0, None)
    assert body_of(connection) == b"until the end"
    assert body_of(connection) == b""  # a new connection, and a 204 has no body whatever the headers say
    assert server.connections == 2


def test_a_chunked_body_cut_short_is_a_protocol_error():
    server = CannedServer([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n10\r\nshort"])
    with pytest.raises(ProtocolError):
        body_of(Connection("http", server.netloc, 5.0, None))


def test_a_malformed_chunk_size_is_a_protocol_error():
    server = CannedServer([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n"])
    with pytest.raises(ProtocolError, match="malformed chunk size"):
        body_of(Connection("http", server.netloc, 5.0, None))


def test_our_own_pauses_between_reads_do_not_count_against_the_servers_minimum_rate():
    """A reader that pauses between small reads (MAX_BANDWIDTH's bucket, a slow disk) for longer than the read
    timeout in all, while the server has long sent everything: only the time spent waiting on the socket counts, so
    no trickle is seen. The pauses come once the head's read-ahead is used up (reads then go to the socket), each a
    third of the timeout; five of them pass it."""
    body = b"x" * (256 << 10)
    server = CannedServer([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)])
    timeout = 0.3
    connection = Connection("http", server.netloc, timeout, None)
    response = connection.get("/", {"host": "x"})
    buffer = memoryview(bytearray(1000))
    data, pauses = b"", 0
    while count := response.readinto(buffer):
        data += buffer[:count]
        if len(data) > (128 << 10) and pauses < 5:
            threading.Event().wait(timeout / 3)  # our side holding the transfer back, not the server
            pauses += 1
    assert data == body and pauses == 5
