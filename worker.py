"""repl-mcp Python worker: one persistent namespace driven over newline-delimited JSON frames.

The protocol is described in docs/worker-protocol.md. Standard library only; CPython 3.10 and newer.
The server starts this file through a small bootstrap, but `python3 worker.py` works as well.

Sections, in file order (the first two run at import time, before anything else; start reading at
main() in the last section):

    Stream protection              fd 0 and fd 1 moved to private pipes before any other import
    SIGINT                         the interrupt gate: SIGINT stops the running cell and nothing else
    Remaining imports and limits   every bound the worker enforces
    Low-level helpers              fd writes, notes on fd 2, process exit, UTF-8 cutting
    Run identity                   the active run id, seen from any thread or task
    Frames to the server           one lock, whole frames, size-checked
    Output capture                 sys.stdout/sys.stderr budgets and coalesced output frames
    Commands from the server       who reads the command fd when, and the queue of cells
    Safe previews                  the trailing value as JSON without running user hooks
    Library previews               numpy, pandas and polars values by identity: shape, dtypes, edge rows
    Source history                 linecache entries for tracebacks and inspect.getsource()
    Error text                     bounded exception messages and tracebacks
    Child processes                tracked Popen, reaping, job frames for group leaders
    Default executor               the loop's executor, so a cell's leftover jobs are visible
    Cell-owned work                cancelling what a cell leaves behind
    sh()                           the shell helper
    pip_install()                  installs into exactly sys.executable, and what they changed
    Bridge calls                   the `mcp` helper: rpc frames to the server's broker
    Namespace inventory, ...       python_namespace, checkpoint() and restore()
    Notebook export                each run's outputs kept; export_notebook() as .ipynb or percent .py
    Cells                          compiling a cell; repairing process state between cells
    The session                    the namespace, loop and context; one result per run
    File runs                      python_run_file: __main__, argv, sys.path[0], exit status
    Kernel host                    the engine inside a Jupyter kernel: kernel_run(), comm frames out, stdin in
    Contained worker               under --sandbox: what a run was refused, for its result
    Entry point                    main()
"""

# =====================================================================================================
# Stream protection
#
# Done before any other import or setup: from here on nothing (an import-time warning, a C library,
# a child process, `input()`) can write into the frame pipe or read from the command pipe.
# =====================================================================================================
import os
import sys


def _protect_standard_streams():
    """Move the original stdin/stdout to private descriptors; return (command_fd, protocol_fd)."""
    try:
        os.fstat(2)
    except OSError:
        # A closed fd 2 would be handed out by the dup() calls below and then aliased onto fd 1.
        spare = os.open(os.devnull, os.O_WRONLY)
        if spare != 2:
            os.dup2(spare, 2)
            os.close(spare)
    command_fd = os.dup(0)
    protocol_fd = os.dup(1)  # os.dup() copies are not inherited by child processes
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # A parent may have left its end non-blocking; the frame code relies on blocking reads and writes.
    os.set_blocking(command_fd, True)
    os.set_blocking(protocol_fd, True)
    return command_fd, protocol_fd


# The worker proper runs as __main__ (the server's bootstrap). Imported as a module — by a host that
# brings its own transport (a Jupyter kernel), or by a test — it takes over nothing: no descriptor is
# moved and no signal handler installed; main() and these two blocks are the only process-wide setup.
WORKER_PROCESS = __name__ == "__main__"
COMMAND_FD = PROTOCOL_FD = None
if WORKER_PROCESS:
    try:
        COMMAND_FD, PROTOCOL_FD = _protect_standard_streams()
    except OSError:
        os._exit(2)


# =====================================================================================================
# SIGINT
#
# Installed right after stream protection so an early SIGINT cannot kill a starting worker. SIGINT
# means "stop the running cell" and nothing else: it is ignored between cells, and while the main
# thread is writing a frame it is deferred so a frame is never left half written.
# =====================================================================================================
import signal
import threading


class _InterruptGate:
    """Decides what a SIGINT does, and makes sure a cancel the server sent is never lost.

    The server cancels a run two ways: a `cancel` frame naming it (read by whichever thread reads the
    command fd, see "Commands from the server") and SIGINT to the worker's group. A SIGINT alone can
    arrive too early: while the run's frame is still being read or compiled, before the gate is armed,
    and would then be dropped. The frame closes that gap: the cancelled run id is remembered, so arming
    the gate for that run stops it before any of its code runs, and a run already armed is interrupted
    at once (the thread that read the frame sends SIGINT to the main thread).
    """

    def __init__(self):
        self.armed = None  # id of the run whose code is running, else None
        self._holds = 0
        self._deferred = False
        self._main_thread = None
        self._lock = threading.Lock()
        self._cancelled = None  # the last run the server cancelled
        self._kick = None  # the run a cancel frame sent SIGINT for, until the handler sees it
        self.wake_fd = None  # written when an interrupt is deferred, so a held wait can end at once
        self.preparing = None  # in a kernel: the run being set up, which an early interrupt is kept for

    def bind_main_thread(self):
        self._main_thread = threading.get_ident()

    def handler(self, signum, frame):
        # Runs on the main thread between bytecodes, maybe inside arm()/disarm(): it must not lock.
        kick, self._kick = self._kick, None
        if self.armed is None and self.preparing is not None:
            self._cancelled = self.preparing  # arm() raises for it
            return
        if self.armed is None or (kick is not None and kick != self.armed):
            return
        if self._holds:
            self._deferred = True
            if self.wake_fd is not None:
                try:
                    os.write(self.wake_fd, b"\0")
                except OSError:
                    pass  # full: a wake-up is pending already
            return
        raise KeyboardInterrupt

    def arm(self, run_id):
        with self._lock:
            self._deferred = False
            self.armed = run_id
            self._kick = None
            cancelled = self._cancelled == run_id
        if cancelled:
            raise KeyboardInterrupt

    def disarm(self):
        with self._lock:
            self.armed = None
            self._deferred = False

    def cancel(self, run_id):
        """Called by whichever thread read the server's cancel frame for `run_id`."""
        with self._lock:
            self._cancelled = run_id
            if self.armed != run_id or self._main_thread is None:
                return
            self._kick = run_id
        signal.pthread_kill(self._main_thread, signal.SIGINT)

    def hold(self, thread_id):
        """Defer SIGINT for a critical section; returns a token for release()."""
        if thread_id != self._main_thread:
            return False
        self._holds += 1
        return True

    def deferred(self):
        return self._deferred

    def release(self, token):
        if not token:
            return
        self._holds -= 1
        if not self._holds and self._deferred:
            self._deferred = False
            if self.armed is not None:
                raise KeyboardInterrupt


GATE = _InterruptGate()
SIGINT_HANDLER = GATE.handler  # one bound method, so a check by identity can tell it is still installed
if WORKER_PROCESS:
    signal.signal(signal.SIGINT, SIGINT_HANDLER)


# =====================================================================================================
# Remaining imports and limits
# =====================================================================================================
# asyncio (with concurrent.futures, logging and ssl behind it) is imported at first need, not here: it
# would double the worker's start-up time and memory. See "The event loop".
import _ast  # the node classes and compile flags; the ast module (Python helpers) is not needed per cell
import binascii
import builtins
import collections
import contextvars
import errno
import io
import itertools
import json
import _signal
import math
import select
import stat
import time
import types
import weakref

MAX_FRAME_BYTES = 1_048_576          # per line, newline included, both directions
MAX_PENDING_COMMANDS = 2             # commands allowed to wait behind a running cell
STREAM_BUDGET_BYTES = 50_000         # per stream per cell
OUTPUT_COALESCE_BYTES = 8_192
OUTPUT_FLUSH_DELAY = 0.05
PREVIEW_MAX_BYTES = 20_000
PREVIEW_MAX_NESTED_STR = 2_000
PREVIEW_MAX_ITEMS = 100
PREVIEW_MAX_NODES = 100
PREVIEW_MAX_DEPTH = 5
PREVIEW_MAX_INT_BITS = 4_096
ERROR_MAX_BYTES = 20_000
TRACEBACK_MAX_CHARS = 10_000
TRACEBACK_MAX_FRAMES = 20
MESSAGE_MAX_CHARS = 4_000
SOURCE_LINE_MAX_CHARS = 500
CANCEL_GRACE_SECONDS = 1.0           # how long an interrupted async cell may take to unwind
BACKGROUND_GRACE_SECONDS = 0.25      # how long cell-owned tasks, threads and executor jobs may take to end
FATAL_EXIT_STATUS = 70
SOURCE_FILE_MAX_BYTES = 262_144
SCRIPT_ARGV_MAX_ITEMS = 128
SCRIPT_ARGV_MAX_BYTES = 32_768
LIBRARY_EDGE_ITEMS = 5               # rows, and items of every array axis, shown from each end
LIBRARY_EDGE_COLUMNS = 10            # table columns shown from each end
LIBRARY_ARRAY_MAX_ITEMS = 200        # array elements one preview shows in all
LIBRARY_CELL_MAX_CHARS = 40          # one shown value or column name
LIBRARY_NESTED_ITEMS = 5             # items shown of a list, tuple or dict inside a cell
LIBRARY_NESTED_DEPTH = 2
LIBRARY_INT_MAX_BITS = 128           # a longer int in a cell is shown by its size (decimal digits cost)
VALUE_INFO_MAX_COLUMNS = 50          # columns value_info names
VALUE_INFO_NAME_MAX_CHARS = 200      # one column name or dtype in value_info
HISTORY_MAX_RUNS = 64
HISTORY_SOURCE_MAX_BYTES = 16_384    # one run's source, as a history request returns it
HISTORY_OUTPUT_MAX_BYTES = 4_096     # each of its outputs there
HISTORY_FRAME_BUDGET_BYTES = 524_288  # a history request's whole answer (characters)
HISTORY_MAX_WEIGHT = 1_048_576       # sum of sys.getsizeof of the retained sources
HISTORY_PREVIEW_MAX_NODES = 512
CHILD_POLL_INTERVAL = 0.05
EXECUTOR_MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
EXECUTOR_MAX_PENDING = 64
SH_MAX_ACTIVE = 64
SH_STREAM_BYTES = 50_000
SH_EXIT_CHECK_INTERVAL = 0.05        # while pipes stay open, how often sh() checks whether the shell ended
SH_DRAIN_GRACE = 0.5                 # after the group is killed, how long to wait for the pipes to close
INVENTORY_SCAN_LIMIT = 1_024
INVENTORY_MAX_ENTRIES = 512
INVENTORY_MAX_BYTES = 60_000
NAME_MAX_CHARS = 256
TYPE_NAME_MAX_CHARS = 128
CHECKPOINT_FORMAT = "repl-checkpoint-v1"
BRIDGE_MAX_PENDING = 64
BRIDGE_CALL_TIMEOUT = 120.0
BRIDGE_LIST_TIMEOUT = 30.0
BRIDGE_OPS_WAIT = 35.0
INPUT_PROMPT_MAX_CHARS = 2000
INPUT_ANSWER_MAX_CHARS = 65_536
BRIDGE_TIMEOUT_MIN = 0.01
BRIDGE_TIMEOUT_MAX = 3600.0
TOOL_ERROR_TEXT_MAX = 2_000
CHECKPOINT_MAX_BYTES = 262_144
CHECKPOINT_MAX_ENTRIES = 256
ARTIFACT_MAX_BYTES = 16_777_216
ARTIFACT_CHUNK_BYTES = 32_768
ARTIFACT_WINDOW = 8                  # upload appends in flight before the oldest answer is awaited
ARTIFACT_HANDOVER_MIN_BYTES = 262_144  # from this size, bytes go through a file the server adopts (Linux)
ARTIFACT_READ_MAX_BYTES = 65_536
ARTIFACT_JSON_MAX_DEPTH = 32
ARTIFACT_JSON_MAX_NODES = 100_000
ARTIFACT_ERROR_MAX_CHARS = 1_000
ARTIFACT_FORMATS = ("json", "text", "binary")
DISPLAYS_MAX_PER_RUN = 32            # displays sent per run; the server inlines at most 8 of them
DISPLAY_IMAGE_MAX_BYTES = 8_388_608  # one rendered image; larger ones are dropped with a note
DISPLAY_CHUNK_CHARS = 524_288        # base64 characters per display frame, well inside a frame
DISPLAY_TEXT_MAX_BYTES = 20_000      # a markdown display or a repr() fallback
FIGURE_DPI = 100
FIGURE_MAX_PIXELS = 2_000            # a figure's longer side is rendered at most this many pixels
NOTEBOOK_OUTPUTS_MAX_BYTES = 16_777_216  # outputs kept for export_notebook(), pictures included
PIP_INSTALL_TIMEOUT = 600.0          # pip_install()'s default timeout, seconds

REPL_FILENAME_PREFIX = "<repl:"
NAMESPACE_NAME = "__repl__"
STREAM_NAMES = ("stdout", "stderr")
HELPER_NAMES = (
    "sh", "checkpoint", "restore", "repl_history", "repl_source", "repl_namespace", "mcp", "display",
    "export_notebook", "pip_install",
)
# Never listed, checkpointed or restored. The last four are entries every module dict starts with: the
# namespace is a module's dict so that pickle can find what cells define, not because users set them.
RESERVED_NAMES = frozenset(
    HELPER_NAMES
    + ("mcp", "artifact", "artifact_read", "artifact_save", "artifact_forward", "artifact_delete")
    + ("__name__", "__file__", "__builtins__", "__repl_result__")
    + ("__doc__", "__package__", "__loader__", "__spec__")
)

MESSAGE_TASKS_REFUSED = "Background tasks refused cancellation; worker stopped and variables cleared"
MESSAGE_LEFT_THREADS = (
    "Cell left active background threads or executor work; worker stopped and variables cleared. "
    "Join threads before the cell ends; use mcp.acall for concurrent bridge calls."
)

MESSAGE_FOREIGN_CALL = "MCP calls must belong to their originating active cell; use mcp.acall for concurrency"
MESSAGE_BRIDGE_TIMEOUT = "MCP request got no answer within %.2f s; external outcome is unknown, request was not retried"
# Written to fd 2 after a cell whose native stderr the server may not have read yet, so it can tell
# which bytes belong to which run (docs/worker-protocol.md, "Protecting the stream").
STDERR_BARRIER = "\x1erepl-mcp-barrier:{}\x1e\n"


# =====================================================================================================
# Deferred imports
#
# A worker that starts fast imports only what every cell needs. Modules the worker must adapt when a
# cell first uses them (asyncio gets the persistent loop, subprocess the tracked Popen, linecache the
# cell sources) are watched instead: the adaptation runs right after the module's own code, before
# whoever imported it sees it, whatever the path (a cell, a library, os.popen, the worker itself).
# =====================================================================================================
class _AfterExec:
    """Wraps a module's loader to call back once the module has been executed."""

    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # The module keeps its real loader, as if the wrapper had never been there.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._callback(module)


class _FirstImports:
    """A meta path finder that only notices the first import of the modules it was asked about.

    It sits first in sys.meta_path while it still waits for one of them, and leaves after the last.
    """

    def __init__(self):
        self._callbacks = {}

    def on(self, name, callback):
        """callback(module) once `name` is imported: now if it already is, else right after its import."""
        module = sys.modules.get(name)
        if module is not None:
            callback(module)
            return
        self._callbacks[name] = callback
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        callback = self._callbacks.pop(name, None)
        if callback is None:
            return None
        if not self._callbacks:  # nothing left to watch: step out of every later import
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
        for finder in sys.meta_path:
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterExec(spec.loader, callback)
        return spec


_FIRST_IMPORTS = _FirstImports()


# =====================================================================================================
# Low-level helpers
# =====================================================================================================
_EXIT_HOOKS = []  # best-effort cleanups before the process ends (e.g. killing tracked children)


def _write_all(fd, data):
    written = os.write(fd, data)  # nearly always all of it: a view is made only for the rest
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


class _Fd2Probe:
    """Whether everything written to the server's stderr channel so far has already been read.

    The channel is the fd 2 the worker started with, kept on a private descriptor because a cell may
    point fd 2 elsewhere while fd 1, children and C code still write to the original. Linux counts the
    bytes still queued on it: FIONREAD on a pipe, TIOCOUTQ (SIOCOUTQ: sent but not yet consumed) on the
    Unix socket a Bun parent hands out. Once the server has read them all, the result frame it is about
    to read comes after them, so the per-cell barrier line can be left out. Anywhere else (another
    system, a file, a terminal) the answer is "cannot tell" and the barrier stays; it is written to the
    same private descriptor, so it reaches the server even when a cell moved fd 2.
    """

    def __init__(self):
        try:
            self.fd = os.dup(2)  # not inherited by children
        except OSError:
            self.fd = 2
        self._request = None
        self.unseen = False  # a kernel's fd 2 is not the server's to read: never a barrier there

    def drained(self):
        if self.unseen:
            return True
        if self._request is None:
            self._request = self._load()
        if not self._request:
            return False
        try:
            import fcntl

            return fcntl.ioctl(self.fd, self._request, b"\0\0\0\0") == b"\0\0\0\0"
        except (OSError, ImportError):
            return False

    def _load(self):
        if not sys.platform.startswith("linux"):
            return 0
        try:
            import termios

            kind = stat.S_IFMT(os.fstat(self.fd).st_mode)
        except (ImportError, OSError):
            return 0
        return {stat.S_IFIFO: termios.FIONREAD, stat.S_IFSOCK: termios.TIOCOUTQ}.get(kind, 0)


_FD2 = _Fd2Probe()


