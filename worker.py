"""repl-mcp Python worker: one persistent namespace driven over newline-delimited JSON frames.

The protocol is described in docs/worker-protocol.md. Standard library only; CPython 3.10 and newer.
The server starts this file through a small bootstrap, but `python3 worker.py` works as well.
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
    def __init__(self):
        self.armed = False
        self._holds = 0
        self._deferred = False
        self._main_thread = None

    def bind_main_thread(self):
        self._main_thread = threading.get_ident()

    def handler(self, signum, frame):
        if not self.armed:
            return
        if self._holds:
            self._deferred = True
            return
        raise KeyboardInterrupt

    def arm(self):
        self._deferred = False
        self.armed = True

    def disarm(self):
        self.armed = False
        self._deferred = False

    def hold(self, thread_id):
        """Defer SIGINT for a critical section; returns a token for release()."""
        if thread_id != self._main_thread:
            return False
        self._holds += 1
        return True

    def release(self, token):
        if not token:
            return
        self._holds -= 1
        if not self._holds and self._deferred:
            self._deferred = False
            if self.armed:
                raise KeyboardInterrupt


GATE = _InterruptGate()
signal.signal(signal.SIGINT, GATE.handler)


# =====================================================================================================
# Remaining imports and limits
# =====================================================================================================
import ast
import asyncio
import builtins
import collections
import inspect
import io
import json
import linecache
import math
import time
import types

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

REPL_FILENAME_PREFIX = "<repl:"
NAMESPACE_NAME = "__repl__"
STREAM_NAMES = ("stdout", "stderr")

# Written to fd 2 after each cell so the server can tell which native stderr bytes belong to which run
# (see src/worker/native-stderr.ts; not yet described in docs/worker-protocol.md).
STDERR_BARRIER = "\x1erepl-mcp-barrier:{}\x1e\n"


# =====================================================================================================
# Low-level helpers
# =====================================================================================================
_EXIT_HOOKS = []  # best-effort cleanups before the process ends (e.g. killing tracked children)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
# Frames to the server
#
# Every frame goes through one lock and is written completely. Text fields are bounded before they
# get here, so the size check is a last line of defence that shrinks result frames rather than
# break the protocol.
# =====================================================================================================
def _encode_frame(frame):
    text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _utf8(text) + b"\n"


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
    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.RLock()
        self._busy = False

    def send(self, frame):
        """Write one frame; False if it was dropped (too large, or re-entered from a finalizer)."""
        try:
            data = _encode_frame(frame)
        except (TypeError, ValueError) as exc:
            _note("unencodable %s frame dropped: %s" % (frame.get("type"), exc))
            return False
        if len(data) > MAX_FRAME_BYTES:
            data = _shrink_result_frame(frame) if frame.get("type") == "result" else None
            if data is None:
                _note("oversized %s frame dropped" % frame.get("type"))
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
        self._kept = [bytearray(), bytearray()]
        self._cut = [False, False]
        self._pending = []  # [stream index, bytearray] in write order, same-stream writes merged
        self._pending_bytes = 0
        self._flushing = False

    def attach(self, capture):
        self._captures.append(capture)
        return len(self._captures) - 1

    def start_flusher(self):
        threading.Thread(target=self._flush_loop, name="repl-output-flusher", daemon=True).start()

    def begin(self, run_id):
        with self._cond:
            self._run_id = run_id
            self._used = [0, 0]
            self._kept = [bytearray(), bytearray()]
            self._cut = [False, False]
            self._pending = []
            self._pending_bytes = 0
            self._restore_writes()

    def finish(self):
        """End the run's capture after sending its last output frames; returns (texts, cut flags)."""
        with self._cond:
            self._flush_locked()
            texts = [kept.decode("utf-8") for kept in self._kept]
            cut = list(self._cut)
            self._run_id = None
            self._kept = [bytearray(), bytearray()]
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
        self._kept[index] += data
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
        chunks, self._pending, self._pending_bytes = self._pending, [], 0
        self._flushing = True
        # The run's frames go out together: an interrupt deferred here fires after the last one.
        token = GATE.hold(threading.get_ident())
        try:
            for index, data in chunks:
                self._writer.send(
                    {"type": "output", "id": self._run_id, "stream": STREAM_NAMES[index], "text": data.decode("utf-8")}
                )
        finally:
            self._flushing = False
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
# A daemon thread owns the command fd: it reads bounded lines, parses frames and dispatches them by
# type. Cells are queued for the main thread; end of input ends the process even while a cell runs.
# =====================================================================================================
class _Execute:
    __slots__ = ("run_id", "code", "timeout")

    def __init__(self, run_id, code, timeout):
        self.run_id = run_id
        self.code = code
        self.timeout = timeout


