"""Request guard, checked before Flask routes anything:

- paths: the app serves its own routes and nothing else. Dash's routes already confine
  assets and component suites to their directories; this refuses anything with a `..`
  segment (raw or percent-encoded) and any path outside Dash's routes, so no request can
  name a file on the machine (404);
- Host: only the names the server is reached by (loopback names, the `--host` given, ...).
  A page on another site can point its own domain name at 127.0.0.1 (DNS rebinding)
  and so read the trace as a same-origin page; its requests carry that domain as Host
  (403);
- token: on an address other machines can reach, every request must carry the token
  printed with the URL, as `?token=` (which also sets a cookie, so the page's own
  requests carry it), the cookie, or `Authorization: token ...` (403).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from urllib.parse import unquote

import flask

from mpiscope.errors import UserError

# Dash's routes; anything else would reach its catch-all route (the page again)
ALLOWED_PATHS = ("/", "/_dash-layout", "/_dash-dependencies", "/_dash-update-component",
                 "/_favicon.ico", "/_reload-hash")
ALLOWED_PREFIXES = ("/assets/", "/_dash-component-suites/")
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def refused(raw_path: str) -> str | None:
    """Why a request path is refused, or None if it may be served."""
    decoded = raw_path
    for _ in range(3):  # %252e%252e decodes twice
        decoded = unquote(decoded)
    parts = decoded.replace("\\", "/").split("/")
    if ".." in parts or any(p.startswith("..") and p.strip(".") == "" for p in parts):
        return "path traversal"
    path = decoded.split("?", 1)[0]
    if path in ALLOWED_PATHS:
        return None
    # a file under one of the prefixes (a suite: package/file), not the directory itself
    rest = next((path[len(p):] for p in ALLOWED_PREFIXES if path.startswith(p)), "")
    if rest and not rest.endswith("/") and ("/" in rest or path.startswith("/assets/")):
        return None
    return "no such page"


def is_loopback(host: str) -> bool:
    """Whether an address (or name) to bind reaches this machine only."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addrs = {a[4][0] for a in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback
                               for a in addrs)


def host_name(header: str) -> str | None:
    """The host of a Host header, lower case, without the port ("[::1]" keeps brackets)."""
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0 or (h[end + 1:] and not (h[end + 1] == ":" and h[end + 2:].isdigit())):
            return None
        return h[:end + 1]
    name, _, port = h.partition(":")
    if (port and not port.isdigit()) or not name:
        return None
    return name.removesuffix(".")


def _ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def choose_token(given: str | None, loopback: bool, no_token: bool = False) -> str | None:
    """The token requests need: the one `given` (--token), else a random one for an
    address other machines reach (unless `no_token`: --no-token), else none."""
    if given is not None:
        if not given.strip():
            raise UserError("--token", "the token is empty")
        return given
    if loopback or no_token:
        return None
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Guard:
    """Which Host headers are answered and which token (if any) every request needs."""

    hosts: frozenset[str]  # host names allowed in the Host header (no port)
    token: str | None = None
    any_ip: bool = False  # bound to every interface: any literal address is fine
    cookie: str = "mpiscope-token"
    _token_bytes: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_token_bytes", (self.token or "").encode())

    @classmethod
    def loopback(cls, token: str | None = None) -> Guard:
        return cls(LOOPBACK_NAMES, token)

    @classmethod
    def for_address(cls, host: str, port: int, token: str | None) -> Guard:
        """The guard of a server bound to `host`: the loopback names (this machine, or an
        ssh tunnel to it), the address given, and for an address other machines reach,
        this machine's names (and any literal address when bound to all of them: a
        literal address cannot be rebound to another site)."""
        names = set(LOOPBACK_NAMES) | {_bracketed(host.lower())}
        wildcard = host.strip("[]") in ("0.0.0.0", "::")
        if not is_loopback(host):
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    names.add(name.lower())
        return cls(frozenset(names), token, any_ip=wildcard, cookie=f"mpiscope-token-{port}")

    def host_allowed(self, header: str | None) -> bool:
        name = host_name(header) if header else None
        if name is None:
            return False
        return name in self.hosts or (self.any_ip and _ip_literal(name))

    def token_ok(self, given: str | None) -> bool:
        if self.token is None:
            return True
        # constant time: the comparison must not tell how much of a guess was right
        return given is not None and hmac.compare_digest(given.encode(), self._token_bytes)

    def token_of(self, request: flask.Request) -> tuple[str | None, bool]:
        """(the token a request carries, whether it came in the URL)."""
        q = request.args.get("token")
        if q is not None:
            return q, True
        auth = request.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "token" and value:
            return value.strip(), False
        return request.cookies.get(self.cookie), False


def _text(body: str, status: int) -> flask.Response:
    return flask.Response(body + "\n", status=status, mimetype="text/plain")


def install(server: flask.Flask, guard: Guard) -> None:
    @server.before_request
    def _guard():
        req = flask.request
        if not guard.host_allowed(req.headers.get("Host")):
            return _text("refused: this server does not answer for that Host", 403)
        given, in_url = guard.token_of(req)
        if not guard.token_ok(given):
            return _text("refused: a token is needed: open the URL `mpiscope serve` "
                         "printed (…/?token=…)", 403)
        env = req.environ
        raw = env.get("RAW_URI") or env.get("REQUEST_URI") or req.full_path
        why = refused(raw) or refused(req.path)
        if why:
            return _text(f"refused: {why}", 404)
        if in_url and guard.token is not None:
            flask.g.mpiscope_set_cookie = True
        return None

    @server.after_request
    def _cookie(resp: flask.Response) -> flask.Response:
        # the token came in the URL: keep it in a cookie that the page's own requests
        # (Dash's XHRs, scripts) carry and no other site's requests do
        if flask.g.get("mpiscope_set_cookie"):
            resp.set_cookie(guard.cookie, guard.token or "", httponly=True,
                            samesite="Strict", path="/")
        return resp
