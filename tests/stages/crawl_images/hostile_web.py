"""A fault-injecting web on 127.0.0.1 for the crawl tests, and a fake DNS that never leaves it.

:class:`HostileWeb` is a threaded HTTP/1.1 server bound to 127.0.0.1 (never another address)
whose routes are built from the fault makers below: slow bodies and headers, endless bodies,
compression bombs, redirect chains, opt-out headers, failing statuses with odd ``Retry-After``
values, and so on. It records every request (path, query, headers, time) and, for trickled
responses, whether the client hung up before the end.

:class:`FakeDns` answers chosen host names with chosen addresses (``socket.getaddrinfo``
monkeypatched) and routes connections to the fake "public" addresses to the loopback server
(``urllib3.util.connection.create_connection`` monkeypatched): the crawler believes it talks to a
public host, nothing ever leaves 127.0.0.1, and every connection target is recorded.
"""

from __future__ import annotations

import gzip
import io
import socket
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image

Handler = Callable[[BaseHTTPRequestHandler], None]


# ------------------------------------------------------------------------------------------ content
def picture(seed: int, size: tuple[int, int] = (160, 120), fmt: str = "JPEG", **save: Any) -> bytes:
    """A distinct, structured picture (distinct perceptual hashes for distinct seeds)."""
    im = Image.new("RGB", size, ((seed * 53) % 256, (seed * 97) % 256, (seed * 31) % 256))
    px = im.load()
    for x in range(size[0]):
        for y in range(0, size[1], 3 + seed % 5):
            px[x, y] = ((x * (seed + 3)) % 256, (y * 7 + seed) % 256, (x + y * seed) % 256)  # type: ignore[index]
    buf = io.BytesIO()
    im.convert("RGB" if fmt in ("JPEG", "PPM", "PCX", "SGI", "TGA", "BMP") else "RGBA").save(buf, fmt, **save)
    return buf.getvalue()


def flat(color: tuple[int, int, int], size: tuple[int, int] = (120, 90), fmt: str = "PNG") -> bytes:
    """A single-colour image."""
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


