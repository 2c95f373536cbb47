"""Code interpreter contexts over /v1, in Python: state that persists from
cell to cell (and only in its own context), MIME-typed results, output that
streams while a cell runs, errors with tracebacks, timeouts that interrupt
a cell and keep the context, workers that die and come back, and the
context API itself (create, list, get, delete, validation)."""
import base64
import json
import threading
import time

import pytest

from helpers import JSON_ACCEPT, assert_error, sse_events, stream_lines, wait_until

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- helpers (these tests' own) -----------------------------------------------

def new_context(v1, sid, **body):
    r = v1.post(f"/v1/sandbox/{sid}/contexts", json=body)
    assert r.status_code == 201, f"create context {body}: {r.status_code} {r.text}"
    return r.json()


def run(v1, sid, cid, code, timeout=60, **body):
    """Runs a cell (JSON answer); asserts a 200 and returns the answer."""
    body["code"] = code
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{cid}/run", json=body,
                headers=JSON_ACCEPT, timeout=timeout)
    assert r.status_code == 200, f"run {code!r}: {r.status_code} {r.text[:2000]}"
    return r.json()


def value(res):
    """The text/plain of the cell's single result (no error allowed)."""
    assert res["error"] is None, res["error"]
    assert len(res["results"]) == 1, res
    return res["results"][0]["text/plain"]


def run_sse(v1, sid, cid, code, **body):
    """Runs a cell as SSE: [(event, data as JSON, arrival time)], and the
    time the request was sent."""
    body["code"] = code
    t0 = time.monotonic()
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{cid}/run", json=body, stream=True)
    with r:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [(e.event, json.loads(e.data), e.t) for e in sse_events(r)
                  if e.event is not None]
    return events, t0


@pytest.fixture
def ctx(v1, sid):
    return new_context(v1, sid)["id"]


# --- state ----------------------------------------------------------------------

def test_state_persists_within_a_context_only(v1, sid):
    a = new_context(v1, sid)["id"]
    b = new_context(v1, sid)["id"]
    assert a != b
    res = run(v1, sid, a, "x = 40")
    assert res["results"] == [] and res["error"] is None, res
    assert value(run(v1, sid, a, "x + 2")) == "42"
    other = run(v1, sid, b, "x")
    assert other["error"]["name"] == "NameError", other
    assert "'x' is not defined" in other["error"]["value"]
    # imports and definitions persist too
    run(v1, sid, a, "import math\ndef twice(n):\n    return 2 * n")
    assert value(run(v1, sid, a, "twice(math.floor(x / 2))")) == "40"


def test_last_expression_is_the_result_and_statements_run_first(v1, sid, ctx):
    res = run(v1, sid, ctx, "print('side effect')\nitems = [3, 1, 2]\nsorted(items)")
    assert res["logs"]["stdout"] == ["side effect\n"], res
    assert res["results"][0]["text/plain"] == "[1, 2, 3]"
    assert run(v1, sid, ctx, "None")["results"] == []
    assert run(v1, sid, ctx, "y = 1  # an assignment has no value")["results"] == []


def test_execution_count_counts_cells(v1, sid, ctx):
    counts = [run(v1, sid, ctx, "1")["executionCount"] for _ in range(3)]
    assert counts == [1, 2, 3], counts


# --- MIME bundles ---------------------------------------------------------------

def test_dict_gives_application_json(v1, sid, ctx):
    res = run(v1, sid, ctx, "{'a': [1, 2.5, None], 'b': {'c': 'd'}}")
    bundle = res["results"][0]
    assert bundle["application/json"] == {"a": [1, 2.5, None], "b": {"c": "d"}}
    assert bundle["text/plain"] == "{'a': [1, 2.5, None], 'b': {'c': 'd'}}"
    # a list too; a value JSON cannot hold is text only
    assert run(v1, sid, ctx, "[1, 'two']")["results"][0]["application/json"] == [1, "two"]
    assert "application/json" not in run(v1, sid, ctx, "{'a': {1, 2}}")["results"][0]


