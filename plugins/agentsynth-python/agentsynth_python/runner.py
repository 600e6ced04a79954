"""The program that runs INSIDE the sandbox (stdlib only; bound read-only at /.agentsynth/runner.py).

Started as ``python -I -S -B runner.py CONFIG_JSON``. It first sets the resource limits (hard =
soft, so the agent cannot raise them), drops to the sandbox's own uid when it starts as root
(bwrap's privileged mode), sets ``no_new_privs``, then runs one of three modes:

- ``serve``: the agent's interpreter. One JSON request per line on fd 0, one JSON response per
  line on fd 1 (both moved to private fds first). Code runs in one persistent namespace; fds 1
  and 2 point at fresh unlinked capture files during a call, so the output of child processes is
  captured too, and the capture cannot be reached by path.
- ``eval``: a checker's expression, in a fresh process. The request (expression, nonce) comes on
  fd 0; fds 1 and 2 go to /dev/null; the result is written once, as ``NONCE JSON``, on a private
  fd, so a module the expression imports cannot print a result the host accepts without the nonce.
- ``exec``: a checker's command (argv), exec'd after the limits and the uid drop.
"""

import ast
import json
import os
import resource
import signal
import sys

LIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "max_processes": resource.RLIMIT_NPROC,
    "max_open_files": resource.RLIMIT_NOFILE,
    "max_file_bytes": resource.RLIMIT_FSIZE,
}


