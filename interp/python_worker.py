"""sandboxd code interpreter: the Python worker.

One of these runs per Python context, inside the sandbox, as a child of the
sandbox's init; the daemon (src/daemon/interp.c) holds the other ends of its
stdin, stdout and stderr. It speaks a line protocol, one JSON object a line:

  daemon -> worker  {"id": N, "code": "..."}
                    {"cancel": N}
  worker -> daemon  {"type": "ready", "language": "python", "version": ...}
                    {"id": N, "type": "start"}
                    {"id": N, "type": "stdout"|"stderr", "text": "..."}
                    {"id": N, "type": "result", "data": {mime type: value}}
                    {"id": N, "type": "error", "ename", "evalue",
                     "traceback": [line, ...]}
                    {"id": N, "type": "done", "execution_count": K[,
                     "skipped": true]}

Cells run one at a time, in one namespace (the __main__ module), so state
carries from cell to cell. A cell's messages go out in the order things
happened: what the cell wrote before a result is sent before the result.

"start" says the cell has begun: from then on a SIGINT interrupts it. A
cancel that arrives before that makes the worker skip the cell (a "done"
with "skipped", and nothing else); the daemon sends a SIGINT only after a
"start", so no interrupt meant for a cell is ever lost between cells.

The protocol owns the original stdin and stdout, moved to private
descriptors that user code never sees (not inherited by its subprocesses):
fd 0 becomes /dev/null, and fds 1 and 2 become pipes read by two threads
here, which turn whatever arrives -- print, os.write(1, ...), a subprocess,
a C extension's printf -- into stdout/stderr messages as it happens. So
nothing user code writes can break the framing, and output streams while a
cell runs.

A timeout is the daemon sending SIGINT: it raises KeyboardInterrupt in the
cell (and is ignored between cells). A cell that does not stop is killed by
the daemon, which then starts a new worker (the state is lost).
"""
import ast
import base64
import builtins
import codecs
import collections
import fcntl
import io
import json
import linecache
import os
import select
import signal
import struct
import sys
import termios
import threading
import traceback
import types

CELL_PREFIX = "<cell-"
WORKER_FILE = os.path.abspath(__file__)
CO_COROUTINE = 0x80
_NOTHING = object()

# (method, MIME type, is binary) in the order a bundle lists them
RICH_REPRS = (
    ("_repr_html_", "text/html", False),
    ("_repr_markdown_", "text/markdown", False),
    ("_repr_svg_", "image/svg+xml", False),
    ("_repr_png_", "image/png", True),
    ("_repr_jpeg_", "image/jpeg", True),
    ("_repr_latex_", "text/latex", False),
    ("_repr_json_", "application/json", False),
    ("_repr_javascript_", "application/javascript", False),
)


def _fionread(fd):
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


class Channel:
    """The protocol's output: whole lines, one writer at a time."""

    def __init__(self, fd, kernel):
        self.fd = fd
        self.kernel = kernel
        self.lock = threading.Lock()

    def send(self, msg):
        try:
            text = json.dumps(msg, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            text = json.dumps({"id": msg.get("id"), "type": "stderr",
                               "text": f"sandboxd: cannot encode a {msg.get('type')} "
                                       f"message: {e}\n"})
        # lone surrogates (from surrogateescape) become "?": the line must
        # be valid UTF-8 for the daemon
        data = memoryview((text + "\n").encode("utf-8", "replace"))
        main = threading.current_thread() is threading.main_thread()
        with self.lock:
            # a SIGINT arriving mid-line must not leave half a message:
            # the handler defers it until the line is out
            if main:
                self.kernel.in_send = True
            try:
                while data:
                    n = os.write(self.fd, data)
                    data = data[n:]
            finally:
                if main:
                    self.kernel.in_send = False
        if (main and self.kernel.interrupt_pending and self.kernel.executing
                and not self.kernel.holding):
            self.kernel.interrupt_pending = False
            raise KeyboardInterrupt


class _FdBinary(io.RawIOBase):
    def __init__(self, fd):
        super().__init__()
        self._fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, b):
        view = memoryview(b).cast("B")
        total = len(view)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        return total


class FdWriter(io.TextIOBase):
    """sys.stdout / sys.stderr: unbuffered text onto fd 1 / fd 2, so print
    output reaches the pipe (and the client) at once."""

    encoding = "utf-8"
    errors = "backslashreplace"
    line_buffering = True

    def __init__(self, fd, name):
        super().__init__()
        self._fd = fd
        self._name = name
        self.buffer = _FdBinary(fd)

    @property
    def name(self):
        return self._name

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if s:
            self.buffer.write(s.encode("utf-8", "backslashreplace"))
        return len(s)

    def flush(self):
        pass