def test_repr_methods_give_their_mime_types(v1, sid, ctx):
    run(v1, sid, ctx, """
class Rich:
    def __repr__(self):
        return 'Rich()'
    def _repr_html_(self):
        return '<b>rich</b>'
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def _repr_markdown_(self):
        return '**rich**'
    def _repr_json_(self):
        return {'rich': True}
""")
    bundle = run(v1, sid, ctx, "Rich()")["results"][0]
    assert bundle == {"text/plain": "Rich()", "text/html": "<b>rich</b>",
                      "image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg"/>',
                      "text/markdown": "**rich**", "application/json": {"rich": True}}


def test_repr_png_is_base64(v1, sid, ctx):
    run(v1, sid, ctx, "class Img:\n    def _repr_png_(self):\n"
                      "        return b'\\x89PNG\\r\\n\\x1a\\nxyz'")
    bundle = run(v1, sid, ctx, "Img()")["results"][0]
    assert base64.b64decode(bundle["image/png"]) == PNG_MAGIC + b"xyz"


def test_display_sends_results_during_the_cell(v1, sid, ctx):
    res = run(v1, sid, ctx, "display(1, {'k': 2})\n3")
    assert [b["text/plain"] for b in res["results"]] == ["1", "{'k': 2}", "3"], res
    assert res["results"][1]["application/json"] == {"k": 2}


def test_matplotlib_plot_is_a_png(v1, sid, ctx):
    res = run(v1, sid, ctx, "import matplotlib.pyplot as plt\n"
                            "plt.plot([1, 4, 9])\nplt.title('squares')\nplt.show()",
              timeout=120)
    assert res["error"] is None, res["error"]
    pngs = [b for b in res["results"] if "image/png" in b]
    assert len(pngs) == 1, res["results"]
    data = base64.b64decode(pngs[0]["image/png"], validate=True)
    assert data.startswith(PNG_MAGIC), data[:16]
    assert len(data) > 1000
    assert pngs[0]["text/plain"].startswith("<Figure")
    # a figure left open at the end of a cell is shown too, once
    res = run(v1, sid, ctx, "fig = plt.figure()\nplt.bar([1, 2], [3, 4])\n'done'")
    kinds = [sorted(b) for b in res["results"]]
    assert kinds == [["text/plain"], ["image/png", "text/plain"]], kinds
    assert base64.b64decode(res["results"][1]["image/png"]).startswith(PNG_MAGIC)
    assert [b for b in run(v1, sid, ctx, "1")["results"] if "image/png" in b] == []


# --- output ---------------------------------------------------------------------

def test_print_streams_before_the_cell_ends(v1, sid, ctx):
    events, t0 = run_sse(v1, sid, ctx,
                         "import time\nfor i in range(3):\n    print('line', i)\n"
                         "    time.sleep(0.6)\n'end'")
    kinds, lines, t_lines, rest = stream_lines(events)
    assert kinds == ["stdout", "result", "done"], events
    assert lines == ["line 0\n", "line 1\n", "line 2\n"] and rest == "", events
    t_done = events[-1][2]
    # each line was in the client's hands while the cell still slept
    assert t_done - t_lines[0] >= 1.4, (t_lines, t_done)
    assert t_lines[1] - t_lines[0] >= 0.4 and t_lines[2] - t_lines[1] >= 0.4, t_lines
    assert events[-2][1] == {"text/plain": "'end'"}
    assert events[-1][1]["executionCount"] == 1 and events[-1][1]["error"] is False


