"""POST /api/rooms/{room}/message: the Duet room assistant (shared/spec/duet.md,
agents.md; seeds 000-002). The model is a scripted OpenAI-protocol server
(llm_stub.py) that these tests start and whose received requests they read."""

import pytest
import requests

from helpers import Daemon, free_port
from llm_stub import ScriptedLLM

KEY = "sk-test-2f1c9a7e55d04b3c"


@pytest.fixture(scope="module")
def module_llm():
    s = ScriptedLLM()
    yield s
    s.close()


@pytest.fixture
def llm(module_llm):
    """The module's scripted model, with an empty script and record."""
    module_llm.script.clear()
    module_llm.requests.clear()
    return module_llm


@pytest.fixture(scope="module")
def assistant(module_llm, tmp_path_factory):
    """One daemon for the module, asking the scripted model."""
    key = tmp_path_factory.mktemp("llm") / "llm.key"
    key.write_text(KEY + "\n")
    d = Daemon(["--llm-url", module_llm.url, "--llm-model", "test-model",
                "--llm-key-file", key])
    yield d
    d.close()


def say(d, room, text, user=None, timeout=60):
    body = {"text": text}
    if user is not None:
        body["userId"] = user
    return requests.post(f"{d.url}/api/rooms/{room}/message", json=body,
                         timeout=timeout)


def ok(r):
    assert r.status_code == 200, f"{r.status_code} {r.text[:2000]}"
    return r.json()


def test_without_model_503(daemon, room):
    r = say(daemon, room, "hello")
    assert r.status_code == 503
    assert "--llm-url" in r.json()["error"]


def test_plain_answer_and_what_the_model_gets(assistant, llm, room):
    llm.add("Hello! How can I help?")
    j = ok(say(assistant, room, "hi there", user="alice"))
    assert j["reply"] == "Hello! How can I help?"
    assert [(m["role"], m["userId"], m["text"]) for m in j["messages"]] == [
        ("user", "alice", "hi there"), ("agent", "agent", "Hello! How can I help?")]
    assert all(isinstance(m["ts"], int) and m["ts"] > 1.7e12 for m in j["messages"])
    (req,) = llm.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "test-model"
    assert body["stream"] is False
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    assert "<run>" in body["messages"][0]["content"]
    assert body["messages"][1]["content"] == "hi there"
    # the key is never written to the log
    assert KEY not in assistant.log_text()


def test_two_run_tags_give_the_seed_summaries_in_order(assistant, llm, room):
    llm.add("Let me check.\n<run>echo one</run>\n<run> echo two >&2 </run>\nDone.")
    j = ok(say(assistant, room, "check"))
    assert j["reply"] == ("Let me check.\n\n\nDone.\n\n"
                          "Output (echo one):\none\n\n\n"
                          "Output (echo two >&2):\ntwo")
    assert j["messages"][-1]["text"] == j["reply"]


def test_seed_example_no_output_and_files_persist(assistant, llm, room):
    llm.add("I'll create the file for you.\n<run>echo 'Hello World' > hello.txt</run>")
    j = ok(say(assistant, room, "Create hello.txt"))
    assert j["reply"] == ("I'll create the file for you.\n\n\n"
                          "Output (echo 'Hello World' > hello.txt):\n[no output]")
    llm.add("<run>cat hello.txt</run>")
    j = ok(say(assistant, room, "Show me hello.txt"))
    assert j["reply"] == "Output (cat hello.txt):\nHello World"
    # the room's own sandbox: the exec endpoint sees the file
    assert assistant.run(room, "cat hello.txt")["stdout"] == "Hello World\n"


def test_long_output_cut_at_500_characters(assistant, llm, room):
    llm.add("<run>yes abcdefghi | head -c 30000</run><run>printf 'é%.0s' $(seq 900)</run>")
    j = ok(say(assistant, room, "spam"))
    assert j["reply"] == ("Output (yes abcdefghi | head -c 30000):\n" +
                          "abcdefghi\n" * 50 +
                          "\n\nOutput (printf 'é%.0s' $(seq 900)):\n" + "é" * 500)


def test_stderr_when_no_stdout_and_empty_tag_skipped(assistant, llm, room):
    llm.add("x<run>  </run><run>ls /nonexistent-dir</run>")
    j = ok(say(assistant, room, "ls"))
    assert j["reply"] == ("x\n\nOutput (ls /nonexistent-dir):\nls: cannot access "
                          "'/nonexistent-dir': No such file or directory\n").strip()


def test_failing_command_gives_error_form(assistant, llm, room):
    llm.add("Trying.<run>nosuchprogram-xyz --flag</run><run>exit 3</run>")
    j = ok(say(assistant, room, "run it"))
    assert j["reply"] == ("Trying.\n\nError (nosuchprogram-xyz --flag):\n"
                          "command not found: nosuchprogram-xyz\n\n"
                          "Output (exit 3):\n[no output]")