def big_png(width: int, height: int, seed: int = 0) -> bytes:
    """An RGB PNG of ``width`` x ``height`` pixels that compresses very well (about 160 KB at
    7000 x 7000), written row by row (never held decoded): a few bands of colour, different per
    seed, so distinct seeds have distinct perceptual hashes."""
    import struct

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    z = zlib.compressobj(9)
    idat = []
    bands = 3 + seed % 5
    for y in range(height):
        band = (y * bands // height + seed) % 7
        left = bytes(((band * 37 + seed * 11) % 256, (band * 91) % 256, (seed * 53) % 256)) * (width * (1 + band) // 8)
        right = bytes(((seed * 29) % 256, (band * 17 + 128) % 256, (band * 71) % 256)) * (width - len(left) // 3)
        idat.append(z.compress(b"\x00" + left + right))
    idat.append(z.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(idat)) + chunk(b"IEND", b"")


def gzip_bomb(decoded_bytes: int) -> bytes:
    """``decoded_bytes`` of spaces, gzip-compressed (about 1,000 : 1)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as g:
        block = b" " * (1 << 20)
        for _ in range(decoded_bytes >> 20):
            g.write(block)
    return out.getvalue()


# ------------------------------------------------------------------------------------------ faults
def send(
    req: BaseHTTPRequestHandler, body: bytes, ctype: str = "image/jpeg", status: int = 200, **headers: str
) -> None:
    req.send_response(status)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    for k, v in headers.items():
        req.send_header(k.replace("_", "-"), v)
    req.end_headers()
    req.wfile.write(body)


def serve(body: bytes, ctype: str = "image/jpeg", status: int = 200, **headers: str) -> Handler:
    return lambda req: send(req, body, ctype, status, **headers)


def redirect(location: str, status: int = 302, **headers: str) -> Handler:
    return lambda req: send(req, b"", "text/plain", status, Location=location, **headers)


def fail_first(status: int, then: Handler, times: int = 1, **headers: str) -> Handler:
    """``status`` (with ``headers``) for the first ``times`` requests, then ``then``."""
    state = {"n": 0}
    lock = threading.Lock()

    def fn(req: BaseHTTPRequestHandler) -> None:
        with lock:
            state["n"] += 1
            n = state["n"]
        if n <= times:
            send(req, b"", "text/plain", status, **headers)
        else:
            then(req)

    return fn


class Trickle:
    """A response sent ``chunk`` bytes every ``delay`` seconds (the body, or the headers too when
    ``slow_headers``); ``hung_up`` is set when the client closed the connection before the end."""

    def __init__(self, body: bytes, delay: float, chunk: int = 1, slow_headers: bool = False) -> None:
        self.body, self.delay, self.chunk, self.slow_headers = body, delay, chunk, slow_headers
        self.hung_up = threading.Event()
        self.sent = 0

    def __call__(self, req: BaseHTTPRequestHandler) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n"
            + f"Content-Length: {len(self.body)}\r\nX-Padding: {'x' * 200}\r\n\r\n".encode()
        )
        data = head + self.body
        start = 0
        if not self.slow_headers:
            req.wfile.write(head)
            req.wfile.flush()
            start = len(head)
        try:
            for i in range(start, len(data), self.chunk):
                req.wfile.write(data[i : i + self.chunk])
                req.wfile.flush()
                self.sent = i + self.chunk
                time.sleep(self.delay)
        except OSError:
            self.hung_up.set()
            req.close_connection = True


def endless(prefix: bytes, filler: bytes, ctype: str = "text/plain") -> Handler:
    """``prefix``, then ``filler`` for ever (no Content-Length; until the client hangs up)."""

    def fn(req: BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Type", ctype)
        req.send_header("Connection", "close")
        req.end_headers()
        req.close_connection = True
        try:
            req.wfile.write(prefix)
            for _ in range(1 << 20):  # 64 GiB of 64 KiB blocks: "for ever" for a test
                req.wfile.write(filler)
        except OSError:
            pass

    return fn


def gzipped(body: bytes, ctype: str = "text/html") -> Handler:
    """``body`` sent as is with ``Content-Encoding: gzip`` (it must already be gzip data)."""
    return serve(body, ctype, Content_Encoding="gzip")


def deflated(raw: bytes, ctype: str = "text/html") -> Handler:
    return serve(zlib.compress(raw), ctype, Content_Encoding="deflate")


# ------------------------------------------------------------------------------------------ server
def self_signed(name: str, folder: Any) -> tuple[str, str]:
    """A self-signed certificate for DNS name ``name`` (cert and key PEM files in ``folder``)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = f"{folder}/{name}.crt", f"{folder}/{name}.key"
    with open(cert_file, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_file, key_file


class HostileWeb:
    """A threaded HTTP/1.1 server on 127.0.0.1 (keep-alive, TCP_NODELAY) serving ``routes``
    (path -> handler); ``hits`` records every request: path -> [(time, query, headers)].
    ``tls``: (certificate, key) files: HTTPS, recording the server names clients asked for (SNI)
    in ``sni``."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.routes: dict[str, Handler] = {}
        self.sni: list[str | None] = []
        self.hits: dict[str, list[tuple[float, str, dict[str, str]]]] = {}
        self.lock = threading.Lock()
        web = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                with web.lock:
                    web.hits.setdefault(path, []).append((time.monotonic(), query, dict(self.headers)))
                fn = web.routes.get(path)
                if fn is None:
                    send(self, b"", "text/plain", 404)
                    return
                fn(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        if tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            ctx.sni_callback = lambda sock, name, _ctx: self.sni.append(name)  # type: ignore[assignment]
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.port = self.server.server_address[1]
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def n(self, path: str) -> int:
        with self.lock:
            return len(self.hits.get(path, []))

    def total(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.hits.values())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SilentServer:
    """A TCP listener on 127.0.0.1 that accepts connections and never says a word (a TLS handshake
    that never ends); ``accepted`` counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self._conns:
            c.close()


class FakeDns:
    """Fake answers for chosen host names, and fake "public" addresses routed to 127.0.0.1.

    ``names``: host -> list of answers (each a list of IP strings); each lookup of the host takes
    the next answer (the last repeats), so ``["93.184.216.34"], ["127.0.0.1"]`` is a rebinding
    name and ``[]`` one that does not exist; ``delays``: seconds a name's lookup takes. ``route``: fake address -> the loopback port
    that answers for it. Connections to any
    other address than 127.0.0.1 or a routed one are refused without touching the network.
    A client that connects by name gets the fake answer too (a lookup). ``lookups`` counts lookups
    per name; ``connects`` lists every (address, port) connected to.
    """

    def __init__(
        self,
        monkeypatch: Any,
        names: dict[str, list[list[str]]],
        route: dict[str, int],
        delays: dict[str, float] | None = None,
    ) -> None:
        import urllib3.util.connection as u3conn

        self.names, self.route, self.delays = names, route, delays or {}
        self.lookups: dict[str, int] = {}
        self.connects: list[tuple[str, int]] = []
        real_gai, real_connect = socket.getaddrinfo, u3conn.create_connection

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            key = host.decode() if isinstance(host, bytes) else host
            if key in self.names:
                n = self.lookups[key] = self.lookups.get(key, 0) + 1
                time.sleep(self.delays.get(key, 0.0))  # a slow resolver
                answer = self.names[key][min(n, len(self.names[key])) - 1]
                if not answer:
                    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
                out = []
                for a in answer:
                    if ":" in a:
                        out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port or 0, 0, 0)))
                    else:
                        out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port or 0)))
                return out
            return real_gai(host, port, *args, **kwargs)

        def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            host, port = address
            if host in self.names:  # a name (a client that resolves by itself): the fake answer
                host = getaddrinfo(host, port)[0][4][0]
            self.connects.append((host, port))
            if host in self.route:
                return real_connect(("127.0.0.1", self.route[host]), *args, **kwargs)
            if host != "127.0.0.1":
                raise ConnectionRefusedError(111, f"test network: {host} is not reachable from here")
            return real_connect(address, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(u3conn, "create_connection", create_connection)