def _note(message):
    """A diagnostic for whoever reads the worker's stderr; never fails."""
    try:
        _write_all(2, ("repl-mcp worker: " + message + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _terminate(status, reason=None):
    """End the process now, from any thread: a blocked main thread must not delay the exit."""
    if reason:
        _note(reason)
    for hook in _EXIT_HOOKS:
        try:
            hook()
        except BaseException:
            pass
    os._exit(status)


def _utf8(text):
    """UTF-8 bytes of text, lone surrogates becoming '?'."""
    return text.encode("utf-8", "replace")


def _cut_utf8(data, limit):
    """The longest prefix of UTF-8 bytes within limit that does not split a character."""
    if len(data) <= limit:
        return data
    end = limit
    while end and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


def _cut_text(text, limit_bytes):
    """(text cut to limit_bytes of UTF-8 with surrogates replaced, whether anything was cut)."""
    data = _utf8(text[: limit_bytes + 1])
    cut = len(text) > limit_bytes or len(data) > limit_bytes
    return _cut_utf8(data, limit_bytes).decode("utf-8"), cut


_type_name_slot = type.__dict__["__name__"].__get__


def _type_name(cls):
    """A type's own name, read from the slot so metaclass properties and hooks never run."""
    try:
        return _type_name_slot(cls, type)
    except Exception:
        return "object"


# =====================================================================================================
# Run identity
#
# The active run id is global state for frames sent from any thread (job frames); the context variable
# marks asyncio callbacks and tasks a cell scheduled, so its cleanup can tell them from older ones.
# =====================================================================================================
class _ActiveRun:
    id = None


_RUN_ID = contextvars.ContextVar("repl_run_id", default=None)
_WORKER_THREADS = weakref.WeakSet()  # the worker's own threads, never blamed on a cell


def _start_worker_thread(target, name):
    thread = threading.Thread(target=target, name=name, daemon=True)
    _WORKER_THREADS.add(thread)
    thread.start()
    return thread


# =====================================================================================================
# Frames to the server
#
# Every frame goes through one lock and is written completely. Text fields are bounded before they
# get here, so the size check is a last line of defence that shrinks result frames rather than
# break the protocol.
# =====================================================================================================
# One encoder for every frame: json.dumps with options builds a new JSONEncoder on each call.
_FRAME_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _encode_frame(frame):
    return _utf8(_FRAME_ENCODER.encode(frame)) + b"\n"


def _shrink_result_frame(frame):
    """Cut a result frame's text fields until it fits a frame; None if it cannot be made to fit."""
    result = frame["result"]
    result.pop("value", None)
    fields = (("stdout", "stdout"), ("stderr", "stderr"), ("error", "error"), ("return_value", "return"))
    for _ in range(16):
        data = _encode_frame(frame)
        if len(data) <= MAX_FRAME_BYTES:
            return data
        key, flag = max(fields, key=lambda f: len(result.get(f[0]) or ""))
        value = result.get(key) or ""
        if not value:
            return None
        result[key], _ = _cut_text(value, len(_utf8(value)) // 2)
        result["truncated"][flag] = True
    return None


class _FrameWriter:
    @staticmethod
    def encode(frame):
        """The frame's bytes within the frame limit (a result shrunk to fit), or None if it must be dropped."""
        try:
            data = _encode_frame(frame)
        except (TypeError, ValueError) as exc:
            _note("unencodable %s frame dropped: %s" % (frame.get("type"), exc))
            return None
        if len(data) > MAX_FRAME_BYTES:
            data = _shrink_result_frame(frame) if frame.get("type") == "result" else None
            if data is None:
                _note("oversized %s frame dropped" % frame.get("type"))
        return data

    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.RLock()
        self._busy = False

    def send(self, frame):
        """Write one frame; False if it was dropped (too large, or re-entered from a finalizer)."""
        data = self.encode(frame)
        if data is None:
            return False
        token = GATE.hold(threading.get_ident())
        try:
            with self._lock:
                if self._busy:
                    # Same thread, mid-frame (a __del__ that printed): writing now would interleave.
                    return False
                self._busy = True
                try:
                    _write_all(self._fd, data)
                except OSError as exc:
                    _terminate(2, "frame pipe failed: %s" % exc)
                finally:
                    self._busy = False
        finally:
            GATE.release(token)
        return True


# =====================================================================================================
# Output capture
#
# sys.stdout and sys.stderr are permanent capture objects, so handles kept by user code (a logging
# handler made in one cell) stay captured in later cells. While a cell runs, text is cut to the
# stream's budget at write time and streamed as coalesced output frames; between cells it goes to
# fd 2. Once a stream has dropped text, its `write` becomes the builtin `len`: a print loop that
# has exhausted the budget then costs no Python frame per write.
# =====================================================================================================
class _OutputPump:
    def __init__(self, writer):
        self._writer = writer
        self._cond = threading.Condition(threading.RLock())  # re-entrant: a __del__ may print mid-write
        self._captures = []
        self._run_id = None
        self._used = [0, 0]
        # What output frames carried, per stream. The result's text is built from it, so an interrupt
        # can never make the result and the frames disagree.
        self._sent = [bytearray(), bytearray()]
        self._cut = [False, False]
        self._pending = []  # [stream index, bytearray] in write order, same-stream writes merged
        self._pending_bytes = 0
        self._flushing = False

    def attach(self, capture):
        self._captures.append(capture)
        return len(self._captures) - 1

    def start_flusher(self):
        _start_worker_thread(self._flush_loop, "repl-output-flusher")

    def begin(self, run_id):
        # Everything else was reset by the last finish() (every run ends with one), or never set.
        with self._cond:
            self._run_id = run_id
            self._used = [0, 0]

    def finish(self):
        """End the run's capture after sending its last output frames; returns (texts, cut flags)."""
        with self._cond:
            self._flush_locked()
            kept = self._sent
            for index, data in self._pending:  # left only if a finalizer printed mid-flush
                kept[index] += data
            texts = [data.decode("utf-8") for data in kept]
            cut = self._cut
            self._run_id = None
            self._sent, self._cut = [bytearray(), bytearray()], [False, False]
            self._pending = []
            self._pending_bytes = 0
            self._restore_writes()
        return texts, cut

    def write(self, index, text):
        size = len(text)
        if not size:
            return 0
        with self._cond:
            if self._run_id is not None:
                self._capture(index, text, size)
                return size
        try:
            _write_all(2, _utf8(text))
        except OSError:
            pass
        return size

    def _capture(self, index, text, size):
        room = STREAM_BUDGET_BYTES - self._used[index]
        if room <= 0:
            self._mark_cut(index)
            return
        # At most `room` characters can fit, so never encode more than that.
        data = _utf8(text[:room])
        if size > room or len(data) > room:
            data = _cut_utf8(data, room)
            self._mark_cut(index)
        if not data:
            return
        self._used[index] += len(data)
        pending = self._pending
        if pending and pending[-1][0] == index:
            pending[-1][1] += data
        else:
            pending.append([index, bytearray(data)])
        was_idle = not self._pending_bytes
        self._pending_bytes += len(data)
        if self._pending_bytes >= OUTPUT_COALESCE_BYTES:
            self._flush_locked()
        elif was_idle:
            self._cond.notify()

    def _mark_cut(self, index):
        self._cut[index] = True
        self._captures[index].write = len

    def _restore_writes(self):
        for capture in self._captures:
            capture.__dict__.pop("write", None)

    def _flush_locked(self):
        if self._flushing or not self._pending:
            return
        # The run's frames go out together: an interrupt deferred here fires after the last one. The
        # hold comes first, so an interrupt can neither drop the taken chunks nor leave _flushing set.
        token = GATE.hold(threading.get_ident())
        try:
            chunks, self._pending, self._pending_bytes = self._pending, [], 0
            self._flushing = True
            try:
                for index, data in chunks:
                    self._sent[index] += data
                    self._writer.send(
                        {"type": "output", "id": self._run_id, "stream": STREAM_NAMES[index], "text": data.decode("utf-8")}
                    )
            finally:
                self._flushing = False
        finally:
            GATE.release(token)

    def _flush_loop(self):
        while True:
            with self._cond:
                while not self._pending_bytes:
                    self._cond.wait()
            time.sleep(OUTPUT_FLUSH_DELAY)
            with self._cond:
                self._flush_locked()


class _BinaryFacade:
    """`sys.stdout.buffer`: bytes written here are decoded (invalid sequences replaced) and captured."""

    def __init__(self, text_stream):
        self._text = text_stream

    def write(self, data):
        data = memoryview(data).tobytes()
        self._text.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def fileno(self):
        raise io.UnsupportedOperation("fileno")


class _CaptureStream(io.TextIOBase):
    encoding = "utf-8"
    errors = "replace"
    newlines = None
    mode = "w"

    def __init__(self, pump, name):
        super().__init__()
        self.name = "<%s>" % name
        self._pump = pump
        self._index = pump.attach(self)
        self.buffer = _BinaryFacade(self)

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + _type_name(type(text)))
        return self._pump.write(self._index, text)

    def flush(self):
        pass  # output frames already leave within ~50 ms

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def fileno(self):
        raise io.UnsupportedOperation("fileno")

    def close(self):
        pass  # closing sys.stdout in a cell must not end capture for every later cell


# =====================================================================================================
# Commands from the server
#
# Whoever is waiting reads the command fd, so a frame costs one wake-up: the main thread between cells
# and while it waits for a bridge answer, a daemon reader thread while a cell's own code runs. The fd is
# lent to the reader thread by registering it in an epoll (kqueue) set the reader sleeps on, which does
# not wake it; a cell that receives no frame costs that thread nothing. Only one of the two reads at a
# time: the reader reads only under the channel's lock and only while the fd is lent. Every complete
# line is dispatched as soon as it is read; cells are queued and run by the main thread. End of input
# ends the process, even while a cell runs.
# =====================================================================================================
class _Execute:
    __slots__ = ("run_id", "code", "timeout", "source_path", "argv", "inventory", "history")

    def __init__(self, run_id, code, timeout, source_path=None, argv=(), inventory=False, history=False):
        self.run_id = run_id
        self.code = code
        self.timeout = timeout
        self.source_path = source_path
        self.argv = argv
        self.inventory = inventory
        self.history = history


def _execute_command(frame):
    """The command an execute frame asks for; ValueError names what is malformed."""
    run_id, source_path, argv = frame.get("id"), frame.get("source_path"), frame.get("argv")
    inventory, history = frame.get("inventory", False), frame.get("history", False)
    # File, inventory and history runs carry no code of their own, so they may leave `code` out.
    code = frame.get("code", "" if inventory is True or history is True or source_path is not None else None)
    if type(run_id) is not str or type(code) is not str:
        raise ValueError("execute frame needs string id and code")
    if type(inventory) is not bool or type(history) is not bool:
        raise ValueError("execute frame has malformed inventory or history")
    if source_path is not None and type(source_path) is not str:
        raise ValueError("execute frame has malformed source_path")
    if argv is None:
        argv = []
    elif type(argv) is not list or any(type(item) is not str for item in argv):
        raise ValueError("execute frame argv must be a list of strings")
    return _Execute(run_id, code, frame.get("timeout"), source_path, argv, inventory, history)


_SHUTDOWN = object()


class _Inbox:
    """Commands waiting for the main thread; the count enforces the pending limit."""

    def __init__(self):
        self._items = collections.deque()
        self._lock = threading.Lock()
        self._busy = False  # the main thread is running a command taken earlier

    def put(self, item):
        with self._lock:
            # While idle, the first queued command is the one about to run, not one waiting behind it.
            limit = MAX_PENDING_COMMANDS + (0 if self._busy else 1)
            if len(self._items) >= limit:
                _terminate(2, "more than %d commands pending" % MAX_PENDING_COMMANDS)
            self._items.append(item)

    def take(self):
        """The next command, or None (the main thread is then idle until it reads more)."""
        with self._lock:
            self._busy = bool(self._items)
            return self._items.popleft() if self._busy else None


class _ReadWatch:
    """A set the reader thread sleeps on; adding or removing the fd never wakes it (epoll or kqueue).

    add() and remove() may be repeated: a signal handler that raises can cut a hand-over short, and
    the next one must still bring the set in line.
    """

    def __init__(self, fd):
        self._fd = fd
        self.watching = False
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        if self._epoll is None:
            self._kqueue = select.kqueue()
            self._events = [
                select.kevent(fd, select.KQ_FILTER_READ, flags)
                for flags in (select.KQ_EV_ADD, select.KQ_EV_DELETE)
            ]

    def add(self):
        if self.watching:
            return
        try:
            if self._epoll is not None:
                self._epoll.register(self._fd, select.EPOLLIN)
            else:
                self._kqueue.control(self._events[:1], 0, 0)
        except FileExistsError:
            pass
        except PermissionError:
            return  # a regular file (`python3 worker.py < commands`): never waits, read between cells
        self.watching = True

    def remove(self):
        if not self.watching:
            return
        try:
            if self._epoll is not None:
                self._epoll.unregister(self._fd)
            else:
                self._kqueue.control(self._events[1:], 0, 0)
        except FileNotFoundError:
            pass
        self.watching = False

    def wait(self):
        """Returns once the fd may be readable (or spuriously); sleeps while it is not in the set."""
        if self._epoll is not None:
            self._epoll.poll()
        else:
            self._kqueue.control(None, 1, None)


def _wait_answer(send, pending, timeout):
    """send(), then wait on pending.event (set by the thread that reads the answer); True if it came."""
    if send is not None:
        send()
    started = time.monotonic()
    while not pending.event.wait(max(0.0, started + timeout + pending.extra - time.monotonic())):
        if time.monotonic() >= started + timeout + pending.extra:
            return False
    return True


class _CommandChannel:
    def __init__(self, fd, inbox):
        self._fd = fd
        self._inbox = inbox
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._lock = threading.Lock()
        self._lent = False
        self._watch = _ReadWatch(fd)
        self._main = threading.get_ident()
        self.forked = False
        # Polled by the main thread while it waits for a bridge answer: the command fd, and the gate's
        # wake-up pipe (a SIGINT deferred during that wait must end it).
        self._wake = os.pipe()
        for end in self._wake:
            os.set_blocking(end, False)
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._poll.register(self._wake[0], select.POLLIN)
        self._check = select.poll()
        self._check.register(fd, select.POLLIN)
        GATE.wake_fd = self._wake[1]
        os.register_at_fork(after_in_child=self._forget)
        # New frame types (rpc_result, ...) get an entry here; handlers run on whichever thread read them.
        self.handlers = {
            "execute": self._on_execute,
            "shutdown": self._on_shutdown,
            "rpc_result": _BRIDGE.deliver,
            "rpc_wait": _BRIDGE.extend,
            "cancel": self._on_cancel,
        }

    def _forget(self):
        # A forked child (os.fork, multiprocessing's fork context) shares the pipe and the epoll set
        # with the worker: it must never read the one nor change the other.
        self._main = None
        self.forked = True

    def start(self):
        _start_worker_thread(self._serve, "repl-command-reader")

    def next_command(self):
        """Main thread, between cells: the next queued command, reading frames until there is one."""
        while True:
            command = self._inbox.take()
            if command is not None:
                return command
            self._read()

    def lend(self):
        """A cell's code is about to run: frames that arrive meanwhile are the reader thread's."""
        if self.forked:
            return
        with self._lock:
            self._watch.add()
            self._lent = True

    def reclaim(self):
        """The cell's code has ended. Called just before its result: the next frame wakes the main thread."""
        if self.forked:
            return
        with self._lock:
            self._lent = False
            self._watch.remove()

    def reads_here(self):
        """True on the thread that can read its own answers: the main thread of the worker process."""
        return threading.get_ident() == self._main

    def exchange(self, send, pending, timeout):
        """send() a request, then wait up to timeout for the frame that marks pending done; True if it came.

        On the main thread the fd is taken back before sending, so the answer wakes this thread alone,
        which reads it itself. Elsewhere (another thread, a forked child) the thread waits on
        pending.event, set by whichever thread reads the answer. SIGINT is deferred for the whole
        exchange, so it can never cut a frame or the hand-back of the fd in half; the gate's wake-up
        pipe ends the poll, and the deferred interrupt is raised on the way out.
        """
        if pending is None:  # send only; the answer is read by whichever thread reads next
            send()
            return True
        if not self.reads_here():
            return _wait_answer(send, pending, timeout)
        deadline = time.monotonic() + timeout
        token = GATE.hold(self._main)
        try:
            with self._lock:
                lent, self._lent = self._lent, False
                self._watch.remove()
            try:
                if send is not None:
                    send()
                return self._read_until(pending, deadline)
            finally:
                if lent:
                    self.lend()
        finally:
            GATE.release(token)

    def _read_until(self, pending, deadline):
        fd, wake = self._fd, self._wake[0]
        while not pending.done:
            if GATE.deferred():
                return False  # the caller's release() raises the interrupt
            remaining = deadline + pending.extra - time.monotonic()
            if remaining <= 0:
                return False
            for ready, _ in self._poll.poll(max(1, math.ceil(remaining * 1000))):
                if ready == fd:
                    self._read()
                elif ready == wake:
                    try:
                        os.read(wake, 4096)
                    except OSError:
                        pass
        return True

    def _serve(self):
        """The reader thread: reads only while the fd is lent, and only what is there already."""
        try:
            while True:
                self._watch.wait()
                with self._lock:
                    # A wake-up can be stale: the main thread may have read that frame meanwhile.
                    if not self._lent:
                        self._watch.remove()  # a hand-back cut short by a raising signal handler
                    elif self._check.poll(0):
                        self._read()
        except BaseException as exc:
            _terminate(2, "command reader failed: %r" % (exc,))

    def _read(self):
        """Read once from the fd and dispatch every complete line; stops the process at the end of input."""
        try:
            chunk = os.read(self._fd, 65_536)
        except OSError as exc:
            _terminate(2, "command pipe failed: %s" % exc)
        buffer = self._buffer
        if not chunk:
            if buffer:
                _terminate(2, "command stream ended inside a line")
            _terminate(0)
        buffer += chunk
        while True:
            newline = buffer.find(b"\n", self._scanned)
            if newline < 0:
                break
            if newline + 1 > MAX_FRAME_BYTES:
                _terminate(2, "command line exceeds %d bytes" % MAX_FRAME_BYTES)
            # Taken off the buffer before it is handled: a handler that ends up here again (a signal
            # handler making a bridge call) then finds only the lines after this one.
            line = buffer[:newline]
            del buffer[: newline + 1]
            self._scanned = 0
            self._dispatch(line)
        self._scanned = len(buffer)
        if len(buffer) >= MAX_FRAME_BYTES:
            _terminate(2, "command line exceeds %d bytes" % MAX_FRAME_BYTES)

    def _dispatch(self, line):
        try:
            frame = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            _terminate(2, "command line is not JSON")
        if type(frame) is not dict:
            _terminate(2, "command line is not a JSON object")
        handler = self.handlers.get(frame.get("type"))
        if handler is None:
            _terminate(2, "unknown frame type %r" % (frame.get("type"),))
        try:
            handler(frame)
        except BaseException as exc:  # a worker bug: the frame is lost, so the worker must not go on
            _terminate(2, "command handler failed: %r" % (exc,))

    def _on_execute(self, frame):
        try:
            command = _execute_command(frame)
        except ValueError as exc:
            _terminate(2, str(exc))
        self._inbox.put(command)

    def _on_cancel(self, frame):
        run_id = frame.get("id")
        if type(run_id) is not str:
            _terminate(2, "cancel frame needs a string id")
        if _SANDBOX is not None:
            # The server cannot see a contained worker's process groups (its pids are another namespace's).
            _CHILDREN.kill_groups()
        GATE.cancel(run_id)

    def _on_shutdown(self, frame):
        self._inbox.put(_SHUTDOWN)


# =====================================================================================================
# Safe previews of a cell's trailing value
#
# Built from exact builtin types only, inspected through type() and C-level container access, so no
# user hook (__repr__, __eq__, __len__, properties, metaclass attributes) can run.
# =====================================================================================================
_LENGTH_TYPES = (str, bytes, list, tuple, dict, set, frozenset)


class _NotPreviewable(Exception):
    """A value outside the exact-builtin JSON subset; args[0] says why (checkpoint reports it)."""


class _JsonConverter:
    def __init__(self, max_nodes=PREVIEW_MAX_NODES):
        self.nodes = 0
        self.max_nodes = max_nodes

    def convert(self, value, depth):
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            if value.bit_length() > PREVIEW_MAX_INT_BITS:
                raise _NotPreviewable("large integer")
            return value
        if kind is float:
            if not math.isfinite(value):
                raise _NotPreviewable("non-finite float")
            return value
        if kind is str or kind is ShellResult:
            if len(value) > PREVIEW_MAX_NESTED_STR:
                raise _NotPreviewable("long nested string")
            return str.__str__(value)
        if kind is list or kind is tuple or kind is ReplHistory:
            self._enter(value, depth)
            return [self._child(item, depth) for item in value]
        if kind is dict or kind is _Envelope:
            self._enter(value, depth)
            converted = {}
            for key, item in dict.items(value):
                if type(key) is not str or len(key) > PREVIEW_MAX_NESTED_STR:
                    raise _NotPreviewable("non-string dict key")
                converted[key] = self._child(item, depth)
            return converted
        raise _NotPreviewable("custom object")

    def _enter(self, container, depth):
        if depth >= PREVIEW_MAX_DEPTH or len(container) > PREVIEW_MAX_ITEMS:
            raise _NotPreviewable("large collection")

    def _child(self, item, depth):
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise _NotPreviewable("large collection")
        return self.convert(item, depth + 1)


def _has_length(kind):
    # Identity, not `in`: comparing types could call a metaclass __eq__.
    for candidate in _LENGTH_TYPES:
        if kind is candidate:
            return True
    return False


def _preview(value):
    """(return_value, has_json_value, json_value, shortened) for a non-None trailing value."""
    kind = type(value)
    if kind is str or kind is ShellResult:
        value = str.__str__(value)
        # Quoting never shrinks a string, so a long one is cut anyway: quote only what can be kept.
        sample = value[:PREVIEW_MAX_BYTES]
        quoted, cut = _cut_text(json.dumps(sample, ensure_ascii=False), PREVIEW_MAX_BYTES)
        cut = cut or len(sample) < len(value)
        return quoted, not cut, value, cut
    if kind is int and value.bit_length() <= PREVIEW_MAX_INT_BITS:
        return int.__repr__(value), True, value, False  # what the general path renders, without JSON
    max_nodes = HISTORY_PREVIEW_MAX_NODES if kind is ReplHistory else PREVIEW_MAX_NODES
    try:
        converted = _JsonConverter(max_nodes).convert(value, 0)
        rendered = json.dumps(converted, ensure_ascii=False, allow_nan=False)
    except (_NotPreviewable, RuntimeError, ValueError, RecursionError):
        # RuntimeError: another thread resized a container while it was being read.
        label = _type_name(kind)
        if _has_length(kind):
            return "<%s; safe preview omitted; length=%d>" % (label, len(value)), False, None, True
        return "<%s; safe preview omitted>" % label, False, None, True
    rendered, cut = _cut_text(rendered, PREVIEW_MAX_BYTES)
    return rendered, not cut, converted, cut


def _json_safe(value):
    """The JSON form of a value a checkpoint may hold: previewable, or a str of any length."""
    kind = type(value)
    if kind is str or kind is ShellResult:
        return str.__str__(value)
    try:
        return _JsonConverter().convert(value, 0)
    except RecursionError:
        raise _NotPreviewable("large collection") from None
    except RuntimeError:
        raise _NotPreviewable("changed while being read") from None


# =====================================================================================================
# Library previews
#
# Arrays and tables are what a data session looks at most, so the classes of numpy, pandas and polars
# get a preview of our own: type, shape, dtypes, column names and a few rows from each end. Only the
# libraries' own classes qualify, found by identity in the module already loaded (a subclass, a look-
# alike, or a library nobody imported is left to the ordinary preview), and the preview only calls
# library code and reads exact builtins: an element of any other type is shown by its type name, so no
# __repr__ of a user's object runs. What is read is bounded by what is shown, never by the value's size.
# =====================================================================================================
class _Libraries:
    """The classes each loaded library gets a preview for, by id, rebuilt when its module is replaced."""

    def __init__(self):
        self._built = {}  # module name -> (module, {id(class): (class, qualified name, renderer)})

    def entry(self, kind):
        """(qualified name, renderer) when kind is exactly one of the libraries' own classes, else None."""
        for name, build in _LIBRARY_BUILDERS:
            names = _module_names(name)
            if names is None:
                continue
            module = sys.modules[name]
            built = self._built.get(name)
            if built is None or built[0] is not module:
                classes = build(names)
                if not classes:
                    continue  # still being imported: look again next time
                built = self._built[name] = (module, classes)
            found = built[1].get(id(kind))
            if found is not None and found[0] is kind:
                return found[1], found[2]
        return None


def _module_names(name):
    """The dict of a loaded module, read without an attribute lookup; None if it is not loaded."""
    module = sys.modules.get(name)
    # A replacement that is not a plain module could run code when its attributes are read.
    return module.__dict__ if type(module) is types.ModuleType else None


def _by_id(classes):
    return {id(cls): cls for cls in classes if cls is not None}


def _numpy_scalar_classes(names):
    """numpy's own scalar types, by id, but void: a structured scalar's fields may hold any object."""
    void = names.get("void")
    return _by_id(scalar for scalar in (names.get("sctypeDict") or {}).values() if scalar is not void)


def _numpy_classes(names):
    if names.get("ndarray") is None:
        return {}
    classes = {id(names["ndarray"]): (names["ndarray"], "numpy.ndarray", _render_ndarray)}
    for key, scalar in _numpy_scalar_classes(names).items():
        classes[key] = (scalar, "numpy." + _type_name(scalar), _render_numpy_scalar)
    return classes


_PANDAS_INDEXES = (
    "Index", "RangeIndex", "DatetimeIndex", "TimedeltaIndex", "PeriodIndex", "CategoricalIndex",
    "IntervalIndex", "MultiIndex",
)
_PANDAS_NUMERIC_INDEXES = ("NumericIndex", "Int64Index", "UInt64Index", "Float64Index")  # pandas 1.x
_PANDAS_DTYPES = (
    "CategoricalDtype", "DatetimeTZDtype", "PeriodDtype", "IntervalDtype", "SparseDtype", "StringDtype",
    "BooleanDtype", "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype", "UInt8Dtype", "UInt16Dtype",
    "UInt32Dtype", "UInt64Dtype", "Float32Dtype", "Float64Dtype", "ArrowDtype",
)
_PANDAS_SCALARS = ("Timestamp", "Timedelta", "Period")
# The arrays pandas itself defines (pandas.arrays), beside numpy's ndarray.
_PANDAS_ARRAYS = (
    "ArrowExtensionArray", "ArrowStringArray", "BooleanArray", "Categorical", "DatetimeArray",
    "FloatingArray", "IntegerArray", "IntervalArray", "NumpyExtensionArray", "PandasArray", "PeriodArray",
    "SparseArray", "StringArray", "TimedeltaArray",
)


class _Opaque:
    """Stands for the dtype of values of an array class no library defines: only its name is shown."""

    __slots__ = ("name",)

    def __init__(self, values):
        self.name = _type_name(type(values))


def _pandas_classes(names):
    if names.get("DataFrame") is None or names.get("Series") is None:
        return {}
    # From module dicts, never as attributes: pandas 1.x warns on some names when they are read.
    numeric = _module_names("pandas.core.indexes.numeric") or {}
    entries = [(names["DataFrame"], "pandas.DataFrame", _render_pandas_frame)]
    entries.append((names["Series"], "pandas.Series", _render_pandas_series))
    entries += [(names.get(name), "pandas." + name, _render_pandas_index) for name in _PANDAS_INDEXES]
    entries += [(numeric.get(name), "pandas." + name, _render_pandas_index) for name in _PANDAS_NUMERIC_INDEXES]
    return {id(entry[0]): entry for entry in entries if entry[0] is not None}


def _polars_classes(names):
    if names.get("DataFrame") is None or names.get("Series") is None:
        return {}
    return {
        id(names["DataFrame"]): (names["DataFrame"], "polars.DataFrame", _render_polars_frame),
        id(names["Series"]): (names["Series"], "polars.Series", _render_polars_series),
    }


_LIBRARY_BUILDERS = (("numpy", _numpy_classes), ("pandas", _pandas_classes), ("polars", _polars_classes))
_LIBRARIES = _Libraries()


def _library_preview(value):
    """(return_value, value_info, shortened) for a value of a class previewed here, else None.

    A value the renderer cannot read (a library version it does not know, a broken object) gets the
    ordinary preview instead, with a note on the worker's stderr.
    """
    try:
        entry = _LIBRARIES.entry(type(value))
        if entry is None:
            return None
        label, render = entry
        shown = _Shown()
        text, info = render(value, label, shown)
    except Exception as exc:
        _note("no library preview: %s: %s" % (_type_name(type(exc)), _exception_message(exc)[:200]))
        return None
    text, cut = _cut_text(text, PREVIEW_MAX_BYTES)
    return text, dict(type=label, **info), shown.shortened or cut


class _PreviewTables:
    """numpy's and pandas' scalar and dtype classes, by id. Built when a preview first meets the libraries,
    and again only when a module dict is replaced or has gained names (an import was still under way)."""

    _MODULES = ("numpy", "numpy.dtypes", "pandas")
    _current = None  # the tables in use

    def __init__(self, dicts):
        self.key = [(names, len(names)) for names in dicts]
        numpy, numpy_dtypes, pandas = dicts
        self.numpy, self.pandas = numpy, pandas
        self.numpy_scalars = _numpy_scalar_classes(numpy)
        self.pandas_scalars = _by_id(pandas.get(name) for name in _PANDAS_SCALARS)
        dtype, typecodes = numpy.get("dtype"), numpy.get("typecodes")
        legacy = [type(dtype(code)) for code in typecodes["All"]] if dtype is not None and typecodes else []
        # numpy 2's variable-width strings (kind "T") have no type code: their class is in numpy.dtypes.
        self.numpy_dtypes = _by_id(legacy + [numpy_dtypes.get("StringDType")])
        self.pandas_dtypes = _by_id(pandas.get(name) for name in _PANDAS_DTYPES)

    def current(self, dicts):
        return all(names is kept and len(names) == size for names, (kept, size) in zip(dicts, self.key))

    @classmethod
    def now(cls):
        dicts = [_module_names(name) or _NO_NAMES for name in cls._MODULES]
        if cls._current is None or not cls._current.current(dicts):
            cls._current = cls(dicts)
        return cls._current


_NO_NAMES = types.MappingProxyType({})  # a library not loaded: the same empty names every time


class _Shown:
    """Formats what a preview shows, and remembers whether anything was left out."""

    def __init__(self):
        self.shortened = False
        tables = _PreviewTables.now()
        self.numpy, self.pandas = tables.numpy, tables.pandas
        self._numpy_scalars, self._pandas_scalars = tables.numpy_scalars, tables.pandas_scalars
        self.numpy_dtypes, self._pandas_dtypes = tables.numpy_dtypes, tables.pandas_dtypes

    # -- one value -----------------------------------------------------------------------------
    def item(self, item, quote, depth=0):
        """Text of one element: exact builtins and the libraries' own scalars; anything else <TypeName>."""
        text = self._item(item, quote, depth)
        if len(text) > LIBRARY_CELL_MAX_CHARS:
            self.shortened = True
            text = text[: LIBRARY_CELL_MAX_CHARS - 1] + "…"
        return text

    def items(self, items, quote):
        return [self.item(item, quote) for item in items]

    def _item(self, item, quote, depth):
        kind = type(item)
        if item is None:
            return "None"
        if kind is bool:
            return "True" if item else "False"
        if kind is int:
            bits = item.bit_length()
            return int.__repr__(item) if bits <= LIBRARY_INT_MAX_BITS else "<int of %d bits>" % bits
        if kind is float:
            return float.__repr__(item)
        if kind is str:
            return self._text(item, quote)
        if kind is bytes:
            return bytes.__repr__(item[: LIBRARY_CELL_MAX_CHARS])
        if kind is complex:
            return complex.__repr__(item)
        if (kind is list or kind is tuple) and depth < LIBRARY_NESTED_DEPTH:
            return self._sequence(item, kind is tuple, depth)
        if kind is dict and depth < LIBRARY_NESTED_DEPTH:
            return self._mapping(item, depth)
        text = _datetime_text(item, kind)
        if text is None:
            text = self._library_scalar(item, kind)
        return "<%s>" % _type_name(kind) if text is None else text

    def _text(self, text, quote):
        sample = text[: LIBRARY_CELL_MAX_CHARS + 1]
        if quote:
            return json.dumps(sample, ensure_ascii=False)
        if not sample.isprintable():  # a newline or a tab would break the rows of a table
            sample = json.dumps(sample, ensure_ascii=False)[1:-1]
        return sample

    def _sequence(self, items, is_tuple, depth):
        shown = [self.item(item, True, depth + 1) for item in items[:LIBRARY_NESTED_ITEMS]]
        if len(items) > LIBRARY_NESTED_ITEMS:
            shown.append("...")
            self.shortened = True
        if is_tuple:
            return "(%s)" % (shown[0] + "," if len(items) == 1 else ", ".join(shown))
        return "[%s]" % ", ".join(shown)

    def _mapping(self, mapping, depth):
        shown = [
            "%s: %s" % (self.item(key, True, depth + 1), self.item(item, True, depth + 1))
            for key, item in itertools.islice(dict.items(mapping), LIBRARY_NESTED_ITEMS)
        ]
        if len(mapping) > LIBRARY_NESTED_ITEMS:
            shown.append("...")
            self.shortened = True
        return "{%s}" % ", ".join(shown)

    def _library_scalar(self, item, kind):
        if self._numpy_scalars.get(id(kind)) is kind:
            return self.numpy_scalar(item, kind)
        if self.pandas:
            if item is self.pandas.get("NaT"):
                return "NaT"
            if item is self.pandas.get("NA"):
                return "<NA>"
            if self._pandas_scalars.get(id(kind)) is kind:
                if kind is self.pandas.get("Timestamp") and not _library_zone(item.tzinfo):
                    return None
                return str(item)
        return None

    def numpy_scalar(self, item, kind):
        if kind is self.numpy.get("datetime64"):
            return str(self.numpy["datetime_as_string"](item, unit="auto"))
        # Strings and bytes are cut before they are copied, so a huge one costs no more than a short one.
        if kind is self.numpy.get("str_"):
            return self._text(str.__getitem__(item, slice(0, LIBRARY_CELL_MAX_CHARS + 1)), True)
        if kind is self.numpy.get("bytes_"):
            return bytes.__repr__(bytes.__getitem__(item, slice(0, LIBRARY_CELL_MAX_CHARS)))
        return str(item)

    # -- dtypes --------------------------------------------------------------------------------
    def numpy_dtype(self, dtype):
        return self.numpy_dtypes.get(id(type(dtype))) is type(dtype)

    def known_dtype(self, dtype):
        """Whether dtype is numpy's or pandas' own, so reading values of it runs library code only."""
        if type(dtype) is self.pandas.get("DatetimeTZDtype") and not _library_zone(dtype.tz):
            return False
        return self.numpy_dtype(dtype) or self._pandas_dtypes.get(id(type(dtype))) is type(dtype)

    def dtype(self, dtype):
        if type(dtype) is _Opaque:
            return "<%s>" % dtype.name
        if self.numpy_dtype(dtype) and dtype.kind == "V":
            return dtype.str  # str() of a structured dtype shows its field titles, which may be any object
        if self.numpy_dtype(dtype) and dtype.kind == "T":
            return self._string_dtype(dtype)
        if self.known_dtype(dtype):
            return _cut_text(str(dtype), VALUE_INFO_NAME_MAX_CHARS)[0]
        return "<%s>" % _type_name(type(dtype))

    def _string_dtype(self, dtype):
        """numpy 2's StringDType as numpy writes it, but its missing-value object (which may be anyone's,
        and numpy shows by repr()) is shown as an element is."""
        options = []
        missing = getattr(dtype, "na_object", _ABSENT)
        if missing is not _ABSENT:
            options.append("na_object=" + self.item(missing, True))
        if getattr(dtype, "coerce", True) is False:
            options.append("coerce=False")
        return "StringDType(%s)" % ", ".join(options)

    def library_values(self, values):
        """Whether values (what a pandas block, series or index holds) are numpy's or pandas' own array,
        so that their length and dtype are library code; an extension array of anyone else's is not."""
        kind = type(values)
        if kind is self.numpy.get("ndarray"):
            return True
        arrays = _module_names("pandas.arrays") or {}
        return any(kind is arrays.get(name) for name in _PANDAS_ARRAYS)

    # -- what is shown of a run of values ------------------------------------------------------
    def spans(self, length, edge):
        """[(start, stop)] of the items shown of `length`: all, or `edge` from each end."""
        if length <= 2 * edge:
            return [(0, length)]
        self.shortened = True
        return [(0, edge), (length - edge, length)]

    def ndarray_items(self, piece, quote):
        """Texts of the items of a short one-dimensional ndarray of one of numpy's own dtypes."""
        kind = piece.dtype.kind
        if kind == "M":
            return self.items(self.numpy["datetime_as_string"](piece, unit="auto").tolist(), False)
        if kind == "T" and getattr(piece.dtype, "na_object", _ABSENT) is not _ABSENT:
            # numpy 2's strings with a missing-value object: a cast would turn that object into text, so
            # the elements come out as they are (each string whole, then cut to what a cell shows).
            return self.items(piece.tolist(), quote)
        if kind in "UST":  # cut to what a cell shows before the elements are copied out
            piece = piece.astype("%s%d" % ("U" if kind == "T" else kind, LIBRARY_CELL_MAX_CHARS + 1))
        if kind in "OUST":
            return self.items(piece.tolist(), quote)
        if kind in "biufcm":
            return [self.item(self.numpy_scalar(item, type(item)), False) for item in piece]
        return ["<%s>" % _type_name(type(piece.dtype))] * len(piece)


def _datetime_text(item, kind):
    """ISO text of an exact datetime, date, time or timedelta; None for anything else."""
    names = _module_names("datetime")
    if names is None:
        return None
    if kind is names.get("datetime") or kind is names.get("time"):
        if not _library_zone(item.tzinfo):
            return "<%s>" % _type_name(kind)  # a tzinfo class of the user's would run its utcoffset()
        return item.isoformat()
    if kind is names.get("date"):
        return item.isoformat()
    if kind is names.get("timedelta"):
        return names["timedelta"].__str__(item)
    return None


# Time zone classes of the standard library and of pytz and dateutil, as (module, class name); pytz
# makes a class per zone, with data only, on top of its own DstTzInfo or StaticTzInfo.
_ZONE_CLASSES = (
    ("datetime", "timezone"), ("zoneinfo", "ZoneInfo"), ("pytz.tzinfo", "DstTzInfo"),
    ("pytz.tzinfo", "StaticTzInfo"), ("pytz", "_FixedOffset"), ("dateutil.tz.tz", "tzutc"),
    ("dateutil.tz.tz", "tzoffset"), ("dateutil.tz.tz", "tzfile"), ("dateutil.tz.tz", "tzlocal"),
)
_DATA_TYPES = (str, int, float, bool, list, tuple, dict, type(None))


def _library_zone(zone):
    """Whether showing a time in `zone` runs library code only: None, or a zone of a library's class."""
    if zone is None:
        return True
    known = set()
    for module, name in _ZONE_CLASSES:
        names = _module_names(module)
        if names is not None and isinstance(names.get(name), type):
            known.add(id(names[name]))
    pytz = _module_names("pytz")
    if pytz is not None and pytz.get("utc") is not None:
        known.add(id(type(pytz["utc"])))
    # Up to the library's class, the classes on the way may hold data, never code of their own.
    for cls in type.__getattribute__(type(zone), "__mro__"):
        if id(cls) in known:
            return True
        if any(type(value) not in _DATA_TYPES for value in type.__getattribute__(cls, "__dict__").values()):
            return False
    return False


def _gapped(cells, spans):
    """A column's cells with "..." where the spans leave rows out."""
    if len(spans) == 1:
        return cells
    first = spans[0][1] - spans[0][0]
    return cells[:first] + ["..."] + cells[first:]


def _table_lines(columns):
    """Right-aligned rows from columns, each a list: its header, then its cells."""
    widths = [max(map(len, column), default=0) for column in columns]
    return [
        "  ".join(column[row].rjust(width) for column, width in zip(columns, widths)).rstrip()
        for row in range(len(columns[0]))
    ]


def _table_text(head, labels, columns, column_spans):
    """The text of a frame: its head line, the table (row labels, then columns) and a dtypes line."""
    table = [labels]
    described = []
    for number, (name, dtype, cells) in enumerate(columns):
        if len(column_spans) > 1 and number == column_spans[0][1] - column_spans[0][0]:
            table.append(["..."] * len(labels))
        table.append([name] + cells)
        described.append("%s %s" % (name, dtype))
    elided = ", ..." if len(column_spans) > 1 else ""
    return "\n".join([head] + _table_lines(table) + ["dtypes: " + ", ".join(described) + elided])


def _counted(count, noun):
    return "%d %s%s" % (count, noun, "" if count == 1 else "s")


def _shape_text(shape):
    return "(%s)" % (", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))


# -- numpy ---------------------------------------------------------------------------------------
def _render_ndarray(array, label, shown):
    shape = [int(size) for size in array.shape]
    dtype = shown.dtype(array.dtype)
    head = "%s shape=%s dtype=%s" % (label, _shape_text(shape), dtype)
    info = {"shape": shape, "dtype": dtype}
    if not shown.numpy_dtype(array.dtype):
        shown.shortened = True
        return head + "\n(values of a dtype numpy does not define are not shown)", info
    if not shape:
        return head + "\n" + shown.ndarray_items(array.reshape(1), True)[0], info
    return head + "\n" + _nested_rows(array, 0, shown, [LIBRARY_ARRAY_MAX_ITEMS]), info


def _nested_rows(array, depth, shown, budget):
    """Brackets like numpy's: a few items from each end of every axis, at most budget[0] items in all."""
    parts = []
    for number, (start, stop) in enumerate(shown.spans(array.shape[0], LIBRARY_EDGE_ITEMS)):
        if number:
            parts.append("...")
        for index in range(start, stop) if array.ndim > 1 else (None,):
            if budget[0] <= 0:
                parts.append("...")
                shown.shortened = True
                break
            if index is None:
                piece = array[start:stop]
                budget[0] -= len(piece)
                parts.extend(shown.ndarray_items(piece, True))
            else:
                parts.append(_nested_rows(array[index], depth + 1, shown, budget))
    separator = ", " if array.ndim == 1 else ",\n" + " " * (depth + 1)
    return "[" + separator.join(parts) + "]"


def _render_numpy_scalar(value, label, shown):
    return "%s %s" % (label, shown.item(value, True)), {"shape": [], "dtype": shown.dtype(value.dtype)}


# -- pandas --------------------------------------------------------------------------------------
def _pandas_column(frame, position, shown):
    """(dtype, a function returning the values) of one column: the dtype is known before any value is read."""
    manager = getattr(frame, "_mgr", None)
    blocks, numbers = getattr(manager, "blocks", None), getattr(manager, "blknos", None)
    if blocks is not None and numbers is not None and hasattr(manager, "iget_values"):
        # The block manager's own lookups: O(1) per column where frame.dtypes is O(columns).
        block = blocks[int(numbers[position])]
        if not shown.library_values(block.values):
            return _Opaque(block.values), None
        return block.dtype, lambda: manager.iget_values(position)
    column = frame.iloc[:, position]
    if not shown.library_values(column._values):
        return _Opaque(column._values), None
    return column.dtype, lambda: column.array


def _pandas_cells(values, dtype, spans, shown):
    """Texts of the shown items of a column, series or index: only pandas' and numpy's dtypes are read."""
    if not shown.known_dtype(dtype):
        return [shown.dtype(dtype)] * sum(stop - start for start, stop in spans)
    asarray = shown.numpy["asarray"]
    cells = []
    for start, stop in spans:
        piece = values[start:stop]
        if shown.numpy_dtype(dtype) and dtype.kind in "biufcMUST":
            cells.extend(shown.ndarray_items(asarray(piece), False))
        else:  # objects, and pandas' own dtypes: the elements as pandas hands them out, shown one by one
            cells.extend(shown.items(asarray(piece, dtype=object).tolist(), False))
    return cells


def _pandas_labels(index, spans, shown):
    if type(index) is shown.pandas.get("RangeIndex"):
        start, step = int(index.start), int(index.step)
        return [str(start + step * row) for first, stop in spans for row in range(first, stop)]
    if _LIBRARIES.entry(type(index)) is None or not _library_index_values(index, shown):
        return ["<%s>" % _type_name(type(index))] * sum(stop - start for start, stop in spans)
    return _pandas_cells(index, index.dtype, spans, shown)


def _library_index_values(index, shown):
    """Whether one of pandas' own index classes also holds library values (an Index can wrap anyone's
    extension array). A RangeIndex holds none, and a MultiIndex keeps its labels in indexes of its own."""
    kind = type(index)
    if kind is shown.pandas.get("RangeIndex") or kind is shown.pandas.get("MultiIndex"):
        return True
    return shown.library_values(index._data)


def _library_axes(value, *axes):
    """Refuses (so the value gets the ordinary preview) an index class of the user's on the value's
    axes: their length, read for the shape, would be the user's code."""
    for axis in axes:
        if _LIBRARIES.entry(type(axis)) is None:
            raise TypeError("an axis of %s is a %s" % (_type_name(type(value)), _type_name(type(axis))))


def _render_pandas_frame(frame, label, shown):
    _library_axes(frame, frame.index, frame.columns)
    rows, width = (int(size) for size in frame.shape)
    columns = frame.columns
    named = _LIBRARIES.entry(type(columns)) is not None and shown.known_dtype(columns.dtype)
    listed = min(width, VALUE_INFO_MAX_COLUMNS)
    column_spans = shown.spans(width, LIBRARY_EDGE_COLUMNS)
    shown_positions = [position for start, stop in column_spans for position in range(start, stop)]
    names, dtypes = {}, {}
    for position in sorted(set(range(listed)).union(shown_positions)):
        names[position] = columns[position] if named else "<column %d>" % position
        dtypes[position] = _pandas_column(frame, position, shown)
    info_names = [_info_name(names[position], shown) for position in range(listed)]
    info = {
        "shape": [rows, width],
        "dtypes": {},
        "columns": info_names,
        "columns_truncated": width > listed,
    }
    for position, name in enumerate(info_names):
        info["dtypes"].setdefault(name, shown.dtype(dtypes[position][0]))
    spans = shown.spans(rows, LIBRARY_EDGE_ITEMS)
    labels = [""] + _gapped(_pandas_labels(frame.index, spans, shown), spans)
    shown_columns = []
    for position in shown_positions:
        dtype, values = dtypes[position]
        cells = _pandas_cells(values() if shown.known_dtype(dtype) else None, dtype, spans, shown)
        shown_columns.append((shown.item(names[position], False), shown.dtype(dtype), _gapped(cells, spans)))
    head = "%s %s × %s" % (label, _counted(rows, "row"), _counted(width, "column"))
    return _table_text(head, labels, shown_columns, column_spans), info


def _info_name(name, shown):
    """A column name for value_info: a str as it is (bounded), anything else as the preview shows it."""
    if type(name) is str:
        return _cut_text(name, VALUE_INFO_NAME_MAX_CHARS)[0]
    return shown.item(name, False)


def _render_pandas_series(series, label, shown):
    _library_axes(series, series.index)
    length = int(len(series.index))
    dtype = series.dtype if shown.library_values(series._values) else _Opaque(series._values)
    spans = shown.spans(length, LIBRARY_EDGE_ITEMS)
    labels = _gapped(_pandas_labels(series.index, spans, shown), spans)
    values = series.array if shown.known_dtype(dtype) else None
    cells = _gapped(_pandas_cells(values, dtype, spans, shown), spans)
    head = "%s %s, dtype %s" % (label, _counted(length, "value"), shown.dtype(dtype))
    if series.name is not None:
        head += ", name " + shown.item(series.name, True)
    return "\n".join([head] + _table_lines([labels, cells])), {"shape": [length], "dtype": shown.dtype(dtype)}


def _render_pandas_index(index, label, shown):
    if not _library_index_values(index, shown):
        raise TypeError("%s holds a %s" % (_type_name(type(index)), _type_name(type(index._data))))
    length = int(len(index))
    info = {"shape": [length], "dtype": shown.dtype(index.dtype)}
    if type(index) is shown.pandas.get("RangeIndex"):
        return "%s(start=%d, stop=%d, step=%d)" % (label, index.start, index.stop, index.step), info
    spans = shown.spans(length, LIBRARY_EDGE_ITEMS)
    cells = _gapped(_pandas_cells(index, index.dtype, spans, shown), spans)
    return "%s %s, dtype %s: [%s]" % (label, _counted(length, "value"), info["dtype"], ", ".join(cells)), info


# -- polars --------------------------------------------------------------------------------------
# Every polars data type is a polars class (user values live in the Object type), so str(dtype) is
# polars code; values come out of to_list() as builtins, or as the user's objects for Object columns.
def _polars_dtype(dtype):
    return _cut_text(str(dtype), VALUE_INFO_NAME_MAX_CHARS)[0]


def _polars_cells(series, spans, shown):
    cells = []
    for start, stop in spans:
        cells.extend(shown.items(series.slice(start, stop - start).to_list(), False))
    return cells


def _render_polars_frame(frame, label, shown):
    rows, width = (int(size) for size in frame.shape)
    listed = min(width, VALUE_INFO_MAX_COLUMNS)
    names = [_cut_text(str.__str__(name), VALUE_INFO_NAME_MAX_CHARS)[0] for name in frame.columns]
    dtypes = [_polars_dtype(dtype) for dtype in frame.dtypes]
    info = {
        "shape": [rows, width],
        "dtypes": dict(zip(names[:listed], dtypes[:listed])),  # polars refuses duplicate names
        "columns": names[:listed],
        "columns_truncated": width > listed,
    }
    spans = shown.spans(rows, LIBRARY_EDGE_ITEMS)
    labels = [""] + _gapped([str(row) for start, stop in spans for row in range(start, stop)], spans)
    column_spans = shown.spans(width, LIBRARY_EDGE_COLUMNS)
    shown_columns = [
        (shown.item(names[position], False), dtypes[position],
         _gapped(_polars_cells(frame.to_series(position), spans, shown), spans))
        for start, stop in column_spans
        for position in range(start, stop)
    ]
    head = "%s %s × %s" % (label, _counted(rows, "row"), _counted(width, "column"))
    return _table_text(head, labels, shown_columns, column_spans), info


def _render_polars_series(series, label, shown):
    length = int(series.len())
    dtype = _polars_dtype(series.dtype)
    spans = shown.spans(length, LIBRARY_EDGE_ITEMS)
    labels = _gapped([str(row) for start, stop in spans for row in range(start, stop)], spans)
    cells = _gapped(_polars_cells(series, spans, shown), spans)
    head = "%s %s, dtype %s, name %s" % (label, _counted(length, "value"), dtype, shown.item(series.name, True))
    return "\n".join([head] + _table_lines([labels, cells])), {"shape": [length], "dtype": dtype}


# =====================================================================================================
# Source history
#
# Every cell's source under `<repl:RUN_ID>` and every file run's under its real path, published through
# linecache (once something imports it) so tracebacks and inspect.getsource() see lines of functions
# defined in older runs. Bounded by run count and by the memory the retained lines take; the oldest
# runs go first.
# =====================================================================================================
class ReplHistory(list):
    """repl_history()'s list: previewed like a list, with room for all 64 entries."""


class _SourceRegistry:
    def __init__(self):
        self._runs = collections.OrderedDict()  # run id -> (filename, lines, weight), oldest first
        self._files = {}  # filename -> lines of the newest retained run with that filename
        self._weight = 0

    def add(self, run_id, filename, code):
        lines = code.splitlines(True)
        weight = sys.getsizeof(code)
        if run_id in self._runs:
            self._forget(run_id)
        self._runs[run_id] = (filename, lines, weight)
        self._weight += weight
        self._files[filename] = lines
        linecache = sys.modules.get("linecache")
        if linecache is not None:
            linecache.cache[filename] = (len(code), None, lines, filename)
        while len(self._runs) > HISTORY_MAX_RUNS or (self._weight > HISTORY_MAX_WEIGHT and len(self._runs) > 1):
            self._forget(next(iter(self._runs)))

    def _forget(self, run_id):
        filename, lines, weight = self._runs.pop(run_id)
        self._weight -= weight
        if self._files.get(filename) is lines:  # a newer run of the same file keeps its entry
            del self._files[filename]
            linecache = sys.modules.get("linecache")
            entry = linecache.cache.get(filename) if linecache is not None else None
            if entry is not None and entry[2] is lines:
                del linecache.cache[filename]

    def publish(self, linecache):
        """Called once linecache is imported (by a traceback, inspect, warnings): it gets every entry."""
        for filename, lines in self._files.items():
            linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)

    def __contains__(self, filename):
        # Frames of evicted cells still belong to the REPL; they are just shown without their line.
        return filename in self._files or filename.startswith(REPL_FILENAME_PREFIX)

    def line(self, filename, lineno):
        lines = self._files.get(filename)
        if not lines or not isinstance(lineno, int) or not 0 < lineno <= len(lines):
            return ""
        return lines[lineno - 1].strip()[:SOURCE_LINE_MAX_CHARS]

    def retained(self):
        """(run id, filename, source text) of every retained run, oldest first."""
        return [(run_id, entry[0], "".join(entry[1])) for run_id, entry in self._runs.items()]

    def history(self):
        return ReplHistory({"run_id": run_id, "lines": len(entry[1])} for run_id, entry in self._runs.items())

    def source(self, run_id):
        entry = self._runs.get(run_id) if type(run_id) is str else None
        if entry is None:
            raise ValueError(
                "Run source unknown or evicted (source history: %d runs / 1 MiB)" % HISTORY_MAX_RUNS
            )
        return "".join(entry[1])


# =====================================================================================================
# Error text
# =====================================================================================================
class _PlainFailure(Exception):
    """A failure the worker itself reports; its message is the whole error text."""


def _exception_message(exc):
    try:
        return str(exc)
    except BaseException:
        return "<exception str() failed>"


def _render_exception(exc, sources, message):
    """(error text, whether anything was cut) in the documented traceback summary format. `message` is
    the exception's text, read once by the caller: str() of an exception is the user's code."""
    if type(exc) is _PlainFailure:
        return _cut_text(exc.args[0], ERROR_MAX_BYTES)
    try:
        return _render_traceback(exc, sources, message)
    except Exception:  # an exception object odd enough to break the summary still fails the cell
        return _type_name(type(exc)), True


def _render_traceback(exc, sources, message):
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in sources:
            lineno = tb.tb_lineno
            entry = '  File "%s", line %s, in %s' % (code.co_filename, lineno, code.co_name)
            source = sources.line(code.co_filename, lineno)
            entries.append(entry + "\n    " + source if source else entry)
        tb = tb.tb_next
    entries = entries[-TRACEBACK_MAX_FRAMES:]

    if isinstance(exc, SyntaxError) and isinstance(exc.filename, str) and exc.filename in sources:
        # A cell that does not compile: show where, as Python itself does.
        message = exc.msg if isinstance(exc.msg, str) else message
        entry = '  File "%s", line %s' % (exc.filename, exc.lineno)
        source = sources.line(exc.filename, exc.lineno)
        entries.append(entry + "\n    " + source if source else entry)
    cut = len(message) > MESSAGE_MAX_CHARS
    message = message[:MESSAGE_MAX_CHARS]
    last = _type_name(type(exc)) + (": " + message if message else "")

    text = "\n".join(entries + [last])
    while len(text) > TRACEBACK_MAX_CHARS and entries:
        entries.pop(0)
        cut = True
        text = "\n".join(entries + [last])
    if len(text) > TRACEBACK_MAX_CHARS:
        text, cut = text[:TRACEBACK_MAX_CHARS], True
    text, byte_cut = _cut_text(text, ERROR_MAX_BYTES)
    return text, cut or byte_cut


# =====================================================================================================
# Child processes
#
# subprocess.Popen is replaced by a subclass so the worker sees every child started through the plain
# subprocess API. Finished children are reaped by a thread that calls Popen.poll(), which takes Popen's
# own waitpid lock and stores the status in the object, so a later wait() or returncode still gives the
# true exit status; nothing here ever calls waitpid(-1). Children that asyncio starts are only watched:
# asyncio's child watcher reaps them and copies the status into the Popen object itself.
#
# A child that leads its own process group escapes the SIGINT the server sends to the worker's group,
# so it is reported in `job` frames (the guardian kills such groups) and killed when the worker exits.
# =====================================================================================================
class _Children:
    def __init__(self):
        # Re-entrant: Popen.__del__ may run from a garbage collection while this thread holds the lock.
        self._cond = threading.Condition(threading.RLock())
        self._polled = weakref.WeakSet()
        self._group_leaders = {}  # pid -> None, insertion-ordered, for children reported as jobs
        self._writer = None
        self._poller = None

    def install(self, writer):
        self._writer = writer
        _FIRST_IMPORTS.on("subprocess", _track_popen)
        _EXIT_HOOKS.append(self.kill_groups)
        os.register_at_fork(after_in_child=self._forget_all)

    def _forget_all(self):
        # A forked child (multiprocessing's fork context) must neither report nor kill its parent's jobs.
        self._writer = None
        self._cond = threading.Condition(threading.RLock())
        self._polled = weakref.WeakSet()
        self._group_leaders = {}
        self._poller = None

    def adopt(self, popen, leads_group, polled):
        if leads_group:
            self._group_leaders[popen.pid] = None
            self._report(popen.pid, "started")
        if polled and popen.returncode is None:
            with self._cond:
                self._polled.add(popen)
                if self._poller is None:
                    self._poller = _start_worker_thread(self._poll_loop, "repl-child-reaper")
                self._cond.notify()

    def exited(self, popen):
        """Called whenever a tracked child's status becomes known, by whichever thread learned it."""
        with self._cond:
            self._polled.discard(popen)
        if self._group_leaders.pop(popen.pid, False) is None:
            self._report(popen.pid, "finished")

    def wake(self):
        with self._cond:
            self._cond.notify()

    def sweep(self):
        """Reap what has ended now, so a cell's own children are reported before its result."""
        if self._polled:
            for popen in list(self._polled):
                try:
                    popen.poll()
                except Exception:
                    pass

    def kill_groups(self):
        # No lock: this runs from _terminate(), possibly while another thread holds it.
        for pid in list(self._group_leaders):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass

    def _report(self, pid, action):
        if self._writer is not None:
            self._writer.send({"type": "job", "id": _ActiveRun.id, "pid": pid, "action": action})

    def _poll_loop(self):
        while True:
            with self._cond:
                while not self._polled and not _abandoned_popens():
                    self._cond.wait()
                batch = list(self._polled)
            for popen in batch:
                try:
                    popen.poll()
                except Exception:
                    pass
            if _abandoned_popens():
                try:
                    sys.modules["subprocess"]._cleanup()  # polls Popen objects dropped while their child still ran
                except Exception:
                    pass
            time.sleep(CHILD_POLL_INTERVAL)


def _abandoned_popens():
    return bool(getattr(sys.modules.get("subprocess"), "_active", None))


def _leads_group(pid, kwargs):
    # The child has already called setsid()/setpgid() when Popen returns (it does so before exec), so
    # this also catches start_new_session passed positionally and preexec_fn=os.setsid.
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return bool(kwargs.get("start_new_session")) or kwargs.get("process_group") == 0


def _track_popen(subprocess):
    """Replace subprocess.Popen, right after subprocess is first imported (see "Deferred imports")."""

    class Popen(subprocess.Popen):
        _repl_status = None

        def __init__(self, *args, **kwargs):
            try:
                caller = sys._getframe(1).f_globals.get("__name__")
            except ValueError:  # called with no Python frame above
                caller = None
            super().__init__(*args, **kwargs)
            polled = not (type(caller) is str and caller.startswith("asyncio."))
            _CHILDREN.adopt(self, _leads_group(self.pid, kwargs), polled)

        # Popen, its waiters and asyncio all store the exit status here, so this sees every reaping.
        @property
        def returncode(self):
            return self._repl_status

        @returncode.setter
        def returncode(self, value):
            self._repl_status = value
            if value is not None:
                _CHILDREN.exited(self)

        def __del__(self):
            super().__del__()  # parks a still-running child in subprocess._active
            _CHILDREN.wake()

    Popen.__qualname__ = "Popen"
    Popen.__module__ = "subprocess"
    subprocess.Popen = Popen


_CHILDREN = _Children()


# =====================================================================================================
# Default executor
#
# The loop's default executor is the worker's own, so the end of a cell can see executor work it
# submitted (run_in_executor, asyncio.to_thread, DNS lookups) that has not finished.
# =====================================================================================================
_EXECUTORS = weakref.WeakSet()  # every default executor made so far (one per event loop)


def _new_default_executor():
    import concurrent.futures

    class _DefaultExecutor(concurrent.futures.ThreadPoolExecutor):
        def __init__(self):
            super().__init__(max_workers=EXECUTOR_MAX_WORKERS, thread_name_prefix="repl-executor")
            self._unfinished = set()
            self._unfinished_lock = threading.Lock()
            _EXECUTORS.add(self)

        def submit(self, fn, /, *args, **kwargs):
            with self._unfinished_lock:
                waiting = sum(1 for future in self._unfinished if not future.running())
                if waiting >= EXECUTOR_MAX_PENDING:
                    raise RuntimeError(
                        "Default executor has %d jobs waiting (limit %d); await earlier work first"
                        % (waiting, EXECUTOR_MAX_PENDING)
                    )
                future = super().submit(fn, *args, **kwargs)
                self._unfinished.add(future)
            future.add_done_callback(self._finished)
            return future

        def _finished(self, future):
            with self._unfinished_lock:
                self._unfinished.discard(future)

        def unfinished(self):
            with self._unfinished_lock:
                return list(self._unfinished)

    return _DefaultExecutor()


def _executor_owns(thread):
    return any(thread in executor._threads for executor in list(_EXECUTORS))


# =====================================================================================================
# Cell-owned work
#
# What a cell leaves behind must not act after its result: asyncio tasks it created and callbacks it
# scheduled are cancelled; threads and executor jobs cannot be stopped, so if they are still running
# after a short grace the worker reports a fatal result and exits. Tasks and threads are told from
# older ones by a baseline; callbacks are recognised by the run id in their context.
# =====================================================================================================
def _is_helper_thread(thread):
    if thread in _WORKER_THREADS or isinstance(thread, threading._DummyThread):
        return True
    if _executor_owns(thread):
        return True  # idle executor threads; their running jobs are checked separately
    # asyncio's threaded child watcher (3.10-3.12) waits for each subprocess in a thread of its own.
    return thread.daemon and thread.name.startswith(("waitpid-", "asyncio-waitpid-"))


def _task_and_future_types():
    import asyncio

    tasks = (asyncio.Task, getattr(asyncio.tasks, "_PyTask", asyncio.Task))
    return tasks, (asyncio.Future, getattr(asyncio.futures, "_PyFuture", asyncio.Future))


def _cancel_run_callbacks(loop, run_id):
    """Cancel pending loop callbacks scheduled from the run's context; returns how many to report."""
    handles = [*getattr(loop, "_ready", ()), *getattr(loop, "_scheduled", ())]
    if not handles:
        return 0
    task_types, future_types = _task_and_future_types()
    io_handles = None
    count = 0
    for handle in handles:
        context = getattr(handle, "_context", None)
        if type(context) is not contextvars.Context or context.get(_RUN_ID) != run_id or handle.cancelled():
            continue
        owner = getattr(handle._callback, "__self__", None)
        if isinstance(owner, task_types):
            continue  # a task's step or wakeup carries the task's context: the task is cancelled instead
        if io_handles is None:
            io_handles = _io_handles(loop)
        if id(handle) in io_handles:
            continue  # a transport's reader/writer: cancelling it would silence the connection for good
        args = handle._args
        handle.cancel()
        # Timers that only resolve a future (asyncio.sleep inside a cancelled task) are not reported.
        if not isinstance(owner, future_types) and not (args and isinstance(args[0], future_types)):
            count += 1
    return count


def _io_handles(loop):
    try:
        keys = loop._selector.get_map().values()
        return {id(handle) for key in keys for handle in key.data if handle is not None}
    except Exception:
        return set()


class _CellWatch:
    """The tasks and threads that were there before the current cell.

    Nothing runs between cells, so what was pending when one cell's cleanup ended (normally nothing)
    is exactly what the next cell starts with: the baseline is carried over instead of snapshotted.
    """

    def __init__(self):
        self._tasks = set()
        self._threads = set(threading.enumerate())
        self._settled_threads = None  # threading's table of live threads after the last clean cell

    def settle(self, loop, run_id, executor):
        """(tasks and callbacks cancelled, fatal error text or None) once the cell has ended.

        loop and executor are None until a cell first needed asyncio: then no task can exist.
        """
        cancelled, refused = (0, False) if loop is None else self._cancel_tasks(loop, run_id)
        if refused:
            return cancelled, MESSAGE_TASKS_REFUSED
        jobs = executor.unfinished() if executor is not None else ()
        if not jobs and self._same_threads():
            return cancelled, None  # the usual cell: nothing started, nothing to wait for or to record
        deadline = time.monotonic() + BACKGROUND_GRACE_SECONDS
        threads = self._new_threads()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for job in jobs:
            job.cancel()  # succeeds only for jobs that have not started
        running = [job for job in jobs if not job.done()]
        if running:
            import concurrent.futures

            concurrent.futures.wait(running, timeout=max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in threads) or any(not job.done() for job in running):
            return cancelled, MESSAGE_LEFT_THREADS
        self._settled_threads = dict(getattr(threading, "_active", {}))
        return cancelled, None

    def _same_threads(self):
        """True if exactly the threads alive after the last clean cell are alive now (same objects)."""
        active = getattr(threading, "_active", None)
        return active is not None and not getattr(threading, "_limbo", True) and active == self._settled_threads

    def _new_threads(self):
        return [
            thread
            for thread in threading.enumerate()
            if thread not in self._threads and thread.is_alive() and not _is_helper_thread(thread)
        ]

    def _cancel_tasks(self, loop, run_id):
        import asyncio

        # Callbacks first, so no delayed callback fires while the tasks unwind.
        count = _cancel_run_callbacks(loop, run_id)
        pending = asyncio.all_tasks(loop)
        if loop.is_closed() or not pending - self._tasks:
            self._tasks = pending
            return count, False  # nothing runs the loop now, so no task can appear later
        # Let tasks a synchronous cell created take their first step, as they would have in a REPL
        # whose loop runs between inputs: a task cancelled before it starts skips its own cleanup
        # code, and one that ignores cancellation must be seen doing so.
        own = set()
        _run_briefly(loop, asyncio.sleep(0), own)
        cancelled = set()
        deadline = None
        while True:
            # Each round also catches tasks that unwinding ones started.
            tasks = [task for task in asyncio.all_tasks(loop) if task not in self._tasks and task not in own]
            for task in tasks:
                if task not in cancelled:
                    cancelled.add(task)
                    task.cancel()
            if not tasks or loop.is_closed():
                break  # a closed loop never runs its tasks again
            now = time.monotonic()
            if deadline is None:
                deadline = now + BACKGROUND_GRACE_SECONDS
            elif now >= deadline:
                break
            _run_briefly(loop, asyncio.wait(tasks, timeout=deadline - now), own)
        for task in own:
            task.cancel()  # a waiter cut short by a task's SystemExit; it ends on the loop's next run
        if loop.is_closed():
            return count + len(cancelled), False
        count += _cancel_run_callbacks(loop, run_id)  # scheduled while the tasks unwound
        self._tasks = asyncio.all_tasks(loop)
        return count + len(cancelled), any(not task.done() for task in cancelled)


def _run_briefly(loop, coroutine, own):
    try:
        task = loop.create_task(coroutine)
    except BaseException:
        coroutine.close()
        return
    own.add(task)
    try:
        loop.run_until_complete(task)
    except BaseException:  # SystemExit or KeyboardInterrupt raised by a cell's task escapes the loop
        pass


# =====================================================================================================
# sh()
#
# The shell runs in a new process group: its background descendants can be killed with it, and the
# server learns about the group through the job frames every tracked group leader produces. Output is
# read from both pipes in the calling thread; what exceeds the budget is read and dropped so a chatty
# command never blocks on a full pipe.
# =====================================================================================================
class ShellResult(str):
    """sh()'s result: the stdout text, with .stdout, .stderr, .returncode, .ok and .truncated."""


class ShellError(RuntimeError):
    """sh(check=True) saw a nonzero status; .result holds the whole ShellResult."""

    def __init__(self, result):
        super().__init__("Shell exited with status %d; inspect exception.stderr" % result.returncode)
        self.result = result
        self.returncode = result.returncode
        self.stdout = result.stdout
        self.stderr = result.stderr


class _ShellStream:
    __slots__ = ("data", "cut")

    def __init__(self):
        self.data = bytearray()
        self.cut = False

    def add(self, chunk):
        # One byte beyond the budget is kept so the text can be cut at a character boundary.
        room = SH_STREAM_BYTES + 1 - len(self.data)
        if len(chunk) > room:
            chunk = chunk[: max(room, 0)]
            self.cut = True
        self.data += chunk

    def text(self):
        data = bytes(self.data)
        if len(data) > SH_STREAM_BYTES:
            data, self.cut = _cut_utf8(data, SH_STREAM_BYTES), True
        # Replacement characters are longer than the bytes they replace, so cut once more.
        text, cut = _cut_text(data.decode("utf-8", "replace"), SH_STREAM_BYTES)
        self.cut = self.cut or cut
        return text


_SH_SLOTS = threading.BoundedSemaphore(SH_MAX_ACTIVE)


def _shell_timeout(timeout):
    try:
        valid = (
            isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
            and math.isfinite(timeout) and timeout > 0
        )
    except OverflowError:
        valid = False
    if not valid:
        raise ValueError("sh() timeout must be a finite number of seconds greater than 0")
    return float(timeout)


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def sh(cmd, *, check=True, timeout=120.0, cwd=None, env=None):
    """Run `cmd` with /bin/sh -c in its own process group and return its stdout.

    The result is a str (the stdout, at most 50,000 bytes) with .stdout, .stderr, .returncode, .ok and
    .truncated. cwd defaults to the current directory and is ~-expanded; env is merged over os.environ.
    With check=True a nonzero status raises ShellError (a RuntimeError carrying .result, .returncode,
    .stdout and .stderr); running past `timeout` seconds raises subprocess.TimeoutExpired. The whole
    process group is killed when the call ends, so background descendants do not outlive it.
    """
    if not isinstance(cmd, str):
        raise TypeError("sh() command must be a str, not " + _type_name(type(cmd)))
    seconds = _shell_timeout(timeout)
    workdir = None if cwd is None else os.path.expanduser(os.fspath(cwd))
    environment = None
    if env is not None:
        environment = dict(os.environ)
        environment.update(env)
    import subprocess  # its first import installs the tracked Popen

    if not _SH_SLOTS.acquire(blocking=False):
        raise RuntimeError("Too many active sh processes (limit %d)" % SH_MAX_ACTIVE)
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=environment,
            start_new_session=True,
        )
        out, err = _ShellStream(), _ShellStream()
        try:
            _collect_shell(process, out, err, time.monotonic() + seconds)
            if process.returncode is None:
                raise subprocess.TimeoutExpired(cmd, seconds, output=bytes(out.data), stderr=bytes(err.data))
        finally:
            _kill_group(process.pid)
            process.stdout.close()
            process.stderr.close()
            if process.returncode is None:
                process.wait()
    finally:
        _SH_SLOTS.release()
    stdout, stderr = out.text(), err.text()
    result = ShellResult(stdout)
    result.stdout = stdout
    result.stderr = stderr
    result.returncode = process.returncode
    result.ok = process.returncode == 0
    result.truncated = out.cut or err.cut
    if check and not result.ok:
        raise ShellError(result)
    return result


def _collect_shell(process, out, err, deadline):
    """Read both pipes until they close and the shell has ended, or until the deadline."""
    # Where the OS offers one (Linux pidfd), a descriptor tells when the shell ends; elsewhere it is
    # polled. Popen.wait(timeout) would sleep in growing steps, adding latency to every call.
    import selectors
    import subprocess

    exit_fd = _exit_descriptor(process.pid)
    ended = False
    drain_deadline = None  # set once the shell has ended while something it started holds a pipe
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, out)
            selector.register(process.stderr, selectors.EVENT_READ, err)
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ, None)
            pipes = 2
            while pipes:
                limit = deadline if drain_deadline is None else min(deadline, drain_deadline)
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    return
                if drain_deadline is None and exit_fd is None:
                    remaining = min(remaining, SH_EXIT_CHECK_INTERVAL)
                for key, _ in selector.select(remaining):
                    if key.data is None:
                        selector.unregister(exit_fd)
                        ended = True
                        continue
                    chunk = os.read(key.fd, 65_536)
                    if chunk:
                        key.data.add(chunk)
                    else:
                        selector.unregister(key.fileobj)
                        pipes -= 1
                if drain_deadline is None and pipes and (ended or (exit_fd is None and process.poll() is not None)):
                    _kill_group(process.pid)
                    drain_deadline = time.monotonic() + SH_DRAIN_GRACE
            if exit_fd is not None and not ended:
                # Both pipes closed; the shell is ending now (or closed them early and runs on).
                selector.select(max(0.0, deadline - time.monotonic()))
        if process.returncode is None:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        if exit_fd is not None:
            os.close(exit_fd)


