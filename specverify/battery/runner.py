"""The only place a subject's code runs: a child process that is killed when a call overruns.

A ``Runner`` forks one child per subject (``start_method="spawn"``, or the environment's
``SPECVERIFY_START_METHOD=spawn``, starts a fresh interpreter instead: CUDA cannot be initialised
in a forked child, so ``check --device cuda`` spawns; the subject must then be importable). The parent sends ``(task, args)`` messages; the child
runs ``task(subject, *args)`` and sends the result back. Tasks batch many sampler calls per
message (a whole enumeration, a look of the sequential test), so the overhead is a few
milliseconds per message, not per call.

It is over 700 lines because the child's side (its session, cgroup, streams, signals and reply
pipe) and the parent's side (the limit, the end of the subject's process tree, the capture file and
their cleanup) are one protocol over the same pipe, file and processes: split in two, each half
would read the other's private framing and leftovers.

What the child does never reaches the parent's process: its stdout and stderr (file descriptors 1
and 2, so C-level output too; Python's streams as UTF-8 whatever the locale) go to a capture file
shown as an excerpt; it ignores SIGINT (the parent owns Ctrl-C) and dies with its parent
(``PR_SET_PDEATHSIG`` on Linux). A call that does not answer within its limit is killed with
SIGKILL, whatever it is doing (a Python loop that swallows exceptions, an endless loop inside one C
call). An exit (``os._exit``), a signal (a segfault) or an out-of-memory kill of the child becomes
``SubjectFailed`` with a sentence that names it.

Nothing the subject starts outlives the check, whatever sessions or groups it made. The child
starts its own session (``os.setsid``, before the subject loads), so what the subject starts
shares its process group, which is SIGKILLed (``os.killpg``) when the runner ends the subject
(``close``, a limit, a crash, Ctrl-C, the finalizer). A process that leaves the group
(``start_new_session=True``, its own ``setsid``) is found by one of two mechanisms:

* a cgroup v2 leaf, where the machine lets this process make one below its own cgroup (root, or
  a delegated subtree such as a systemd user session): the child moves itself into it before the
  subject loads, so every process the subject starts is born inside, and ending the subject kills
  every member (``cgroup.kill``, Linux 5.14; before it, each member until none is left). This
  covers every case, the subject's own exit (``os._exit``, a crash) with a new-session child alive
  included. ``close`` removes the leaf; the leaves of a host killed outright (which runs no
  finalizer) are emptied and removed by the next runner made below the same cgroup
  (``remove_orphan_cgroups``).
* otherwise, the runner's own records on /proc: the child makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so a process orphaned below it (a ``setsid`` grandchild whose
  parent returned, a double fork) is reparented to the subject's process, not to init. Ending the
  subject stops (SIGSTOP) it and every descendant found through /proc's parent links, walking
  again until no new one appears (a stopped process cannot fork), then SIGKILLs them all. After
  every reply the runner records the subject's descendants (pid and start time, so that a reused
  pid is never killed; a /proc walk, a few milliseconds): they are what the subject's own exit
  hands over to init, and they are ended with it. Its limit: a process started and orphaned
  within one call by the subject's own exit (``os._exit`` or a crash before the reply) is not
  recorded and escapes, as does everything a host killed outright leaves (the subject dies with
  it, ``PR_SET_PDEATHSIG``, its new-session children do not).

Both are set before any subject code runs in the child, so no process escapes before them. This
is no sandbox: a subject with the rights to do so can move its processes to another cgroup, or
have a process outside its tree start one. Where there is no /proc, no ``prctl`` and no cgroup v2
(macOS), only the process group is killed. Under the subreaper, a process orphaned below the
subject stays a zombie of the subject's process until the subject ends (``os.wait`` in the
subject may reap one of them).

The capture file is deleted by ``close``, when the runner is collected, and at interpreter exit (a
``weakref.finalize``), so a crash or Ctrl-C leaves no ``specverify-subject-*.log`` either; a
host killed outright (SIGKILL, or SIGTERM where no handler is installed: a pytest run stopped by
``timeout``) runs no finalizer, so the next process to make a capture file deletes those whose
maker is gone (``remove_orphan_captures``).

The subject cannot signal the checker from Python: in its process ``os.kill``, ``os.killpg`` and
``signal.pidfd_send_signal`` raise PermissionError when aimed at the parent's process or process
group (or at every process, pid -1), so ``os.kill(os.getppid(), signal.SIGINT)`` is the subject's
exception, a contract finding, never an "interrupted" check. This is a guard on Python's calls, not
a sandbox: native code calling kill(2) itself, or a ``kill`` command run by the subject, is not
blocked.

A daemonic process (a ``multiprocessing.Pool`` worker) cannot have children: ``start`` says so
with a RuntimeError instead of multiprocessing's "can only join a started process".

Tasks must convert the subject's own exceptions, ``SystemExit`` and ``KeyboardInterrupt``
included, into their results (see interfaces.round_tasks.guarded); an exception that escapes a task is a bug
of ours and is raised in the parent as ``RunnerError`` with the child's traceback.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import multiprocessing
import operator
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler

from ..common.validation import check_positive_real

OUTPUT_EXCERPT_CHARS = 2000
"""How much of the subject's captured stdout/stderr reports show (its head and its tail)."""