class Pump(threading.Thread):
    """Reads one of the pipes behind fd 1 / fd 2 and sends what arrives."""

    def __init__(self, kernel, rfd, stream):
        super().__init__(name=f"sandboxd-{stream}", daemon=True)
        self.kernel = kernel
        self.rfd = rfd
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def run(self):
        poller = select.poll()
        poller.register(self.rfd, select.POLLIN)
        while True:
            poller.poll()
            with self.kernel.io_lock:
                data = self.read(65536)
                # print() writes the text and the newline separately: a
                # moment's wait for the rest of a line makes one message
                # of the two
                if data and not data.endswith(b"\n") and poller.poll(5):
                    data += self.read(65536 - len(data))
                self.send(data)

    def read(self, limit):
        """What is in the pipe now (up to limit); io_lock held. Reading
        only under the lock, after FIONREAD, is what lets drain() know
        that everything written before it has been sent."""
        n = _fionread(self.rfd)
        if n <= 0 or limit <= 0:
            return b""
        return os.read(self.rfd, min(n, limit))

    def send(self, data):
        text = self.decoder.decode(data) if data else ""
        if text:
            self.kernel.emit(self.stream, text)

    def drain(self):
        left = _fionread(self.rfd)
        while left > 0:
            data = self.read(min(left, 65536))
            if not data:
                break
            left -= len(data)
            self.send(data)