def _exit_descriptor(pid):
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:  # an older kernel, or the child is already reaped
        return None


# =====================================================================================================
# pip_install()
#
# Installs go into exactly the interpreter this worker runs, never whichever pip or python comes first
# on PATH. The command runs through sh(), so it has sh()'s bounded output, process group and job frames.
# What changed is read from the installed distributions before and after, not parsed from the
# installer's output, which differs between pip and uv and between their versions.
# =====================================================================================================
class InstallError(ShellError):
    """pip_install() saw the installer fail; .result holds the ShellResult (with .changed, .needs_reset)."""

    def __init__(self, result):
        super().__init__(result)
        self.args = ("Install exited with status %d; inspect exception.stderr" % result.returncode,)


def pip_install(*requirements, upgrade=False, index_url=None, find_links=None, timeout=PIP_INSTALL_TIMEOUT):
    """Install requirements into this session's interpreter (sys.executable) and return a ShellResult.

    Uses `uv pip install --python sys.executable` when uv is on PATH, else `sys.executable -m pip
    install`. With find_links and no index_url no index is asked (--no-index). The result has sh()'s
    attributes plus .changed ([{name, before, after}] of the distributions installed, upgraded or
    removed) and .needs_reset (imported top-level modules of those distributions: they keep their old
    code until execute_python(reset=True)). A failed install raises InstallError (a ShellError).
    """
    options = _install_options(requirements, upgrade, index_url, find_links)
    command = _installer_command() + options
    before = _installed_distributions()
    imported_before = _imported_distributions()
    import shlex

    try:
        result = sh(shlex.join(command), check=False, timeout=timeout)
    finally:
        import importlib

        importlib.invalidate_caches()  # what was just installed can be imported without a reset
    after = _installed_distributions()
    changed = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old != new:
            name = (new or old)[0]
            changed.append({"name": name, "before": old and old[1], "after": new and new[1]})
    keys = {_canonical_name(entry["name"]) for entry in changed}
    imported = _imported_distributions()
    needs_reset = sorted(
        module for mapping in (imported_before, imported) for module, owners in mapping.items() if owners & keys
    )
    result.changed = changed
    result.needs_reset = sorted(set(needs_reset))
    if not result.ok:
        raise InstallError(result)
    return result