MAX_MESSAGE_BYTES = 1 << 31
"""The largest reply read from a subject's process (a forged length header beyond it is a failure)."""

KILL_MARGIN_S = 1.0
"""Added to every call's limit before the child is killed (fork, pickling, a loaded machine)."""

CGROUP_DRAIN_S = 2.0
"""How long ending a subject waits for its killed cgroup members to exit before removing the leaf."""

STOP_ROUNDS = 100
"""The most /proc walks that stopping a subject's tree makes (each stops what the last one found)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
IN_SUBJECT_PROCESS = False
"""True in a subject's process: a KeyboardInterrupt there is the subject's (SIGINT is ignored)."""
_LIVE: weakref.WeakSet[Runner] = weakref.WeakSet()
DAEMONIC_MESSAGE = (
    "specverify.check cannot run inside a daemonic process (e.g. a multiprocessing.Pool worker): "
    "its subject runs in a child process; use concurrent.futures.ProcessPoolExecutor or run it in "
    "the main process"
)


class SubjectFailed(Exception):
    """The subject's process ended a call abnormally; the message says how."""


class RunnerError(RuntimeError):
    """A task raised in the child: a bug of specverify's, not the subject's."""


def describe_exit(exitcode: int | None) -> str:
    """A sentence for how the child ended: an exit code, or the signal that killed it."""
    if exitcode is None:
        return "its process stopped answering"
    if exitcode >= 0:
        return f"its process exited with code {exitcode} during a call (os._exit or a C-level exit)"
    sig = -exitcode
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    if sig == signal.SIGKILL:
        return f"its process was killed by {name} (out of memory?)"
    return f"its process was killed by {name}"


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(2) through libc; False where it failed or there is none (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value) == 0
    except (OSError, AttributeError):
        return False


def _die_with_parent(parent_pid: int) -> None:
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))  # not Linux: the child still exits on EOF from the parent
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def _join_cgroup(leaf: str | None) -> bool:
    """In the subject's process: move into the cgroup ``leaf`` (so is everything it starts after);
    False when there is none or the machine refuses."""
    if leaf is None:
        return False
    try:
        with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        return True
    except OSError:
        return False


