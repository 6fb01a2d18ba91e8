import ctypes
import os
import shutil

_PREFIX = "."
_SUFFIX = ".partial-"


class AtomicFolder:
    """A folder written under a temporary name beside its target, and put
    in place whole.

    `keras-txl train`, `convert` and `export` write their output through
    one: every file goes into `path`, a hidden folder beside `target`
    (`.NAME.partial-PID`), and `commit()` puts it in place in one step:
    a rename when `target` does not exist, else an exchange of the two
    folders (`renameat2(RENAME_EXCHANGE)` on Linux; elsewhere two renames,
    the old folder first) and the old one is deleted. Until then `target`
    is untouched, and `discard()` (or an exception in a `with` block)
    removes the temporary folder and the parent folders it had to create:
    the file system is left as it was found.

    A folder of a process that died before its commit (killed) is removed
    by the next `AtomicFolder` of the same target.

    Args:
        target: the folder to write.
        in_place: bool. Write `target` itself (it exists already: a resumed
            run), `commit()` and `discard()` do nothing to it.

    Example:

    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "runs", "x")
    >>> with AtomicFolder(target) as folder:
    ...     _ = open(os.path.join(folder.path, "a.txt"), "w").write("a")
    ...     os.path.exists(target)
    False
    >>> os.listdir(target)
    ['a.txt']
    """

    def __init__(self, target, in_place=False):
        self.target = os.path.abspath(os.fspath(target))
        self.in_place = bool(in_place)
        self.committed = self.in_place
        if self.in_place:
            self.path = self.target
            self._created = None
            return
        parent, name = os.path.split(self.target)
        self._created = _first_missing(parent)
        os.makedirs(parent, exist_ok=True)
        _remove_abandoned(parent, name)
        staging = f"{_PREFIX}{name}{_SUFFIX}{os.getpid()}"
        self.path = os.path.join(parent, staging)
        shutil.rmtree(self.path, ignore_errors=True)
        os.mkdir(self.path)

    def join(self, *names):
        """`os.path.join(self.path, *names)`: where to write now."""
        return os.path.join(self.path, *names)

    def commit(self):
        """Puts the folder in place of `target` (once; later calls do
        nothing). Returns `target`."""
        if not self.committed:
            replace_folder(self.path, self.target)
            self.path = self.target
            self.committed = True
        return self.target

    def discard(self):
        """Removes the uncommitted folder and the parents it created."""
        if self.committed:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        if self._created is not None:
            folder = os.path.dirname(self.path)
            while True:
                try:
                    os.rmdir(folder)  # only while empty
                except OSError:
                    break
                if folder == self._created:
                    break
                folder = os.path.dirname(folder)
        self.committed = True  # nothing left to do

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is None:
            self.commit()
        else:
            self.discard()
        return False


def replace_folder(source, target):
    """Moves folder `source` to `target` in one step; an existing `target`
    is exchanged with it (atomically on Linux), then deleted."""
    if not os.path.lexists(target):
        os.rename(source, target)
        return
    if _exchange(source, target):
        shutil.rmtree(source)  # now the old folder
        return
    old = f"{source}.old"
    os.rename(target, old)
    os.rename(source, target)
    shutil.rmtree(old)


def _exchange(first, second):
    """Swaps two paths with Linux's `renameat2(RENAME_EXCHANGE)`; returns
    False where it is not available (other systems, old C libraries, file
    systems without it)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    status = renameat2(
        at_fdcwd,
        os.fsencode(first),
        at_fdcwd,
        os.fsencode(second),
        rename_exchange,
    )
    return status == 0


def _first_missing(folder):
    """The highest ancestor of `folder` (itself included) that does not
    exist, or `None`."""
    missing = None
    folder = os.path.abspath(folder)
    while not os.path.exists(folder):
        missing = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


def _remove_abandoned(parent, name):
    """Removes the temporary folders of `name` whose process is gone."""
    start = f"{_PREFIX}{name}{_SUFFIX}"
    for entry in os.listdir(parent):
        if not entry.startswith(start):
            continue
        pid = entry[len(start) :].split(".")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