class _PatchingLoader:
    """Runs after(module) once the wrapped loader has executed it."""

    def __init__(self, inner, after):
        self._inner = inner
        self._after = after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _PyplotHook:
    """Patches matplotlib.pyplot.show as soon as pyplot is imported, so a
    plt.show() in a cell sends its figures as image/png results right away
    (and closes them, as a notebook does)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot" or self.busy:
            return None
        import importlib.util
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        except Exception:
            return None
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, self.kernel.patch_pyplot)
        return spec


class Kernel:
    def __init__(self):
        self.io_lock = threading.Lock()
        self.cell_id = None
        self.count = 0
        self.executing = False
        self.in_send = False
        self.holding = False
        self.interrupt_pending = False
        self.loop = None
        self.pumps = []
        self.chan = None
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        main.__dict__["display"] = self.display
        sys.modules["__main__"] = main
        self.ns = main.__dict__

    # --- setup --------------------------------------------------------
    def setup_fds(self):
        """Move the protocol to private fds; fds 0/1/2 become /dev/null
        and two pipes this process reads."""
        in_fd = os.dup(0)   # os.dup: not inherited by subprocesses
        out_fd = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self.chan = Channel(out_fd, self)
        self.wfds = {}
        for fd, stream in ((1, "stdout"), (2, "stderr")):
            r, w = os.pipe()
            os.dup2(w, fd)
            # w stays open (private): the pipe never reports a hangup,
            # even when user code closes fd 1
            self.wfds[fd] = w
            self.pumps.append(Pump(self, r, stream))
        sys.stdin = open(os.devnull, "r")
        sys.stdout = FdWriter(1, "<stdout>")
        sys.stderr = FdWriter(2, "<stderr>")
        sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
        for p in self.pumps:
            p.start()
        return in_fd

    def emit(self, stream, text):
        self.chan.send({"id": self.cell_id, "type": stream, "text": text})

    def on_sigint(self, signum, frame):
        if not self.executing:
            return  # between cells: a late timeout, nothing to stop
        if self.in_send or self.holding:
            self.interrupt_pending = True
            return
        raise KeyboardInterrupt

    def drain(self):
        with self.io_lock:
            for p in self.pumps:
                p.drain()

    def say(self, msg):
        """Sends a message of the main thread (a result, the worker's own
        stderr) after what the cell wrote before it: the pumps' output is
        drained first. An interrupt meanwhile waits until both are out, so
        it cannot drop output that was read and not yet sent."""
        self.holding = True
        try:
            self.drain()
            self.chan.send(msg)
        finally:
            self.holding = False
        if self.interrupt_pending and self.executing:
            self.interrupt_pending = False
            raise KeyboardInterrupt

    def restore_fds(self):
        # a cell that closed fd 1 or 2 gets them back for the next one
        for fd, w in self.wfds.items():
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(w, fd)

    # --- running a cell -----------------------------------------------
    def run_cell(self, cid, code):
        self.cell_id = cid
        self.count += 1
        filename = f"{CELL_PREFIX}{self.count}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self.restore_fds()
        value, error = _NOTHING, None
        try:
            try:
                self.executing = True
                # from here a SIGINT interrupts this cell
                self.chan.send({"id": cid, "type": "start"})
                value = self.execute(code, filename)
            finally:
                self.executing = False
        except BaseException as e:  # KeyboardInterrupt and SystemExit too
            error = e
        try:
            self.drain()
            if error is None and value is not _NOTHING and value is not None:
                self.ns["_"] = value
                self.executing = True
                try:
                    self.send_result(value)
                finally:
                    self.executing = False
            self.flush_figures()
        except BaseException as e:
            if error is None:
                error = e
        try:
            self.drain()
            if error is not None:
                self.send_error(error)
        finally:
            self.chan.send({"id": cid, "type": "done", "execution_count": self.count})
            self.cell_id = None

    def execute(self, code, filename):
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
        r = eval(body, self.ns)
        if body.co_flags & CO_COROUTINE:
            self.run_coroutine(r)
        if last is None:
            return _NOTHING
        expr = compile(last, filename, "eval", flags=flags, dont_inherit=True)
        v = eval(expr, self.ns)
        if expr.co_flags & CO_COROUTINE:
            v = self.run_coroutine(v)
        return v

    def run_coroutine(self, coro):
        import asyncio
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        return self.loop.run_until_complete(coro)

    # --- results ------------------------------------------------------
    def bundle(self, v):
        """The MIME bundle of a value: text/plain always, plus whatever
        richer forms it offers."""
        b = {}
        try:
            b["text/plain"] = repr(v)
        except Exception as e:
            b["text/plain"] = f"<{type(v).__name__} object (repr failed: {e!r})>"
        # an object that claims every attribute (a proxy, a mock) offers
        # no rich forms
        try:
            liar = getattr(v, "_sandboxd_no_such_attribute_", None) is not None
        except Exception:
            liar = True
        if not liar and not isinstance(v, type):
            for meth, mime, binary in RICH_REPRS:
                try:
                    f = getattr(v, meth, None)
                    if not callable(f):
                        continue
                    data = f()
                    if isinstance(data, tuple) and len(data) == 2:
                        data = data[0]  # (data, metadata)
                    if data is None:
                        continue
                    if binary:
                        if isinstance(data, str):
                            data = data.encode("ascii")
                        if isinstance(data, (bytes, bytearray)):
                            b[mime] = _b64(data)
                    elif mime == "application/json":
                        if isinstance(data, str):
                            data = json.loads(data)
                        json.dumps(data, allow_nan=False)
                        b[mime] = data
                    elif isinstance(data, str):
                        b[mime] = data
                except Exception as e:
                    self.say({"id": self.cell_id, "type": "stderr",
                              "text": f"{type(v).__name__}.{meth}() failed: {e!r}\n"})
        fig = self.as_figure(v)
        if fig is not None:
            png = self.figure_png(fig)
            if png:
                b["image/png"] = png
        if isinstance(v, (dict, list)) and "application/json" not in b:
            try:
                b["application/json"] = json.loads(json.dumps(v, allow_nan=False))
            except (TypeError, ValueError, RecursionError):
                pass
        return b

    def send_result(self, v):
        self.say({"id": self.cell_id, "type": "result", "data": self.bundle(v)})
        fig = self.as_figure(v)
        if fig is not None:  # shown as the result: not again at the end
            plt = sys.modules.get("matplotlib.pyplot")
            if plt is not None:
                try:
                    plt.close(fig)
                except Exception:
                    pass

    def display(self, *objs):
        """display(obj, ...): send each as a result now, as in Jupyter."""
        for o in objs:
            self.send_result(o)

    def send_error(self, e):
        tb = e.__traceback__
        # the worker's own frames (and asyncio's) come before the cell's
        t = tb
        while t is not None and not t.tb_frame.f_code.co_filename.startswith(CELL_PREFIX):
            t = t.tb_next
        if t is None:
            lines = traceback.format_exception_only(type(e), e)
        else:
            te = traceback.TracebackException(type(e), e, t)
            _drop_worker_frames(te)
            lines = te.format()
        try:
            value = str(e)
        except Exception:
            value = ""
        self.chan.send({"id": self.cell_id, "type": "error", "ename": type(e).__name__,
                        "evalue": value, "traceback": "".join(lines).splitlines()})

    # --- matplotlib ---------------------------------------------------
    @staticmethod
    def as_figure(v):
        fm = sys.modules.get("matplotlib.figure")
        if fm is not None and isinstance(v, getattr(fm, "Figure", ())):
            return v
        return None

    def figure_png(self, fig):
        try:
            out = io.BytesIO()
            fig.savefig(out, format="png", bbox_inches="tight")
            return _b64(out.getvalue())
        except Exception as e:
            self.say({"id": self.cell_id, "type": "stderr",
                      "text": f"cannot render the figure: {e!r}\n"})
            return None

    def flush_figures(self):
        """Every open pyplot figure becomes an image/png result and is closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            from matplotlib._pylab_helpers import Gcf
            figs = [m.canvas.figure for m in Gcf.get_all_fig_managers()]
        except Exception:
            return
        for fig in figs:
            png = self.figure_png(fig)
            if png:
                try:
                    text = repr(fig)
                except Exception:
                    text = "<Figure>"
                self.say({"id": self.cell_id, "type": "result",
                          "data": {"text/plain": text, "image/png": png}})
        try:
            plt.close("all")
        except Exception:
            pass

    def patch_pyplot(self, plt):
        kernel = self

        def show(*args, **kwargs):
            kernel.flush_figures()

        show.__doc__ = getattr(plt.show, "__doc__", None)
        plt.show = show