def _keep_orphans() -> None:
    """In the subject's process: become a child subreaper (Linux), so that a process orphaned
    below it (a ``setsid`` grandchild whose parent returned) is reparented to it, not to init,
    and stays in the tree the runner walks on /proc."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _refuse_to_signal_the_checker() -> None:
    raise PermissionError(errno.EPERM, "specverify: a subject may not signal the checker's process")


def _guard_signals(parent_pid: int, parent_pgid: int) -> None:
    """In the subject's process: Python's ways to send a signal refuse the parent's pid, its
    process group and pid -1 (every process) with PermissionError. ``os.getppid`` is left as it
    is (a made-up answer could aim the subject's kill at an innocent process). Native code that
    calls kill(2) itself is not blocked: this guards the subject's Python, it is no sandbox.
    ``signal.pthread_kill`` needs no guard: it reaches only threads of the subject's own process."""
    real_kill, real_killpg = os.kill, os.killpg

    def kill(pid, sig, /):
        target = operator.index(pid)
        if target in (parent_pid, -1, -parent_pgid):
            _refuse_to_signal_the_checker()
        return real_kill(pid, sig)

    def killpg(pgid, sig, /):
        if operator.index(pgid) == parent_pgid:
            _refuse_to_signal_the_checker()
        return real_killpg(pgid, sig)

    kill.__doc__, killpg.__doc__ = real_kill.__doc__, real_killpg.__doc__
    os.kill, os.killpg = kill, killpg
    real_pidfd_send_signal = getattr(signal, "pidfd_send_signal", None)
    if real_pidfd_send_signal is not None:

        def pidfd_send_signal(pidfd, sig, *args, **kwargs):
            if _pidfd_target(pidfd) == parent_pid:
                _refuse_to_signal_the_checker()
            return real_pidfd_send_signal(pidfd, sig, *args, **kwargs)

        signal.pidfd_send_signal = pidfd_send_signal


def _pidfd_target(pidfd) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{operator.index(pidfd)}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, TypeError):
        pass
    return None


def _own_session() -> None:
    """The child leads a new session and process group (its id: the child's pid), so everything
    the subject starts can be killed with it (``os.killpg``)."""
    try:
        os.setsid()
    except OSError:  # already a group leader: cannot happen in a fresh child
        pass


def _utf8_streams() -> None:
    """Python's stdout and stderr as UTF-8 on file descriptors 1 and 2 (the capture file), line
    buffered: a print of "é" works under LC_ALL=C, and what was printed is there when read."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        try:
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False))
        except (OSError, ValueError):
            pass


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the subject may have replaced or closed them
            pass


def _child_main(
    conn, parents_end, parent_pid: int, load: Callable[[], Callable], capture_path: str, leaf: str | None
) -> None:
    global IN_SUBJECT_PROCESS
    IN_SUBJECT_PROCESS = True
    parent_pgid = os.getpgrp()  # inherited from the parent, read before leaving it
    _own_session()
    if not _join_cgroup(leaf):
        _keep_orphans()
    parents_end.close()  # so that the parent's death is an EOF here
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the checker's handler (sigterm_as_interrupt)
    fd = os.open(capture_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _utf8_streams()
    _guard_signals(parent_pid, parent_pgid)
    if "torch" in sys.modules:  # a forked OpenMP pool can deadlock; one thread is enough here
        sys.modules["torch"].set_num_threads(1)
    try:
        subject = load()
    except BaseException as exc:  # noqa: BLE001 - whatever the import does is reported
        _flush_streams()
        conn.send(
            (
                "load-failed",
                exc if isinstance(exc, Exception) and _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"),
            )
        )
        os._exit(0)
    _flush_streams()
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if message is None:
            os._exit(0)
        task, args = message
        try:
            reply = ("ok", task(subject, *args))
        except BaseException:  # noqa: BLE001 - a task escaped: ours, reported with its traceback
            reply = ("error", traceback.format_exc())
        _flush_streams()
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result is ours as well
            conn.send(("error", f"result of {getattr(task, '__name__', task)} not picklable: {exc}"))


def _exception_text(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:200]
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def _picklable(exc: BaseException) -> bool:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return True
    except Exception:  # noqa: BLE001
        return False


# -- the subject's process tree ------------------------------------------------------------------


def _read_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (the last ')': a name may hold spaces
    and parentheses), the state first; None when the process is gone or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), a zombie's too: with the pid, an
    identity no later process has. None when it is gone."""
    fields = _read_stat(pid)
    return int(fields[19]) if fields is not None else None