def test_stdout_and_stderr_are_kept_apart(v1, sid, ctx):
    res = run(v1, sid, ctx, "import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert "".join(res["logs"]["stdout"]) == "out\n"
    assert "".join(res["logs"]["stderr"]) == "err\n"


def test_raw_fd_writes_and_subprocesses_are_captured(v1, sid, ctx):
    """Output that bypasses sys.stdout still arrives as output, and cannot
    break the protocol."""
    res = run(v1, sid, ctx, "import os, subprocess\n"
                            "os.write(1, b'raw fd 1\\n')\n"
                            "os.write(2, b'raw fd 2\\n')\n"
                            "os.write(1, b'{\"type\": \"done\", \"id\": 1}\\n')\n"
                            "subprocess.run(['echo', 'from a child'])\n"
                            "None")
    out = "".join(res["logs"]["stdout"])
    assert "raw fd 1\n" in out and "from a child\n" in out, res
    assert '{"type": "done", "id": 1}' in out
    assert "".join(res["logs"]["stderr"]) == "raw fd 2\n"
    # the user cannot read the protocol's input either
    res = run(v1, sid, ctx, "import sys\nsys.stdin.read()")
    assert value(res) == "''"
    assert value(run(v1, sid, ctx, "1 + 1")) == "2"


def test_closing_stdout_does_not_break_the_context(v1, sid, ctx):
    run(v1, sid, ctx, "import os\nos.close(1)\nos.close(2)")
    res = run(v1, sid, ctx, "print('back')")
    assert res["logs"]["stdout"] == ["back\n"], res


# --- errors ---------------------------------------------------------------------

def test_exception_gives_name_value_and_traceback(v1, sid, ctx):
    res = run(v1, sid, ctx, "def f():\n    return 1/0\nf()")
    err = res["error"]
    assert err["name"] == "ZeroDivisionError" and err["value"] == "division by zero", err
    tb = err["traceback"]
    assert isinstance(tb, list) and all(isinstance(l, str) for l in tb), tb
    assert tb[0] == "Traceback (most recent call last):"
    assert tb[-1] == "ZeroDivisionError: division by zero"
    assert any('File "<cell-1>", line 2, in f' in l for l in tb), tb
    assert any("return 1/0" in l for l in tb), tb
    assert not any("python_worker" in l for l in tb), tb
    assert res["results"] == []


def test_exception_over_sse(v1, sid, ctx):
    events, _ = run_sse(v1, sid, ctx, "print('before')\n1/0")
    assert [e[0] for e in events] == ["stdout", "error", "done"], events
    assert events[1][1]["name"] == "ZeroDivisionError"
    assert events[1][1]["traceback"][-1] == "ZeroDivisionError: division by zero"
    assert events[2][1]["error"] is True


def test_syntax_error(v1, sid, ctx):
    err = run(v1, sid, ctx, "x = (")["error"]
    assert err["name"] == "SyntaxError", err
    assert err["traceback"][-1].startswith("SyntaxError"), err


def test_exit_and_input_do_not_end_the_context(v1, sid, ctx):
    run(v1, sid, ctx, "kept = 1")
    assert run(v1, sid, ctx, "import sys\nsys.exit(3)")["error"]["name"] == "SystemExit"
    assert run(v1, sid, ctx, "input()")["error"]["name"] == "EOFError"
    assert value(run(v1, sid, ctx, "kept")) == "1"


def test_top_level_await(v1, sid, ctx):
    res = run(v1, sid, ctx, "import asyncio\nawait asyncio.sleep(0.1)\n"
                            "async def f():\n    return 5\nawait f()")
    assert value(res) == "5"


# --- timeouts and dead workers ----------------------------------------------------

def test_timeout_interrupts_the_cell_and_keeps_the_state(v1, sid, ctx):
    run(v1, sid, ctx, "kept = 'still here'")
    t0 = time.monotonic()
    res = run(v1, sid, ctx, "while True:\n    pass", timeoutMs=1000)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 2.5, elapsed
    assert res["timedOut"] is True and res["stateLost"] is False, res
    err = res["error"]
    assert err["name"] == "TimeoutError", err
    assert "1000 ms" in err["value"] and "KeyboardInterrupt" in err["value"], err
    assert err["traceback"][-1] == "KeyboardInterrupt"
    after = run(v1, sid, ctx, "kept")
    assert value(after) == "'still here'"
    assert after["restarted"] is False and after["notice"] is None


def test_timeout_over_sse(v1, sid, ctx):
    events, _ = run_sse(v1, sid, ctx, "import time\nprint('going')\ntime.sleep(60)",
                        timeoutMs=800)
    assert [e[0] for e in events] == ["stdout", "error", "done"], events
    assert events[1][1]["name"] == "TimeoutError"
    assert events[2][1]["timedOut"] is True


def test_a_cell_that_ignores_the_interrupt_is_killed(v1, sid, ctx):
    run(v1, sid, ctx, "lost = 1")
    t0 = time.monotonic()
    res = run(v1, sid, ctx, "import time\nwhile True:\n    try:\n        time.sleep(5)\n"
                            "    except KeyboardInterrupt:\n        pass", timeoutMs=500)
    elapsed = time.monotonic() - t0
    assert 2.3 <= elapsed < 5, elapsed  # the timeout, then ~2 s of grace
    assert res["error"]["name"] == "TimeoutError", res
    assert res["timedOut"] is True and res["stateLost"] is True, res
    after = run(v1, sid, ctx, "'lost' in dir()")
    assert value(after) == "False"
    assert after["restarted"] is True
    assert "restarted" in after["notice"] and "gone" in after["notice"], after
    assert value(run(v1, sid, ctx, "1"))  == "1"
    assert run(v1, sid, ctx, "2")["restarted"] is False


def test_a_worker_that_dies_is_reported_and_restarted(v1, sid, ctx):
    run(v1, sid, ctx, "lost = 1")
    res = run(v1, sid, ctx, "import os\nprint('bye', flush=True)\nos._exit(7)")
    assert res["error"]["name"] == "WorkerDied", res
    assert "status 7" in res["error"]["value"], res
    assert res["stateLost"] is True
    events, _ = run_sse(v1, sid, ctx, "'lost' in dir()")
    assert [e[0] for e in events] == ["notice", "result", "done"], events
    assert "exited with status 7" in events[0][1]["message"]
    assert events[1][1]["text/plain"] == "False"
    assert events[2][1]["restarted"] is True and events[2][1]["executionCount"] == 1


def test_cells_of_a_context_run_in_order(v1, sid, ctx):
    results = {}

    def first():
        results["first"] = run(v1, sid, ctx, "import time\ntime.sleep(1)\norder = ['first']")

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.3)
    results["second"] = run(v1, sid, ctx, "order.append('second')\norder")
    t.join()
    assert results["first"]["error"] is None, results
    assert value(results["second"]) == "['first', 'second']"


