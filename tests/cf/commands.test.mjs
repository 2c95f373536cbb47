// Commands through the official client: utils (ping, version, commands),
// commands.execute and commands.executeStream (parsed with the package's
// own parseSSEStream).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { parseSSEStream } from "@cloudflare/sandbox";

import { Daemon, collect, rejectsAs, sandboxId } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

describe("utils", () => {
	it("ping answers, without making a sandbox", async () => {
		const c = daemon.client(sandboxId("ping"));
		assert.equal(await c.utils.ping(), "pong");
	});

	it("getVersion names the protocol release spoken", async () => {
		const c = daemon.client(sandboxId("version"));
		assert.match(await c.utils.getVersion(), /^0\.12\.\d+$/);
	});

	it("getCommands lists programs of the sandbox, not shell builtins", async () => {
		const c = daemon.client(sandboxId("cmds"));
		const cmds = await c.utils.getCommands();
		assert.ok(Array.isArray(cmds));
		for (const name of ["bash", "ls", "git"]) assert.ok(cmds.includes(name), name);
		assert.ok(!cmds.includes("cd"), "cd is a builtin");
		assert.deepEqual([...cmds].sort(), cmds);
	});
});

describe("commands.execute", () => {
	const c = () => daemon.client("exec-basic");

	it("returns stdout, stderr, the exit code and success", async () => {
		const r = await c().commands.execute("echo out; echo err >&2");
		assert.equal(r.success, true);
		assert.equal(r.exitCode, 0);
		assert.equal(r.stdout, "out\n");
		assert.equal(r.stderr, "err\n");
		assert.equal(r.command, "echo out; echo err >&2");
		assert.equal(typeof r.duration, "number");
		assert.ok(!Number.isNaN(Date.parse(r.timestamp)));
	});

	it("reports a failing command's exit code without throwing", async () => {
		const r = await c().commands.execute("exit 7");
		assert.equal(r.success, false);
		assert.equal(r.exitCode, 7);
		const nf = await c().commands.execute("no-such-command-xyz");
		assert.equal(nf.exitCode, 127);
		assert.match(nf.stderr, /not found/);
	});

	it("runs in /workspace by default, as root of the sandbox", async () => {
		const r = await c().commands.execute("pwd; id -u; hostname");
		assert.equal(r.stdout, "/workspace\n0\nsandbox\n");
	});

	it("keeps cwd and exports of the default session between commands", async () => {
		const s = daemon.client(sandboxId("exec-state"));
		await s.commands.execute("mkdir -p /tmp/w && cd /tmp/w && export KEEP=yes");
		const r = await s.commands.execute("pwd; echo $KEEP");
		assert.equal(r.stdout, "/tmp/w\nyes\n");
	});

	it("gives a command its own env and cwd, for that command only", async () => {
		const s = daemon.client(sandboxId("exec-scoped"));
		await s.commands.execute("export SHARED=session");
		const r = await s.commands.execute("pwd; echo $SHARED $ONLY; export MADE=here", undefined, {
			cwd: "/tmp",
			env: { SHARED: "override", ONLY: "one" },
		});
		assert.equal(r.stdout, "/tmp\noverride one\n");
		const after = await s.commands.execute('pwd; echo "$SHARED|${ONLY-unset}|$MADE"');
		// cwd and the given variables are back; what the command exported stays
		assert.equal(after.stdout, "/workspace\nsession|unset|here\n");
	});

	it("resolves a relative cwd against the session's", async () => {
		const s = daemon.client(sandboxId("exec-relcwd"));
		await s.commands.execute("mkdir -p /workspace/sub/dir");
		const r = await s.commands.execute("pwd", undefined, { cwd: "sub/dir" });
		assert.equal(r.stdout, "/workspace/sub/dir\n");
	});

	it("restores the session even when the command exits", async () => {
		const s = daemon.client(sandboxId("exec-exit"));
		const r = await s.commands.execute("exit 3", undefined, { cwd: "/tmp", env: { X: "1" } });
		assert.equal(r.exitCode, 3);
		const after = await s.commands.execute('pwd; echo "${X-unset}"');
		assert.equal(after.stdout, "/workspace\nunset\n");
	});

	it("restores the session after a command under set -eu that fails", async () => {
		const s = daemon.client(sandboxId("exec-errexit"));
		await s.commands.execute("export KEPT=1");
		const r = await s.commands.execute("set -eu; export NEW=2; false; echo never", undefined, {
			cwd: "/tmp",
			env: { KEPT: "override" },
		});
		assert.deepEqual([r.exitCode, r.stdout], [1, ""]);
		const after = await s.commands.execute('pwd; echo "$KEPT ${NEW-unset}"');
		assert.equal(after.stdout, "/workspace\n1 2\n");
	});

	it("reports a cwd that does not exist as the command's failure", async () => {
		const r = await c().commands.execute("echo never", undefined, { cwd: "/does/not/exist" });
		assert.equal(r.exitCode, 1);
		assert.equal(r.stdout, "");
		assert.match(r.stderr, /Failed to change directory to \/does\/not\/exist/);
	});

	it("runs sessionless commands in a fresh shell each time", async () => {
		const s = daemon.client(sandboxId("exec-nosession"));
		await s.commands.execute("cd /tmp; export GONE=1", "__DISABLE_SESSION__");
		const r = await s.commands.execute('pwd; echo "${GONE-unset}"', "__DISABLE_SESSION__");
		assert.equal(r.stdout, "/workspace\nunset\n");
	});

	it("kills the whole tree at a timeout and throws CommandError", async () => {
		const s = daemon.client(sandboxId("exec-timeout"));
		const t0 = Date.now();
		const err = await rejectsAs(
			s.commands.execute("sleep 31337 & sleep 31338; wait", undefined, { timeoutMs: 500 }),
			"CommandError",
			"COMMAND_EXECUTION_ERROR",
			500,
		);
		assert.match(err.message, /timed out after 500 ms/);
		assert.equal(err.context.exitCode, 124);
		assert.ok(Date.now() - t0 < 5000);
		const ps = await s.commands.execute("ps -eo args");
		assert.doesNotMatch(ps.stdout, /sleep 3133[78]/);
	});

	it("carries arbitrary bytes of output as text", async () => {
		const r = await c().commands.execute("printf 'caf\\xc3\\xa9 \\xff end'");
		assert.equal(r.stdout, "café \ufffd end");
	});
});