def test_timeout_gives_error_form_and_kills_tree(llm, make_daemon, room):
    d = make_daemon("--llm-url", llm.url, "--exec-timeout", "1s")
    llm.add("<run>sleep 60 & sleep 60</run><run>echo after</run>")
    j = ok(say(d, room, "sleep"))
    assert j["reply"] == ("Error (sleep 60 & sleep 60):\ntimeout\n\n"
                          "Output (echo after):\nafter")
    # nothing of it is left in the sandbox
    out = d.run(room, "ps -eo comm= | grep -c '^sleep$' || true")["stdout"]
    assert out.strip() == "0"


def test_model_gets_the_last_10_messages_and_50_come_back(assistant, llm, room):
    for i in range(30):
        llm.add(f"answer {i}")
    for i in range(30):
        j = ok(say(assistant, room, f"question {i}", user=f"u{i % 3}"))
    sent = llm.requests[-1]["body"]["messages"]
    assert sent[0]["role"] == "system"
    # the 9 messages before the new question, then the question
    want = [("assistant", "answer 24")]
    for i in range(25, 29):
        want += [("user", f"question {i}"), ("assistant", f"answer {i}")]
    want.append(("user", "question 29"))
    assert [(m["role"], m["content"]) for m in sent[1:]] == want
    msgs = j["messages"]
    assert len(msgs) == 50
    assert (msgs[0]["text"], msgs[0]["userId"]) == ("question 5", "u2")
    assert msgs[-1]["text"] == "answer 29"


def test_upstream_error_502_history_untouched(assistant, llm, room):
    llm.add("first")
    ok(say(assistant, room, "one"))
    llm.add({"status": 500, "body": {"error": {"message": "model exploded"}}})
    r = say(assistant, room, "two")
    assert r.status_code == 502
    assert "model exploded" in r.json()["error"]
    llm.add({"raw": b"this is not json"})
    r = say(assistant, room, "three")
    assert r.status_code == 502
    assert "not JSON" in r.json()["error"]
    llm.add({"raw": b'{"choices": []}'})
    assert say(assistant, room, "four").status_code == 502
    llm.add("second")
    j = ok(say(assistant, room, "five"))
    assert [m["text"] for m in j["messages"]] == ["one", "first", "five", "second"]
    # the failed questions never reached the model's context either
    assert [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]] == \
        ["one", "first", "five"]


def test_unreachable_model_502(make_daemon, room):
    d = make_daemon("--llm-url", f"http://127.0.0.1:{free_port()}/v1")
    r = say(d, room, "anyone?")
    assert r.status_code == 502
    assert r.json()["error"]


def test_slow_model_504_history_untouched(llm, make_daemon, room):
    d = make_daemon("--llm-url", llm.url, "--llm-timeout", "1s")
    llm.add({"delay": 4, "content": "too late"})
    r = say(d, room, "quick?")
    assert r.status_code == 504
    assert "--llm-timeout" in r.json()["error"]
    llm.add("now")
    j = ok(say(d, room, "again"))
    assert [m["text"] for m in j["messages"]] == ["again", "now"]


def test_delete_clears_history(assistant, llm, room):
    llm.add("a1", "a2")
    ok(say(assistant, room, "q1"))
    r = assistant.delete(room)
    assert r.status_code == 200 and r.json() == {"cleaned": True, "roomId": room}
    j = ok(say(assistant, room, "q2"))
    assert [m["text"] for m in j["messages"]] == ["q2", "a2"]
    assert [m["role"] for m in llm.requests[-1]["body"]["messages"]] == ["system", "user"]


def test_history_survives_restart_and_rooms_are_apart(llm, make_daemon, new_room):
    d = make_daemon("--llm-url", llm.url)
    a, b = new_room(), new_room()
    llm.add("for a", "for b")
    ok(say(d, a, "in a"))
    ok(say(d, b, "in b"))
    d.restart()
    llm.add("again a")
    j = ok(say(d, a, "more a"))
    assert [m["text"] for m in j["messages"]] == ["in a", "for a", "more a", "again a"]


def test_validation(assistant, room):
    url = f"{assistant.url}/api/rooms/{room}/message"
    r = requests.post(url, json={"text": ""})
    assert r.status_code == 400
    assert r.json() == {"error": "invalid request",
                        "details": {"text": ["Text cannot be empty"]}}
    r = requests.post(url, json={"text": "x", "userId": 5})
    assert r.status_code == 400 and "userId" in r.json()["details"]
    assert requests.get(url).status_code == 405


def test_missing_key_file_refuses_to_start(tmp_path):
    import subprocess
    from helpers import SBX_BIN
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    p = subprocess.run([SBX_BIN, "--listen", f"127.0.0.1:{free_port()}",
                        "--state-dir", str(state), "--llm-url", "http://127.0.0.1:9/v1",
                        "--llm-key-file", str(tmp_path / "nope.key")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "--llm-key-file" in p.stderr and "nope.key" in p.stderr
