"""Code interpreter contexts over /v1, in JavaScript (node) and TypeScript:
declarations that persist from cell to cell, console output that streams,
thrown errors with their stack, top-level await, timeouts, and what a
TypeScript context says when no transpiler is installed."""
import json
import time

import pytest

from helpers import JSON_ACCEPT, assert_error, sse_events, stream_lines, wait_until


def new_context(v1, sid, **body):
    body.setdefault("language", "javascript")
    r = v1.post(f"/v1/sandbox/{sid}/contexts", json=body)
    assert r.status_code == 201, f"create context {body}: {r.status_code} {r.text}"
    return r.json()


def run(v1, sid, cid, code, timeout=60, **body):
    body["code"] = code
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{cid}/run", json=body,
                headers=JSON_ACCEPT, timeout=timeout)
    assert r.status_code == 200, f"run {code!r}: {r.status_code} {r.text[:2000]}"
    return r.json()


def value(res):
    assert res["error"] is None, res["error"]
    assert len(res["results"]) == 1, res
    return res["results"][0]["text/plain"]


@pytest.fixture
def ctx(v1, sid):
    return new_context(v1, sid)["id"]


def test_create_says_javascript(v1, sid):
    c = new_context(v1, sid)
    assert c["language"] == "javascript" and c["cwd"] == "/workspace", c
    # "js" is accepted for it
    assert new_context(v1, sid, language="js")["language"] == "javascript"


def test_declarations_persist_within_a_context_only(v1, sid):
    a = new_context(v1, sid)["id"]
    b = new_context(v1, sid)["id"]
    res = run(v1, sid, a, "let x = 40")
    assert res["results"] == [] and res["error"] is None, res
    assert value(run(v1, sid, a, "x + 2")) == "42"
    run(v1, sid, a, "const k = 3; var v = 4; function f(n) { return n * k } class C {}")
    assert value(run(v1, sid, a, "f(v) + (new C() instanceof C ? 1 : 0)")) == "13"
    err = run(v1, sid, b, "x")["error"]
    assert err["name"] == "ReferenceError" and "x is not defined" in err["value"], err


def test_results_and_mime_types(v1, sid, ctx):
    bundle = run(v1, sid, ctx, "({a: [1, 'two'], b: null})")["results"][0]
    assert bundle["application/json"] == {"a": [1, "two"], "b": None}
    assert bundle["text/plain"] == "{ a: [ 1, 'two' ], b: null }"
    # an object literal at the start of a cell is an object, not a block
    assert run(v1, sid, ctx, "{x: 1}")["results"][0]["application/json"] == {"x": 1}
    assert run(v1, sid, ctx, "[1, 2]")["results"][0]["application/json"] == [1, 2]
    assert run(v1, sid, ctx, "'str'")["results"] == [{"text/plain": "'str'"}]
    bundle = run(v1, sid, ctx, "new Map([[1, 2]])")["results"][0]
    assert bundle == {"text/plain": "Map(1) { 1 => 2 }"}
    assert run(v1, sid, ctx, "undefined")["results"] == []


def test_console_log_streams(v1, sid, ctx):
    t0 = time.monotonic()
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", stream=True,
                json={"code": "for (let i = 0; i < 3; i++) {\n  console.log('tick', i);\n"
                              "  await new Promise(r => setTimeout(r, 600));\n}\n'end'"})
    with r:
        assert r.status_code == 200
        events = [(e.event, json.loads(e.data), e.t) for e in sse_events(r)
                  if e.event is not None]
    # however the output happened to be cut into events
    kinds, lines, t_lines, rest = stream_lines(events)
    assert kinds == ["stdout", "result", "done"], events
    assert lines == ["tick 0\n", "tick 1\n", "tick 2\n"] and rest == "", events
    t_done = events[-1][2]
    assert t_done - t_lines[0] >= 1.4, (t_lines[0] - t0, t_done - t0)
    assert t_lines[1] - t_lines[0] >= 0.4
    assert events[-2][1] == {"text/plain": "'end'"}


def test_console_error_and_process_streams(v1, sid, ctx):
    res = run(v1, sid, ctx, "console.error('bad'); process.stdout.write('w\\n'); "
                            "console.log({a: 1}); 7")
    assert "".join(res["logs"]["stderr"]) == "bad\n"
    assert "".join(res["logs"]["stdout"]) == "w\n{ a: 1 }\n"
    assert value(res) == "7"


