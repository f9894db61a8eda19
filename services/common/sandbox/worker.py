"""One sandbox worker: a long-lived, small interpreter that runs each program in a forked child.

Standard library only: the pool starts it by path as ``python -I -S worker.py SETTINGS_JSON`` (a fresh
interpreter with no site-packages and no environment), inside bubblewrap in ``bwrap`` isolation.
At start it sets up its isolation (``fork``: a new network and mount namespace of its own, the whole
file system read-only, a private tmpfs on ``/tmp``), preloads common standard-library modules (the
children then need not import them), reports ready and serves jobs one at a time over its
stdin/stdout (4-byte big-endian length + JSON). For each job it forks a child that:

- gets its own process group, stdin from a memfd, stdout/stderr on pipes, every other fd closed;
- works in a fresh scratch directory (mode 0700, the only place it can write), removed afterwards;
- gets RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CORE=0 and RLIMIT_NOFILE;
- drops to the worker's own unprivileged uid (so RLIMIT_NPROC counts this worker's processes only,
  and the child cannot signal the worker or the pool), with no_new_privs and a parent-death SIGKILL;
- runs the program with ``exec`` as ``__main__``.

After the child exits, or at the wall-clock timeout, or when an output stream passes its cap, the
worker kills the child's process group; if any process of the run is still alive (one that left the
group), every process of its uid (``kill(-1)`` from a helper running as that uid). It reaps everything
(it is a child subreaper, so orphans come back to it) and reports the raw facts; the pool classifies them.
"""

from __future__ import annotations

import builtins
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time

HEADER = struct.Struct(">I")
MEMORY_EXIT = 197
"""Exit status the child reports when the program raised MemoryError (a program can fake it by exiting
with this status itself; it only changes its own verdict)."""
SETUP_EXIT = 198
"""Exit status of a child whose sandbox set-up failed before the program started (a sandbox fault)."""

PRELOAD = (
    "array", "bisect", "collections", "copy", "dataclasses", "datetime", "decimal", "fractions", "functools",
    "encodings.idna", "heapq", "io", "itertools", "json", "math", "operator", "random", "re", "statistics", "string", "tempfile",
    "traceback", "typing",
)
"""Modules imported before forking: cheaper runs, and importable even where the sandbox uid cannot read
the interpreter's own directory."""

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 8192, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 1
SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
M_ARENA_MAX = -8  # mallopt(3)
CHUNK = 65536
WATCH_MS = 20
"""Milliseconds between two samples of a run's memory and process count (`RunUsage`)."""
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)


def write_message(fd: int, message: dict) -> None:
    """Write one framed JSON message to ``fd`` (blocking, whole)."""
    data = json.dumps(message).encode()
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def read_exact(fd: int, n: int, deadline: float | None = None) -> bytes | None:
    """Read exactly ``n`` bytes from ``fd``; None at end of file before any byte. Raises TimeoutError past
    ``deadline`` (time.monotonic seconds) and EOFError at end of file inside the message."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no complete message on fd {fd} in time")
        part = os.read(fd, n - got)
        if not part:
            if got == 0:
                return None
            raise EOFError(f"end of file inside a message on fd {fd}")
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def read_message(fd: int, deadline: float | None = None) -> dict | None:
    """Read one framed JSON message from ``fd``; None at end of file."""
    head = read_exact(fd, HEADER.size, deadline)
    if head is None:
        return None
    body = read_exact(fd, HEADER.unpack(head)[0], deadline)
    if body is None:
        raise EOFError(f"end of file after a message header on fd {fd}")
    return json.loads(body)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def isolate_fork(scratch_bytes: int) -> None:
    """Fork isolation, done once in the worker as root: new network and mount namespaces, every mount
    read-only (recursively), a private root-owned tmpfs on /tmp for the scratch directories, and the
    interpreter's directory reachable for an unprivileged uid (the rest of its closed ancestor hidden)."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare(CLONE_NEWNS | CLONE_NEWNET)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr),
                         ctypes.sizeof(attr)), "mount_setattr(/, read-only, recursive)")
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={scratch_bytes}")
    _expose_prefix(sys.base_prefix)


