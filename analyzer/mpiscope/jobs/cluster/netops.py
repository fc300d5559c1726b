"""Thin wrappers over `ip` and `tc` (iproute2): the only place that touches the kernel."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from mpiscope.errors import UserError

CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21  # unshare --uts (per-node host names)
NETNS_DIR = Path("/run/netns")


class NetError(UserError):
    """An ip/tc command failed: names the command and the kernel's message."""


def _capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def check_privileges() -> None:
    """Raise a one-line UserError unless we may create namespaces and shape links."""
    caps = _capabilities()
    missing = [name for name, bit in (("CAP_NET_ADMIN", CAP_NET_ADMIN),
                                      ("CAP_SYS_ADMIN", CAP_SYS_ADMIN))
               if not caps >> bit & 1]
    if missing:
        raise UserError("cluster", f"needs {' and '.join(missing)} to create network "
                        "namespaces (run as root)")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise UserError("cluster", f"`{tool}` not found (apt install iproute2 util-linux)")


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one iproute2 command; on failure raise NetError naming it and the kernel's reply."""
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise UserError("cluster", f"`{args[0]}` not found (apt install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise NetError(" ".join(args), "no answer within 30 s") from None
    if check and proc.returncode != 0:
        reply = (proc.stderr or proc.stdout).strip().splitlines()
        raise NetError(" ".join(args), reply[-1] if reply else f"exit code {proc.returncode}")
    return proc


def netns_list() -> list[str]:
    out = run("ip", "netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def link_exists(name: str, netns: str | None = None) -> bool:
    cmd = ["ip", "-n", netns] if netns else ["ip"]
    return run(*cmd, "link", "show", "dev", name, check=False).returncode == 0


def links_with_prefix(prefix: str) -> list[str]:
    """Root-namespace links whose name starts with `prefix` (peer suffix `@…` stripped)."""
    out = run("ip", "-o", "link", "show").stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]
    return [n for n in names if n.startswith(prefix)]


def qdiscs(dev: str, netns: str | None = None) -> list[str]:
    cmd = ["ip", "netns", "exec", netns, "tc"] if netns else ["tc"]
    out = run(*cmd, "qdisc", "show", "dev", dev, check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def addresses(dev: str, netns: str | None = None) -> list[str]:
    """IPv4 addresses (without prefix length) of `dev`."""
    cmd = ["ip", "-n", netns] if netns else ["ip"]
    out = run(*cmd, "-4", "-o", "addr", "show", "dev", dev, check=False).stdout
    return re.findall(r"\binet (\d+\.\d+\.\d+\.\d+)", out)


def netem_available() -> bool:
    """True if the kernel has sch_netem (often missing from minimal/VM kernels).

    Probed on a throw-away veth pair (kernels without netem often lack `dummy` too),
    so nothing of ours or the host's is touched.
    """
    probe = "mpiscope-nprobe"
    run("ip", "link", "del", probe, check=False)
    if run("ip", "link", "add", probe, "type", "veth", "peer", "name", f"{probe}1",
           check=False).returncode != 0:
        return False
    try:
        return run("tc", "qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms",
                   check=False).returncode == 0
    finally:
        run("ip", "link", "del", probe, check=False)