_SHUTDOWN = object()


class _Inbox:
    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._items = collections.deque()
        self._busy = False  # the main thread is running a command taken earlier

    def put(self, item):
        with self._cond:
            # While idle, the first queued command is the one about to run, not one waiting behind it.
            limit = MAX_PENDING_COMMANDS + (0 if self._busy else 1)
            if len(self._items) >= limit:
                _terminate(2, "more than %d commands pending" % MAX_PENDING_COMMANDS)
            self._items.append(item)
            self._cond.notify()

    def take(self):
        with self._cond:
            self._busy = False
            while not self._items:
                self._cond.wait()
            self._busy = True
            return self._items.popleft()


def _read_lines(fd):
    """Yield each line (without its newline); stops the process on an over-long or unterminated line."""
    buffer = bytearray()
    scanned = 0
    while True:
        newline = buffer.find(b"\n", scanned)
        if newline < 0:
            if len(buffer) >= MAX_FRAME_BYTES:
                _terminate(2, "command line exceeds %d bytes" % MAX_FRAME_BYTES)
            scanned = len(buffer)
            try:
                chunk = os.read(fd, 65_536)
            except OSError as exc:
                _terminate(2, "command pipe failed: %s" % exc)
            if not chunk:
                if buffer:
                    _terminate(2, "command stream ended inside a line")
                return
            buffer += chunk
            continue
        if newline + 1 > MAX_FRAME_BYTES:
            _terminate(2, "command line exceeds %d bytes" % MAX_FRAME_BYTES)
        line = bytes(buffer[:newline])
        del buffer[: newline + 1]
        scanned = 0
        yield line


class _CommandReader:
    def __init__(self, fd, inbox):
        self._fd = fd
        self._inbox = inbox
        # New frame types (rpc_result, ...) get an entry here; handlers run on the reader thread.
        self.handlers = {
            "execute": self._on_execute,
            "shutdown": self._on_shutdown,
        }

    def start(self):
        threading.Thread(target=self._run, name="repl-command-reader", daemon=True).start()

    def _run(self):
        try:
            for line in _read_lines(self._fd):
                try:
                    frame = json.loads(line.decode("utf-8"))
                except (ValueError, RecursionError):
                    _terminate(2, "command line is not JSON")
                if type(frame) is not dict:
                    _terminate(2, "command line is not a JSON object")
                handler = self.handlers.get(frame.get("type"))
                if handler is None:
                    _terminate(2, "unknown frame type %r" % (frame.get("type"),))
                handler(frame)
        except BaseException as exc:
            _terminate(2, "command reader failed: %r" % (exc,))
        _terminate(0)

    def _on_execute(self, frame):
        run_id, code = frame.get("id"), frame.get("code")
        if type(run_id) is not str or type(code) is not str:
            _terminate(2, "execute frame needs string id and code")
        self._inbox.put(_Execute(run_id, code, frame.get("timeout")))

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
    pass


