// commands and pty through the official e2b SDK (envd's process.Process
// over Connect): foreground and background runs, stdin, exit codes,
// timeouts that kill the whole tree, list and connect, users.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { CommandExitError, Sandbox, SandboxError, TimeoutError } from "e2b";

import { Daemon, rejection, waitFor } from "./harness.mjs";

let daemon, sbx;
before(async () => {
	daemon = await Daemon.start();
	sbx = await Sandbox.create();
});
after(async () => {
	await sbx?.kill();
	await daemon?.stop();
});

describe("run", () => {
	it("runs in the foreground with output, cwd and envs, as user by default", async () => {
		const out = [];
		const r = await sbx.commands.run("echo out; echo err >&2; pwd; whoami; echo $FOO", {
			cwd: "/tmp",
			envs: { FOO: "bar" },
			onStdout: (d) => out.push(d),
		});
		assert.equal(r.exitCode, 0);
		assert.equal(r.stdout, "out\n/tmp\nuser\nbar\n");
		assert.equal(r.stderr, "err\n");
		assert.equal(out.join(""), r.stdout);
		const home = await sbx.commands.run("pwd; id -u; echo $HOME");
		assert.equal(home.stdout, "/home/user\n1000\n/home/user\n");
	});

	it("runs as root when asked", async () => {
		const r = await sbx.commands.run("whoami; id -u", { user: "root" });
		assert.equal(r.stdout, "root\n0\n");
		// user is unprivileged: root's files are not its to write
		const err = await rejection(sbx.commands.run("touch /root/nope"));
		assert.ok(err instanceof CommandExitError);
		assert.match(err.stderr, /Permission denied/);
	});

	it("a non-zero exit is CommandExitError with the output", async () => {
		const err = await rejection(sbx.commands.run("echo partial; exit 7"));
		assert.ok(err instanceof CommandExitError, err.stack);
		assert.equal(err.exitCode, 7);
		assert.equal(err.stdout, "partial\n");
		assert.equal(err.error, "exit status 7");
	});

	it("a missing cwd fails the start", async () => {
		const err = await rejection(sbx.commands.run("true", { cwd: "/no/such/dir" }));
		assert.ok(err instanceof SandboxError, err.stack);
	});

	it("a timeout kills the command's whole tree", async () => {
		const err = await rejection(
			sbx.commands.run("sleep 300 & sleep 301 & wait", { timeoutMs: 1500 }),
		);
		assert.ok(err instanceof TimeoutError, err.stack);
		const clean = await waitFor(async () => {
			try {
				await sbx.commands.run("pgrep -x sleep");
				return false;
			} catch (e) {
				return e instanceof CommandExitError && e.exitCode === 1;
			}
		});
		assert.ok(clean, "sleep processes left after the timeout");
	});

	it("stdin: sendStdin and closeStdin reach the command", async () => {
		const h = await sbx.commands.run("cat; echo done", { background: true, stdin: true });
		await sbx.commands.sendStdin(h.pid, "line one\n");
		await sbx.commands.sendStdin(h.pid, "line two\n");
		await sbx.commands.closeStdin(h.pid);
		const r = await h.wait();
		assert.equal(r.stdout, "line one\nline two\ndone\n");
	});

	it("without stdin, a command reading it sees end of file", async () => {
		const r = await sbx.commands.run("cat; echo eof");
		assert.equal(r.stdout, "eof\n");
	});
});

describe("background", () => {
	it("lists, connects to and kills a running command", async () => {
		const h = await sbx.commands.run("for i in $(seq 1 1000); do echo tick $i; sleep 0.05; done", {
			background: true,
			timeoutMs: 0,
		});
		assert.ok(h.pid > 0);
		const list = await sbx.commands.list();
		const mine = list.find((p) => p.pid === h.pid);
		assert.ok(mine, JSON.stringify(list));
		assert.equal(mine.cmd, "/bin/bash");
		assert.deepEqual(mine.args.slice(0, 2), ["-l", "-c"]);
		h.disconnect(); // the command runs on
		const seen = [];
		const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
		assert.ok(await waitFor(() => seen.join("").includes("tick")), "no output after connect");
		assert.equal(await again.kill(), true);
		const err = await rejection(again.wait());
		assert.ok(err instanceof CommandExitError, err.stack);
		assert.equal(err.exitCode, -1);
		assert.match(err.error, /signal: killed/);
		assert.equal((await sbx.commands.list()).some((p) => p.pid === h.pid), false);
		assert.equal(await sbx.commands.kill(h.pid), false);
	});

	it("a background command keeps running after its client disconnects", async () => {
		const h = await sbx.commands.run("sleep 0.5; echo finished > /tmp/bg.txt", {
			background: true,
		});
		await h.disconnect();
		assert.ok(
			await waitFor(async () => (await sbx.files.exists("/tmp/bg.txt"))),
			"the command did not finish",
		);
		assert.equal(await sbx.files.read("/tmp/bg.txt"), "finished\n");
	});

	it("connect to an unknown pid is an error", async () => {
		const err = await rejection(sbx.commands.connect(999999));
		assert.ok(err instanceof SandboxError, err.stack);
	});
});

describe("pty", () => {
	// the terminal engine is not in this build: the SDK reports it
	it("pty.create answers Connect's unimplemented, never a fake terminal", async () => {
		const err = await rejection(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }));
		assert.ok(err instanceof SandboxError, err.stack);
		assert.match(err.message, /unimplemented.*PTY/);
	});
});
