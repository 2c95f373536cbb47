// Sessions through the official client: utils.createSession/deleteSession
// (and session/list, which SandboxClient has no method for over HTTP: it
// is read with the sub-client's own GET). Sessions keep cwd and env apart.
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

const listSessions = async (c) => (await c.utils.get("/api/session/list")).data;

describe("sessions", () => {
	it("are created with their own cwd and env, and kept apart", async () => {
		const c = daemon.client(sandboxId("sess"));
		const a = await c.utils.createSession({ id: "alpha", cwd: "/tmp", env: { WHO: "alpha" } });
		assert.equal(a.success, true);
		assert.equal(a.id, "alpha");
		await c.utils.createSession({ id: "beta", env: { WHO: "beta" } });

		await c.commands.execute("cd /; export ONLY_ALPHA=1", "alpha");
		const ra = await c.commands.execute('pwd; echo "$WHO ${ONLY_ALPHA-no}"', "alpha");
		const rb = await c.commands.execute('pwd; echo "$WHO ${ONLY_ALPHA-no}"', "beta");
		const rd = await c.commands.execute('pwd; echo "${WHO-none} ${ONLY_ALPHA-no}"');
		assert.equal(ra.stdout, "/\nalpha 1\n");
		assert.equal(rb.stdout, "/workspace\nbeta no\n");
		assert.equal(rd.stdout, "/workspace\nnone no\n");
		assert.equal(ra.sessionId, "alpha");
	});

	it("a duplicate id is SessionAlreadyExistsError (409)", async () => {
		const c = daemon.client(sandboxId("sess-dup"));
		await c.utils.createSession({ id: "same" });
		const err = await rejectsAs(
			c.utils.createSession({ id: "same" }),
			"SessionAlreadyExistsError",
			"SESSION_ALREADY_EXISTS",
			409,
		);
		assert.equal(err.context.sessionId, "same");
	});

	it("the SDK's own default session id works as the SDK uses it", async () => {
		// Sandbox.ensureDefaultSession: create "sandbox-<name>", and a
		// SessionAlreadyExistsError just means it is there already
		const c = daemon.client(sandboxId("sess-sdk"));
		await c.utils.createSession({ id: "sandbox-demo", env: {}, cwd: "/workspace" });
		await rejectsAs(
			c.utils.createSession({ id: "sandbox-demo", env: {}, cwd: "/workspace" }),
			"SessionAlreadyExistsError",
			"SESSION_ALREADY_EXISTS",
		);
		const r = await c.commands.execute("echo $HOME", "sandbox-demo");
		assert.equal(r.stdout, "/root\n");
	});

	it("are listed, and a name used for the first time makes one", async () => {
		const c = daemon.client(sandboxId("sess-list"));
		await c.utils.createSession({ id: "made" });
		await c.commands.execute("true", "named-on-use");
		const ids = await listSessions(c);
		for (const id of ["default", "made", "named-on-use"]) assert.ok(ids.includes(id), id);
	});

	it("generate an id when none is given", async () => {
		const c = daemon.client(sandboxId("sess-gen"));
		const r = await c.utils.createSession({});
		assert.match(r.id, /^session_\d+_[0-9a-f]+$/);
		assert.ok((await listSessions(c)).includes(r.id));
	});

	it("are deleted; the name then starts afresh", async () => {
		const c = daemon.client(sandboxId("sess-del"));
		await c.utils.createSession({ id: "gone", env: { MARK: "first" } });
		const d = await c.utils.deleteSession("gone");
		assert.equal(d.success, true);
		assert.equal(d.sessionId, "gone");
		assert.ok(!(await listSessions(c)).includes("gone"));
		const r = await c.commands.execute('echo "${MARK-fresh}"', "gone");
		assert.equal(r.stdout, "fresh\n");
	});

	it("deleting a session kills the command it runs", async () => {
		const c = daemon.client(sandboxId("sess-kill"));
		await c.utils.createSession({ id: "busy" });
		const stream = await c.commands.executeStream("echo started; sleep 31350", "busy");
		const events = collect(parseSSEStream, stream);
		await new Promise((r) => setTimeout(r, 300));
		await c.utils.deleteSession("busy");
		const seen = (await events).map((e) => e.type);
		assert.deepEqual(seen.slice(0, 2), ["start", "stdout"]);
		assert.equal(seen.at(-1), "error");
		const ps = await c.commands.execute("ps -eo args");
		assert.doesNotMatch(ps.stdout, /sleep 31350/);
	});

	it("deleting an unknown session is the container's INTERNAL_ERROR", async () => {
		const c = daemon.client(sandboxId("sess-unknown"));
		await rejectsAs(c.utils.deleteSession("never-made"), "SandboxError", "INTERNAL_ERROR", 500);
	});

	it("a session's commandTimeoutMs is its commands' default timeout", async () => {
		const c = daemon.client(sandboxId("sess-timeout"));
		await c.utils.createSession({ id: "quick", commandTimeoutMs: 300 });
		await rejectsAs(
			c.commands.execute("sleep 5", "quick"),
			"CommandError",
			"COMMAND_EXECUTION_ERROR",
		);
		// a command's own timeoutMs wins
		const r = await c.commands.execute("sleep 0.5; echo done", "quick", { timeoutMs: 5000 });
		assert.equal(r.stdout, "done\n");
	});

	it("file paths are relative to the session's cwd", async () => {
		const c = daemon.client(sandboxId("sess-files"));
		await c.utils.createSession({ id: "intmp", cwd: "/tmp" });
		await c.files.writeFile("here.txt", "in tmp", "intmp");
		assert.equal((await c.files.readFile("/tmp/here.txt")).content, "in tmp");
		assert.equal((await c.files.exists("here.txt")).exists, false); // default: /workspace
		assert.equal((await c.files.exists("here.txt", "intmp")).exists, true);
	});
});