class _JsonConverter:
    def __init__(self):
        self.nodes = 0

    def convert(self, value, depth):
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            if value.bit_length() > PREVIEW_MAX_INT_BITS:
                raise _NotPreviewable
            return value
        if kind is float:
            if not math.isfinite(value):
                raise _NotPreviewable
            return value
        if kind is str:
            if len(value) > PREVIEW_MAX_NESTED_STR:
                raise _NotPreviewable
            return value
        if kind is list or kind is tuple:
            self._enter(value, depth)
            return [self._child(item, depth) for item in value]
        if kind is dict:
            self._enter(value, depth)
            converted = {}
            for key, item in dict.items(value):
                if type(key) is not str or len(key) > PREVIEW_MAX_NESTED_STR:
                    raise _NotPreviewable
                converted[key] = self._child(item, depth)
            return converted
        raise _NotPreviewable

    def _enter(self, container, depth):
        if depth >= PREVIEW_MAX_DEPTH or len(container) > PREVIEW_MAX_ITEMS:
            raise _NotPreviewable

    def _child(self, item, depth):
        self.nodes += 1
        if self.nodes > PREVIEW_MAX_NODES:
            raise _NotPreviewable
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
    if kind is str:
        # Quoting never shrinks a string, so a long one is cut anyway: quote only what can be kept.
        sample = value[:PREVIEW_MAX_BYTES]
        quoted, cut = _cut_text(json.dumps(sample, ensure_ascii=False), PREVIEW_MAX_BYTES)
        cut = cut or len(sample) < len(value)
        return quoted, not cut, value, cut
    try:
        converted = _JsonConverter().convert(value, 0)
        rendered = json.dumps(converted, ensure_ascii=False, allow_nan=False)
    except (_NotPreviewable, RuntimeError, ValueError, RecursionError):
        # RuntimeError: another thread resized a container while it was being read.
        label = _type_name(kind)
        if _has_length(kind):
            return "<%s; safe preview omitted; length=%d>" % (label, len(value)), False, None, True
        return "<%s; safe preview omitted>" % label, False, None, True
    rendered, cut = _cut_text(rendered, PREVIEW_MAX_BYTES)
    return rendered, not cut, converted, cut


# =====================================================================================================
# Error text
# =====================================================================================================
class _SourceRegistry:
    """Every cell's source, by its `<repl:RUN_ID>` filename, also published through linecache."""

    def __init__(self):
        self._lines = {}

    def add(self, filename, code):
        lines = code.splitlines(True)
        self._lines[filename] = lines
        linecache.cache[filename] = (len(code), None, lines, filename)

    def __contains__(self, filename):
        return filename in self._lines

    def line(self, filename, lineno):
        lines = self._lines.get(filename)
        if not lines or not isinstance(lineno, int) or not 0 < lineno <= len(lines):
            return ""
        return lines[lineno - 1].strip()[:SOURCE_LINE_MAX_CHARS]


def _exception_message(exc):
    try:
        return str(exc)
    except BaseException:
        return "<exception str() failed>"


def _render_exception(exc, sources):
    """(error text, whether anything was cut) in the documented traceback summary format."""
    try:
        return _render_traceback(exc, sources)
    except Exception:  # an exception object odd enough to break the summary still fails the cell
        return _type_name(type(exc)), True


def _render_traceback(exc, sources):
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

    message = _exception_message(exc)
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
# Cells
# =====================================================================================================
class _Outcome:
    __slots__ = ("value", "error")

    def __init__(self, value=None, error=None):
        self.value = value
        self.error = error


