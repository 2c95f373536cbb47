"""POST /api/rooms/{id}/sandbox/exec: the happy path, the response shape,
sessions (cwd, exported env), exit codes, errors from the shell, output."""
import base64
import json
import re
from datetime import datetime, timedelta, timezone

import requests

TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RESULT_KEYS = {"success", "exitCode", "stdout", "stderr", "command",
               "duration", "timestamp", "sessionId"}


def parse_ts(ts):
    assert TS_RE.match(ts), f"timestamp not ISO-8601 UTC with ms: {ts!r}"
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def test_health(daemon):
    r = requests.get(daemon.url + "/health", timeout=5)
    assert r.status_code == 200
    assert r.text.strip() == "ok"
    assert r.headers["Content-Type"].startswith("text/plain")


def test_response_shape(daemon, room):
    cmd = "echo 'Hello from sandbox'"
    before = datetime.now(timezone.utc)
    r = daemon.exec(room, cmd)
    after = datetime.now(timezone.utc)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"result", "sandboxName"}
    assert body["sandboxName"] == f"sandbox-{room}"
    res = body["result"]
    assert set(res) == RESULT_KEYS
    assert res["success"] is True
    assert res["exitCode"] == 0 and type(res["exitCode"]) is int
    assert res["stdout"] == "Hello from sandbox\n"
    assert res["stderr"] == ""
    assert res["command"] == cmd
    assert type(res["duration"]) is int and 0 <= res["duration"] < 10000
    assert res["sessionId"] == f"sandbox-{room}"
    ts = parse_ts(res["timestamp"])
    assert before - timedelta(seconds=1) <= ts <= after + timedelta(seconds=1)


def test_duration_and_timestamp_are_start_time_and_ms(daemon, room):
    before = datetime.now(timezone.utc)
    res = daemon.run(room, "sleep 0.5")
    after = datetime.now(timezone.utc)
    assert 450 <= res["duration"] <= 5000, res
    ts = parse_ts(res["timestamp"])
    # the start time, not the end time
    assert before - timedelta(seconds=1) <= ts <= after - timedelta(milliseconds=400), \
        (before, ts, after)


def test_seed_hello_world_file(daemon, room):
    res = daemon.run(room, 'echo "Hello world" > hello.txt')
    assert res["exitCode"] == 0 and res["stdout"] == ""
    res = daemon.run(room, "cat hello.txt")
    assert res["stdout"] == "Hello world\n"
    assert res["success"] is True


def test_seed_ls_and_whoami(daemon, room):
    res = daemon.run(room, "ls -la && whoami")
    assert res["exitCode"] == 0, res
    assert res["stdout"].endswith("root\n")
    assert daemon.run(room, "id -u")["stdout"] == "0\n"


def test_initial_cwd_is_workspace(daemon, room):
    assert daemon.run(room, "pwd")["stdout"] == "/workspace\n"


def test_cd_persists_in_session(daemon, room):
    assert daemon.run(room, "cd /tmp")["exitCode"] == 0
    assert daemon.run(room, "pwd")["stdout"] == "/tmp\n"
    daemon.run(room, "mkdir -p /tmp/deeper && cd deeper")
    assert daemon.run(room, "pwd")["stdout"] == "/tmp/deeper\n"


def test_export_persists_in_session(daemon, room):
    assert daemon.run(room, "export A=1")["exitCode"] == 0
    assert daemon.run(room, "echo $A")["stdout"] == "1\n"
    daemon.run(room, "export B='two words'")
    assert daemon.run(room, 'echo "$A/$B"')["stdout"] == "1/two words\n"


def bash_ansic(data):
    """bytes as a bash $'...' word."""
    return "$'" + "".join(f"\\{b:03o}" for b in data) + "'"


def test_exported_values_of_any_bytes_persist(daemon, room):
    values = {
        "NL": b"line1\nline2\n",
        "QUOTES": b"q\"uo'te and \\ back\\",
        "DOLLAR": b"$HOME `id` $(id) ${X}",
        "UTF8": "h\u00e9llo \u2713 \U0001F600".encode(),
        "BIN": bytes(range(1, 256)),
        "EMPTY": b"",
    }
    cmd = "; ".join(f"export {k}={bash_ansic(v)}" for k, v in values.items())
    assert daemon.run(room, cmd)["exitCode"] == 0
    for k, v in values.items():
        res = daemon.run(room, f'printf %s "${{{k}?unset}}" | base64 -w0')
        assert res["exitCode"] == 0, res
        assert base64.b64decode(res["stdout"]) == v, k