def test_contexts_run_in_parallel(v1, sid):
    ids = [new_context(v1, sid)["id"] for _ in range(3)]
    out = {}

    def go(cid):
        out[cid] = run(v1, sid, cid, "import time\ntime.sleep(1)\n'ok'")

    t0 = time.monotonic()
    threads = [threading.Thread(target=go, args=(cid,)) for cid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    assert [value(out[cid]) for cid in ids] == ["'ok'"] * 3
    assert elapsed < 2.0, elapsed


def test_client_disconnect_interrupts_the_cell(v1, sid, ctx):
    run(v1, sid, ctx, "kept = 5")
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", stream=True,
                json={"code": "import time\nprint('started', flush=True)\n"
                              "while True:\n    print('tick')\n    time.sleep(0.2)"})
    first = next(e for e in sse_events(r) if e.event is not None)
    assert first.event == "stdout", first
    r.close()
    t0 = time.monotonic()
    res = run(v1, sid, ctx, "kept", timeout=10)
    assert time.monotonic() - t0 < 3
    assert value(res) == "5" and res["restarted"] is False


# A cell after which the worker, once the cell is done and before it reads
# its next one, waits until /workspace/go exists: the next cell is then
# with the worker but not begun, for as long as the test wants.
HOLD_AFTER = (
    "import os, sys, time\n"
    "def _hold(frame, event, arg):\n"
    "    if event == 'return' and frame.f_code.co_name == 'run_cell':\n"
    "        sys.setprofile(None)\n"
    "        while not os.path.exists('/workspace/go'):\n"
    "            time.sleep(0.02)\n"
    "sys.setprofile(_hold)\n")