def _install_options(requirements, upgrade, index_url, find_links):
    if not requirements:
        raise TypeError("pip_install() needs at least one requirement, e.g. pip_install('requests')")
    for requirement in requirements:
        if type(requirement) is not str or not requirement.strip():
            raise TypeError("pip_install() requirements must be non-empty strings")
        if requirement.lstrip().startswith("-"):
            raise ValueError(
                "pip_install() requirement %r looks like an option; use upgrade=, index_url= or find_links="
                % requirement
            )
    if type(upgrade) is not bool:
        raise TypeError("pip_install() upgrade must be True or False")
    if index_url is not None and (type(index_url) is not str or not index_url):
        raise TypeError("pip_install() index_url must be a URL string or None")
    if find_links is None:
        links = []
    elif isinstance(find_links, (str, os.PathLike)):
        links = [find_links]
    elif isinstance(find_links, (list, tuple)):
        links = list(find_links)
    else:
        raise TypeError("pip_install() find_links must be a path, a URL or a list of them")
    options = ["--upgrade"] if upgrade else []
    if index_url is not None:
        options += ["--index-url", index_url]
    for link in links:
        link = os.fspath(link)
        if type(link) is not str or not link:
            raise TypeError("pip_install() find_links entries must be non-empty paths or URLs")
        options += ["--find-links", link if "://" in link else os.path.abspath(os.path.expanduser(link))]
    if links and index_url is None:
        options.append("--no-index")  # an offline install must not wait on a network
    return options + list(requirements)