def test_exported_attributes_persist_as_bash_exports_them(daemon, room):
    daemon.run(room, "declare -ix N=6*7; declare -rx R=ro; "
                     "declare -ax ARR=(1 2); T=target; declare -nx REF=T; "
                     "export NOVALUE; declare -lx LOW=ABC; export -n HOME")
    res = daemon.run(room, 'echo "$N $R ${ARR-noarr} $REF ${NOVALUE-unset} '
                           '$LOW ${HOME-nohome}"; env | grep -c "^ARR=" || true')
    # arrays are not exported by bash; a nameref exports its target's name
    assert res["stdout"] == "42 ro noarr T unset abc nohome\n0\n", res


def test_session_hook_keeps_exit_status_and_quiet_xtrace(daemon, room):
    res = daemon.run(room, "set -x; export Z=1; exit 7")
    assert res["exitCode"] == 7
    # the hook's own commands are never traced into the command's stderr:
    # it holds what the same script traces in a bash without the hook
    plain = daemon.run(room, "bash -c 'set -x; export Z=1; exit 7'")
    assert plain["exitCode"] == 7 and "export Z=1" in plain["stderr"], plain
    assert res["stderr"] == plain["stderr"], (res, plain)
    assert daemon.run(room, "echo $Z")["stdout"] == "1\n"
    # a command that closes the state fd loses its state, nothing more
    res = daemon.run(room, "exec 63>&-; export Z=2; cd /tmp")
    assert (res["exitCode"], res["stderr"]) == (0, ""), res
    assert daemon.run(room, "echo $Z; pwd")["stdout"] == "1\n/workspace\n"


def test_runs_under_bash(daemon, room):
    res = daemon.run(room, '[[ abc == a* ]] && echo "bash ${BASH_VERSION%%.*}"')
    assert re.fullmatch(r"bash \d+\n", res["stdout"]), res


def test_nonzero_exit_is_200_with_success_false(daemon, room):
    res = daemon.run(room, "echo out; echo err >&2; exit 3")
    assert res["success"] is False
    assert res["exitCode"] == 3
    assert res["stdout"] == "out\n"
    assert res["stderr"] == "err\n"
    res = daemon.run(room, "false")
    assert (res["success"], res["exitCode"]) == (False, 1)
    # an `exit` ends only that command; the room keeps working
    assert daemon.run(room, "echo still here")["stdout"] == "still here\n"


def test_exit_127_without_not_found_is_an_exit_code(daemon, room):
    res = daemon.run(room, "exit 127")
    assert (res["success"], res["exitCode"]) == (False, 127)


def test_killed_by_signal_reports_128_plus_signal(daemon, room):
    assert daemon.run(room, "kill -9 $$")["exitCode"] == 137
    assert daemon.run(room, "kill -TERM $$")["exitCode"] == 143


def test_command_not_found_is_500(daemon, room):
    r = daemon.exec(room, "nosuchcmd_e2e --flag")
    assert r.status_code == 500, r.text
    assert r.json() == {"error": "sandbox execution failed: command not found: nosuchcmd_e2e"}
    # and the room is fine afterwards
    assert daemon.run(room, "echo ok")["stdout"] == "ok\n"


def test_unicode_and_multiline_commands(daemon, room):
    cmd = 'echo "héllo ✓ 日本"\nprintf "%s|" one "two three"'
    res = daemon.run(room, cmd)
    assert res["command"] == cmd
    assert res["stdout"] == "héllo ✓ 日本\none|two three|"


def test_large_stdout_returned_whole(daemon, room):
    res = daemon.run(room, "head -c 5000000 /dev/zero | tr '\\0' a", timeout=60)
    assert res["exitCode"] == 0
    assert len(res["stdout"]) == 5_000_000
    assert res["stdout"] == "a" * 5_000_000


def test_large_stderr_returned_whole(daemon, room):
    res = daemon.run(room, "head -c 1000000 /dev/zero | tr '\\0' b >&2; echo done",
                     timeout=60)
    assert res["stdout"] == "done\n"
    assert res["stderr"] == "b" * 1_000_000


def test_invalid_utf8_output_gives_valid_json(daemon, room):
    r = daemon.exec(room, "printf 'ok \\377\\376 mid \\0 end\\n\\303'; printf 'x\\377' >&2")
    assert r.status_code == 200
    body = json.loads(r.content.decode("utf-8"))  # strict UTF-8, then JSON
    res = body["result"]
    assert res["stdout"].startswith("ok ")
    assert " mid " in res["stdout"] and " end\n" in res["stdout"]
    assert res["stderr"].startswith("x")


def test_long_command_of_100k_chars(daemon, room):
    cmd = "echo " + "z" * 100_000
    res = daemon.run(room, cmd)
    assert res["stdout"] == "z" * 100_000 + "\n"
    assert res["command"] == cmd