def confine(config):
    for name, which in LIMITS.items():
        value = config["limits"].get(name)
        if value:
            hard = value + 1 if which == resource.RLIMIT_CPU else value  # SIGXCPU first, then SIGKILL
            resource.setrlimit(which, (value, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    uid = config.get("uid")
    if config.get("namespaced"):  # never with isolation: none, where these are the HOST's
        ipc_limits(config["limits"].get("memory_bytes") or 2**30)
        pty_limit(config["limits"].get("max_processes") or 64)
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("agentsynth-python runner: could not drop root")
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    except Exception:
        pass
    if config.get("seccomp"):
        install_filter(bytes.fromhex(config["seccomp"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file past max_file_bytes: EFBIG, not death
    os.umask(0o022)


def ipc_limits(memory_bytes):
    """Bound System V IPC in the sandbox's own IPC namespace (its sysctls are per namespace): a
    shared memory segment lives on when no process has it attached, counted in no process's
    memory and in no rlimit, so without this a sandbox could hold the host's RAM in detached
    segments (the kernel's defaults allow ~16 EB), and as much again in semaphore arrays and message
    queues. ``shm_rmid_forced`` destroys a segment once nothing has it attached (an attached one is
    in its process's RLIMIT_AS and in the memory guard's sum); the rest caps the totals. Written
    while the runner is still root (bwrap's privileged mode: the sandbox uid cannot change them
    back); without root (a user namespace: they belong to the sandbox's own uid) best effort."""
    page = os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shm_rmid_forced", "1"), ("shmmax", str(memory_bytes)), ("shmall", str(memory_bytes // page)),
                        ("shmmni", "64"), ("msgmni", "16"), ("msgmnb", "16384"), ("sem", "250 8192 32 64")):
        try:
            with open("/proc/sys/kernel/" + name, "w") as f:
                f.write(value)
        except OSError:
            pass


def install_filter(program):
    """Load the host's seccomp filter (sandbox.seccomp_program: no new user namespaces) for this
    process and every process it starts; refuse to run agent code without it."""
    import ctypes

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(program, len(program))
    prog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise SystemExit(f"agentsynth-python runner: cannot install the seccomp filter: {os.strerror(ctypes.get_errno())}")


def pty_limit(count):
    """At most ``count`` pseudo-terminals in the sandbox's own devpts: the kernel's pty limit
    (kernel.pty.max, 4,096 less 1,024 reserved) is one for the whole host, and a sandbox opens
    ~127 per process (RLIMIT_NOFILE), so one sandbox could leave none to any other sandbox or
    container. A remount of bwrap's devpts instance while still root (privileged mode: the sandbox
    uid cannot undo it); elsewhere it fails and nothing changes."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount(b"devpts", b"/dev/pts", b"devpts", 32 | 2 | 8,  # MS_REMOUNT | MS_NOSUID | MS_NOEXEC
                   f"mode=620,ptmxmode=0666,max={count}".encode())
    except Exception:
        pass


def private_fd(fd):
    """A copy of ``fd`` that child processes do not inherit, and ``fd`` itself pointed at /dev/null."""
    moved = os.dup(fd)  # non-inheritable (PEP 446)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, fd)
    os.close(null)
    return moved


def capture_file(name):
    path = "/tmp/.agentsynth-" + name + "-" + str(os.getpid())
    try:
        os.unlink(path)
    except OSError:
        pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.unlink(path)
    return fd


def read_capture(fd, cap):
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    data = os.read(fd, cap) if cap else b""
    return data.decode("utf-8", "replace"), size


class Cells:
    """The agent's persistent interpreter state."""

    def __init__(self):
        import builtins

        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        self.count = 0

    def run(self, code):
        """(repr of the last expression or None, traceback text or '')."""
        import linecache
        import traceback

        self.count += 1
        name = f"<cell {self.count}>"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec"), self.ns)
            if last is not None:
                value = eval(compile(last, name, "eval"), self.ns)
                if value is not None:
                    text = repr(value)
                    return (text if len(text) <= 20000 else text[:20000] + "..."), ""
            return None, ""
        except SystemExit as exc:
            return None, f"SystemExit: {exc.code!r} (the interpreter keeps running)\n"
        except BaseException as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next
            return None, "".join(traceback.format_exception(type(exc), exc, tb))


def shell(command):
    """Run ``command`` with /bin/sh; (exit status text)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execv("/bin/sh", ["/bin/sh", "-c", command])
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


def serve(config):
    requests = os.fdopen(private_fd(0), "rb", 0)
    responses = private_fd(1)
    os.dup2(1, 2)  # between calls both go to /dev/null
    cap = int(config.get("output_bytes", 16000))
    null = os.open(os.devnull, os.O_RDWR)  # kept: restoring fds 1 and 2 needs no new fd (EMFILE-proof)
    cells = Cells()
    sys.path[:0] = [config.get("cwd", os.getcwd()), *config.get("paths", [])]

    def send(message):
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(responses, data):]

    send({"ready": True})
    while True:
        line = requests.readline()
        if not line:
            return
        request = json.loads(line)
        try:
            out = capture_file("out")
        except OSError as exc:
            send({"error": f"the interpreter cannot capture output: {exc} (release files or descriptors)\n"})
            continue
        try:
            err = capture_file("err")
        except OSError as exc:
            os.close(out)
            send({"error": f"the interpreter cannot capture output: {exc} (release files or descriptors)\n"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out, 1)
        os.dup2(err, 2)
        value, error, status = None, "", None
        try:
            if request["op"] == "shell":
                status = shell(request["command"])
            else:
                value, error = cells.run(request["code"])
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os.dup2(null, 1)
            os.dup2(null, 2)
        stdout, stdout_bytes = read_capture(out, cap)
        stderr, stderr_bytes = read_capture(err, cap)
        os.close(out)
        os.close(err)
        send({"stdout": stdout, "stdout_bytes": stdout_bytes, "stderr": stderr, "stderr_bytes": stderr_bytes,
              "value": value, "error": error, "status": status})


def evaluate(config):
    """Evaluate a checker's expression; write ``NONCE JSON`` on the private fd once."""
    requests = os.fdopen(private_fd(0), "rb", 0)
    result_fd = private_fd(1)
    os.dup2(1, 2)
    request = json.loads(requests.readline())
    nonce = request.pop("nonce")
    dumps, write = json.dumps, os.write  # taken before any module of the world can be imported
    import csv
    import errno
    import math
    import pathlib
    import stat

    def regular(path, flags):
        """Open only a regular file: a FIFO the agent left where an output goes would block the
        check until check_seconds (a device: read forever), and the episode's time with it."""
        fd = os.open(path, flags | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file (checkers read only regular files)", path)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def safe_open(file, mode="r", *args, **kwargs):
        if isinstance(file, int):
            return open(file, mode, *args, **kwargs)
        return open(file, mode, *args, opener=regular, **kwargs)

    def read_json(path):
        with safe_open(path, encoding="utf-8") as f:
            return json.load(f)

    def read_csv(path):
        with safe_open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    def read_text(path):
        with safe_open(path, encoding="utf-8") as f:
            return f.read()

    ns = {"json": json, "csv": csv, "math": math, "os": os, "Path": pathlib.Path, "read_json": read_json,
          "read_csv": read_csv, "read_text": read_text, "open": safe_open}
    sys.path[:] = [p for p in sys.path if p and not p.startswith(config.get("cwd", "/world"))]
    sys.path.extend(config.get("paths", []))
    if request.get("world_on_path"):
        sys.pycache_prefix = "/tmp/.pycache"  # never a __pycache__ the agent planted next to its source
        sys.path.insert(0, config.get("cwd", os.getcwd()))
    try:
        if request.get("setup"):
            exec(compile(request["setup"], "<checker setup>", "exec"), ns)
        value = eval(compile(request["expr"], "<checker expression>", "eval"), ns)
        message = {"value": value}
        text = dumps(message)
    except BaseException as exc:  # a failed expression is a failed check, with the reason
        text = dumps({"error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
    write(result_fd, (nonce + " " + text + "\n").encode())
    os._exit(0)  # no atexit hook of an imported module runs after the result


def main():
    config = json.loads(sys.argv[1])
    confine(config)
    mode = config["mode"]
    if mode == "serve":
        serve(config)
    elif mode == "eval":
        evaluate(config)
    elif mode == "exec":
        argv = config["argv"]
        os.execvp(argv[0], argv)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