def test_a_cell_cancelled_before_it_began_is_skipped_and_the_state_kept(v1, sid, ctx):
    run(v1, sid, ctx, "x = 'kept'")
    run(v1, sid, ctx, HOLD_AFTER)
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", stream=True,
                json={"code": "ran = True\nimport time\ntime.sleep(30)"})
    assert r.status_code == 200, r.text

    def sent():  # with the worker, no longer queued in the daemon
        info = v1.get(f"/v1/sandbox/{sid}/contexts/{ctx}").json()
        return info["status"] == "busy" and info["queued"] == 0
    assert wait_until(sent, 10)
    r.close()  # the client is gone before the worker took the cell
    assert wait_until(lambda: f"event=cell-cancelled id={ctx} " in v1.d.log_text(), 10)
    assert v1.put(f"/v1/sandbox/{sid}/file/go", data=b"").status_code == 201
    res = run(v1, sid, ctx, "(x, 'ran' in dir())", timeout=30)
    # the cancelled cell never ran, and nothing was interrupted or killed
    assert value(res) == "('kept', False)"
    assert res["restarted"] is False and res["notice"] is None, res
    assert res["executionCount"] == 3, res


def test_output_and_results_come_in_the_order_they_happened(v1, sid, ctx):
    code = ("import sys\n"
            "for i in range(3):\n"
            "    print('out', i, end='')\n"
            "    print('err', i, file=sys.stderr, end='')\n"
            "    display(i)\n"
            "'last'")
    events, _ = run_sse(v1, sid, ctx, code)
    assert events[-1][0] == "done", events
    # what the cell wrote to a stream before a result comes before it
    # (stdout and stderr are two pipes: between them, no order is known)
    for stream in ("stdout", "stderr"):
        got = []
        for e in events:
            if e[0] == "result":
                got.append(("result", e[1]["text/plain"]))
            elif e[0] == stream and got and got[-1][0] == stream:
                got[-1] = (stream, got[-1][1] + e[1]["text"])  # one write, cut
            elif e[0] == stream:
                got.append((stream, e[1]["text"]))
        want = []
        for i in range(3):
            want += [(stream, f"{stream[3:]} {i}"), ("result", f"{i}")]
        assert got == want + [("result", "'last'")], events
    # the JSON answer keeps each one's order
    res = run(v1, sid, ctx, code)
    assert [b["text/plain"] for b in res["results"]] == ["0", "1", "2", "'last'"]
    assert "".join(res["logs"]["stdout"]) == "out 0out 1out 2"


# --- the context API ----------------------------------------------------------------

def test_create_list_get_delete(v1, sid):
    c = new_context(v1, sid)
    assert set(c) >= {"id", "language", "cwd"}, c
    assert c["language"] == "python" and c["cwd"] == "/workspace"
    assert c["id"].startswith("ctx_")
    listed = v1.get(f"/v1/sandbox/{sid}/contexts").json()["contexts"]
    assert [x["id"] for x in listed] == [c["id"]]
    got = v1.get(f"/v1/sandbox/{sid}/contexts/{c['id']}")
    assert got.status_code == 200 and got.json()["status"] == "ready", got.text
    r = v1.delete(f"/v1/sandbox/{sid}/contexts/{c['id']}")
    assert r.status_code == 204, r.text
    assert v1.get(f"/v1/sandbox/{sid}/contexts").json() == {"contexts": []}
    assert_error(v1.delete(f"/v1/sandbox/{sid}/contexts/{c['id']}"), 404, "context_not_found")
    assert_error(v1.get(f"/v1/sandbox/{sid}/contexts/{c['id']}"), 404, "context_not_found")
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{c['id']}/run", json={"code": "1"})
    assert_error(r, 404, "context_not_found")


def test_deleting_a_busy_context_ends_its_cell(v1, sid, ctx):
    holder = {}

    def slow():
        holder["res"] = run(v1, sid, ctx, "import time\ntime.sleep(30)")

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    assert v1.delete(f"/v1/sandbox/{sid}/contexts/{ctx}").status_code == 204
    t.join(10)
    assert not t.is_alive()
    assert holder["res"]["error"]["name"] == "ContextDeleted", holder
    # its worker is gone too
    assert wait_until(lambda: "python_worker" not in v1.sh(sid, "ps -e -o args"), 5)


