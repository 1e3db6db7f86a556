"""Whether a host:port answers, within a deadline: the TCP probe that the Ray executor (a cluster
address) and the model loader (the Hugging Face hub) run before handing over to a library that
would retry for a minute. The name lookup runs in a daemon thread that is not waited for past the
deadline, so a resolver that hangs costs no more than a port that does not answer. Standard
library only."""

from __future__ import annotations

import socket
import threading
import time


def resolve(host: str, port: int, timeout: float) -> list | str:
    """``socket.getaddrinfo(host, port)`` (TCP) within ``timeout`` s, or why not, one phrase:
    "no answer for the name 'HOST' within T s" or "unknown host: ..."."""
    found: list = []

    def lookup():
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            found.append(exc)

    thread = threading.Thread(target=lookup, name="specverify-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if not found:
        return f"no answer for the name {host!r} within {timeout:g} s"
    if isinstance(found[0], OSError):
        return f"unknown host: {found[0].strerror or found[0]}"
    return found[0]


def connect_any(addresses: list, deadline: float, timeout: float) -> str | None:
    """None when one of ``addresses`` (``resolve``'s) accepts a TCP connection before ``deadline``
    (a ``time.monotonic()`` value), else why not: "no answer within T s" (``timeout``, the whole
    probe's) or the last error, lower case ("connection refused")."""
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(left)
                sock.connect(sockaddr)
            return None
        except OSError as exc:
            error = exc
    if error is None or isinstance(error, TimeoutError):
        return f"no answer within {timeout:g} s"
    return (error.strerror or str(error)).lower()


def unreachable(host: str, port: int, timeout: float) -> str | None:
    """None when host:port accepts a TCP connection within ``timeout`` s, name lookup included;
    else why not, one phrase (``resolve``'s or ``connect_any``'s)."""
    deadline = time.monotonic() + timeout
    found = resolve(host, port, timeout)
    return found if isinstance(found, str) else connect_any(found, deadline, timeout)


__all__ = ["connect_any", "resolve", "unreachable"]