def _first_closed_ancestor(path: str) -> str | None:
    """The outermost directory on ``path`` that others may not traverse (no o+x), or None."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        ancestor = os.sep.join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def _expose_prefix(prefix: str) -> None:
    """Make the interpreter's directory readable for the sandbox uid at its own path when an ancestor is
    closed (e.g. a pyenv interpreter under /root, mode 0700): a read-only tmpfs over that ancestor holding
    only the prefix (bind-mounted), so the rest of the ancestor is hidden as well."""
    closed = _first_closed_ancestor(prefix)
    if closed is None:
        return
    stage = "/tmp/.python"
    os.mkdir(stage, 0o755)
    _mount(prefix, stage, None, MS_BIND | MS_REC)
    _mount("tmpfs", closed, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=65536")
    path = closed
    for part in os.path.relpath(prefix, closed).split(os.sep):
        path = os.path.join(path, part)
        os.mkdir(path, 0o755)
    _mount(stage, prefix, None, MS_MOVE)
    os.rmdir(stage)
    _mount(None, closed, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def check_isolation(host_netns: int) -> None:
    """Refuse to serve unless this process is in another network namespace than the pool (inode
    ``host_netns`` of /proc/self/ns/net there) with no interface but loopback: raises RuntimeError."""
    own = os.stat("/proc/self/ns/net").st_ino
    if own == host_netns:
        raise RuntimeError("network namespace not isolated: the worker shares the pool's network namespace")
    names = [name for _, name in socket.if_nameindex()]
    if any(name != "lo" for name in names):
        raise RuntimeError(f"network namespace not isolated: interfaces {names}")


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (from a helper that becomes ``uid``; kill(-1) skips the caller)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(100):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        except BaseException:
            code = 1
        os._exit(code)
    os.waitpid(pid, 0)


def reap_all() -> None:
    """Wait for every child (orphans come back to this subreaper) until none is left."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _child(job: dict, scratch: str, stdin_fd: int, out_w: int, err_w: int, uid: int) -> None:
    """In the forked child: isolate, drop privileges, run the program; never returns."""
    try:
        os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, 1 << 16)
        os.chdir(scratch)
        cpu = int(job["cpu_s"])
        for limit, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                             (resource.RLIMIT_AS, (job["address_space_bytes"],) * 2),
                             (resource.RLIMIT_NPROC, (job["max_processes"],) * 2),
                             (resource.RLIMIT_FSIZE, (job["max_file_bytes"],) * 2),
                             (resource.RLIMIT_NOFILE, (64, 64)),
                             (resource.RLIMIT_CORE, (0, 0))):
            resource.setrlimit(limit, value)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8"})
        import tempfile
        tempfile.tempdir = scratch
        sys.stdin = open(0, "r", encoding="utf-8", errors="replace", closefd=False)
        # as CPython sets up stdout on a pipe: text writes pass straight to the buffer (write_through), so
        # print() and sys.stdout.buffer.write() come out in the order the program made them
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stdout.reconfigure(write_through=True)
        sys.set_int_max_str_digits(0)  # no 4,300-digit cap on int <-> str: a program prints its big integers
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.argv = ["program"]
    except BaseException:
        os._exit(SETUP_EXIT)
    code = 0
    try:
        exec(compile(job["program"], "<program>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except MemoryError:
        code = MEMORY_EXIT
    except BaseException as error:
        try:
            import traceback
            tb = error.__traceback__
            traceback.print_exception(type(error), error, tb.tb_next if tb else None)  # not this frame
        except BaseException:
            pass
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except MemoryError:
            code = code or MEMORY_EXIT
        except BaseException:
            code = code or 1
    os._exit(code & 0xFF)


class Worker:
    """Runs jobs for the pool: one at a time, each in a forked child as ``uid``, scratch under ``root``."""

    def __init__(self, uid: int, root: str, pool_fd: int = -1) -> None:
        self.uid = uid
        self.root = root
        self.pool_fd = pool_fd
        """The pipe from the pool: watched during a run, so a pool that dies ends the run and the worker at once."""
        self.count = 0

    def run(self, job: dict) -> dict:
        """Run one job (keys: program, stdin, timeout_s, cpu_s, memory_bytes, max_processes, max_file_bytes,
        max_output_bytes) and return the raw facts of how it ended."""
        self.count += 1
        scratch = os.path.join(self.root, f"run-{self.count}")
        os.mkdir(scratch, 0o700)
        os.chown(scratch, self.uid, self.uid)
        stdin_fd = os.memfd_create("stdin")
        data = job["stdin"].encode("utf-8", "surrogateescape")
        view = memoryview(data)
        while view:
            view = view[os.write(stdin_fd, view):]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(job, scratch, stdin_fd, out_w, err_w, self.uid)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first, or has already exited
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        cap = job["max_output_bytes"]
        streams = {out_r: bytearray(), err_r: bytearray()}
        names = {out_r: "stdout", err_r: "stderr"}
        poller = select.poll()
        for fd in (out_r, err_r, pidfd):
            poller.register(fd, select.POLLIN)
        if self.pool_fd >= 0:
            poller.register(self.pool_fd, 0)  # POLLHUP/POLLERR only: the pool's end closed
        deadline = start + job["timeout_s"]
        timed_out = False
        exceeded: str | None = None
        open_fds = {out_r, err_r}
        exited = False
        usage = RunUsage(self.uid)
        while not exited and exceeded is None and not usage.over(job["memory_bytes"]):
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            usage.sample(job["max_processes"], job["memory_bytes"])
            for fd, _ in poller.poll(min(WATCH_MS, max(1, int(left * 1000) + 1))):
                if fd == self.pool_fd:
                    os.killpg(pid, signal.SIGKILL)
                    kill_uid(self.uid)
                    os._exit(3)  # the pool is gone: nobody will read the result
                if fd == pidfd:
                    exited = True
                elif fd in open_fds:
                    chunk = os.read(fd, CHUNK)
                    if not chunk:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    streams[fd] += chunk
                    if len(streams[fd]) > cap:
                        exceeded = names[fd]
        end = time.monotonic()
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, _ = os.wait4(pid, 0)
        _end_descendants(self.uid)
        os.close(pidfd)
        for fd in (out_r, err_r):
            while fd in open_fds and len(streams[fd]) <= cap:
                chunk = os.read(fd, CHUNK)  # every writer is dead: this ends
                if not chunk:
                    break
                streams[fd] += chunk
            os.close(fd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        shutil.rmtree(scratch, ignore_errors=True)
        truncated = {name: len(streams[fd]) > cap for fd, name in names.items()}
        return {
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "timed_out": timed_out,
            "output_exceeded": exceeded,
            "wall_s": end - start,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "stdout": bytes(streams[out_r][:cap]).decode("utf-8", "replace"),
            "stderr": bytes(streams[err_r][:cap]).decode("utf-8", "replace"),
            "stdout_truncated": truncated["stdout"],
            "stderr_truncated": truncated["stderr"],
            "scratch_left": os.path.exists(scratch),
            "memory_exceeded": usage.over(job["memory_bytes"]),
            "peak_memory_bytes": usage.peak_bytes,
            "process_limit_hit": usage.limit_hit,
        }


class RunUsage:
    """The memory and process count of one run, sampled from /proc: the processes whose owner is the
    run's uid (inside bubblewrap's PID namespace only the run's own; in fork isolation /proc is the
    host's, and the uid is still the run's alone). Memory is the sum of their resident sets (cheap, from
    /proc/<pid>/stat), and when that passes the limit, the sum of their proportional sets (Pss from
    /proc/<pid>/smaps_rollup: pages shared copy-on-write after a fork counted once, not once per process).
    ``peak_bytes`` is the largest sum seen; ``limit_hit`` whether their processes and threads together
    reached the process limit."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self.peak_bytes = 0
        self.limit_hit = False

    def sample(self, max_processes: int, limit_bytes: int) -> None:
        """One sample of the run's memory in bytes (``peak_bytes`` keeps the largest) and its tasks."""
        total = tasks = 0
        pids = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != self.uid:
                    continue
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # exited meanwhile
            tasks += int(fields[17])  # num_threads (field 20 of proc(5), counted after the name)
            total += int(fields[21]) * PAGE  # rss in pages (field 24)
            pids.append(entry.name)
        if total > limit_bytes:
            total = sum(_pss_bytes(pid) for pid in pids)
        self.peak_bytes = max(self.peak_bytes, total)
        self.limit_hit = self.limit_hit or tasks >= max_processes

    def over(self, limit_bytes: int) -> bool:
        """Has any sample passed ``limit_bytes``?"""
        return self.peak_bytes > limit_bytes


def _pss_bytes(pid: str) -> int:
    """The proportional set size of ``pid`` in bytes (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _end_descendants(uid: int) -> None:
    """After the run's first process is reaped: every process it left is a descendant of this worker, and
    as a child subreaper the worker is the parent of each one whose parent died, so "no child left" means
    "no descendant left". Zombies are reaped; if a live child remains, every process of ``uid`` is killed
    (the run's tree cannot be walked race-free while it forks) and all are reaped."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            kill_uid(uid)
            reap_all()
            return


def main(argv: list[str]) -> int:
    """Set up isolation, report ``{"ready": true}`` (or ``{"ready": false, "error": ...}``), then serve.
    ``worker.py --kill-uid UID`` only kills every process of UID (the pool's clean-up after a lost worker)."""
    if argv[1] == "--kill-uid":
        kill_uid(int(argv[2]))
        return 0
    settings = json.loads(argv[1])
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
        # glibc gives each thread that allocates an arena reserving 64 MiB of address space (up to 8 per
        # core): under RLIMIT_AS a program with a few dozen threads could not start them. Two arenas.
        _libc.mallopt(M_ARENA_MAX, 2)
        if settings["isolation"] == "fork":  # (bwrap's own --die-with-parent covers the other isolation)
            _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
            if os.getppid() != settings["pool_pid"]:
                raise RuntimeError("the pool exited before the worker started")
            isolate_fork(settings["scratch_bytes"])
        check_isolation(settings["host_netns"])
        root = "/tmp/scratch"
        os.makedirs(root, mode=0o711, exist_ok=True)
        os.chmod(root, 0o711)
        uid = settings["uid"]
        kill_uid(uid)  # processes left by an earlier worker of this uid that died
        reap_all()
        for name in PRELOAD:
            __import__(name)
    except Exception as error:  # start-up failure: reported to the pool, which refuses to start
        write_message(proto_out, {"ready": False, "error": f"{type(error).__name__}: {error}"})
        return 1
    write_message(proto_out, {"ready": True, "pid": os.getpid()})
    worker = Worker(uid, root, proto_in)
    while True:
        job = read_message(proto_in)
        if job is None:
            return 0
        try:
            reply = worker.run(job)
        except Exception as error:  # a fault of the worker, not of the program: the pool replaces it
            write_message(proto_out, {"fault": f"{type(error).__name__}: {error}"})
            return 1
        write_message(proto_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