def _drop_worker_frames(te, seen=None):
    """Frames of this file (the SIGINT handler raising KeyboardInterrupt,
    display()) say nothing about the user's code."""
    seen = seen if seen is not None else set()
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if f.filename != WORKER_FILE])
    _drop_worker_frames(te.__cause__, seen)
    _drop_worker_frames(te.__context__, seen)


def _b64(data):
    return base64.b64encode(bytes(data)).decode("ascii")


class Inbox:
    """The protocol's input: cells to run, and cancels of cells that have
    not begun. Read on the main thread between cells only (a SIGINT then
    is ignored, and os.read resumes after it)."""

    def __init__(self, fd):
        self.fd = fd
        self.rest = b""
        self.cells = collections.deque()
        self.cancelled = set()
        self.eof = False

    def pull(self, wait):
        """Takes what has arrived; with wait, first waits for a cell."""
        while not self.eof:
            if not (wait and not self.cells):
                ready, _, _ = select.select([self.fd], [], [], 0)
                if not ready:
                    return
            data = os.read(self.fd, 65536)
            if not data:
                self.eof = True
                return
            *lines, self.rest = (self.rest + data).split(b"\n")
            for line in lines:
                self.take(line)

    def take(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if isinstance(msg.get("cancel"), int):
            self.cancelled.add(msg["cancel"])
        elif isinstance(msg.get("code"), str):
            self.cells.append(msg)

    def next_cell(self):
        self.pull(wait=True)
        return self.cells.popleft() if self.cells else None

    def cancelled_before_start(self, cid):
        """Whether a cancel of cell cid came before it begins (cancels of
        earlier cells came too late for them: forgotten)."""
        self.pull(wait=False)
        if isinstance(cid, int):
            self.cancelled = {n for n in self.cancelled if n >= cid}
        return cid in self.cancelled


def main():
    kernel = Kernel()
    in_fd = kernel.setup_fds()
    signal.signal(signal.SIGINT, kernel.on_sigint)
    # figures render off-screen; the context's env may choose otherwise
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.meta_path.insert(0, _PyplotHook(kernel))
    # as in the interactive interpreter: modules in the cwd import
    sys.path[0] = ""
    sys.argv = [""]
    kernel.chan.send({"type": "ready", "language": "python",
                      "version": sys.version.split()[0], "pid": os.getpid()})
    inbox = Inbox(in_fd)
    while True:
        msg = inbox.next_cell()
        if msg is None:
            break
        cid = msg.get("id")
        if inbox.cancelled_before_start(cid):
            kernel.chan.send({"id": cid, "type": "done",
                              "execution_count": kernel.count, "skipped": True})
            continue
        try:
            kernel.run_cell(cid, msg["code"])
        except KeyboardInterrupt:
            pass
    # the daemon closed the protocol: leave at once, even with user
    # threads still running
    os._exit(0)


if __name__ == "__main__":
    main()