class _Session:
    def __init__(self, writer, pump, captures):
        self._writer = writer
        self._pump = pump
        self._captures = captures
        self._sources = _SourceRegistry()
        module = types.ModuleType(NAMESPACE_NAME)
        module.__dict__["__builtins__"] = builtins
        # Registered so pickle and `import __repl__` find classes and functions defined in cells.
        sys.modules[NAMESPACE_NAME] = module
        self.namespace = module.__dict__
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self._install_helpers()

    # -- per-cell process state ------------------------------------------------------------------
    def _install_helpers(self):
        """Names the worker provides inside cells; re-installed after every cell so shadowing is brief."""
        helpers = {}
        self.namespace.update(helpers)

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
        signal.signal(signal.SIGINT, GATE.handler)
        if self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
        # asyncio.run() in a cell leaves no current loop behind.
        asyncio.set_event_loop(self.loop)

    # -- running -------------------------------------------------------------------------------
    def run(self, command):
        run_id = command.run_id
        self._pump.begin(run_id)
        self._prepare_process()
        outcome = self._execute(run_id, command.code)
        (stdout, stderr), (stdout_cut, stderr_cut) = self._pump.finish()
        result = {"success": outcome.error is None, "stdout": stdout, "stderr": stderr, "return_value": None}
        truncated = {"stdout": stdout_cut, "stderr": stderr_cut, "return": False}
        error, interrupted = None, False
        if outcome.error is not None:
            error, interrupted, error_cut = self._describe_failure(run_id, outcome.error)
            if error_cut:
                truncated["error"] = True
        elif outcome.value is not None:
            preview, has_value, value, truncated["return"] = _preview(outcome.value)
            result["return_value"] = preview
            if has_value:
                result["value"] = value
        outcome = None  # drop the value and any traceback (and the frames it keeps alive) right away
        result.update(error=error, truncated=truncated, state="preserved", interrupted=interrupted)
        self._install_helpers()
        self._send_result(run_id, result)

    def _send_result(self, run_id, result):
        try:
            _write_all(2, _utf8(STDERR_BARRIER.format(run_id)))
        except OSError:
            pass
        self._writer.send({"type": "result", "id": run_id, "result": result})

    def _execute(self, run_id, code):
        filename = REPL_FILENAME_PREFIX + run_id + ">"
        self._sources.add(filename, code)
        try:
            body, tail = _compile_cell(code, filename)
        except BaseException as exc:  # SyntaxError, but also ValueError, RecursionError, MemoryError
            return _Outcome(error=exc)
        try:
            try:
                GATE.arm()
                self._run_code(body)
                value = self._run_code(tail) if tail is not None else None
            finally:
                GATE.disarm()
        except BaseException as exc:
            GATE.disarm()
            return _Outcome(error=exc)
        return _Outcome(value=value)

    def _run_code(self, code):
        if code.co_flags & inspect.CO_COROUTINE:
            return self._await(eval(code, self.namespace))
        return eval(code, self.namespace)

    def _await(self, coroutine):
        """Run a cell's coroutine on the persistent loop; on interrupt, cancel it and let it unwind."""
        loop = self.loop
        task = None
        try:
            task = loop.create_task(coroutine)
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
            "truncated": {"stdout": False, "stderr": False, "return": False},
            "state": "preserved",
            "interrupted": isinstance(exc, KeyboardInterrupt),
        }
        self._send_result(run_id, result)

    def _describe_failure(self, run_id, exc):
        """(error text, interrupted, error text was cut)."""
        if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
            return "Execution interrupted (%s); namespace preserved" % run_id, True, False
        text, cut = _render_exception(exc, self._sources)
        return text, False, cut


def _compile_cell(code, filename):
    """(body code, trailing-expression code or None), both allowing top-level await."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
    tail = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        tail = compile(ast.Expression(tree.body.pop().value), filename, "eval", flags, dont_inherit=True)
    body = compile(tree, filename, "exec", flags, dont_inherit=True)
    return body, tail


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
# Main
# =====================================================================================================
def main():
    GATE.bind_main_thread()
    writer = _FrameWriter(PROTOCOL_FD)
    pump = _OutputPump(writer)
    captures = (_CaptureStream(pump, "stdout"), _CaptureStream(pump, "stderr"))
    sys.stdout, sys.stderr = captures
    sys.stdin = _null_stdin()
    session = _Session(writer, pump, captures)
    pump.start_flusher()
    inbox = _Inbox()
    writer.send(
        {
            "type": "ready",
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "python_executable": sys.executable or "",
            "pid": os.getpid(),
            "implementation": sys.implementation.name,
        }
    )
    _CommandReader(COMMAND_FD, inbox).start()
    while True:
        command = inbox.take()
        if command is _SHUTDOWN:
            break
        try:
            session.run(command)
        except BaseException as exc:  # a worker bug, or an interrupt that raced the end of a cell
            session.report_internal_failure(command.run_id, exc)
    _terminate(0)


if __name__ == "__main__":
    main()
