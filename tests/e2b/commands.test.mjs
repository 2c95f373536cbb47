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
	// a terminal of its own per pty.create, on the engine of /v1's pty
	const dec = new TextDecoder();
	const reader = () => {
		const chunks = [];
		return {
			onData: (d) => chunks.push(dec.decode(d, { stream: true })),
			text: () => chunks.join(""),
		};
	};
	// markers are printed by arithmetic so that the echo of the typed
	// line (the terminal echoes input) never matches them
	const has = (rd, s) => waitFor(async () => rd.text().includes(s));
	const typed = (pid, line) => sbx.pty.sendInput(pid, new TextEncoder().encode(line));

	it("create runs an interactive login shell on a terminal: input, output, cwd, envs, user, resize, exit code", async () => {
		const rd = reader();
		const h = await sbx.pty.create({ cols: 80, rows: 24, cwd: "/tmp", envs: { FOO: "bar" }, onData: rd.onData });
		assert.ok(h.pid > 0);
		// tty: a real terminal
		await typed(h.pid, "echo M$((40+1)) $FOO $(pwd) $(whoami) $(stty size) $TERM $(tty) E$((2+2))\n");
		assert.ok(await has(rd, "E4"), rd.text());
		assert.match(rd.text(), /M41 bar \/tmp user 24 80 xterm-256color \/dev\/pts\/\d+ E4/);
		await sbx.pty.resize(h.pid, { cols: 100, rows: 30 });
		await typed(h.pid, "echo S$((1+1)) $(stty size)\n");
		assert.ok(await has(rd, "S2 30 100"), rd.text());
		await typed(h.pid, "exit 3\n");
		const err = await rejection(h.wait());
		assert.ok(err instanceof CommandExitError, err.stack);
		assert.equal(err.exitCode, 3);
		// stdout and stderr stay empty: everything came as pty data
		assert.equal(err.stdout, "");
		assert.equal(err.stderr, "");
	});

	it("runs as root when asked; two terminals are separate", async () => {
		const a = reader(), b = reader();
		const ha = await sbx.pty.create({ cols: 80, rows: 24, user: "root", onData: a.onData });
		const hb = await sbx.pty.create({ cols: 80, rows: 24, onData: b.onData });
		assert.notEqual(ha.pid, hb.pid);
		await typed(ha.pid, "echo A$((5*5)) $(id -u)\n");
		assert.ok(await has(a, "A25 0"), a.text());
		assert.equal(b.text().includes("A25"), false);
		await typed(hb.pid, "exit 0\n");
		const r = await hb.wait();
		assert.equal(r.exitCode, 0);
		await typed(ha.pid, "exit\n");
		assert.equal((await ha.wait()).exitCode, 0);
	});

	it("kill ends the terminal's program; the pid is gone afterwards", async () => {
		const h = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
		assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid));
		assert.equal(await sbx.pty.kill(h.pid), true);
		const err = await rejection(h.wait());
		assert.ok(err instanceof CommandExitError, err.stack);
		assert.match(err.error ?? err.message, /killed/);
		assert.equal(await sbx.pty.kill(h.pid), false);
		assert.ok(await rejection(typed(h.pid, "echo\n")) instanceof SandboxError);
		assert.ok(await rejection(sbx.pty.resize(h.pid, { cols: 90, rows: 20 })) instanceof SandboxError);
		assert.equal((await sbx.commands.list()).some((p) => p.pid === h.pid), false);
	});

	it("connect follows a running terminal; it runs on when a client leaves", async () => {
		const first = reader();
		const h = await sbx.pty.create({ cols: 80, rows: 24, onData: first.onData });
		await h.disconnect();
		const rd = reader();
		const again = await sbx.pty.connect(h.pid, { onData: rd.onData });
		assert.equal(again.pid, h.pid);
		await typed(h.pid, "echo C$((6*7))\n");
		assert.ok(await has(rd, "C42"), rd.text());
		assert.equal(first.text().includes("C42"), false);
		assert.equal(await sbx.pty.kill(h.pid), true);
		await rejection(again.wait());
	});

	it("a pty with a cwd that does not exist ends in an error; resize of a non-pty process is refused", async () => {
		// as commands.run: the start event, then the failure
		const h = await sbx.pty.create({ cols: 80, rows: 24, cwd: "/nonexistent/dir", onData: () => {} });
		const err = await rejection(h.wait());
		assert.ok(err instanceof SandboxError, err.stack);
		assert.match(err.message, /chdir/);
		const bg = await sbx.commands.run("sleep 30", { background: true });
		assert.ok(await rejection(sbx.pty.resize(bg.pid, { cols: 90, rows: 20 })) instanceof SandboxError);
		assert.ok(await rejection(sbx.pty.resize(999999, { cols: 90, rows: 20 })) instanceof SandboxError);
		await bg.kill();
	});
});
