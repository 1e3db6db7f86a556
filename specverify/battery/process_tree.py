"""Ending a subject's whole process tree: a cgroup v2 leaf where the machine allows one, else a
child subreaper and the /proc tree.

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

Contract: the subject's process calls ``own_session``, then ``join_cgroup(leaf)`` (or, where that
fails, ``keep_orphans``) and ``die_with_parent`` before any subject code runs; the parent holds a
``SubjectTree``: ``leaf_for_child`` before starting the child, ``adopt(pid)`` after, ``record``
after every reply, ``end`` to kill the tree (best before the child is reaped) and ``remove`` to
kill it and remove the leaf. Only the process that made a ``SubjectTree`` ends it.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import signal
import time

CGROUP_DRAIN_S = 2.0
"""How long ending a subject waits for its killed cgroup members to exit before removing the leaf."""

STOP_ROUNDS = 100
"""The most /proc walks that stopping a subject's tree makes (each stops what the last one found)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(2) through libc; False where it failed or there is none (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int) -> None:
    """In the subject's process: be SIGKILLed when the parent ``parent_pid`` dies (Linux's
    ``PR_SET_PDEATHSIG``), and exit now if it already has."""
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))  # not Linux: the child still exits on EOF from the parent
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def join_cgroup(leaf: str | None) -> bool:
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


def keep_orphans() -> None:
    """In the subject's process: become a child subreaper (Linux), so that a process orphaned
    below it (a ``setsid`` grandchild whose parent returned) is reparented to it, not to init,
    and stays in the tree the runner walks on /proc."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def own_session() -> None:
    """The child leads a new session and process group (its id: the child's pid), so everything
    the subject starts can be killed with it (``os.killpg``)."""
    try:
        os.setsid()
    except OSError:  # already a group leader: cannot happen in a fresh child
        pass


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
        if maker.isdigit() and process_gone(int(maker)):
            _remove_cgroup(os.path.join(home, name))
            if not os.path.exists(os.path.join(home, name)):
                removed.append(os.path.join(home, name))
    return removed


class SubjectTree:
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
        owned: dict[int, int | None] = dict(self.records)
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
        root = self.root
        assert root is not None, "end() kills the group only of a started subject"
        start = _start_time(root)
        if start is not None and start != self.root_start:
            return
        try:
            os.killpg(root, signal.SIGKILL)
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


def process_gone(pid: int) -> bool:
    """Process ``pid`` is no longer running (one that cannot be asked, another user's, runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        pass
    return False


__all__ = [
    "CGROUP_DRAIN_S",
    "STOP_ROUNDS",
    "SubjectTree",
    "cgroup_prefix",
    "die_with_parent",
    "join_cgroup",
    "keep_orphans",
    "own_cgroup",
    "own_session",
    "process_gone",
    "remove_orphan_cgroups",
]