def _process_table() -> dict[int, tuple[int, int]]:
    """Every live process on /proc, zombies left out: pid -> (parent's pid, start time). Empty
    where there is no /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    table = {}
    for name in names:
        fields = _read_stat(int(name)) if name.isdigit() else None
        if fields is not None and fields[0] not in (b"Z", b"X", b"x"):
            table[int(name)] = (int(fields[1]), int(fields[19]))
    return table


def _descendants(table: dict[int, tuple[int, int]], roots: set[int]) -> set[int]:
    """The pids in ``table`` below any of ``roots`` (children, their children, ...), roots left out."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    frontier = list(roots)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found and child not in roots:
                found.add(child)
                frontier.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _unescape_mount_path(text: str) -> str:
    """A path of /proc/self/mountinfo, whose spaces and the like are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _cgroup2_mount() -> tuple[str, str] | None:
    """(the root it shows, where it is mounted) of the cgroup v2 hierarchy; None without one."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mount, _, kind = line.partition(" - ")
                fields = mount.split()
                if kind.split()[:1] == ["cgroup2"] and len(fields) >= 5:
                    return _unescape_mount_path(fields[3]), _unescape_mount_path(fields[4])
    except OSError:
        pass
    return None


def own_cgroup() -> str | None:
    """The folder of this process's cgroup v2 (where the runner makes its leaves); None where
    there is none this process can see."""
    mount = _cgroup2_mount()
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line[3:].rstrip("\n") for line in f if line.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or path is None:
        return None
    root, point = mount
    if not path.startswith(root):
        return None
    folder = os.path.join(point, path[len(root) :].lstrip("/"))
    return folder if os.path.isdir(folder) else None


def cgroup_prefix(pid: int) -> str:
    """The name every cgroup leaf made by process ``pid`` starts with (below its own cgroup)."""
    return f"specverify-subject-{pid}-"


_LEAF_NUMBERS = itertools.count()


def _new_cgroup_leaf() -> str | None:
    """A new, empty cgroup below this process's own, for one subject; None where the machine does
    not allow one (no cgroup v2, no right to write there). Sweeps the orphans first."""
    home = own_cgroup()
    if home is None:
        return None
    remove_orphan_cgroups(home)
    leaf = os.path.join(home, f"{cgroup_prefix(os.getpid())}{next(_LEAF_NUMBERS)}")
    try:
        os.mkdir(leaf)
    except OSError:
        return None
    return leaf


def _cgroup_members(leaf: str) -> set[int]:
    try:
        with open(os.path.join(leaf, "cgroup.procs")) as f:
            return {int(line) for line in f if line.strip()}
    except (OSError, ValueError):
        return set()