def _installer_command():
    """The command that installs into sys.executable, or a RuntimeError saying why it cannot be."""
    python = sys.executable
    advice = (
        "Use a project environment instead: `%s -m venv .venv` in the project, then open a session on "
        "it (python_session_open picks up the project's .venv, or pass python='.venv/bin/python'; the "
        "server's --python flag does the same for the default session) and call pip_install() there."
        % (python or "python3")
    )
    if not python:
        raise RuntimeError("Cannot install: this interpreter does not know its own executable (sys.executable is empty)")
    marker = _externally_managed()
    if marker is not None:
        raise RuntimeError(
            "Cannot install into %s: it is an externally managed system Python (%s, PEP 668); nothing was "
            "installed. %s" % (python, marker, advice)
        )
    import shutil

    uv = shutil.which("uv")
    if uv is not None:
        return [uv, "pip", "install", "--python", python]
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        raise RuntimeError(
            "Cannot install into %s: it has no pip and uv is not on PATH; nothing was installed. Run `%s -m "
            "ensurepip` or put uv on PATH. %s" % (python, python, advice)
        )
    return [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"]


def _externally_managed():
    """The EXTERNALLY-MANAGED marker of a system Python (PEP 668), or None (a virtual environment has none)."""
    if sys.prefix != sys.base_prefix:
        return None
    import sysconfig

    marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
    return marker if os.path.isfile(marker) else None


def _canonical_name(name):
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_distributions():
    """{canonical name: (name, version)} of what this interpreter's path holds now."""
    import importlib.metadata

    found = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(_canonical_name(name), (name, distribution.version))
    return found


def _imported_distributions():
    """{imported top-level module: canonical names of the distributions that provide it}."""
    import importlib.metadata

    owners = importlib.metadata.packages_distributions()
    return {
        module: {_canonical_name(name) for name in owners[module]}
        for module in list(sys.modules)
        if "." not in module and module in owners
    }


# =====================================================================================================
# Bridge calls (the mcp helper)
#
# Requests to the server's MCP broker travel as `rpc` frames tagged with the active run id and come back
# as `rpc_result` frames. A blocking call on the main thread reads the command fd itself until its
# answer comes (SIGINT still interrupts it); on another thread it waits on an Event that the thread
# reading the frames sets. An async call waits on a future of the persistent loop, resolved by the
# reader thread. Whatever stops waiting early sends `rpc_cancel`, and the server then abandons the
# request downstream.
# =====================================================================================================
class ToolError(RuntimeError):
    """A failed MCP call: `.result` holds the tool's error envelope, or None for a broker refusal, and
    `.code` the broker's stable code for a refusal (e.g. "TOOL_DENIED"), or None."""

    def __init__(self, message, result=None, code=None):
        super().__init__(message)
        self.result = result
        self.code = code


class _Envelope(dict):
    """A tool's complete result. Awaiting it gives it back, so `await mcp.call(...)` sends nothing twice."""

    def __await__(self):
        return self
        yield  # makes this a generator; the value above is the await's result


class _Pending:
    __slots__ = ("id", "run_id", "event", "loop", "future", "result", "error", "error_code", "done", "extra")

    def __init__(self, request_id, run_id, loop=None, future=None, event=None):
        self.id = request_id
        self.run_id = run_id
        self.event = event  # for a blocking call on a thread that does not read its own answer
        self.loop = loop
        self.future = future
        self.result = None
        self.error = None
        self.error_code = None
        self.done = False
        self.extra = 0.0  # seconds the server added (rpc_wait): the person is being asked meanwhile


class _Bridge:
    def __init__(self):
        self.writer = None
        self.commands = None  # the _CommandChannel: a blocking call on the main thread reads its own answer
        self.on_pending = None
        self._lock = threading.Lock()
        self._pending = {}

    def _owner(self):
        run_id = _RUN_ID.get()
        if run_id is None or run_id != _ActiveRun.id:
            raise RuntimeError(MESSAGE_FOREIGN_CALL)
        return run_id

    def _register(self, run_id, loop=None, future=None, event=None):
        with self._lock:
            if len(self._pending) >= BRIDGE_MAX_PENDING:
                raise RuntimeError("Too many pending MCP calls (limit %d)" % BRIDGE_MAX_PENDING)
            pending = _Pending(os.urandom(16).hex(), run_id, loop, future, event)
            self._pending[pending.id] = pending
        if self.on_pending is not None:
            self.on_pending()  # a kernel host opens its channel for the answer
        return pending

    def pending_count(self):
        with self._lock:
            return len(self._pending)

    def _post(self, pending, op, params):
        frame = {"type": "rpc", "id": pending.id, "run_id": pending.run_id, "op": op, "params": params}
        if not self.writer.send(frame):
            self._forget(pending.id)
            raise ToolError("MCP request could not be sent (it exceeds the 1 MiB frame limit)")

    def _forget(self, request_id):
        with self._lock:
            return self._pending.pop(request_id, None)

    def _give_up(self, pending):
        """Stop waiting: the server cancels the request downstream, and a late answer is dropped."""
        if self._forget(pending.id) is not None:
            self.writer.send({"type": "rpc_cancel", "id": pending.id, "run_id": pending.run_id})

    def deliver(self, frame):
        """Runs on whichever thread read the frame (see "Commands from the server")."""
        pending = self._forget(frame.get("id"))
        if pending is None:
            return  # given up already
        pending.result, pending.error = frame.get("result"), frame.get("error")
        pending.error_code, pending.done = frame.get("error_code"), True
        if pending.future is not None:
            try:
                pending.loop.call_soon_threadsafe(_settle_future, pending)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more
        if pending.event is not None:
            pending.event.set()

    def extend(self, frame):
        """rpc_wait: the server is waiting for the person on this request; wait that much longer for it."""
        with self._lock:
            pending = self._pending.get(frame.get("id"))
        seconds = frame.get("seconds")
        if pending is not None and type(seconds) in (int, float) and 0 < seconds <= BRIDGE_TIMEOUT_MAX:
            pending.extra += seconds

    def abandon_run(self, run_id):
        """At the end of a cell: its unanswered requests are cancelled."""
        if not self._pending:
            return  # only the cell's own code adds requests for it, and that code has ended
        with self._lock:
            leftovers = [p for p in self._pending.values() if p.run_id == run_id]
        for pending in leftovers:
            self._give_up(pending)

    def request(self, op, params, wait):
        event = None if self.commands.reads_here() else threading.Event()
        pending = self._register(self._owner(), event=event)
        try:
            if not self.commands.exchange(lambda: self._post(pending, op, params), pending, wait):
                raise ToolError(MESSAGE_BRIDGE_TIMEOUT % wait)
        finally:
            if not pending.done:
                self._give_up(pending)
        return _unwrap(pending)

    def pipeline(self, op, params_seq, window, wait):
        """Sends one `op` request per params and returns the last answer: once `window` + 1 are
        unanswered, it waits for the oldest before the next goes out. The server handles them in the order sent. The first failure raises once it is
        read; the requests still unanswered are then given up."""
        run_id = self._owner()
        here = self.commands.reads_here()
        sent = collections.deque()
        result = None
        try:
            for params in params_seq:
                pending = self._register(run_id, event=None if here else threading.Event())
                sent.append(pending)
                oldest = sent[0] if len(sent) > window else None
                if not self.commands.exchange(lambda: self._post(pending, op, params), oldest, wait):
                    raise ToolError(MESSAGE_BRIDGE_TIMEOUT % wait)
                if oldest is not None:
                    result = _unwrap(sent.popleft())
            while sent:
                if not self.commands.exchange(None, sent[0], wait):
                    raise ToolError(MESSAGE_BRIDGE_TIMEOUT % wait)
                result = _unwrap(sent.popleft())
            return result
        finally:
            for pending in sent:
                if not pending.done:
                    self._give_up(pending)

    async def arequest(self, op, params, wait):
        import asyncio

        run_id = self._owner()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._register(run_id, loop, future)
        self._post(pending, op, params)
        started = time.monotonic()
        try:
            while not future.done():
                left = started + wait + pending.extra - time.monotonic()
                if left <= 0:
                    raise ToolError(MESSAGE_BRIDGE_TIMEOUT % wait)
                await asyncio.wait((future,), timeout=left)
        finally:
            if not pending.done:
                self._give_up(pending)
        return _unwrap(pending)


def _settle_future(pending):
    if not pending.future.done():
        pending.future.set_result(None)


def _unwrap(pending):
    if pending.error is not None:
        message, code = str(pending.error), pending.error_code
        if isinstance(code, str) and code.startswith("APPROVAL_"):
            # The person's say, like a tool's own refusal: what `except McpToolError` is written for.
            raise McpToolError(message, None, message, None, code)
        raise ToolError(message, code=code if isinstance(code, str) else None)
    return pending.result


_BRIDGE = _Bridge()


# input() and getpass() in a cell ask the person, through the server's channels (MCP elicitation, the
# viewer page); the server extends the wait with rpc_wait while they think. With nobody to ask, they
# raise EOFError at once, as reading an empty stdin would, with a message that says why. Anywhere else
# (a thread the cell started, a forked child, between cells) they keep their ordinary behaviour.
_ORIGINAL_INPUT = builtins.input


def _ask_person(prompt, secret):
    try:
        _BRIDGE._owner()
    except RuntimeError:
        return None
    params = {"prompt": prompt[:INPUT_PROMPT_MAX_CHARS], "secret": secret}
    try:
        answer = _BRIDGE.request("input", params, BRIDGE_OPS_WAIT)
    except ToolError as exc:
        raise EOFError(str(exc)) from None
    if type(answer) is not str:
        raise EOFError("input() got no text back from the server")
    return answer[:INPUT_ANSWER_MAX_CHARS]


def _input(prompt=""):
    text = str(prompt)
    sys.stdout.write(text)
    sys.stdout.flush()
    answer = _ask_person(text, False)
    if answer is None:
        return _ORIGINAL_INPUT()
    sys.stdout.write(answer + "\n")  # the transcript reads as a terminal's would
    return answer


def _patch_getpass(module):
    original = module.getpass

    def getpass(prompt="Password: ", stream=None):
        answer = _ask_person(str(prompt), True)
        return original(prompt, stream) if answer is None else answer

    getpass.__doc__ = original.__doc__
    module.getpass = getpass



def _check_timeout(timeout):
    kind = type(timeout)
    if (kind is not int and kind is not float) or not math.isfinite(timeout):
        raise ValueError("timeout must be a finite number of seconds")
    if not BRIDGE_TIMEOUT_MIN <= timeout <= BRIDGE_TIMEOUT_MAX:
        raise ValueError("timeout must be between 0.01 and 3600 seconds")
    return float(timeout)


def _check_server(server):
    if type(server) is not str or not 1 <= len(server) <= 200 or any(ord(c) < 32 or ord(c) == 127 for c in server):
        raise ValueError("server must be a name of 1..200 characters without control characters")
    return server


def _call_params(server, tool, arguments, timeout, kwargs):
    if arguments is not None and kwargs:
        raise ValueError("Pass tool arguments either as arguments={...} or as keywords, not both")
    if arguments is None:
        arguments = kwargs
    elif type(arguments) is not dict and not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict")
    if type(tool) is not str or not tool:
        raise ValueError("tool must be a non-empty string")
    return {"server": _check_server(server), "tool": tool, "arguments": dict(arguments), "timeout": _check_timeout(timeout)}


def _text_blocks(envelope):
    content = envelope.get("content")
    if type(content) is not list:
        return ""
    texts = [block.get("text") for block in content if type(block) is dict and block.get("type") == "text"]
    return "\n".join(text for text in texts if type(text) is str)


def _envelope(result):
    if type(result) is not dict:
        raise ToolError("MCP broker returned a malformed result")
    envelope = _Envelope(result)
    if envelope.get("isError") is True:
        raise ToolError("MCP tool failed: " + _text_blocks(envelope)[:TOOL_ERROR_TEXT_MAX], envelope)
    return envelope


class _Mcp:
    """Calls tools of the MCP servers this broker was granted. See mcp.help() and the README."""

    def call(self, server, tool, *, arguments=None, timeout=BRIDGE_CALL_TIMEOUT, **kwargs):
        """Call a tool and return its complete result; raises ToolError if it failed."""
        params = _call_params(server, tool, arguments, timeout, kwargs)
        return _envelope(_BRIDGE.request("call", params, params["timeout"] + 1))

    async def acall(self, server, tool, *, arguments=None, timeout=BRIDGE_CALL_TIMEOUT, **kwargs):
        """Like call(), as a coroutine: run many at once with asyncio.gather."""
        params = _call_params(server, tool, arguments, timeout, kwargs)
        return _envelope(await _BRIDGE.arequest("call", params, params["timeout"] + 1))

    def servers(self):
        """Names of the servers cells may use."""
        return _BRIDGE.request("servers", {}, BRIDGE_OPS_WAIT)

    def list_tools(self, server, *, timeout=BRIDGE_LIST_TIMEOUT):
        """Every tool definition of a server that this broker grants (all pages, complete schemas)."""
        params = {"server": _check_server(server), "timeout": _check_timeout(timeout)}
        return _BRIDGE.request("tools", params, params["timeout"] + 1)

    def help(self, server=None, tool=None, *, timeout=BRIDGE_LIST_TIMEOUT):
        """help() → servers; help(server) → its tools; help(server, tool) → that tool's definition."""
        if server is None:
            return self.servers()
        tools = self.list_tools(server, timeout=timeout)
        if tool is None:
            return tools
        for definition in tools:
            if type(definition) is dict and definition.get("name") == tool:
                return definition
        raise ValueError("Unknown tool %r; use mcp.list_tools(server)" % (tool,))

    def text(self, envelope):
        """The text blocks of a result, joined with newlines."""
        if not isinstance(envelope, dict):
            raise TypeError("mcp.text() takes a tool result (a dict)")
        return _text_blocks(envelope)

    def refresh(self):
        """Re-read the registry now (and forget the tool functions built from it); returns the broker's health."""
        _TOOL_CATALOGUES.clear()
        return _BRIDGE.request("refresh", {}, BRIDGE_OPS_WAIT)

    def journal(self):
        """Metadata of every dispatched call (no arguments, no results)."""
        return _BRIDGE.request("journal", {}, BRIDGE_OPS_WAIT)

    async def ajournal(self):
        return await _BRIDGE.arequest("journal", {}, BRIDGE_OPS_WAIT)

    def explain(self, server, tool=None):
        """Why a server or tool is or is not usable, without connecting anywhere."""
        _check_server(server)
        if tool is not None and (type(tool) is not str or not 1 <= len(tool) <= 400):
            raise TypeError("tool must be a string or omitted")
        return _BRIDGE.request("explain", {"server": server, "tool": tool}, BRIDGE_OPS_WAIT)

    def __repr__(self):
        return "<mcp broker helper: mcp.help() lists servers>"

    # Tools as code (see that section below): mcp.<server>.<tool>(...) and mcp["<server>"]["<tool>"](...).
    ToolError = ToolError
    McpToolError = None  # set below, once the class exists

    def source(self):
        """Python stubs of every allowed server's tools (see mcp.<server>.source())."""
        return _all_sources()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)  # protocols (copy, pickle, ...) probe these: never an RPC for them
        server = _TOOL_CATALOGUES.server_table().get(name)
        if server is None:
            raise AttributeError("mcp has no allowed server %r; dir(mcp) lists them (mcp[\"name\"] takes the exact name)" % (name,))
        return _TOOL_CATALOGUES.handle(server)

    def __getitem__(self, server):
        _check_server(server)
        if server not in _TOOL_CATALOGUES.server_names():
            raise KeyError("mcp has no allowed server %r; mcp.servers() lists them" % (server,))
        return _TOOL_CATALOGUES.handle(server)

    def __dir__(self):
        names = set(_MCP_OWN_NAMES)
        try:
            names.update(_TOOL_CATALOGUES.server_table())
        except (ToolError, RuntimeError):
            pass  # a broken registry or a call outside a cell: the helper's own names only
        return sorted(names)


# =====================================================================================================
# Tools as code (mcp.<server>.<tool>)
#
# Every allowed tool is also a Python function, `mcp.files.read_file(path=...)`, built from its
# definition: a keyword-only signature typed from the inputSchema, a docstring, and `source()` stubs
# short enough to read instead of the JSON. A call checks its arguments here first (a TypeError naming
# the parameter, before anything is sent or journaled), then takes exactly mcp.call's path: the same
# "call" request, so the broker's allowlist, schema check, journal, deadline, cancellation and
# never-retry rules all apply. The server and tool lists are fetched on first use and kept for as long
# as the broker's registry generation stays the same; that is asked at most once per cell, and
# mcp.refresh() drops everything. Names that are not Python identifiers are mapped (_python_name); the
# subscript forms mcp["name"] and mcp.files["tool-name"] take the exact names.
# =====================================================================================================
TOOL_SUMMARY_SENTENCES = 2           # a description in source(): its first sentences ...
TOOL_SUMMARY_MAX_CHARS = 120         # ... while they fit in this many characters
TOOL_FIELD_NOTE_MAX_CHARS = 60       # a parameter's or field's description in source(): one sentence, cut
TOOL_HELP_MAX_CHARS = 4_000          # a description in help()
TOOL_SCHEMA_MAX_DEPTH = 16           # deeper schemas are typed Any and left to the broker's check
TOOL_CHECK_MAX_NODES = 10_000        # values checked per call here; the broker checks the rest
TOOL_ENUM_MAX_ITEMS = 64             # a longer enum is typed by its JSON type, not as a Literal
_SERVER_OWN_NAMES = ("source",)

_NO_DEFAULT = object()  # a required parameter's default
_JSON_PY_NAMES = {
    "string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list",
    "object": "dict", "null": "None",
}


class McpToolError(ToolError):
    """A tool called as mcp.<server>.<tool>() answered isError: true, or a call (from any mcp path)
    was not approved by the person: `.code` is then "APPROVAL_REQUIRED" and `.envelope` None.

    `.text` is its text blocks joined, `.envelope` (also `.result`) its complete CallToolResult and
    `.journal_id` the id of its record in mcp.journal().
    """

    def __init__(self, message, envelope, text, journal_id, code=None):
        super().__init__(message, envelope, code)
        self.envelope = envelope
        self.text = text
        self.journal_id = journal_id


_Mcp.McpToolError = McpToolError
_MCP_OWN_NAMES = frozenset(name for name in dir(_Mcp) if not name.startswith("_"))


def _python_name(name, reserved):
    """The attribute a server, tool or parameter name gets: itself when it is an ASCII identifier;
    otherwise every other character becomes `_` and a leading digit gets a `_` in front. A keyword or
    a name the helper uses itself gets a `_` appended (class -> class_, source -> source_)."""
    import keyword

    py = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)
    if py[:1].isdigit():
        py = "_" + py
    if keyword.iskeyword(py) or py in reserved:
        py += "_"
    return py


def _name_table(names, reserved):
    """{python name: name}. A Python name two names would share goes to the one spelled that way
    already, else to neither; names beginning with `__` get none. Those are reached by subscript only."""
    wanted = {}
    for name in names:
        wanted.setdefault(_python_name(name, reserved), []).append(name)
    table = {}
    for py, owners in wanted.items():
        if py.startswith("__"):
            continue
        if len(owners) == 1:
            table[py] = owners[0]
        elif py in owners:
            table[py] = py
    return table


def _camel(hint):
    words = "".join(c if c.isascii() and c.isalnum() else " " for c in hint).split()
    name = "".join(word[:1].upper() + word[1:] for word in words)
    return name if name[:1].isalpha() else "T" + name


def _singular(hint):
    if hint.endswith("ies") and len(hint) > 3:
        return hint[:-3] + "y"
    if hint.endswith(("ches", "shes", "sses", "xes")):
        return hint[:-2]
    if hint.endswith("s") and not hint.endswith("ss") and len(hint) > 1:
        return hint[:-1]
    return hint + "_item"


def _summary(text, sentences, limit):
    """A description on one line: its first sentence, and the next ones up to `sentences` while they fit
    in `limit` characters (a first sentence longer than that is cut at a word)."""
    if type(text) is not str:
        return ""
    words = " ".join(text.split())
    end = 0
    for number in range(sentences):
        found = min((i for i in (words.find(". ", end), words.find("? ", end), words.find("! ", end)) if i >= 0), default=-1)
        following = len(words) if found < 0 else found + 1
        if number and following > limit:
            break
        end = following
        if found < 0:
            break
    words = words[:end]
    if len(words) > limit:
        words = words[: limit - 3].rsplit(" ", 1)[0] + "..."
    return words


def _resolve_ref(root, ref):
    """A local `#/...` reference inside the tool's own schema, or None."""
    if not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if type(node) is not dict or part not in node:
            return None
        node = node[part]
    return node if type(node) is dict else None


def _union(annotations):
    """(text, runtime) of a union of (text, runtime) pairs, duplicates removed."""
    import functools
    import operator
    import typing

    seen = {}
    for text, runtime in annotations:
        if text == "Any":
            return "Any", typing.Any
        seen.setdefault(text, runtime)
    if len(seen) == 1:
        return next(iter(seen.items()))
    try:
        runtime = functools.reduce(operator.or_, seen.values())
    except TypeError:
        runtime = typing.Union[tuple(seen.values())]
    return " | ".join(seen), runtime


def _literal(values):
    import typing

    return "Literal[%s]" % ", ".join(repr(v) for v in values), typing.Literal[tuple(values)]


class _Types:
    """Python types for one server's schemas: the annotation text of the stubs and the objects of the
    signatures, built together. Object schemas become TypedDicts, shared by every tool of the server
    that has an object of the same fields."""

    def __init__(self, module):
        self.module = module
        self.by_shape = {}
        self.taken = set()
        self.stubs = []
        self.uses = set()

    def of(self, schema, hint, root, depth=0):
        import typing

        if schema is True or schema == {} or type(schema) is not dict or depth > TOOL_SCHEMA_MAX_DEPTH:
            self.uses.add("Any")
            return "Any", typing.Any
        ref = schema.get("$ref")
        if type(ref) is str:
            target = _resolve_ref(root, ref)
            if target is None:
                self.uses.add("Any")
                return "Any", typing.Any
            return self.of(target, ref.rsplit("/", 1)[-1] or hint, root, depth + 1)
        if "const" in schema and _literal_value(schema["const"]):
            self.uses.add("Literal")
            return _literal([schema["const"]])
        enum = schema.get("enum")
        if type(enum) is list and 0 < len(enum) <= TOOL_ENUM_MAX_ITEMS and all(_literal_value(v) for v in enum):
            self.uses.add("Literal")
            return _literal(enum)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if type(branches) is list and branches:
                return _union([self.of(branch, hint, root, depth + 1) for branch in branches])
        kind = schema.get("type")
        if type(kind) is list and kind and all(type(k) is str for k in kind):
            return _union([self.of(dict(schema, type=k), hint, root, depth + 1) for k in kind])
        if kind is None and type(schema.get("properties")) is dict:
            kind = "object"
        simple = {"string": str, "integer": int, "number": float, "boolean": bool, "null": None}
        if kind in simple:
            return _JSON_PY_NAMES[kind], simple[kind]
        if kind == "array":
            items = schema.get("items")
            if type(items) is not dict:
                return "list", list
            text, runtime = self.of(items, _singular(hint), root, depth + 1)
            return "list[%s]" % text, list[runtime]
        if kind == "object":
            properties = schema.get("properties")
            if type(properties) is dict and properties:
                return self._typed_dict(schema, properties, hint, root, depth)
            extra = schema.get("additionalProperties")
            if type(extra) is dict and extra:
                text, runtime = self.of(extra, _singular(hint), root, depth + 1)
                return "dict[str, %s]" % text, dict[str, runtime]
            return "dict", dict
        self.uses.add("Any")
        return "Any", typing.Any

    def _typed_dict(self, schema, properties, hint, root, depth):
        import typing

        required = schema.get("required")
        required = set(required) if type(required) is list else set()
        fields = []
        for key, sub in properties.items():
            text, runtime = self.of(sub, key, root, depth + 1)
            note = _summary(sub.get("description") if type(sub) is dict else None, 1, TOOL_FIELD_NOTE_MAX_CHARS)
            fields.append((key, text, runtime, key in required, note))
        shape = tuple((key, text, need) for key, text, _, need, _ in fields)
        known = self.by_shape.get(shape)
        if known is not None:
            return known
        name = base = _camel(hint)
        number = 2
        while name in self.taken:
            name = "%s%d" % (base, number)
            number += 1
        self.taken.add(name)
        every, none = all(f[3] for f in fields), not any(f[3] for f in fields)
        mixed = not every and not none
        not_required = getattr(typing, "NotRequired", None) if mixed else None
        members = {
            key: (not_required[runtime] if not_required is not None and not need else runtime)
            for key, _, runtime, need, _ in fields
        }
        runtime = typing.TypedDict(name, members, total=every or not_required is not None)
        runtime.__module__ = self.module
        self.uses.add("TypedDict")
        if mixed:
            self.uses.add("NotRequired")
        total = "" if every or mixed else ", total=False"
        wrap = lambda text, need: "NotRequired[%s]" % text if mixed and not need else text  # noqa: E731
        if all(key.isascii() and key.isidentifier() and not _is_keyword(key) for key, *_ in fields):
            lines = ["class %s(TypedDict%s):" % (name, total)]
            for key, text, _, need, note in fields:
                line = "    %s: %s" % (key, wrap(text, need))
                lines.append(line + ("  # " + note if note else ""))
        else:
            members_text = ", ".join("%s: %s" % (json.dumps(key), wrap(text, need)) for key, text, _, need, _ in fields)
            lines = ["%s = TypedDict(%s, {%s}%s)" % (name, json.dumps(name), members_text, total)]
        self.stubs.append("\n".join(lines))
        self.by_shape[shape] = (name, runtime)
        return name, runtime


def _is_keyword(name):
    import keyword

    return keyword.iskeyword(name)


def _literal_value(value):
    return value is None or type(value) in (str, int, bool)


class _Param:
    __slots__ = ("name", "py", "schema", "required", "default", "nullable", "text", "runtime", "note")


class _ToolSpec:
    """What one tool function knows: names, parameters, types, docstring and stub."""

    def __init__(self, server, server_py, py, definition, types):
        import inspect

        self.server, self.server_py, self.py = server, server_py, py
        self.name = definition.get("name")
        self.definition = definition
        self.label = "mcp.%s.%s" % (server_py, py)
        schema = definition.get("inputSchema")
        self.root = schema if type(schema) is dict else {}
        properties = self.root.get("properties")
        properties = properties if type(properties) is dict else {}
        required = self.root.get("required")
        required = set(required) if type(required) is list else set()
        extra = self.root.get("additionalProperties")
        self.extra = extra if extra is True or (type(extra) is dict and extra) else None
        table = _name_table(list(properties), ())
        by_name = {name: py_name for py_name, name in table.items()}
        self.params, self.by_key = [], {}
        for key, sub in properties.items():
            param = _Param()
            param.name, param.py, param.schema = key, by_name.get(key), sub if type(sub) is dict else {}
            param.required = key in required
            param.text, param.runtime = types.of(sub, key, self.root)
            param.nullable = _accepts_null(param.schema)
            param.default = _NO_DEFAULT
            if not param.required:
                if "default" in param.schema and _json_default(param.schema["default"]):
                    param.default = param.schema["default"]
                else:
                    param.default = None
                    param.text, param.runtime = _union([(param.text, param.runtime), ("None", None)])
            param.note = _summary(param.schema.get("description"), 1, TOOL_FIELD_NOTE_MAX_CHARS)
            self.params.append(param)
            self.by_key[key] = param
            if param.py is not None:
                self.by_key.setdefault(param.py, param)
        output = definition.get("outputSchema")
        if type(output) is dict and type(output.get("properties")) is dict and output["properties"]:
            self.returns = types.of(output, "%s_result" % py, output)
        elif type(output) is dict:
            self.returns = ("dict", dict)
        else:
            self.returns = _union([("str", str), ("dict", dict)])
        empty = inspect.Parameter.empty
        parameters = [
            inspect.Parameter(
                p.py,
                inspect.Parameter.KEYWORD_ONLY,
                default=empty if p.default is _NO_DEFAULT else p.default,
                annotation=p.runtime,
            )
            for p in self.params
            if p.py is not None
        ]
        self.rest = _python_name("other", {p.py for p in self.params}) if self.extra is not None else None
        if self.rest is not None:
            parameters.append(inspect.Parameter(self.rest, inspect.Parameter.VAR_KEYWORD))
        self.signature = inspect.Signature(parameters, return_annotation=self.returns[1])
        self.doc = self._doc()

    def _arguments_text(self):
        parts = []
        for p in self.params:
            if p.py is None:
                continue
            if p.default is _NO_DEFAULT:
                parts.append("%s: %s" % (p.py, p.text))
            else:
                parts.append("%s: %s = %r" % (p.py, p.text, p.default))
        if self.rest is not None:
            parts.append("**" + self.rest)
        return "*, " + ", ".join(parts) if parts else ""

    def _spelled(self, p):
        return p.py if p.py == p.name else "%s (sent as %s)" % (p.py or "-", json.dumps(p.name))

    def _doc(self):
        description = self.definition.get("description")
        description = description.strip()[:TOOL_HELP_MAX_CHARS] if type(description) is str else ""
        lines = [description or "(no description)", ""]
        if self.params:
            lines.append("Parameters:")
        for p in self.params:
            default = " (required)" if p.default is _NO_DEFAULT else " = %r" % (p.default,)
            lines.append("  %s: %s%s%s" % (self._spelled(p), p.text, default, " - " + p.note if p.note else ""))
        if self.rest is not None:
            lines.append("  **%s: any further arguments the schema allows" % self.rest)
        lines += [
            "",
            "Returns the tool's structuredContent, else its text when the result is text only, else the whole "
            "result; a failed tool raises mcp.McpToolError. Tool %s of server %s, through mcp.call's path; "
            "`await %s.acall(...)` is the coroutine form." % (json.dumps(self.name), json.dumps(self.server), self.label),
        ]
        return "\n".join(lines)

    def stub(self):
        head = "def %s(%s) -> %s:" % (self.py, self._arguments_text(), self.returns[0])
        if self.py != self.name:
            head = "# %s\n%s" % (json.dumps(self.name), head)
        # Parameter descriptions are left to help(): the signature says what a call needs.
        summary = _summary(self.definition.get("description"), TOOL_SUMMARY_SENTENCES, TOOL_SUMMARY_MAX_CHARS)
        return '%s\n    """%s"""' % (head, _docstring_safe(summary) or "...")


def _docstring_safe(text):
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _json_default(value):
    return value is None or type(value) in (str, int, float, bool) or (type(value) in (list, dict) and len(json.dumps(value)) <= 200)


class _ArgumentProblem(Exception):
    def __init__(self, path, message):
        super().__init__(path, message)
        self.path, self.message = path, message


def _json_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def _kind_fits(kind, value, wanted):
    if wanted == "integer":
        return kind == "integer" or (kind == "number" and value.is_integer())
    if wanted == "number":
        return kind == "integer" or (kind == "number" and math.isfinite(value))
    if wanted in _JSON_PY_NAMES:
        return kind == wanted
    return True  # a type this check does not know is the broker's to judge


def _check_value(schema, value, path, root, depth, budget):
    """Raises _ArgumentProblem when `value` cannot satisfy `schema` by its JSON types, enums, required
    and closed object keys. What it does not understand it lets through: the broker validates fully."""
    if type(schema) is not dict or depth > TOOL_SCHEMA_MAX_DEPTH or budget[0] <= 0:
        return
    budget[0] -= 1
    ref = schema.get("$ref")
    if type(ref) is str:
        target = _resolve_ref(root, ref)
        if target is not None:
            _check_value(target, value, path, root, depth + 1, budget)
        return
    kind = _json_kind(value)
    if kind is None:
        raise _ArgumentProblem(path, "is of type %s, which has no JSON form" % _type_name(type(value)))
    if kind == "number" and not math.isfinite(value):
        raise _ArgumentProblem(path, "must be a finite number")
    wanted = schema.get("type")
    wanted = [wanted] if type(wanted) is str else wanted
    if type(wanted) is list and wanted and all(type(w) is str for w in wanted):
        if not any(_kind_fits(kind, value, w) for w in wanted):
            names = " or ".join(_JSON_PY_NAMES.get(w, w) for w in wanted)
            raise _ArgumentProblem(path, "must be %s, not %s" % (names, _type_name(type(value))))
    enum = schema.get("enum")
    if type(enum) is list and enum and all(_literal_value(v) for v in enum) and _literal_value(value):
        if not any(type(v) is type(value) and v == value for v in enum):
            shown = ", ".join(json.dumps(v) for v in enum[:TOOL_ENUM_MAX_ITEMS])
            raise _ArgumentProblem(path, "must be one of %s" % shown)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if type(branches) is list and branches:
            for branch in branches:
                try:
                    _check_value(branch, value, path, root, depth + 1, budget)
                    break
                except _ArgumentProblem:
                    continue
            else:
                raise _ArgumentProblem(path, "matches none of the types its schema allows")
    branches = schema.get("allOf")
    if type(branches) is list:
        for branch in branches:
            _check_value(branch, value, path, root, depth + 1, budget)
    if kind == "object":
        properties = schema.get("properties")
        properties = properties if type(properties) is dict else {}
        required = schema.get("required")
        for key in required if type(required) is list else ():
            if type(key) is str and key not in value:
                raise _ArgumentProblem(path, "is missing the required key %s" % json.dumps(key))
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if type(key) is not str:
                raise _ArgumentProblem(path, "has a key that is not a str")
            if key in properties:
                _check_value(properties[key], item, "%s[%s]" % (path, json.dumps(key)), root, depth + 1, budget)
            elif extra is False:
                raise _ArgumentProblem(path, "has the unknown key %s" % json.dumps(key[:100]))
            elif type(extra) is dict:
                _check_value(extra, item, "%s[%s]" % (path, json.dumps(key[:100])), root, depth + 1, budget)
    elif kind == "array":
        items = schema.get("items")
        if type(items) is dict:
            for index, item in enumerate(value):
                _check_value(items, item, "%s[%d]" % (path, index), root, depth + 1, budget)


