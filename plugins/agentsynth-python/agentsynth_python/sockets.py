"""Memory held in the socket buffers of a sandbox's network namespace.

A socket's queued data is kernel memory: in no process's proportional set size, in no rlimit. A
process that raises SO_SNDBUF (up to twice ``net.core.wmem_max``, global: 8 MB here) on 120
socketpairs queued 1 GB measured, per process, and a sandbox has ``max_processes`` of them. The
guard asks the kernel (``NETLINK_SOCK_DIAG``: the ``ss -m`` numbers) for every socket of the
sandbox's network namespace, unix, TCP and UDP, and counts what they hold against
``memory_bytes``. A netlink socket answers for the namespace it was made in, so it is made in the
sandbox's (``setns`` on the calling thread, then back): that needs root (CAP_SYS_ADMIN), so
without root there is no socket accounting (:func:`diag_socket` returns None).
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_MEMINFO, UNIX_DIAG_MEMINFO = 0x20, 5
INET_DIAG_SKMEMINFO = 7
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_MEMINFO = struct.Struct("=9I")  # rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc, wmem_queued, optmem, backlog, drops


def diag_socket(pid: int) -> socket.socket | None:
    """A sock_diag netlink socket in the network namespace of ``pid``, or None (not root, gone)."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if os.fstat(target).st_ino == os.stat("/proc/thread-self/ns/net").st_ino:
        os.close(target)  # not (yet) a namespace of its own: the host's sockets are not the sandbox's
        return None
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            return None
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:  # cannot happen with our own namespace's descriptor
                raise OSError(ctypes.get_errno(), "agentsynth-python: cannot return to the host's network namespace")
        sock.settimeout(2.0)
        return sock
    finally:
        os.close(target)
        os.close(own)


def _dump(sock: socket.socket, request: bytes, header: int, attribute: int, seq: int) -> int:
    """Bytes held by the sockets one SOCK_DIAG_BY_FAMILY dump lists (0 when the kernel refuses it)."""
    sock.send(_HEADER.pack(_HEADER.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
              + request)
    total = 0
    while True:
        data = sock.recv(1 << 20)
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
            if length < _HEADER.size or kind in (NLMSG_DONE, NLMSG_ERROR):
                return total
            end, at = offset + length, offset + _HEADER.size + header
            while at + 4 <= end:
                size, kind = struct.unpack_from("=HH", data, at)
                if size < 4:
                    break
                if kind == attribute and size >= 4 + _MEMINFO.size:
                    info = _MEMINFO.unpack_from(data, at + 4)
                    total += info[0] + max(info[2], info[5]) + info[7]
                at += (size + 3) & ~3
            offset += (length + 3) & ~3
        if not data:
            return total


def socket_memory(sock: socket.socket) -> int:
    """Bytes queued in every unix, TCP and UDP socket of the namespace ``sock`` was made in."""
    total = _dump(sock, struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, UDIAG_SHOW_MEMINFO, 0, 0),
                  16, UNIX_DIAG_MEMINFO, 1)  # unix_diag_msg: 16 bytes
    seq = 2
    for family in (socket.AF_INET, socket.AF_INET6):
        for protocol in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
            request = struct.pack("=BBBBI", family, protocol, 1 << (INET_DIAG_SKMEMINFO - 1), 0, 0xFFFFFFFF) + bytes(48)
            total += _dump(sock, request, 72, INET_DIAG_SKMEMINFO, seq)  # inet_diag_msg: 72 bytes
            seq += 1
    return total