def _kill_cgroup(leaf: str) -> None:
    """SIGKILL every process in the cgroup ``leaf`` and below it: ``cgroup.kill`` (Linux 5.14),
    or before it each member in turn until none is left or ``CGROUP_DRAIN_S`` passed."""
    try:
        with open(os.path.join(leaf, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    deadline = time.monotonic() + CGROUP_DRAIN_S
    while time.monotonic() < deadline:
        members = set().union(*(_cgroup_members(folder) for folder, _, _ in os.walk(leaf)))
        if not members:
            return
        for pid in members:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)


def _remove_cgroup(leaf: str) -> None:
    """Kill what is in the cgroup ``leaf``, wait up to ``CGROUP_DRAIN_S`` for it to exit (a zombie
    does not count), then remove the leaf and any cgroup the subject made below it."""
    _kill_cgroup(leaf)
    deadline = time.monotonic() + CGROUP_DRAIN_S
    while any(_cgroup_members(folder) for folder, _, _ in os.walk(leaf)) and time.monotonic() < deadline:
        time.sleep(0.01)
    for folder, _, _ in os.walk(leaf, topdown=False):
        try:
            os.rmdir(folder)
        except OSError:
            pass


_CGROUPS_SWEPT: set[int] = set()
"""The processes that have swept their cgroup for orphan leaves (``remove_orphan_cgroups``)."""


def remove_orphan_cgroups(home: str) -> list[str]:
    """Kill the processes in, and remove, the leaves below the cgroup ``home`` whose maker is no
    longer running (a host killed outright runs no finalizer, and a subject's new-session children
    outlive it there); returns their paths. Done once per process, when it makes its first leaf."""
    if os.getpid() in _CGROUPS_SWEPT:
        return []
    _CGROUPS_SWEPT.add(os.getpid())
    head = cgroup_prefix(0)[:-2]  # "specverify-subject-"
    try:
        names = [n for n in os.listdir(home) if n.startswith(head)]
    except OSError:
        return []
    removed = []
    for name in names:
        maker = name[len(head) :].split("-", 1)[0]
        if maker.isdigit() and _maker_gone(int(maker)):
            _remove_cgroup(os.path.join(home, name))
            if not os.path.exists(os.path.join(home, name)):
                removed.append(os.path.join(home, name))
    return removed


class _SubjectTree:
    """Every process a subject started, whatever sessions or groups they made, so that all of
    them end with it: its cgroup leaf where the machine allows one, its process group, and
    otherwise its descendants on /proc and the runner's records of them (see the module's
    docstring). Only the process that made it ends it."""

    def __init__(self):
        self.owner = os.getpid()
        self.leaf: str | None = None
        self.root: int | None = None  # the subject's process, which leads its process group
        self.root_start: int | None = None
        self.contained: bool | None = None  # the subject's process is in the leaf (None: not asked)
        self.records: dict[int, int] = {}  # pid -> start time of the descendants seen

    def leaf_for_child(self) -> str | None:
        """The cgroup leaf the next child joins (made when there is none); None without cgroups."""
        if self.leaf is None or not os.path.isdir(self.leaf):
            self.leaf = _new_cgroup_leaf()
        return self.leaf

    def adopt(self, pid: int) -> None:
        """The subject's process is ``pid`` (just started, so not reaped yet)."""
        self.root, self.root_start = pid, _start_time(pid)
        self.contained, self.records = None, {}

    @property
    def mechanism(self) -> str | None:
        """ "cgroup" or "/proc" (records and walks): how the subject's tree is found; None before
        the subject started."""
        if self.root is None:
            return None
        if self.contained is None:
            self.contained = self.leaf is not None and self.root in _cgroup_members(self.leaf)
        return "cgroup" if self.contained else "/proc"

    def record(self) -> None:
        """Without a cgroup: note the subject's descendants now, forget the recorded ones gone,
        so that those the subject's own exit hands over to init are still ended with it."""
        if self.mechanism != "/proc":
            return
        table = _process_table()
        self.records = {pid: start for pid, start in self.records.items() if table.get(pid, (0, None))[1] == start}
        for pid in _descendants(table, self._live_roots(table)):
            self.records[pid] = table[pid][1]

    def _live_roots(self, table: dict[int, tuple[int, int]]) -> set[int]:
        """The subject's process and the recorded ones, those still running as the same process."""
        owned = dict(self.records)
        if self.root is not None:
            owned[self.root] = self.root_start
        return {pid for pid, start in owned.items() if table.get(pid, (0, None))[1] == start}

    def _stop_all(self) -> set[int]:
        """SIGSTOP the subject's process, the recorded ones and all their descendants, walking /proc
        again until no new one appears (a stopped process cannot fork); returns their pids."""
        stopped: set[int] = set()
        for _ in range(STOP_ROUNDS):
            table = _process_table()
            roots = self._live_roots(table)
            new = (roots | _descendants(table, roots | stopped)) - stopped
            if not new:
                break
            for pid in new:
                _signal(pid, signal.SIGSTOP)
            stopped |= new
        return stopped

    def _kill_group(self) -> None:
        """SIGKILL the subject's process group, unless its pid (the group's id) now names another
        process: while the subject is not reaped, or a member is left, the id is still ours."""
        start = _start_time(self.root)
        if start is not None and start != self.root_start:
            return
        try:
            os.killpg(self.root, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # gone, or the child never led it
            pass

    def end(self) -> None:
        """SIGKILL every process the subject started, and its own: the cgroup's members, the
        stopped tree on /proc, the process group. Best called before the subject's process is
        reaped. The leaf stays, for the next child."""
        if os.getpid() != self.owner:
            return
        if self.leaf is not None:
            _kill_cgroup(self.leaf)
        if self.root is not None:
            for pid in self._stop_all():
                _signal(pid, signal.SIGKILL)
            self._kill_group()
        self.root = self.root_start = self.contained = None
        self.records = {}

    def remove(self) -> None:
        """End the tree and remove the cgroup leaf."""
        self.end()
        if self.leaf is not None and os.getpid() == self.owner:
            _remove_cgroup(self.leaf)
            self.leaf = None


class _Leftovers:
    """What a Runner may leave on the machine: its capture file and its subject's process tree.
    Held apart from the Runner so that a ``weakref.finalize`` can release them when the Runner is
    collected or the interpreter exits; only the process that made them releases them (a subject
    that forks and exits normally runs the inherited exit handlers)."""

    def __init__(self):
        self.owner = os.getpid()
        self.capture_path: str | None = None
        self.tree = _SubjectTree()

    def capture(self) -> str:
        if self.capture_path is None or not os.path.exists(self.capture_path):
            remove_orphan_captures()
            fd, self.capture_path = tempfile.mkstemp(prefix=capture_prefix(os.getpid()), suffix=".log")
            os.close(fd)
        return self.capture_path

    def remove_capture(self) -> None:
        if self.capture_path is not None and os.getpid() == self.owner:
            try:
                os.unlink(self.capture_path)
            except OSError:
                pass
            self.capture_path = None

    def release(self) -> None:
        self.tree.remove()
        self.remove_capture()


def capture_prefix(pid: int) -> str:
    """The name every capture file made by process ``pid`` starts with (in ``tempfile.gettempdir()``)."""
    return f"specverify-subject-{pid}-"


def remove_captures_of(pid: int) -> list[str]:
    """Delete the capture files process ``pid`` made and could not delete itself (it was killed
    with SIGKILL, which runs no finalizer); returns their paths. For a parent that kills its
    worker processes (the mutant report on Ctrl-C)."""
    folder, prefix = tempfile.gettempdir(), capture_prefix(pid)
    removed = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".log")]
    except OSError:
        return removed
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
            removed.append(os.path.join(folder, name))
        except OSError:
            pass
    return removed