def _tool_arguments(spec, args, kwargs):
    """The arguments object for a call, or TypeError: checked here, before anything is sent."""
    if args:
        raise TypeError(
            "%s() takes keyword arguments only (got %d positional); call it as %s(%s)"
            % (spec.label, len(args), spec.label, ", ".join("%s=..." % p.py for p in spec.params if p.py)[:200])
        )
    arguments = {}
    budget = [TOOL_CHECK_MAX_NODES]
    for key, value in kwargs.items():
        param = spec.by_key.get(key)
        if param is None:
            if spec.extra is None:
                known = ", ".join(p.py or json.dumps(p.name) for p in spec.params) or "none"
                raise TypeError("%s() got an unexpected keyword argument %r; its parameters: %s" % (spec.label, key, known))
            try:
                _check_value(spec.extra if type(spec.extra) is dict else {}, value, key, spec.root, 0, budget)
            except _ArgumentProblem as problem:
                raise TypeError("%s() argument %r %s" % (spec.label, problem.path, problem.message)) from None
            arguments[key] = value
            continue
        if param.name in arguments:
            raise TypeError("%s() got argument %r twice (as %r and %r)" % (spec.label, param.py, param.py, param.name))
        if value is None and not param.required and not param.nullable:
            continue  # None stands for "not given" for an optional parameter that takes no null
        try:
            _check_value(param.schema, value, param.py or param.name, spec.root, 0, budget)
        except _ArgumentProblem as problem:
            raise TypeError("%s() argument %r %s" % (spec.label, problem.path, problem.message)) from None
        arguments[param.name] = value
    missing = [p.py or p.name for p in spec.params if p.required and p.name not in arguments]
    if missing:
        raise TypeError(
            "%s() missing required keyword argument%s: %s"
            % (spec.label, "s" if len(missing) > 1 else "", ", ".join(repr(m) for m in missing))
        )
    return arguments


def _accepts_null(schema, depth=0):
    """Whether a parameter's own schema takes null (then None is sent; otherwise it means "not given")."""
    kinds, enum = schema.get("type"), schema.get("enum")
    if kinds == "null" or (type(kinds) is list and "null" in kinds) or (type(enum) is list and None in enum):
        return True
    branches = [b for key in ("anyOf", "oneOf") if type(schema.get(key)) is list for b in schema[key]]
    return depth < TOOL_SCHEMA_MAX_DEPTH and any(type(b) is dict and _accepts_null(b, depth + 1) for b in branches)


def _tool_value(spec, answer):
    """A call's answer as the function returns it; McpToolError for isError."""
    if type(answer) is not dict or type(answer.get("result")) is not dict:
        raise ToolError("MCP broker returned a malformed result")
    envelope = _Envelope(answer["result"])
    if envelope.get("isError") is True:
        text = _text_blocks(envelope)
        raise McpToolError("MCP tool failed: " + text[:TOOL_ERROR_TEXT_MAX], envelope, text, answer.get("journal_id"))
    structured = envelope.get("structuredContent")
    if structured is not None:
        return structured
    content = envelope.get("content")
    if type(content) is list and all(type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str for b in content):
        return _text_blocks(envelope)
    return envelope


def _tool_function(spec, timeout=BRIDGE_CALL_TIMEOUT):
    def call(*args, **kwargs):
        params = {"server": spec.server, "tool": spec.name, "arguments": _tool_arguments(spec, args, kwargs)}
        params.update(timeout=timeout, with_journal_id=True)
        return _tool_value(spec, _BRIDGE.request("call", params, timeout + 1))

    async def acall(*args, **kwargs):
        params = {"server": spec.server, "tool": spec.name, "arguments": _tool_arguments(spec, args, kwargs)}
        params.update(timeout=timeout, with_journal_id=True)
        return _tool_value(spec, await _BRIDGE.arequest("call", params, timeout + 1))

    def with_timeout(seconds):
        """The same tool with another deadline (0.01..3600 s; the default is 120 s)."""
        return _tool_function(spec, _check_timeout(seconds))

    for function, suffix in ((call, ""), (acall, ".acall")):
        function.__name__ = spec.py
        function.__qualname__ = spec.label + suffix
        function.__module__ = "mcp." + spec.server_py
        function.__doc__ = spec.doc
        function.__signature__ = spec.signature
    call.acall, call.with_timeout = acall, with_timeout
    call.server, call.tool, call.definition = spec.server, spec.name, spec.definition
    return call


class _ServerTools:
    """One server's allowed tools, as functions built on first use."""

    def __init__(self, server, server_py, definitions):
        self.server, self.server_py = server, server_py
        self.definitions = {d["name"]: d for d in definitions if type(d) is dict and type(d.get("name")) is str}
        self.table = _name_table(list(self.definitions), _SERVER_OWN_NAMES)
        self.py_of = {name: py for py, name in self.table.items()}
        self.types = _Types("mcp." + server_py)
        self.functions = {}
        self.built = False

    def function(self, name):
        function = self.functions.get(name)
        if function is None and name in self.definitions:
            py = self.py_of.get(name) or _python_name(name, _SERVER_OWN_NAMES)
            function = _tool_function(_ToolSpec(self.server, self.server_py, py, self.definitions[name], self.types))
            self.functions[name] = function
        return function

    def source(self):
        stubs = []
        for name in self.definitions:
            stub = _ToolSpec(self.server, self.server_py, self.py_of.get(name) or _python_name(name, _SERVER_OWN_NAMES), self.definitions[name], self.types).stub()
            if name not in self.py_of:
                stub = "# no attribute (its Python name is taken): use mcp.%s[%s]\n%s" % (self.server_py, json.dumps(name), stub)
            stubs.append(stub)
        here = "mcp." + self.server_py if self.server_py == self.server else "mcp[%s]" % json.dumps(self.server)
        typing_names = sorted(self.types.uses)
        head = [
            "# %s: %d tools. Call %s.<tool>(...) or await %s.<tool>.acall(...)." % (here, len(self.definitions), here, here),
            "# They return structuredContent, else the text, else the whole result; failures raise McpToolError.",
        ]
        if typing_names:
            head.append("from typing import %s" % ", ".join(typing_names))
        return "\n".join(head) + "\n\n" + "\n".join(self.types.stubs + stubs) + "\n"


class _ServerHandle:
    """mcp.<server>: its allowed tools as attributes (dir() lists them), or by exact name as items."""

    __slots__ = ("_server", "_server_py")

    def __init__(self, server, server_py):
        self._server, self._server_py = server, server_py

    def _tools(self):
        return _TOOL_CATALOGUES.tools_of(self._server, self._server_py)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        tools = self._tools()
        tool = tools.table.get(name)
        if tool is None:
            raise AttributeError(
                "mcp.%s has no allowed tool %r; dir(mcp.%s) lists them (mcp.%s[\"name\"] takes the exact name)"
                % (self._server_py, name, self._server_py, self._server_py)
            )
        return tools.function(tool)

    def __getitem__(self, tool):
        if type(tool) is not str:
            raise TypeError("mcp.%s[...] takes a tool name (str)" % self._server_py)
        function = self._tools().function(tool)
        if function is None:
            raise KeyError("mcp.%s has no allowed tool %r; dir(mcp.%s) lists them" % (self._server_py, tool, self._server_py))
        return function

    def __dir__(self):
        return sorted(set(self._tools().table) | set(_SERVER_OWN_NAMES))

    def source(self):
        """Python stubs of this server's allowed tools: signatures, TypedDicts, one-line descriptions."""
        return self._tools().source()

    def __repr__(self):
        return "<mcp server %s: dir() lists its tools, source() shows their signatures>" % json.dumps(self._server)