def test_thrown_error_has_name_message_and_stack(v1, sid, ctx):
    res = run(v1, sid, ctx, "function inner() { throw new TypeError('nope') }\n"
                            "function outer() { inner() }\nouter()")
    err = res["error"]
    assert err["name"] == "TypeError" and err["value"] == "nope", err
    tb = err["traceback"]
    assert "TypeError: nope" in tb, tb
    assert any("at inner (<cell-1>:1:" in l for l in tb), tb
    assert any("at outer (<cell-1>:2:" in l for l in tb), tb
    assert not any("node_worker" in l or "node:vm" in l for l in tb), tb
    # a thrown non-error, and a syntax error
    assert run(v1, sid, ctx, "throw 42")["error"]["value"] == "42"
    err = run(v1, sid, ctx, "let = = 1")["error"]
    assert err["name"] == "SyntaxError", err


def test_top_level_await_and_require(v1, sid, ctx):
    run(v1, sid, ctx, "const v = await Promise.resolve(20)")
    assert value(run(v1, sid, ctx, "v + 1")) == "21"
    assert value(run(v1, sid, ctx, "require('path').join('a', 'b')")) == "'a/b'"
    assert value(run(v1, sid, ctx, "(await import('node:os')).EOL.length")) == "1"


def test_timeout_interrupts_and_keeps_the_state(v1, sid, ctx):
    run(v1, sid, ctx, "let kept = 'yes'")
    t0 = time.monotonic()
    res = run(v1, sid, ctx, "while (true) {}", timeoutMs=1000)
    assert time.monotonic() - t0 < 2.5
    assert res["error"]["name"] == "TimeoutError", res
    assert res["timedOut"] is True and res["stateLost"] is False
    assert value(run(v1, sid, ctx, "kept")) == "'yes'"
    # an awaited cell is abandoned the same way
    res = run(v1, sid, ctx, "await new Promise(() => {})", timeoutMs=800)
    assert res["error"]["name"] == "TimeoutError", res
    assert value(run(v1, sid, ctx, "kept")) == "'yes'"


def test_a_cell_cancelled_before_it_began_is_skipped_and_the_state_kept(v1, sid, ctx):
    run(v1, sid, ctx, "let x = 'kept'")
    # once this cell is done, the worker's event loop (and so its input)
    # is held until /workspace/go exists
    run(v1, sid, ctx, "setImmediate(() => {\n"
                      "  const nap = new Int32Array(new SharedArrayBuffer(4));\n"
                      "  while (!require('fs').existsSync('/workspace/go')) Atomics.wait(nap, 0, 0, 20);\n"
                      "})")
    r = v1.post(f"/v1/sandbox/{sid}/contexts/{ctx}/run", stream=True,
                json={"code": "var ran = true; await new Promise((r) => setTimeout(r, 30000))"})
    assert r.status_code == 200, r.text

    def sent():  # with the worker, no longer queued in the daemon
        info = v1.get(f"/v1/sandbox/{sid}/contexts/{ctx}").json()
        return info["status"] == "busy" and info["queued"] == 0
    assert wait_until(sent, 10)
    r.close()
    assert wait_until(lambda: f"event=cell-cancelled id={ctx} " in v1.d.log_text(), 10)
    assert v1.put(f"/v1/sandbox/{sid}/file/go", data=b"").status_code == 201
    res = run(v1, sid, ctx, "[x, typeof ran]", timeout=30)
    assert value(res) == "[ 'kept', 'undefined' ]"
    assert res["restarted"] is False and res["notice"] is None, res


def test_late_errors_do_not_kill_the_worker(v1, sid, ctx):
    run(v1, sid, ctx, "let alive = 1; setTimeout(() => { throw new Error('late') }, 10)")
    time.sleep(0.3)
    res = run(v1, sid, ctx, "alive")
    assert value(res) == "1" and res["restarted"] is False


def test_process_exit_is_a_dead_worker(v1, sid, ctx):
    res = run(v1, sid, ctx, "process.exit(4)")
    assert res["error"]["name"] == "WorkerDied" and "status 4" in res["error"]["value"], res
    res = run(v1, sid, ctx, "typeof kept")
    assert value(res) == "'undefined'" and res["restarted"] is True


def test_typescript_needs_a_transpiler(v1, sid):
    r = v1.post(f"/v1/sandbox/{sid}/contexts", json={"language": "typescript"})
    if r.status_code == 201:  # the sandbox has one: then it works
        cid = r.json()["id"]
        assert r.json()["language"] == "typescript"
        run(v1, sid, cid, "const n: number = 41")
        assert value(run(v1, sid, cid, "n + 1")) == "42"
        return
    doc = assert_error(r, 501, "language_unavailable")
    assert "TypeScript" in doc["error"] and "typescript" in doc["error"], doc
    assert v1.get(f"/v1/sandbox/{sid}/contexts").json() == {"contexts": []}