_SWEPT: set[int] = set()
"""The processes that have swept the capture folder for orphans (``remove_orphan_captures``)."""


def remove_orphan_captures() -> list[str]:
    """Delete the capture files whose maker is no longer running (a host killed by SIGKILL or a
    default SIGTERM, e.g. a pytest run stopped by ``timeout``, which runs no finalizer); returns
    their paths. Done once per process, when it makes its first capture file: what one killed run
    leaves, the next one removes. A maker that cannot be asked (another user's process) counts as
    running; a file that cannot be deleted is left."""
    if os.getpid() in _SWEPT:
        return []
    _SWEPT.add(os.getpid())
    folder, head = tempfile.gettempdir(), capture_prefix(0)[:-2]  # "specverify-subject-"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    makers = {
        int(pid)
        for pid in (n[len(head) :].split("-", 1)[0] for n in names if n.startswith(head) and n.endswith(".log"))
        if pid.isdigit()
    }
    removed = []
    for pid in sorted(makers):
        if _maker_gone(pid):
            removed += remove_captures_of(pid)
    return removed


def _maker_gone(pid: int) -> bool:
    """Process ``pid`` is no longer running (one that cannot be asked, another user's, runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        pass
    return False


class Runner:
    """One subject in one child process; ``call`` runs a task on it within a limit.

    ``load`` runs in the child and returns the subject (a callable); ``Runner.for_callable(fn)``
    hands a function over by fork. ``start()`` returns after the subject loaded, or raises the
    exception ``load`` raised (an import error, a usage error) or ``SubjectFailed`` when the child
    died loading it. After ``SubjectFailed`` the next ``call`` starts a fresh child (the capture
    file is kept: the output excerpt covers every child). ``close()`` ends the subject's process
    tree (whatever sessions or groups its processes made) and deletes the capture file and the
    cgroup leaf; read ``output_excerpt()`` before it.
    """

    def __init__(self, load: Callable[[], Callable], load_limit: float = 120.0, start_method: str | None = None):
        self._load = load
        self._load_limit = check_positive_real("load_limit", load_limit)
        method = start_method or os.environ.get("SPECVERIFY_START_METHOD") or "fork"
        if method not in ("fork", "spawn"):
            raise ValueError(f"start_method: must be fork or spawn, got {method!r}")
        self.start_method = method
        self._process = None
        self._conn = None
        self._leftovers = _Leftovers()
        self._finalizer = weakref.finalize(self, self._leftovers.release)

    @property
    def capture_path(self) -> str | None:
        """The file the subject's stdout and stderr go to (None before ``start`` and after ``close``)."""
        return self._leftovers.capture_path

    @property
    def containment(self) -> str | None:
        """How the subject's processes are found when it ends: "cgroup" (its cgroup v2 leaf) or
        "/proc" (its descendants and the runner's records of them); None when no subject runs."""
        return self._leftovers.tree.mechanism

    @classmethod
    def for_callable(cls, fn: Callable) -> Runner:
        return cls(_Constant(fn))

    def clone(self) -> Runner:
        """A new, unstarted Runner of the same subject, loaded the same way."""
        return type(self)(self._load, self._load_limit, self.start_method)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> Runner:
        if multiprocessing.current_process().daemon:
            raise RuntimeError(DAEMONIC_MESSAGE)
        ctx = multiprocessing.get_context(self.start_method)
        parent, child = ctx.Pipe()
        capture = self._leftovers.capture()
        leaf = self._leftovers.tree.leaf_for_child()
        self._process = ctx.Process(
            target=_child_main,
            args=(child, parent, os.getpid(), self._load, capture, leaf),
            daemon=True,
            name="specverify-subject",
        )
        try:
            self._process.start()
        finally:
            child.close()
        self._leftovers.tree.adopt(self._process.pid)  # it leads its own group (os.setsid)
        self._conn = parent
        _LIVE.add(self)
        status, value = self._receive(self._load_limit, "loading the subject")
        if status == "load-failed":
            self.kill()
            raise value
        return self

    def kill(self) -> None:
        """SIGKILL the child and every process it started (its process tree, see the module's
        docstring) and reap the child; the capture file and the cgroup leaf stay (a later
        ``call`` starts a fresh child)."""
        process = self._process
        if process is not None:
            self._leftovers.tree.end()  # before reaping: the child's pid and group id are still ours
            if process.is_alive():  # it had not led its group yet
                process.kill()
            process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        """Kill the subject's process tree, delete the capture file and remove the cgroup leaf.
        (The child has nothing to save on an orderly exit, it would ``os._exit``; what it started
        must go in any case.)"""
        self.kill()
        self._leftovers.release()

    def __enter__(self) -> Runner:
        return self.start() if self._process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------------------------
    def call(self, task: Callable, *args, limit: float):
        """``task(subject, *args)`` in the child; SubjectFailed when it overruns ``limit`` s
        (plus ``KILL_MARGIN_S``) or the child dies; RunnerError when the task itself raised."""
        if self._process is None or not self._process.is_alive():
            self.kill()
            self.start()
        self._conn.send((task, args))
        status, value = self._receive(limit + KILL_MARGIN_S, "a call")
        if status == "error":
            raise RunnerError(f"{getattr(task, '__name__', task)} failed in the subject's process:\n{value}")
        return value

    def _receive(self, limit: float, what: str):
        if not self._conn.poll(limit):
            self.kill()
            raise SubjectFailed(f"{what} did not return within {limit:g} s; its process was killed")
        data = self._read_message(limit)
        try:
            status, value = ForkingPickler.loads(data)
        except Exception as exc:  # noqa: BLE001 - bytes the subject wrote onto our pipe
            self.kill()
            raise SubjectFailed(
                f"{what} returned bytes that are not a reply of specverify's "
                f"({_exception_text(exc)}): the subject wrote onto the result pipe; "
                f"its process was killed"
            ) from None
        self._leftovers.tree.record()
        return status, value

    def _read_message(self, limit: float) -> bytes:
        """One whole message from the child, within ``limit`` s once its first bytes arrived (a
        length header the subject forged could otherwise keep ``recv_bytes`` waiting forever) and
        at most ``MAX_MESSAGE_BYTES``; SubjectFailed when the child died, overran or lied."""
        box: dict = {}

        def read():
            try:
                box["data"] = self._conn.recv_bytes(MAX_MESSAGE_BYTES)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["error"] = exc

        reader = threading.Thread(target=read, daemon=True, name="specverify-receive")
        reader.start()
        reader.join(limit)
        if reader.is_alive():  # a message that never ends: kill the writer, which ends the read
            self.kill()
            reader.join(5)
            raise SubjectFailed(f"a reply did not arrive whole within {limit:g} s; its process was killed")
        error = box.get("error")
        if error is None:
            return box["data"]
        if isinstance(error, EOFError) or (isinstance(error, OSError) and "bad message length" not in str(error)):
            process = self._process
            exited = _wait_unreaped(process, 5)
            self.kill()  # ends its tree while its pid is still ours, then reaps it
            raise SubjectFailed(describe_exit(process.exitcode if exited else None)) from None
        self.kill()
        raise SubjectFailed(
            f"the subject's process sent a malformed reply ({_exception_text(error)}); its process was killed"
        ) from None

    def output_excerpt(self, chars: int = OUTPUT_EXCERPT_CHARS) -> str:
        """What the subject printed (stdout and stderr together): the first and the last
        ``chars // 2`` characters when there is more."""
        if self.capture_path is None:
            return ""
        try:
            with open(self.capture_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if len(text) <= chars:
            return text
        return f"{text[: chars // 2]}\n[... {len(text) - chars} characters ...]\n{text[-(chars // 2) :]}"


def _wait_unreaped(process, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``process`` (a child) to end, leaving it unreaped where the
    platform allows (``os.waitid`` with WNOWAIT): a zombie keeps its pid and process group id from
    being reused while the runner ends its tree. Whether it ended."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        except (AttributeError, OSError):  # no waitid: reap it
            process.join(max(0.0, deadline - time.monotonic()))
            return process.exitcode is not None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class _Constant:
    """``load`` for a subject handed over by fork."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self) -> Callable:
        return self.fn


class Terminated(KeyboardInterrupt):
    """SIGTERM received by the checker, raised where it is, so that it stops as on Ctrl-C: the
    subjects' process trees killed, capture files deleted, finished verdicts reported (exit 143)."""


def how_stopped(stop: KeyboardInterrupt) -> tuple[str, int]:
    """The words and exit code for a command stopped by ``stop``: ("terminated (SIGTERM)", 143)
    for ``Terminated``, ("interrupted", 130) for Ctrl-C."""
    from ..common.command_line import EXIT_INTERRUPTED, EXIT_TERMINATED

    if isinstance(stop, Terminated):
        return "terminated (SIGTERM)", EXIT_TERMINATED
    return "interrupted", EXIT_INTERRUPTED


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread
    instead of ending the process at once (which would leave the subject's children and capture
    file behind). Does nothing outside the main thread, where signals cannot be handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def kill_all() -> None:
    """Kill every live subject process (Ctrl-C: the parent stops within a second or two)."""
    for runner in list(_LIVE):
        runner.kill()


__all__ = [
    "Runner",
    "RunnerError",
    "SubjectFailed",
    "Terminated",
    "capture_prefix",
    "cgroup_prefix",
    "own_cgroup",
    "remove_orphan_cgroups",
    "remove_orphan_captures",
    "how_stopped",
    "sigterm_as_interrupt",
    "describe_exit",
    "kill_all",
    "remove_captures_of",
]