class _ToolCatalogues:
    """The servers and tool definitions the functions are built from, for one registry generation."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.generation = None
        self.checked_run = None
        self.servers = {}
        self.names = ()
        self.handles = {}
        self.tools = {}

    def _check(self):
        run = _ActiveRun.id
        if run is not None and run == self.checked_run:
            return
        answer = _BRIDGE.request("generation", {}, BRIDGE_OPS_WAIT)
        if type(answer) is not dict or type(answer.get("servers")) is not list:
            raise ToolError("MCP broker returned a malformed result")
        if answer.get("generation") != self.generation:
            self.handles, self.tools = {}, {}
            self.generation = answer.get("generation")
        self.names = tuple(s for s in answer["servers"] if type(s) is str)
        self.servers = _name_table(self.names, _MCP_OWN_NAMES)
        self.checked_run = run

    def server_table(self):
        """{python name: server} of the allowed servers that have an attribute."""
        self._check()
        return self.servers

    def server_names(self):
        self._check()
        return self.names

    def handle(self, server):
        handle = self.handles.get(server)
        if handle is None:
            py = next((p for p, name in self.servers.items() if name == server), None) or _python_name(server, _MCP_OWN_NAMES)
            handle = self.handles[server] = _ServerHandle(server, py)
        return handle

    def tools_of(self, server, server_py):
        self._check()
        tools = self.tools.get(server)
        if tools is None:
            params = {"server": server, "timeout": BRIDGE_LIST_TIMEOUT}
            definitions = _BRIDGE.request("tools", params, BRIDGE_LIST_TIMEOUT + 1)
            if type(definitions) is not list:
                raise ToolError("MCP broker returned a malformed result")
            tools = self.tools[server] = _ServerTools(server, server_py, definitions)
        return tools


_TOOL_CATALOGUES = _ToolCatalogues()


def _all_sources():
    parts = []
    for py, server in sorted(_TOOL_CATALOGUES.server_table().items()):
        try:
            parts.append(_TOOL_CATALOGUES.tools_of(server, py).source())
        except ToolError as exc:
            parts.append("# mcp.%s: unavailable: %s\n" % (py, " ".join(str(exc).split())[:300]))
    return "\n".join(parts) if parts else "# No MCP servers are allowed; see mcp.explain(server).\n"


# =====================================================================================================
# Artifacts (the artifact helpers and auto-artifacts)
#
# A value becomes an artifact by uploading its bytes to the server (begin, appends at the current size,
# several in flight, commit; abort on any failure), through the same bridge as mcp.call, so the upload
# belongs to the active cell. Large values are written into an unnamed file the server adopts (Linux);
# the appends then carry only sizes. JSON artifacts are built only from exact builtins, read through type() and C-level
# container access: a refused value costs no user hook and sends nothing.
# =====================================================================================================
class _NotExactJson(ValueError):
    pass


class _ExactJson:
    def __init__(self):
        self.nodes = 0

    def convert(self, value, depth):
        self.nodes += 1
        if self.nodes > ARTIFACT_JSON_MAX_NODES:
            raise _NotExactJson("more than %d values" % ARTIFACT_JSON_MAX_NODES)
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            if value.bit_length() > PREVIEW_MAX_INT_BITS:
                raise _NotExactJson("an int over %d bits" % PREVIEW_MAX_INT_BITS)
            return value
        if kind is float:
            if not math.isfinite(value):
                raise _NotExactJson("a non-finite float")
            return value
        if kind is str or kind is ShellResult:
            return str.__str__(value)
        if depth >= ARTIFACT_JSON_MAX_DEPTH:
            raise _NotExactJson("nesting deeper than %d" % ARTIFACT_JSON_MAX_DEPTH)
        if kind is list or kind is tuple or kind is ReplHistory:
            return [self.convert(item, depth + 1) for item in value]
        if kind is dict or kind is _Envelope:
            converted = {}
            for key, item in dict.items(value):
                if type(key) is not str:
                    raise _NotExactJson("a dict key of type %s" % _type_name(type(key)))
                converted[key] = self.convert(item, depth + 1)
            return converted
        raise _NotExactJson("a value of type %s" % _type_name(kind))


def _exact_json_bytes(value):
    try:
        converted = _ExactJson().convert(value, 0)
    except (_NotExactJson, RecursionError, RuntimeError) as exc:
        # RuntimeError: another thread resized a container while it was being read.
        raise ValueError(
            "artifact() stores exact JSON builtins only (None, bool, int, finite float, str, list, tuple, "
            "dict with str keys, mcp results; depth <= %d, <= %d values); found %s. Pass str or bytes, or "
            "convert the value first." % (ARTIFACT_JSON_MAX_DEPTH, ARTIFACT_JSON_MAX_NODES, exc)
        ) from None
    return json.dumps(converted, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _artifact_bytes(value, format):
    """(bytes, format) for a value, checked completely before anything is sent."""
    kind = type(value)
    if format is None:
        if kind is bytes or kind is bytearray:
            format = "binary"
        elif kind is str or kind is ShellResult:
            format = "text"
        else:
            format = "json"
    if format == "binary":
        if kind is not bytes and kind is not bytearray:
            raise TypeError("a binary artifact takes bytes or bytearray")
        data = bytes(value)
    elif format == "text":
        if kind is not str and kind is not ShellResult:
            raise TypeError("a text artifact takes a str")
        try:
            data = str.__str__(value).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a text artifact must be valid Unicode (it holds a lone surrogate)") from None
    elif format == "json":
        data = _exact_json_bytes(value)
    else:
        raise ValueError("format must be 'json', 'text' or 'binary'")
    if len(data) > ARTIFACT_MAX_BYTES:
        raise ValueError("Artifact exceeds 16 MiB; write the value to a file instead")
    return data, format


def _upload(data, format):
    """Begin, appends (ARTIFACT_WINDOW in flight), commit; abort on any failure. From
    ARTIFACT_HANDOVER_MIN_BYTES the bytes go into an unnamed file the server adopts, where it can; where
    it cannot (the server refuses the file, the temp directory's file system is full), as base64 chunks."""
    fd = _handover_file() if len(data) >= ARTIFACT_HANDOVER_MIN_BYTES else None
    try:
        if fd is not None:
            try:
                begun = _BRIDGE.request("artifact.begin", {"format": format, "fd": fd}, BRIDGE_OPS_WAIT)
            except ToolError as exc:
                # Only a refused file: after a timeout or a full server, a second begin would not help.
                if "Artifact file handover" not in str(exc):
                    raise
            else:
                try:
                    pieces = _file_pieces(fd, data, begun["upload_id"], begun["piece_bytes"])
                    return _send_upload(begun, pieces)
                except OSError as exc:
                    if exc.errno not in _FILE_FULL:
                        raise
        begun = _BRIDGE.request("artifact.begin", {"format": format}, BRIDGE_OPS_WAIT)
        return _send_upload(begun, _chunks(data, begun["upload_id"]))
    finally:
        if fd is not None:
            os.close(fd)


_FILE_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _send_upload(begun, appends):
    """The appends of a begun upload, then its commit; the upload is aborted if anything fails."""
    upload_id = begun["upload_id"]
    try:
        _BRIDGE.pipeline("artifact.append", appends, ARTIFACT_WINDOW, BRIDGE_OPS_WAIT)
        return _BRIDGE.request("artifact.commit", {"upload_id": upload_id}, BRIDGE_OPS_WAIT)
    except BaseException:
        try:
            _BRIDGE.request("artifact.abort", {"upload_id": upload_id}, BRIDGE_OPS_WAIT)
        except BaseException:
            pass  # the server drops unfinished uploads when the cell ends anyway
        raise


def _handover_file():
    """An unnamed file (O_TMPFILE, mode 0600) in the temp directory, or None where none can be made. No
    other user can open or replace it, and it disappears with its last descriptor, whoever crashes."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(os.environ.get("TMPDIR") or "/tmp", flag | os.O_RDWR, 0o600)
    except OSError:
        return None  # a file system without O_TMPFILE


def _file_pieces(fd, data, upload_id, piece_bytes):
    """Appends for a handed-over file: each piece is written there before the server is told of it."""
    view = memoryview(data)
    for offset in range(0, len(data), piece_bytes):
        piece = view[offset : offset + piece_bytes]
        done = 0
        while done < len(piece):
            done += os.pwrite(fd, piece[done:], offset + done)
        yield {"upload_id": upload_id, "offset": offset, "size": len(piece)}


def _chunks(data, upload_id):
    """Appends carrying the bytes themselves, base64 chunks of ARTIFACT_CHUNK_BYTES."""
    view = memoryview(data)
    for offset in range(0, len(data), ARTIFACT_CHUNK_BYTES):
        chunk = binascii.b2a_base64(view[offset : offset + ARTIFACT_CHUNK_BYTES], newline=False)
        yield {"upload_id": upload_id, "offset": offset, "data": chunk.decode("ascii")}


def _artifact_id(ref):
    """An id, or a reference dict holding one."""
    if (type(ref) is dict or type(ref) is _Envelope) and type(dict.get(ref, "id")) is str:
        return dict.get(ref, "id")
    if type(ref) is not str or not ref:
        raise TypeError("pass an artifact id (str) or the reference dict artifact() returned")
    return ref


def _absolute_path(path):
    if type(path) is not str and not isinstance(path, os.PathLike):
        raise TypeError("path must be a str or os.PathLike")
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _check_int(name, value, low, high):
    if type(value) is not int or not low <= value <= high:
        raise ValueError("%s must be an int in %d..%d" % (name, low, high))
    return value


def artifact(value=None, *, path=None, format=None):
    """Keep a value (bytes → binary, str → text, exact JSON builtins → json) or, with path=, a copy of a
    file (format default binary) on the server. Returns the reference {id, size, format, sha256, ...}."""
    if path is not None:
        if value is not None:
            raise ValueError("pass a value or path=, not both")
        format = "binary" if format is None else format
        if format not in ARTIFACT_FORMATS:
            raise ValueError("format must be 'json', 'text' or 'binary'")
        params = {"path": _absolute_path(path), "format": format}
        return _BRIDGE.request("artifact.create", params, BRIDGE_OPS_WAIT)
    if value is None:
        raise ValueError("artifact() needs a value or path=")
    if format is not None and format not in ARTIFACT_FORMATS:
        raise ValueError("format must be 'json', 'text' or 'binary'")
    data, format = _artifact_bytes(value, format)
    return _upload(data, format)


def artifact_read(id, *, offset=0, length=ARTIFACT_READ_MAX_BYTES, encoding="text"):
    """A range of an artifact: {artifact, offset, length, encoding, content, has_more}."""
    if encoding not in ("text", "base64", "hex"):
        raise ValueError("encoding must be 'text', 'base64' or 'hex'")
    params = {
        "id": _artifact_id(id),
        "offset": _check_int("offset", offset, 0, 2**63 - 1),
        "length": _check_int("length", length, 0, ARTIFACT_READ_MAX_BYTES),
        "encoding": encoding,
    }
    return _BRIDGE.request("artifact.read", params, BRIDGE_OPS_WAIT)


def artifact_save(id, path, *, overwrite=False):
    """Write the artifact's exact bytes to path (SHA-256 checked); replace a file only with overwrite=True."""
    if type(overwrite) is not bool:
        raise TypeError("overwrite must be True or False")
    params = {"id": _artifact_id(id), "path": _absolute_path(path), "overwrite": overwrite}
    return _BRIDGE.request("artifact.save", params, BRIDGE_OPS_WAIT)


def artifact_delete(id):
    """Delete an artifact now."""
    return _BRIDGE.request("artifact.drop", {"id": _artifact_id(id)}, BRIDGE_OPS_WAIT)


def artifact_forward(id, server, tool, argument, *, format="json", arguments=None):
    """Send an artifact (<= 512 KiB) as arguments[argument] of a brokered tool; returns its result."""
    if format not in ("json", "text", "base64"):
        raise ValueError("format must be 'json', 'text' or 'base64'")
    if type(tool) is not str or not tool or type(argument) is not str or not argument:
        raise ValueError("tool and argument must be non-empty strings")
    params = {"id": _artifact_id(id), "server": _check_server(server), "tool": tool, "argument": argument}
    params["format"] = format
    if arguments is not None:
        if not isinstance(arguments, dict):
            raise TypeError("arguments must be a dict")
        params["arguments"] = dict(arguments)
    return _envelope(_BRIDGE.request("artifact.forward", params, BRIDGE_CALL_TIMEOUT + 1))


def _auto_artifact(value):
    """A shortened trailing value of a kind worth keeping whole: its reference, uploaded now."""
    data, format = _artifact_bytes(value, None)
    return _upload(data, format)


def _keeps_whole(kind):
    # Identity, not `in`: comparing types could call a metaclass __eq__.
    for candidate in (str, ShellResult, bytes, list, tuple, dict, _Envelope):
        if kind is candidate:
            return True
    return False


ARTIFACT_HELPERS = {
    "artifact": artifact,
    "artifact_read": artifact_read,
    "artifact_save": artifact_save,
    "artifact_delete": artifact_delete,
    "artifact_forward": artifact_forward,
}


# =====================================================================================================
# Namespace inventory, checkpoint and restore
#
# All of these read values through type() and exact-builtin checks only, so no user hook runs, and
# restore validates the whole file before it changes anything.
# =====================================================================================================
def _first_items(mapping, limit):
    for _ in range(3):
        try:
            return list(itertools.islice(dict.items(mapping), limit))
        except RuntimeError:  # another thread changed the namespace while it was read
            continue
    return []


# Names a host keeps in the namespace for itself (a kernel's In, Out, _i1, get_ipython, ...), never listed.
_HOST_NAMES = frozenset()


def _hidden(name):
    # and, in a kernel, the numbered outputs and inputs it keeps (_1, _i1, ...)
    return name in _HOST_NAMES or (bool(_HOST_NAMES) and name[:1] == "_" and name.lstrip("_i").isdigit())


def _namespace_inventory(namespace):
    variables, size = [], 0
    for name, value in _first_items(namespace, INVENTORY_SCAN_LIMIT):
        if type(name) is not str or name in RESERVED_NAMES or len(name) > NAME_MAX_CHARS or _hidden(name):
            continue
        kind = type(value)
        entry = {"name": name, "type": _type_name(kind)[:TYPE_NAME_MAX_CHARS]}
        if _has_length(kind):
            entry["length"] = len(value)
        size += len(json.dumps(entry)) + 2  # ASCII-escaped, so never below the UTF-8 size
        if len(variables) >= INVENTORY_MAX_ENTRIES or size > INVENTORY_MAX_BYTES:
            break
        variables.append(entry)
    total = len(namespace)
    return {
        "variables": variables,
        "total_namespace_entries": total,
        "omitted_including_helpers": total - len(variables),
        "values_included": False,
    }


def _json_entry(name, value):
    """`"name":value` as UTF-8 JSON; lone surrogates force \\u escapes instead of failing."""
    text = json.dumps(name, ensure_ascii=False) + ":" + json.dumps(value, ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(name) + ":" + json.dumps(value, allow_nan=False)).encode("ascii")


def _checkpoint_candidates(namespace):
    """([(name, json value)], {name: reason}, omitted count) for the first 256 non-reserved entries."""
    candidates, skipped, omitted, scanned = [], {}, 0, 0
    for name, value in _first_items(namespace, sys.maxsize):
        if type(name) is str and name in RESERVED_NAMES:
            continue
        if scanned >= CHECKPOINT_MAX_ENTRIES or type(name) is not str or len(name) > NAME_MAX_CHARS:
            omitted += 1
            continue
        scanned += 1
        try:
            candidates.append((name, _json_safe(value)))
        except _NotPreviewable as exc:
            skipped[name] = exc.args[0]
    return candidates, skipped, omitted


def _checkpoint_document(namespace):
    """(encoded document, saved count, skipped, omitted), within 256 KiB by construction."""
    candidates, skipped, omitted = _checkpoint_candidates(namespace)
    too_big = "snapshot size limit"
    head = b'{"format":"%s","values":{' % CHECKPOINT_FORMAT.encode()
    tail = b'},"omitted":%d}' % omitted
    skip_entries = {name: _json_entry(name, reason) for name, reason in skipped.items()}
    # Start as if every candidate were skipped for size; each one kept swaps its skip entry for its value.
    overflow = {name: len(_json_entry(name, too_big)) + 1 for name, _ in candidates}
    used = len(head) + len(b'},"skipped":{') + len(tail)
    used += sum(len(entry) + 1 for entry in skip_entries.values()) + sum(overflow.values())
    if used > CHECKPOINT_MAX_BYTES:
        raise ValueError("Checkpoint exceeds 256 KiB even without values; shorten variable names")
    value_entries = []
    for name, value in candidates:
        entry = None
        if not (type(value) is str and len(value) > CHECKPOINT_MAX_BYTES):
            entry = _json_entry(name, value)
        if entry is not None and used - overflow[name] + len(entry) + 1 <= CHECKPOINT_MAX_BYTES:
            value_entries.append(entry)
            used += len(entry) + 1 - overflow[name]
        else:
            skipped[name] = too_big
            skip_entries[name] = _json_entry(name, too_big)
    document = b"".join(
        (head, b",".join(value_entries), b'},"skipped":{', b",".join(skip_entries.values()), tail)
    )
    return document, len(value_entries), skipped, omitted


def _write_private_file(target, data):
    """Atomically replace target with a private (0600) file: see _write_atomically."""
    _write_atomically(target, data, 0o600, overwrite=True)


def _read_bounded(path, limit, what):
    """Bytes of a regular file, refusing more than limit (a FIFO must not block the cell)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _PlainFailure("%s is not a regular file: %s" % (what, path))
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise _PlainFailure("%s exceeds %d KiB" % (what, limit // 1024))
    return data


def _checkpoint(namespace, path):
    target = os.path.abspath(os.path.expanduser(os.fspath(path)))
    document, saved, skipped, omitted = _checkpoint_document(namespace)
    _write_private_file(target, document)
    return {"saved": saved, "skipped": skipped, "omitted": omitted}


def _restore(namespace, path):
    source = os.path.abspath(os.path.expanduser(os.fspath(path)))
    try:
        data = _read_bounded(source, CHECKPOINT_MAX_BYTES, "Checkpoint")
    except _PlainFailure as exc:
        raise ValueError(exc.args[0]) from None
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ValueError("Checkpoint is not valid UTF-8 JSON: %s" % source) from None
    if type(document) is not dict or document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError("Checkpoint format must be %s" % CHECKPOINT_FORMAT)
    values = document.get("values")
    if type(values) is not dict or len(values) > CHECKPOINT_MAX_ENTRIES:
        raise ValueError("Checkpoint values must be an object of at most %d variables" % CHECKPOINT_MAX_ENTRIES)
    validated = {}
    for name, value in values.items():
        if len(name) > NAME_MAX_CHARS:
            raise ValueError("Checkpoint variable name exceeds %d characters" % NAME_MAX_CHARS)
        if name in RESERVED_NAMES:
            raise ValueError("Checkpoint cannot restore reserved name %r" % name)
        try:
            validated[name] = _json_safe(value)
        except _NotPreviewable as exc:
            raise ValueError("Checkpoint value %r is not JSON-safe (%s)" % (name, exc.args[0])) from None
    namespace.update(validated)
    return {"restored": len(validated), "state": "merged"}


def _make_helpers(namespace, sources):
    """The functions cells see under HELPER_NAMES."""

    def checkpoint(path):
        """Atomically save JSON-safe variables to path: returns {saved, skipped, omitted}. Never pickles."""
        return _checkpoint(namespace, path)

    def restore(path):
        """Validate a checkpoint completely, then merge its variables: returns {restored, state}."""
        return _restore(namespace, path)

    def repl_history():
        """[{run_id, lines}] of the retained sources (64 runs / 1 MiB), oldest first."""
        return sources.history()

    def repl_source(run_id):
        """The source text of a retained run."""
        return sources.source(run_id)

    def repl_namespace():
        """Names, types and lengths of the namespace's variables; no values, no user hooks."""
        return _namespace_inventory(namespace)

    def export_notebook(path, *, overwrite=False):
        """Write this session's retained runs (oldest first, without this cell) as a notebook.

        A path ending in .ipynb gets an nbformat 4 notebook with each run's outputs; one ending in .py a
        percent-format script (`# %%` cells) with failures noted in comments. A relative path is taken
        from the current directory; an existing file raises FileExistsError unless overwrite=True. The
        file is written atomically. Returns {path, format, cells, missing}.
        """
        return _export_notebook(sources, path, overwrite)

    helpers = {
        "sh": sh,
        "checkpoint": checkpoint,
        "restore": restore,
        "repl_history": repl_history,
        "repl_source": repl_source,
        "repl_namespace": repl_namespace,
        "export_notebook": export_notebook,
    }
    for name, function in helpers.items():
        function.__qualname__ = name
    helpers["mcp"] = _Mcp()
    helpers.update(ARTIFACT_HELPERS)
    helpers["display"] = display
    helpers["pip_install"] = pip_install
    return helpers


# =====================================================================================================
# Displays
#
# display(*objects) is an explicit request to show objects, which is what makes calling their own hooks
# acceptable here (a cell's trailing value never comes through this path). matplotlib figures are
# rendered by the worker itself, at plt.show() and at the end of a run, without ever importing
# matplotlib unless the cell did (pyplot is patched on its first import, see "Deferred imports"). Each
# display travels in `display` frames (an image in base64 chunks that each fit a frame); the server
# decides what is inlined and what is kept aside.
# =====================================================================================================
_DISPLAY_IMAGE_HOOKS = (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"), ("_repr_svg_", "image/svg+xml"))


class _Displays:
    def __init__(self):
        self.writer = None
        self.outside = None
        self._run_id = None
        self._count = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def begin(self, run_id):
        self._run_id, self._count, self._dropped = run_id, 0, 0
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            _patch_pyplot(pyplot)

    def finish(self, render_figures):
        """Render the figures the run left open (unless it was interrupted), then close them all."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and _agg_backend():
            try:
                if render_figures:
                    GATE.arm(self._run_id)  # rendering a huge figure can be cancelled like the cell
                    self.show_open_figures(pyplot)
            except BaseException as exc:  # a broken matplotlib, or a cancel while rendering
                _note("figures left by run %s not rendered: %r" % (self._run_id, exc))
            finally:
                GATE.disarm()
                try:
                    pyplot.close("all")
                except Exception as exc:
                    _note("figures not closed: %r" % exc)
        if self._dropped:
            sys.stderr.write("display(): %d more displays were dropped (at most %d per run)\n"
                             % (self._dropped, DISPLAYS_MAX_PER_RUN))
        self._run_id = None

    def show(self, obj):
        if self._run_id is None:
            # Outside a run: in a kernel, the person's own display(); else (a thread that outlived its
            # cell) nowhere to show it.
            if self.outside is not None:
                self.outside(obj)
            return
        if self._count >= DISPLAYS_MAX_PER_RUN:
            self._dropped += 1
            return
        mime, payload = _render_display(obj)
        if mime.startswith("image/") and len(payload) > DISPLAY_IMAGE_MAX_BYTES:
            sys.stderr.write("display(): a %s of %d bytes is over the %d-byte limit and was dropped\n"
                             % (mime, len(payload), DISPLAY_IMAGE_MAX_BYTES))
            return
        self._count += 1
        # An image travels as base64, and the notebook keeps it so: it is encoded once, here.
        encoded = binascii.b2a_base64(payload, newline=False).decode("ascii") if mime.startswith("image/") else None
        self._send(mime, payload, encoded)
        _NOTEBOOK.add_display(self._run_id, mime, payload, encoded)

    def show_open_figures(self, pyplot):
        for number in pyplot.get_fignums():
            self.show(pyplot.figure(number))
        pyplot.close("all")

    def _send(self, mime, payload, data):
        base = {"type": "display", "id": self._run_id, "mime": mime}
        if data is None:
            self.writer.send(dict(base, text=payload))
            return
        with self._lock:  # one image's chunks stay together
            for start in range(0, max(len(data), 1), DISPLAY_CHUNK_CHARS):
                end = start + DISPLAY_CHUNK_CHARS
                self.writer.send(dict(base, bytes=len(payload), data=data[start:end], more=end < len(data)))


_DISPLAYS = _Displays()


def display(*objects):
    """Show objects in the result: figures and objects with _repr_png_/_repr_jpeg_/_repr_svg_ as images,
    else _repr_markdown_ or repr() as text. A hook that fails is skipped; the cell goes on."""
    for obj in objects:
        _DISPLAYS.show(obj)


def _render_display(obj):
    """(mime, bytes for images or str for text): a figure, the first hook that works, else repr()."""
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is not None and isinstance(obj, figure_module.Figure):
        png = _call_display_hook(obj, "savefig", lambda: _figure_png(obj))
        if isinstance(png, bytes):
            return "image/png", png
    for name, mime in _DISPLAY_IMAGE_HOOKS:
        data = _call_display_hook(obj, name)
        if mime == "image/svg+xml" and isinstance(data, str):
            data = _utf8(data)
        if isinstance(data, (bytes, bytearray, memoryview)) and len(data):
            return mime, bytes(data)
    markdown = _call_display_hook(obj, "_repr_markdown_")
    if isinstance(markdown, str):
        return "text/markdown", _cut_text(markdown, DISPLAY_TEXT_MAX_BYTES)[0]
    try:
        text = repr(obj)
    except Exception as exc:
        text = "<%s object; repr() failed: %s>" % (_type_name(type(obj)), _exception_message(exc))
    if not isinstance(text, str):
        text = "<%s object>" % _type_name(type(obj))
    return "text/plain", _cut_text(text, DISPLAY_TEXT_MAX_BYTES)[0]


def _call_display_hook(obj, name, call=None):
    """The hook's value, or None when it is missing or fails (said on stderr; the cell goes on)."""
    try:
        if call is None:
            method = getattr(obj, name, None)
            if not callable(method):
                return None
            call = method
        value = call()
        # IPython lets a hook return (data, metadata).
        if isinstance(value, tuple) and len(value) == 2:
            value = value[0]
        return value
    except Exception as exc:
        sys.stderr.write("display(): %s.%s failed (%s); trying the next way\n"
                         % (_type_name(type(obj)), name, _exception_message(exc)))
        return None


def _figure_png(figure):
    width, height = figure.get_size_inches()
    dpi = min(FIGURE_DPI, FIGURE_MAX_PIXELS / max(width, height, 0.01))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


# Backends that show no window; a kernel host adds the notebook's inline one, which shows in the notebook
# only after the request ended (too late for the run's result).
_HEADLESS_BACKENDS = {"agg"}


def _agg_backend():
    """True when figures cannot be shown in a window: only then does the worker show them itself."""
    matplotlib = sys.modules.get("matplotlib")
    try:
        return matplotlib is not None and matplotlib.get_backend().lower() in _HEADLESS_BACKENDS
    except Exception:
        return False


def _patch_pyplot(pyplot):
    """plt.show() during a run sends the open figures as displays and closes them."""
    original = getattr(pyplot, "show", None)
    if original is None or getattr(original, "_repl_mcp_show", False):
        return

    def show(*args, **kwargs):
        if _DISPLAYS._run_id is None or not _agg_backend():
            return original(*args, **kwargs)
        _DISPLAYS.show_open_figures(pyplot)
        return None

    show._repl_mcp_show = True
    show.__wrapped__ = original
    show.__doc__ = original.__doc__
    pyplot.show = show


# =====================================================================================================
# Notebook export
#
# What each run showed is kept beside its source, so the session can be written out as a notebook:
# its stdout and stderr (as captured, already bounded), its preview or error, and its displays. The
# source history decides which runs are retained; outputs have a byte budget of their own, and the
# oldest runs lose theirs first. export_notebook() writes an nbformat 4 notebook or a percent-format
# script, never dropping a run silently: what is missing is said at the top.
# =====================================================================================================
class _RunRecord:
    __slots__ = ("number", "outputs", "failure", "weight")

    def __init__(self, number, outputs, failure):
        self.number = number  # the run's place among the runs this worker finished, from 1
        # (kind, first, second) in the order shown: ("stream", name, text), ("display", mime, data),
        # ("result", preview, None), ("error", (ename, evalue), traceback text); None once dropped.
        self.outputs = outputs
        self.failure = failure  # "TypeName: message" of a failed run, else None
        # The characters it holds: what the output budget counts.
        self.weight = sum(len(first if kind == "result" else second) for kind, first, second in outputs)


class _Notebook:
    def __init__(self):
        self._records = collections.OrderedDict()  # run id -> _RunRecord, oldest first
        self._weight = 0
        self.finished = 0  # runs this worker finished (inventories are not runs)
        self._displays = []  # (run id, output) of the active run
        self._display_weight = 0

    def add_display(self, run_id, mime, payload, encoded):
        """Keep what a run displayed (a failure here must not fail display()); `encoded` is an image's
        base64, which a notebook keeps for every image but SVG (kept as its text)."""
        try:
            if encoded is not None and mime != "image/svg+xml":
                data = encoded
            else:
                data = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
            if self._display_weight + len(data) > NOTEBOOK_OUTPUTS_MAX_BYTES:
                mime, data = "text/plain", "[a %s display of %d bytes was not kept]" % (mime, len(payload))
            self._display_weight += len(data)
            self._displays.append((run_id, ("display", mime, data)))
        except Exception as exc:
            _note("display not kept for the notebook: %r" % exc)

    @staticmethod
    def failure_of(exc, message):
        """(ename, evalue) of a failed run; `message` is the exception's text as the result showed it."""
        if _is_interruption(exc):
            return "KeyboardInterrupt", "Execution interrupted"
        if type(exc) is _PlainFailure:  # the worker's own report (a file run's exit status, ...): no class
            return "Error", exc.args[0][:MESSAGE_MAX_CHARS]
        return _type_name(type(exc)), message[:MESSAGE_MAX_CHARS]

    def finish(self, run_id, result, failure):
        """Keep a finished run's outputs; a failure here is noted, and the run's result still goes out."""
        try:
            self._finish(run_id, result, failure)
        except Exception as exc:
            _note("outputs of run %s not kept for the notebook: %r" % (run_id, exc))
        finally:
            self._displays, self._display_weight = [], 0

    def _finish(self, run_id, result, failure):
        outputs = []
        for stream in STREAM_NAMES:
            text = result.get(stream) or ""
            if result["truncated"].get(stream):
                text += "\n[%s was cut to %d bytes]\n" % (stream, STREAM_BUDGET_BYTES)
            if text:
                outputs.append(("stream", stream, text))
        outputs += [output for owner, output in self._displays if owner == run_id]
        error, summary = result.get("error"), None
        if error is not None:
            ename, evalue = failure or ("Error", error.rsplit("\n", 1)[-1])
            outputs.append(("error", (ename, evalue), error))
            summary = "%s: %s" % (ename, evalue) if evalue else ename
        elif result.get("return_value") is not None:
            outputs.append(("result", result["return_value"], None))
        old = self._records.pop(run_id, None)
        if old is None:
            self.finished += 1
        else:  # recorded again (its result failed to go out, and an internal error replaces it)
            self._drop(old)
        record = _RunRecord(self.finished if old is None else old.number, outputs, summary)
        self._records[run_id] = record
        self._weight += record.weight
        while len(self._records) > HISTORY_MAX_RUNS:
            self._drop(self._records.popitem(last=False)[1])
        for kept in self._records.values():
            if self._weight <= NOTEBOOK_OUTPUTS_MAX_BYTES:
                break
            if kept.outputs is not None:
                self._drop(kept)

    def _drop(self, record):
        self._weight -= record.weight
        record.outputs, record.weight = None, 0

    def record(self, run_id):
        return self._records.get(run_id)


def _nbformat_output(output, number):
    kind, first, second = output
    if kind == "stream":
        return {"output_type": "stream", "name": first, "text": second.splitlines(True)}
    if kind == "display":
        data = second if first.startswith("image/") and first != "image/svg+xml" else second.splitlines(True)
        return {"output_type": "display_data", "data": {first: data}, "metadata": {}}
    if kind == "result":
        return {
            "output_type": "execute_result",
            "execution_count": number,
            "data": {"text/plain": first.splitlines(True)},
            "metadata": {},
        }
    return {"output_type": "error", "ename": first[0], "evalue": first[1], "traceback": second.splitlines()}


_NOTEBOOK = _Notebook()
_NOTEBOOK_FORMATS = {".ipynb": "ipynb", ".py": "py"}


def _export_notebook(sources, path, overwrite):
    if type(overwrite) is not bool:
        raise TypeError("export_notebook() overwrite must be True or False")
    target = os.path.abspath(os.path.expanduser(os.fspath(path)))
    kind = _NOTEBOOK_FORMATS.get(os.path.splitext(target)[1].lower())
    if kind is None:
        raise ValueError("export_notebook() writes a .ipynb notebook or a .py percent script, not %r" % target)
    if not overwrite and os.path.lexists(target):
        raise FileExistsError("%s exists; pass overwrite=True to replace it" % target)
    current = _RUN_ID.get()
    runs = []
    for run_id, filename, source in sources.retained():
        record = _NOTEBOOK.record(run_id)
        if run_id != current and run_id != _ActiveRun.id and record is not None:
            runs.append((run_id, filename, source, record))
    missing = _NOTEBOOK.finished - len(runs)
    dropped = sum(1 for run in runs if run[3].outputs is None)
    notes = _missing_notes(missing, dropped)
    document = _ipynb_document(runs, notes) if kind == "ipynb" else _percent_script(runs, notes)
    _write_document(target, _utf8(document), overwrite)
    return {"path": target, "format": kind, "cells": len(runs), "missing": missing}


def _missing_notes(missing, dropped):
    notes = []
    if missing:
        notes.append(
            "%d earlier run%s of this session %s not here: %s source fell out of the session's history "
            "(the last %d runs, 1 MiB of source), or never ran (a file that could not be read)."
            % (missing, "" if missing == 1 else "s", "is" if missing == 1 else "are",
               "its" if missing == 1 else "their", HISTORY_MAX_RUNS)
        )
    if dropped:
        notes.append(
            "%d run%s here kept no outputs: the session keeps %d MiB of outputs, the oldest runs' go first."
            % (dropped, "" if dropped == 1 else "s", NOTEBOOK_OUTPUTS_MAX_BYTES // 1_048_576)
        )
    return notes


def _cell_source(filename, source):
    if not filename.startswith(REPL_FILENAME_PREFIX):
        source = "# python_execute_file: %s\n%s" % (filename, source)
    return source


def _ipynb_document(runs, notes):
    cells = []
    if notes:
        cells.append({"cell_type": "markdown", "id": "repl-mcp-missing-runs", "metadata": {}, "source": " ".join(notes)})
    for run_id, filename, source, record in runs:
        cells.append({
            "cell_type": "code",
            "id": run_id,
            "execution_count": record.number,
            "metadata": {},
            "source": _cell_source(filename, source).splitlines(True),
            "outputs": [_nbformat_output(output, record.number) for output in record.outputs or ()],
        })
    notebook = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {
                "name": "python",
                "version": "%d.%d.%d" % sys.version_info[:3],
                "mimetype": "text/x-python",
                "file_extension": ".py",
                "codemirror_mode": {"name": "ipython", "version": 3},
                "pygments_lexer": "ipython3",
                "nbconvert_exporter": "python",
            },
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook, ensure_ascii=False, indent=1) + "\n"


def _percent_script(runs, notes):
    lines = ["# Exported by repl-mcp from a Python %d.%d.%d session." % sys.version_info[:3]]
    lines += ["# " + note for note in notes]
    for run_id, filename, source, record in runs:
        lines.append("")
        lines.append("# %%")
        lines.append(_cell_source(filename, source).rstrip("\n"))
        if record.failure is not None:
            failure = " ".join(record.failure.split())[:SOURCE_LINE_MAX_CHARS]
            lines.append("# Failed: " + failure)
    return "\n".join(lines) + "\n"


def _write_document(target, data, overwrite):
    """Atomically write a user's file (mode as the umask allows); never replaces one unless overwrite."""
    _write_atomically(target, data, 0o666, overwrite)


def _write_atomically(target, data, mode, overwrite):
    """Exclusive temp file beside target, fsync, then rename (or link, to never replace), dir fsync."""
    temporary = "%s.%s.part" % (target, os.urandom(8).hex())
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(temporary, target)
        else:
            _place_new(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _fsync_directory(os.path.dirname(target))


def _place_new(temporary, target):
    """Give the written file its name unless that name exists, without a moment where it could be lost."""
    try:
        os.link(temporary, target)  # fails if target exists, even one made a moment ago
    except FileExistsError:
        raise FileExistsError("%s exists; pass overwrite=True to replace it" % target) from None
    except OSError:  # a file system without hard links
        if os.path.lexists(target):
            raise FileExistsError("%s exists; pass overwrite=True to replace it" % target) from None
        os.rename(temporary, target)
        return
    os.unlink(temporary)


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# =====================================================================================================
# Cells
#
# A cell's source is compiled so its trailing expression becomes the result value (top-level await
# allowed), and the process state the protocol depends on is repaired before every run.
# =====================================================================================================
class _Outcome:
    __slots__ = ("value", "error", "exit_code")

    def __init__(self, value=None, error=None):
        self.value = value
        self.error = error
        self.exit_code = None


_STORED_TAIL = object()  # _compile_cell's marker: the trailing value is left in __repl_result__


def _compile_cell(code, filename):
    """(body code, trailing-expression code or _STORED_TAIL or None), allowing top-level await."""
    flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if "\n" not in code.strip():
        # One line is often one expression: compiled as such, it needs one pass instead of three.
        try:
            tail = compile(code, filename, "eval", flags, dont_inherit=True)
        except SyntaxError:
            pass
        else:
            if not tail.co_flags & CO_COROUTINE:
                return None, tail
    tree = compile(code, filename, "exec", flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
    if not tree.body or not isinstance(tree.body[-1], _ast.Expr):
        return compile(tree, filename, "exec", flags, dont_inherit=True), None
    last = tree.body.pop()
    tail = compile(_ast.Expression(last.value), filename, "eval", flags, dont_inherit=True)
    body = compile(tree, filename, "exec", flags, dont_inherit=True)
    if not (body.co_flags | tail.co_flags) & CO_COROUTINE:
        return body, tail
    # A cell that awaits anywhere runs as one coroutine, so all of it sees the running loop
    # (asyncio.create_task before a trailing await); the trailing value comes back through a name.
    import ast

    target = ast.Name(id="__repl_result__", ctx=ast.Store())
    tree.body.append(ast.copy_location(ast.Assign(targets=[target], value=last.value), last))
    return compile(ast.fix_missing_locations(tree), filename, "exec", flags, dont_inherit=True), _STORED_TAIL


def _keep_fd0_open():
    """Point a closed fd 0 back at /dev/null, so no file a cell opens later becomes everyone's stdin."""
    try:
        os.fstat(0)
    except OSError:
        null = os.open(os.devnull, os.O_RDONLY)  # lands on 0 when 0 is the lowest free descriptor
        if null != 0:
            os.dup2(null, 0)
            os.close(null)


def _null_stdin():
    # closefd=False: `exit()` closes sys.stdin, and a freed fd 0 would be reused by the next open().
    return open(0, "r", encoding="utf-8", errors="replace", closefd=False)


# =====================================================================================================
# The event loop
#
# Most cells never touch asyncio, and importing it (concurrent.futures, logging and ssl come with it)
# would double the worker's start-up time and add megabytes. So the session's persistent loop is made
# at first need: when a cell awaits at top level, or when anything imports asyncio (a cell, a library
# it imports, the worker's own async helpers; see "Deferred imports"). From then on it is every cell's
# loop, exactly as if it had been made at start-up.
# =====================================================================================================
CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect


def _is_interruption(exc):
    """KeyboardInterrupt, or asyncio's CancelledError (only possible once asyncio is imported)."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


# =====================================================================================================
# The session
#
# One persistent namespace, event loop and context. Runs one cell, file or inventory at a time on the
# main thread and sends exactly one result frame for each.
# =====================================================================================================
class _Session:
    def __init__(self, writer, pump, captures, commands, namespace=None):
        self._writer = writer
        self._commands = commands
        self._pump = pump
        self._captures = captures
        self._sources = _SourceRegistry()
        if namespace is None:
            module = types.ModuleType(NAMESPACE_NAME)
            module.__dict__["__builtins__"] = builtins
            # Registered so pickle and `import __repl__` find classes and functions defined in cells.
            sys.modules[NAMESPACE_NAME] = module
            namespace = module.__dict__
        self.namespace = namespace
        # Cells run in copies of this context, so context variables a cell sets persist like its globals.
        self._context = contextvars.copy_context()
        self._watch = _CellWatch()
        self.loop = None
        self._executor = None
        _FIRST_IMPORTS.on("asyncio", self._on_asyncio_imported)
        _FIRST_IMPORTS.on("linecache", self._sources.publish)
        self._helpers = _make_helpers(self.namespace, self._sources)
        self._install_helpers()

    # -- per-cell process state ------------------------------------------------------------------
    def _ensure_loop(self):
        """The persistent loop, made now if it does not exist yet (or a cell closed it)."""
        asyncio = sys.modules.get("asyncio")
        if asyncio is None:
            import asyncio  # the import watch calls back, and that call makes the loop

        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
            # Closing a loop shuts its default executor down, so every loop gets a new one.
            self._executor = _new_default_executor()
            self.loop.set_default_executor(self._executor)
        return self.loop

    def _use_loop(self):
        """Make sure the loop exists and is the main thread's current loop (asyncio.get_event_loop())."""
        loop = self._ensure_loop()
        sys.modules["asyncio"].set_event_loop(loop)

    def _on_asyncio_imported(self, asyncio):
        if threading.current_thread() is threading.main_thread():
            self._use_loop()
        else:
            self._ensure_loop()  # made current for the main thread when the next cell starts

    def _install_helpers(self):
        """Names the worker provides inside cells; re-installed after every cell so shadowing is brief."""
        self.namespace.update(self._helpers)

    def _prepare_process(self):
        """Undo what an earlier cell may have changed that the protocol depends on."""
        sys.stdout, sys.stderr = self._captures
        _keep_fd0_open()
        try:
            stdin_closed = sys.stdin is None or sys.stdin.closed
        except Exception:
            stdin_closed = True
        if stdin_closed:
            sys.stdin = _null_stdin()
        # _signal's getter returns the handler as stored (signal.getsignal converts it to an enum).
        if _signal.getsignal(signal.SIGINT) is not SIGINT_HANDLER:
            signal.signal(signal.SIGINT, SIGINT_HANDLER)
        # asyncio.run() in a cell leaves no current loop behind, and a cell may have closed ours.
        if self.loop is not None or "asyncio" in sys.modules:
            self._use_loop()

    # -- running -------------------------------------------------------------------------------
    def run(self, command):
        """Runs one command and sends its result; True when the namespace can no longer be trusted."""
        if command.inventory:
            self._run_inventory(command.run_id)
            return False
        if command.history:
            self._run_history(command.run_id)
            return False
        _ActiveRun.id = command.run_id
        try:
            return self._run(command)
        finally:
            _ActiveRun.id = None

    def _run(self, command):
        """Run one cell or file and send its result; True if the worker must now exit."""
        run_id = command.run_id
        self._pump.begin(run_id)
        self._prepare_process()
        _DISPLAYS.begin(run_id)
        context = self._context.copy()
        context.run(_RUN_ID.set, run_id)
        if command.source_path is None:
            outcome = self._execute(run_id, command.code, context)
        else:
            outcome = self._execute_file(run_id, command.source_path, command.argv, context)
        interrupted = _is_interruption(outcome.error)
        _DISPLAYS.finish(render_figures=not interrupted)
        self._context = context
        cancelled, fatal = self._watch.settle(self.loop, run_id, self._executor)
        _BRIDGE.abandon_run(run_id)
        _CHILDREN.sweep()
        (stdout, stderr), (stdout_cut, stderr_cut) = self._pump.finish()
        result = {"success": outcome.error is None, "stdout": stdout, "stderr": stderr, "return_value": None}
        truncated = {"stdout": stdout_cut, "stderr": stderr_cut, "return": False}
        error, interrupted, failure = None, False, None
        if outcome.error is not None:
            error, interrupted, error_cut, failure = self._describe_failure(run_id, outcome.error)
            if error_cut:
                truncated["error"] = True
            code = getattr(outcome.error, "code", None) if type(outcome.error) is _PlainFailure else None
            if code is not None:
                result["error_code"] = code
        elif outcome.value is not None and fatal is None:
            library = _library_preview(outcome.value)
            if library is not None:
                result["return_value"], result["value_info"], truncated["return"] = library
            else:
                preview, has_value, value, truncated["return"] = _preview(outcome.value)
                result["return_value"] = preview
                if has_value:
                    result["value"] = value
                elif truncated["return"] and _keeps_whole(type(outcome.value)):
                    self._attach_artifact(result, outcome.value, context)
        exit_code = outcome.exit_code
        if _SANDBOX is not None:
            denials = _SANDBOX.finish(outcome.error)
            if denials:
                result["sandbox_denials"] = denials
        outcome = None  # drop the value and any traceback (and the frames it keeps alive) right away
        result.update(error=error, truncated=truncated, state="preserved", interrupted=interrupted)
        if exit_code is not None:
            result["exit_code"] = exit_code
        if cancelled:
            result["background_tasks_cancelled"] = cancelled
        if fatal is not None:
            result.update(success=False, error=fatal, state="cleared", fatal=True)
        self._install_helpers()
        _NOTEBOOK.finish(run_id, result, failure)
        self._send_result(run_id, result)
        return fatal is not None

    def _attach_artifact(self, result, value, context):
        """The whole value goes to the store; a failure is reported beside the result, not as one."""
        try:
            result["artifact"] = context.run(_auto_artifact, value)
        except BaseException as exc:  # a KeyboardInterrupt here must not lose the cell's result
            message = "%s: %s" % (_type_name(type(exc)), _exception_message(exc))
            result["artifact_error"] = message[:ARTIFACT_ERROR_MAX_CHARS]

    def _run_inventory(self, run_id):
        result = {
            "success": True,
            "stdout": "",
            "stderr": "",
            "return_value": None,
            "error": None,
            "truncated": {"stdout": False, "stderr": False, "return": False},
            "state": "preserved",
            "interrupted": False,
            "namespace": _namespace_inventory(self.namespace),
        }
        self._send_result(run_id, result)

    def _run_history(self, run_id):
        """The retained runs for a server that adopted this worker (its viewer shows them): each one's
        source and what it printed and returned, newest first until the budget, then oldest first."""
        runs, used = [], 0
        for retained_id, _filename, source in reversed(list(self._sources.retained())):
            entry = {"run_id": retained_id, "source": _cut_text(source, HISTORY_SOURCE_MAX_BYTES)[0]}
            record = _NOTEBOOK.record(retained_id)
            for kind, first, second in (record.outputs or ()) if record is not None else ():
                if kind == "stream":
                    entry[first] = _cut_text(second, HISTORY_OUTPUT_MAX_BYTES)[0]
                elif kind == "result":
                    entry["return_value"] = _cut_text(first, HISTORY_OUTPUT_MAX_BYTES)[0]
                elif kind == "error":
                    entry["error"] = _cut_text(second, HISTORY_OUTPUT_MAX_BYTES)[0]
            size = sum(len(value) for value in entry.values())
            if used + size > HISTORY_FRAME_BUDGET_BYTES:
                break
            used += size
            runs.append(entry)
        runs.reverse()
        result = {
            "success": True,
            "stdout": "",
            "stderr": "",
            "return_value": None,
            "error": None,
            "truncated": {"stdout": False, "stderr": False, "return": False},
            "state": "preserved",
            "interrupted": False,
            "history": runs,
        }
        self._send_result(run_id, result)

    def _send_result(self, run_id, result):
        if self._commands.forked:
            # A process a cell forked (os.fork() without exiting the child) has come back here: the
            # worker itself sends this run's result, so the copy leaves quietly.
            _terminate(0)
        self._commands.reclaim()
        if _FD2.drained():
            result["stderr_barrier"] = False
        else:
            try:
                _write_all(_FD2.fd, _utf8(STDERR_BARRIER.format(run_id)))
            except OSError:
                pass
        self._writer.send({"type": "result", "id": run_id, "result": result})

    def _execute(self, run_id, code, context):
        filename = REPL_FILENAME_PREFIX + run_id + ">"
        self._sources.add(run_id, filename, code)
        try:
            body, tail = _compile_cell(code, filename)
        except BaseException as exc:  # SyntaxError, but also ValueError, RecursionError, MemoryError
            return _Outcome(error=exc)
        return self._run_compiled(run_id, context, body, tail)

    def _run_compiled(self, run_id, context, body, tail):
        try:
            try:
                GATE.arm(run_id)
                if body is not None:
                    context.run(self._run_code, body)
                if tail is _STORED_TAIL:
                    value = self.namespace.pop("__repl_result__", None)
                else:
                    value = context.run(self._run_code, tail) if tail is not None else None
            finally:
                GATE.disarm()
                if tail is _STORED_TAIL:
                    self.namespace.pop("__repl_result__", None)
        except BaseException as exc:
            GATE.disarm()
            return _Outcome(error=exc)
        return _Outcome(value=value)

    def _execute_file(self, run_id, path, argv, context):
        try:
            source = _read_script(path, argv)
        except BaseException as exc:
            return _Outcome(error=exc)
        self._sources.add(run_id, path, source)
        try:
            code = compile(source, path, "exec", _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except BaseException as exc:
            outcome = _Outcome(error=exc)
        else:
            with _MainScript(self.namespace, path, argv):
                outcome = self._run_compiled(run_id, context, code, None)
        _set_exit_status(outcome, self._captures[1])
        return outcome

    def _run_code(self, code):
        if code.co_flags & CO_COROUTINE:
            return self._await(eval(code, self.namespace))
        return eval(code, self.namespace)

    def _await(self, coroutine):
        """Run a cell's coroutine on the persistent loop; on interrupt, cancel it and let it unwind."""
        self._use_loop()
        loop = self.loop
        import asyncio

        task = None
        try:
            task = loop.create_task(coroutine)  # inside the cell's context, so the task copies it
            return loop.run_until_complete(task)
        except BaseException:
            if task is None:
                coroutine.close()  # interrupted before it was scheduled: it must never start later
            elif not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(asyncio.wait((task,), timeout=CANCEL_GRACE_SECONDS))
                except BaseException:
                    pass
            raise
        finally:
            if task is not None and task.done() and not task.cancelled():
                task.exception()  # mark it retrieved: the error is reported in the result instead

    def report_internal_failure(self, run_id, exc):
        GATE.disarm()
        self._pump.finish()
        _note("internal error in run %s: %r" % (run_id, exc))
        result = {
            "success": False,
            "stdout": "",
            "stderr": "",
            "return_value": None,
            "error": "Internal worker error: %s" % _cut_text(repr(exc), 1_000)[0],
            "error_code": "INTERNAL",
            "truncated": {"stdout": False, "stderr": False, "return": False},
            "state": "preserved",
            "interrupted": isinstance(exc, KeyboardInterrupt),
        }
        _NOTEBOOK.finish(run_id, result, None)
        self._send_result(run_id, result)

    def _describe_failure(self, run_id, exc):
        """(error text, interrupted, error text was cut, (ename, evalue) for the notebook)."""
        if _is_interruption(exc):
            failure = _Notebook.failure_of(exc, "")
            return "Execution interrupted (%s); namespace preserved" % run_id, True, False, failure
        message = "" if type(exc) is _PlainFailure else _exception_message(exc)
        text, cut = _render_exception(exc, self._sources, message)
        return text, False, cut, _Notebook.failure_of(exc, message)


# =====================================================================================================
# File runs
#
# `python_run_file` runs a saved file in the session's namespace the way `python file.py` would: as
# `__main__`, with its own sys.argv and sys.path[0], and with the exit status the interpreter would give.
# What the file changes in those names is undone afterwards; the namespace keeps everything else.
# =====================================================================================================
def _read_script(path, argv):
    """A saved file's source text, decoded by its PEP 263 declaration."""
    if not os.path.isabs(path):
        raise _PlainFailure("source_path must be an absolute path")
    if len(argv) > SCRIPT_ARGV_MAX_ITEMS or sum(len(_utf8(item)) for item in argv) > SCRIPT_ARGV_MAX_BYTES:
        raise _PlainFailure("Script arguments exceed %d items or 32 KiB" % SCRIPT_ARGV_MAX_ITEMS)
    try:
        data = _read_bounded(path, SOURCE_FILE_MAX_BYTES, "Python source file")
    except FileNotFoundError:
        missing = _PlainFailure("Python file not found or not a regular file: " + path)
        missing.code = "FILE_NOT_FOUND"  # as the server says when it can check the path itself
        raise missing from None
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


_ABSENT = object()


class _MainScript:
    """While active, the namespace and sys look as they do for `python path argv...`."""

    def __init__(self, namespace, path, argv):
        self._namespace = namespace
        self._path = path
        self._argv = argv

    def __enter__(self):
        namespace, path = self._namespace, self._path
        self._saved_names = [(key, namespace.get(key, _ABSENT)) for key in ("__name__", "__file__")]
        # The same list objects stay in place: modules may hold references to them.
        self._lists = sys.argv, sys.path
        argv_list, path_list = self._lists
        self._saved_argv, self._saved_path = list(argv_list), list(path_list)
        argv_list[:] = [path, *self._argv]
        if path_list:
            path_list[0] = os.path.dirname(path)
        else:
            path_list.append(os.path.dirname(path))
        namespace["__name__"] = "__main__"
        namespace["__file__"] = path
        return self

    def __exit__(self, *exc_info):
        argv_list, path_list = self._lists
        sys.argv, sys.path = argv_list, path_list
        argv_list[:] = self._saved_argv
        path_list[:] = self._saved_path
        for key, value in self._saved_names:
            if value is _ABSENT:
                self._namespace.pop(key, None)
            else:
                self._namespace[key] = value
        return False


def _set_exit_status(outcome, stderr):
    """Give a file run the exit status `python file.py` would have had."""
    error = outcome.error
    if error is None:
        outcome.exit_code = 0
        return
    if _is_interruption(error):
        return
    if not isinstance(error, SystemExit):
        outcome.exit_code = 1
        return
    code = error.code
    if code is None:
        status = 0
    elif issubclass(type(code), int):
        status = int.__int__(code)
    else:
        try:
            text = str(code)
        except BaseException:
            text = "<exit value str() failed>"
        stderr.write(text + "\n")
        status = 1
    outcome.exit_code = status
    outcome.error = None if status == 0 else _PlainFailure("Saved Python file exited with status %d" % status)


# =====================================================================================================
# Kernel host
#
# The same engine inside a Jupyter kernel: the server loads this file into the kernel as a module, opens a
# comm to the target kernel_ready() registers, and sends each run's execute frame as a message on it (or,
# in a kernel without comms, as an execute_request of `kernel_run(<frame>)`). Frames leave as comm
# messages on the kernel's iopub channel, parented to that request. Frames for the engine (bridge answers,
# rpc_wait, cancel) come back as answers to input requests on the kernel's stdin channel, opened by a
# helper thread only while a bridge request waits: the shell channel is busy with the run itself. What is process-wide
# stays the kernel's: its streams, stdin, input(), SIGINT handler and running asyncio loop are swapped out
# for the cell and put back after it. The helpers (mcp, artifact, sh, ...) are names in the kernel's
# namespace, as in a worker's. Nothing here runs unless kernel_run is called.
# =====================================================================================================
KERNEL_COMM = "repl-mcp"
KERNEL_POLL_PROMPT = "\x00repl-mcp frames"
KERNEL_POLL_END_SECONDS = 5.0


class _KernelWriter(_FrameWriter):
    """Frames as comm messages on the kernel's iopub channel (thread-safe there), for the running request."""

    def __init__(self, kernel):
        super().__init__(None)
        self._kernel = kernel
        self.parent = None

    def send(self, frame):
        data = self.encode(frame)
        if data is None:
            return False
        content = {"comm_id": KERNEL_COMM, "data": {"frame": data.decode("utf-8")}}
        self._kernel.session.send(self._kernel.iopub_socket, "comm_msg", content, parent=self.parent)
        return True


class _KernelInbox:
    """The bridge's view of the command side: answers are read by the poll thread, never by the caller."""

    forked = False

    def reads_here(self):
        return False

    def lend(self):
        pass

    def reclaim(self):
        pass

    def exchange(self, send, pending, timeout):
        if pending is None:
            send()
            return True
        return _wait_answer(send, pending, timeout)


def _kernel_dispatch(frame):
    kind = frame.get("type")
    if kind == "rpc_result":
        _BRIDGE.deliver(frame)
    elif kind == "rpc_wait":
        _BRIDGE.extend(frame)
    elif kind == "cancel":
        GATE.cancel(frame.get("id"))


class _KernelHost:
    _instance = None

    def __init__(self, shell):
        import asyncio

        self.kernel = shell.kernel
        self.writer = _KernelWriter(self.kernel)
        pump = _OutputPump(self.writer)
        self.captures = (_CaptureStream(pump, "stdout"), _CaptureStream(pump, "stderr"))
        inbox = _KernelInbox()
        _BRIDGE.writer = self.writer
        _BRIDGE.commands = inbox
        _DISPLAYS.writer = self.writer
        _FIRST_IMPORTS.on("matplotlib.pyplot", _patch_pyplot)
        _FIRST_IMPORTS.on("getpass", _patch_getpass)
        running = asyncio._get_running_loop()
        global _HOST_NAMES
        _HOST_NAMES = frozenset(shell.user_ns_hidden)
        _FD2.unseen = True
        _HEADLESS_BACKENDS.add("module://matplotlib_inline.backend_inline")
        try:
            from IPython.display import display as notebook_display

            _DISPLAYS.outside = notebook_display
        except ImportError:
            pass
        self.session = _Session(self.writer, pump, self.captures, inbox, namespace=shell.user_ns)
        # Making the session's loop (asyncio is imported already) set it as the thread's: the kernel's again.
        asyncio.set_event_loop(running)
        pump.start_flusher()

    @classmethod
    def get(cls):
        if cls._instance is None:
            from IPython import get_ipython  # a builtin only while IPython runs a cell

            cls._instance = cls(get_ipython())
        return cls._instance

    def run(self, command):
        import asyncio

        # An interrupt from here on is this run's: before the cell is armed, it is kept for it.
        saved_sigint = signal.getsignal(signal.SIGINT)
        GATE.preparing = command.run_id
        signal.signal(signal.SIGINT, SIGINT_HANDLER)
        kernel = self.kernel
        self._parent = kernel.get_parent("shell")
        self._ident = kernel._parent_ident["shell"]
        self.writer.parent = self._parent
        saved = (sys.stdout, sys.stderr, sys.stdin, builtins.input)
        running = asyncio._get_running_loop()
        GATE.bind_main_thread()
        builtins.input = _input
        asyncio._set_running_loop(None)  # the cell's own loop runs inside the kernel's
        _BRIDGE.on_pending = self._ensure_poll
        try:
            return self.session.run(command)
        finally:
            _BRIDGE.on_pending = None
            with self._poll_lock:
                poll = self._poll
            # The server ends an open request once it has the result; the next run's must not race it.
            if poll is not None:
                poll.join(KERNEL_POLL_END_SECONDS)
            asyncio._set_running_loop(running)
            if running is not None:
                asyncio.set_event_loop(running)
            sys.stdout, sys.stderr, sys.stdin, builtins.input = saved
            GATE.preparing = None
            signal.signal(signal.SIGINT, saved_sigint)

    # The stdin channel is used only while the engine waits for the server: an input request is opened
    # when a bridge request is registered and kept open (a new one after each answer) until none is
    # pending. A cell that asks the server nothing costs no round trip beyond its own request.
    _poll = None
    _poll_lock = threading.Lock()

    def _ensure_poll(self):
        with self._poll_lock:
            if self._poll is None:
                self._poll = _start_worker_thread(self._poll_loop, "repl-kernel-poll")

    def _poll_loop(self):
        kernel, ident, parent = self.kernel, self._ident, self._parent
        try:
            while True:
                try:
                    text = kernel._input_request(KERNEL_POLL_PROMPT, ident, parent, password=False)
                    frames = json.loads(text) if text else []
                except BaseException:  # the kernel is going away, or the answer was not ours: stop
                    return
                for frame in frames if type(frames) is list else ():
                    if type(frame) is not dict:
                        continue
                    if frame.get("type") == "end":
                        return
                    _kernel_dispatch(frame)
                with self._poll_lock:
                    if not _BRIDGE.pending_count():
                        self._poll = None
                        return
        finally:
            with self._poll_lock:
                if self._poll is threading.current_thread():
                    self._poll = None


def kernel_run(frame):
    """Runs one run in this kernel: `frame` is the execute frame a worker reads from its pipe, as JSON text.

    Its frames, the result last, go out as comm messages (a fatal result tells the server to restart
    the kernel).
    """
    _KernelHost.get().run(_execute_command(json.loads(frame)))


def _kernel_comm_opened(comm, open_msg):
    comm.on_msg(_kernel_comm_message)


def _kernel_comm_message(msg):
    # The server's runs arrive as messages on its comm: a shell request the kernel hands straight to this
    # handler, without the input transforms, history and hooks of an execute_request.
    kernel_run(msg["content"]["data"]["frame"])


def _register_comm_target():
    """Whether runs can come as comm messages here (else the server sends execute_requests)."""
    try:
        from IPython import get_ipython

        get_ipython().kernel.comm_manager.register_target(KERNEL_COMM, _kernel_comm_opened)
        return True
    except Exception as exc:
        _note("runs come as execute requests: the kernel takes no comm target (%r)" % (exc,))
        return False


def kernel_ready():
    """What a worker's ready frame says, as base64 of its JSON (a plain string survives any repr)."""
    ready = {
        "type": "ready",
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "python_executable": sys.executable or "",
        "pid": os.getpid(),
        "implementation": sys.implementation.name,
        "comm": _register_comm_target(),
    }
    return binascii.b2a_base64(json.dumps(ready).encode("utf-8"), newline=False).decode("ascii")


# =====================================================================================================
# Contained worker
#
# Under --sandbox (docs/sandbox.md) the worker runs inside an OS sandbox, and the server describes its
# policy in REPL_MCP_SANDBOX. The sandbox refuses; this only notes what a run was refused, so that its
# result can name it (sandbox_denials): writes outside the writable places and direct connections, seen
# by an audit hook as they are tried, and reads of denied places, seen in the error the cell ends with.
# =====================================================================================================
SANDBOX_DENIALS_MAX = 16
SANDBOX_DENIAL_TEXT_MAX_CHARS = 512


class _Sandbox:
    def __init__(self, policy):
        def paths(key):
            found = []
            for entry in policy.get(key) or ():
                path = entry.get("path") if type(entry) is dict else entry
                if type(path) is str and not any(c in path for c in "*?["):
                    found.append(path.rstrip("/") or "/")
            return tuple(found)

        self.read_denied = paths("denyRead")
        self.read_allowed = paths("allowRead")
        self.writable = paths("allowWrite") + ("/dev",)
        self.write_denied = paths("denyWrite")
        self.found = []

    @staticmethod
    def _under(path, roots):
        return any(path == root or path.startswith(root + "/") for root in roots)

    def _note(self, kind, target, reason):
        if _ActiveRun.id is None or len(self.found) >= SANDBOX_DENIALS_MAX:
            return
        denial = {"kind": kind, "target": target[:SANDBOX_DENIAL_TEXT_MAX_CHARS], "reason": reason}
        if denial not in self.found:
            self.found.append(denial)

    def hook(self, event, args):
        # An audit hook's exception would become the audited call's: nothing may escape.
        try:
            if event == "open":
                self._opened(*args[:3])
            elif event == "socket.connect":
                self._connected(args[1])
        except Exception:
            pass

    def _opened(self, path, mode, flags):
        if type(path) is int:
            return
        if type(mode) is str:
            writes = any(c in mode for c in "wax+")
        else:
            writes = type(flags) is int and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))
        if not writes:
            return
        try:
            full = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError, OSError):
            return
        if self._under(full, self.write_denied):
            self._note("write", full, "never writable in the sandbox")
        elif not self._under(full, self.writable):
            self._note("write", full, "outside the sandbox's writable places")

    def _connected(self, address):
        if type(address) is not tuple or len(address) < 2 or type(address[0]) is not str:
            return
        host, port = address[0], address[1]
        if host in ("localhost", "::1") or host.startswith("127."):
            return
        self._note(
            "network",
            "%s:%s" % (host, port),
            "direct connections leave no contained worker; go through the proxy (HTTP_PROXY, HTTPS_PROXY)",
        )

    def finish(self, error):
        """What this run was refused, its ending error included; [] when nothing."""
        seen = 0
        while error is not None and seen < 16:
            seen += 1
            filename = getattr(error, "filename", None) if isinstance(error, OSError) else None
            if type(filename) is str and error.errno in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS):
                full = os.path.realpath(filename)
                written = any(found["target"] == full for found in self.found)
                if written:
                    pass
                elif error.errno == errno.EROFS:
                    # Only a write meets a read-only mount: in a writable place, a name the sandbox itself
                    # protects there (.git/hooks, .vscode, a shell's start file), which no list names.
                    self._note("write", full, "never writable in the sandbox")
                elif self._under(full, self.read_denied) and not self._under(full, self.read_allowed):
                    self._note("read", full, "a place the sandbox keeps unreadable (credentials, secrets)")
            error = error.__cause__ or error.__context__
        found, self.found = self.found, []
        return found


_SANDBOX = None


def _contain(text):
    """REPL_MCP_SANDBOX's policy, read once; the variable is not passed on to what the worker starts."""
    global _SANDBOX
    try:
        policy = json.loads(text)
    except ValueError:
        return
    if type(policy) is dict:
        _SANDBOX = _Sandbox(policy)
        sys.addaudithook(_SANDBOX.hook)


# =====================================================================================================
# Entry point
#
# Everything above only defines things (apart from the stream protection and SIGINT set-up at the top).
# main() wires the pieces together, announces `ready` and then runs commands one at a time on the main
# thread until the command pipe closes.
# =====================================================================================================
def main():
    GATE.bind_main_thread()
    # multiprocessing's spawn start method re-runs __main__.__file__ in its children; run directly as
    # `python3 worker.py`, that would be this worker. Without it they start from a plain __main__.
    sys.modules["__main__"].__dict__.pop("__file__", None)
    # Figures render off-screen unless the user chose a backend; plt.show() then sends them as displays.
    os.environ.setdefault("MPLBACKEND", "Agg")
    contained = os.environ.pop("REPL_MCP_SANDBOX", None)
    if contained is not None:
        _contain(contained)
    _FIRST_IMPORTS.on("matplotlib.pyplot", _patch_pyplot)
    _FIRST_IMPORTS.on("getpass", _patch_getpass)
    builtins.input = _input
    writer = _FrameWriter(PROTOCOL_FD)
    _BRIDGE.writer = writer
    _DISPLAYS.writer = writer
    _CHILDREN.install(writer)
    pump = _OutputPump(writer)
    captures = (_CaptureStream(pump, "stdout"), _CaptureStream(pump, "stderr"))
    sys.stdout, sys.stderr = captures
    sys.stdin = _null_stdin()
    commands = _CommandChannel(COMMAND_FD, _Inbox())
    _BRIDGE.commands = commands
    session = _Session(writer, pump, captures, commands)
    pump.start_flusher()
    writer.send(
        {
            "type": "ready",
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "python_executable": sys.executable or "",
            "pid": os.getpid(),
            "implementation": sys.implementation.name,
        }
    )
    commands.start()
    while True:
        command = commands.next_command()
        if command is _SHUTDOWN:
            break
        commands.lend()
        try:
            if session.run(command):
                _terminate(FATAL_EXIT_STATUS)
        except BaseException as exc:  # a worker bug, or an interrupt that raced the end of a cell
            session.report_internal_failure(command.run_id, exc)
        commands.reclaim()  # already done before the result; kept in case no result could be sent
    _terminate(0)


if __name__ == "__main__":
    main()