def test_language_cwd_and_env(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/proj && echo 'VALUE = 11' > /workspace/proj/mymod.py")
    c = new_context(v1, sid, language="python", cwd="proj", env={"GREETING": "hi"})
    assert c["cwd"] == "/workspace/proj"
    res = run(v1, sid, c["id"], "import os, mymod\n(os.getcwd(), os.environ['GREETING'], mymod.VALUE)")
    assert value(res) == "('/workspace/proj', 'hi', 11)"
    # the sandbox's default environment is there too
    assert value(run(v1, sid, c["id"], "os.environ['HOME']")) == "'/root'"


def test_cwd_must_exist_and_stay_in_the_workspace(v1, sid):
    r = v1.post(f"/v1/sandbox/{sid}/contexts", json={"cwd": "no/such/dir"})
    doc = assert_error(r, 400, "invalid_request")
    assert "no/such/dir" in doc["error"], doc
    assert_error(v1.post(f"/v1/sandbox/{sid}/contexts", json={"cwd": "/etc"}), 403,
                 "path_outside_workspace")
    assert_error(v1.post(f"/v1/sandbox/{sid}/contexts", json={"cwd": "../x"}), 403,
                 "path_outside_workspace")
    assert v1.get(f"/v1/sandbox/{sid}/contexts").json() == {"contexts": []}


@pytest.mark.parametrize("body", [
    {"language": "ruby"}, {"language": 3}, {"cwd": 5}, {"env": ["A=B"]},
    {"env": {"A": 1}}, {"env": {"A=B": "c"}},
])
def test_create_validation(v1, sid, body):
    assert_error(v1.post(f"/v1/sandbox/{sid}/contexts", json=body), 400, "invalid_request")


@pytest.mark.parametrize("body", [
    {}, {"code": 5}, {"code": "1", "timeoutMs": 0}, {"code": "1", "timeoutMs": "1s"},
])
def test_run_validation(v1, sid, ctx, body):
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", json=body, headers=JSON_ACCEPT)
    assert_error(r, 400, "invalid_request")


def test_run_bad_json_and_unknown_context(v1, sid, ctx):
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", data=b"{nope")
    assert_error(r, 400, "invalid_request")
    r = v1.post(f"/v1/sandbox/{sid}/contexts/ctx_nope/run", json={"code": "1"})
    assert_error(r, 404, "context_not_found")


# --- contexts and their sandbox -----------------------------------------------------

def test_destroying_the_sandbox_drops_its_contexts(v1, sid, ctx):
    run(v1, sid, ctx, "x = 1")
    assert v1.delete(f"/v1/sandbox/{sid}").status_code == 204
    assert v1.get(f"/v1/sandbox/{sid}/contexts").json() == {"contexts": []}
    assert_error(v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", json={"code": "x"}),
                 404, "context_not_found")


def test_a_stopped_sandbox_restarts_its_context(v1, sid, ctx):
    run(v1, sid, ctx, "x = 1")
    assert v1.post(f"/v1/sandbox/{sid}/stop").status_code == 200
    assert v1.running(sid) is False
    res = run(v1, sid, ctx, "'x' in dir()")
    assert value(res) == "False"
    assert res["restarted"] is True and "sandbox stopped" in res["notice"], res


def test_idle_contexts_let_the_sandbox_sleep(v1, new_sid):
    sid = new_sid()
    v1.create(sid, sleepAfter="1s")
    c = new_context(v1, sid)["id"]
    run(v1, sid, c, "x = 1")
    assert v1.running(sid) is True
    assert wait_until(lambda: not v1.running(sid), 8), "the sandbox never slept"
    res = run(v1, sid, c, "1")
    assert res["restarted"] is True and "idle" in res["notice"], res


def test_a_running_cell_keeps_the_sandbox_awake(v1, new_sid):
    sid = new_sid()
    v1.create(sid, sleepAfter="1s")
    c = new_context(v1, sid)["id"]
    res = run(v1, sid, c, "import time\ntime.sleep(3)\n'awake'")
    assert value(res) == "'awake'" and res["restarted"] is False
    assert value(run(v1, sid, c, "2")) == "2"