describe("commands.executeStream", () => {
	it("streams start, output as it is written, and complete", async () => {
		const s = daemon.client(sandboxId("stream"));
		const stream = await s.commands.executeStream("echo first; sleep 1; echo second >&2; exit 4");
		const seen = [];
		for await (const ev of parseSSEStream(stream)) seen.push({ ...ev, at: Date.now() });
		assert.deepEqual(
			seen.map((e) => e.type),
			["start", "stdout", "stderr", "complete"],
		);
		const [start, out, err, done] = seen;
		assert.equal(start.command, "echo first; sleep 1; echo second >&2; exit 4");
		assert.ok(start.pid > 0);
		assert.equal(out.data, "first\n");
		assert.equal(err.data, "second\n");
		assert.equal(done.exitCode, 4);
		// the first line came while the command still ran
		assert.ok(done.at - out.at >= 700, `first output ${done.at - out.at} ms before the end`);
	});

	it("never splits a character between events", async () => {
		const s = daemon.client(sandboxId("stream-utf8"));
		// 3-byte characters in writes of 4096 bytes: boundaries fall mid-character
		const stream = await s.commands.executeStream(
			"for i in $(seq 2000); do printf '€€€€€€€€€€€€€€€€€€€€€€€€€€€€€€€€'; done",
		);
		const events = await collect(parseSSEStream, stream);
		const text = events.filter((e) => e.type === "stdout").map((e) => e.data).join("");
		assert.equal(text.length, 2000 * 32);
		assert.ok(!text.includes("\ufffd"));
		assert.equal(events.at(-1).type, "complete");
	});

	it("ends with an error event at a timeout, the tree killed", async () => {
		const s = daemon.client(sandboxId("stream-timeout"));
		const stream = await s.commands.executeStream("echo go; sleep 31339", undefined, {
			timeoutMs: 400,
		});
		const events = await collect(parseSSEStream, stream);
		assert.deepEqual(
			events.map((e) => e.type),
			["start", "stdout", "error"],
		);
		assert.match(events[2].error, /timed out after 400 ms/);
		const ps = await s.commands.execute("ps -eo args");
		assert.doesNotMatch(ps.stdout, /sleep 31339/);
	});

	it("kills the command when the reader goes away", async () => {
		const s = daemon.client(sandboxId("stream-cancel"));
		const stream = await s.commands.executeStream("echo up; sleep 31340");
		const reader = stream.getReader();
		await reader.read();
		await reader.cancel();
		// noticed at the second keepalive write after the reader left
		let left = "";
		for (let i = 0; i < 200; i++) {
			left = (await s.commands.execute("ps -eo args", "__DISABLE_SESSION__")).stdout;
			if (!/sleep 31340/.test(left)) break;
			await new Promise((r) => setTimeout(r, 100));
		}
		assert.doesNotMatch(left, /sleep 31340/);
	});
});
