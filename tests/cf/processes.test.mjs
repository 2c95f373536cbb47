// Background processes through the official client: processes.start, list,
// get, logs, streamProcessLogs (parsed with parseSSEStream), kill, kill-all.
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

async function waitFor(fn, ms = 10000) {
	const deadline = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v || Date.now() > deadline) return v;
		await new Promise((r) => setTimeout(r, 50));
	}
}

describe("processes", () => {
	it("start, run beside the session, and end with their logs kept", async () => {
		const c = daemon.client(sandboxId("proc"));
		const st = await c.processes.startProcess(
			"echo out-$MODE; echo err >&2; sleep 0.3; echo late",
			undefined,
			{ processId: "job-1", env: { MODE: "bg" }, cwd: "/tmp" },
		);
		assert.equal(st.success, true);
		assert.equal(st.processId, "job-1");
		assert.ok(st.pid > 0);
		// the session is not blocked by it
		const r = await c.commands.execute("echo free");
		assert.equal(r.stdout, "free\n");

		const info = await waitFor(async () => {
			const p = (await c.processes.getProcess("job-1")).process;
			return p.status === "completed" && p;
		});
		assert.equal(info.id, "job-1");
		assert.equal(info.exitCode, 0);
		assert.ok(info.endTime >= info.startTime);
		const logs = await c.processes.getProcessLogs("job-1");
		assert.equal(logs.processId, "job-1");
		assert.equal(logs.stdout, "out-bg\nlate\n");
		assert.equal(logs.stderr, "err\n");
		// its env and cwd were its own
		const after = await c.commands.execute('pwd; echo "${MODE-unset}"');
		assert.equal(after.stdout, "/workspace\nunset\n");
	});

	it("start from the session's state, which they never change", async () => {
		const c = daemon.client(sandboxId("proc-state"));
		await c.commands.execute("cd /tmp; export FROM=session");
		await c.processes.startProcess("pwd; echo $FROM; cd /; export FROM=proc", undefined, {
			processId: "reader",
		});
		await waitFor(async () => (await c.processes.getProcess("reader")).process.status !== "running");
		assert.equal((await c.processes.getProcessLogs("reader")).stdout, "/tmp\nsession\n");
		const r = await c.commands.execute("pwd; echo $FROM");
		assert.equal(r.stdout, "/tmp\nsession\n");
	});

	it("are listed, oldest first, with their status", async () => {
		const c = daemon.client(sandboxId("proc-list"));
		await c.processes.startProcess("exit 3", undefined, { processId: "fails" });
		await c.processes.startProcess("sleep 30", undefined, { processId: "runs" });
		await waitFor(async () => (await c.processes.getProcess("fails")).process.status === "failed");
		const list = (await c.processes.listProcesses()).processes;
		assert.deepEqual(
			list.map((p) => [p.id, p.status]),
			[
				["fails", "failed"],
				["runs", "running"],
			],
		);
		assert.equal(list[0].exitCode, 3);
		assert.equal(list[1].exitCode, undefined);
		await c.processes.killProcess("runs");
	});

	it("stream their output: replayed, then live, then the exit", async () => {
		const c = daemon.client(sandboxId("proc-stream"));
		await c.processes.startProcess(
			"echo one; sleep 0.8; echo two >&2; sleep 0.2; exit 5",
			undefined,
			{ processId: "talker" },
		);
		await new Promise((r) => setTimeout(r, 300));
		const stream = await c.processes.streamProcessLogs("talker");
		const seen = [];
		for await (const ev of parseSSEStream(stream)) seen.push({ ...ev, at: Date.now() });
		assert.deepEqual(
			seen.map((e) => [e.type, e.data]),
			[
				["process_info", undefined],
				["stdout", "one\n"],
				["stderr", "two\n"],
				["exit", "Process completed with exit code 5"],
			],
		);
		assert.equal(seen[0].processId, "talker");
		assert.equal(seen[0].status, "running");
		assert.equal(seen[3].exitCode, 5);
		for (const e of seen.slice(1)) assert.equal(e.processId, "talker");
		assert.ok(seen[3].at - seen[1].at >= 500, "the replay came before the live part");
	});

	it("stream the whole log of one that already ended", async () => {
		const c = daemon.client(sandboxId("proc-ended"));
		await c.processes.startProcess("printf 'a\\nb\\n'", undefined, { processId: "done" });
		await waitFor(async () => (await c.processes.getProcess("done")).process.status === "completed");
		const events = await collect(parseSSEStream, await c.processes.streamProcessLogs("done"));
		assert.equal(events[0].type, "process_info");
		assert.equal(events[0].status, "completed");
		const out = events.slice(1, -1);
		assert.ok(out.every((e) => e.type === "stdout"));
		assert.equal(out.map((e) => e.data).join(""), "a\nb\n");
		assert.deepEqual([events.at(-1).type, events.at(-1).exitCode], ["exit", 0]);
	});

	it("are killed with their whole tree", async () => {
		const c = daemon.client(sandboxId("proc-kill"));
		await c.processes.startProcess("sleep 31360 & sleep 31361 & wait", undefined, {
			processId: "tree",
		});
		await waitFor(async () => /sleep 31361/.test((await c.commands.execute("ps -eo args")).stdout));
		const k = await c.processes.killProcess("tree");
		assert.equal(k.success, true);
		assert.equal(k.processId, "tree");
		// answered once it is gone
		const p = (await c.processes.getProcess("tree")).process;
		assert.equal(p.status, "killed");
		assert.doesNotMatch((await c.commands.execute("ps -eo args")).stdout, /sleep 3136[01]/);
		// killing it again is fine
		assert.equal((await c.processes.killProcess("tree")).success, true);
	});

	it("a process that ignores TERM is killed after the grace", async () => {
		const c = daemon.client(sandboxId("proc-stubborn"));
		await c.processes.startProcess("trap '' TERM; echo ready; sleep 31362 & wait; sleep 31363", undefined, {
			processId: "stubborn",
		});
		await waitFor(async () => (await c.processes.getProcessLogs("stubborn")).stdout === "ready\n");
		const t0 = Date.now();
		await c.processes.killProcess("stubborn");
		assert.equal((await c.processes.getProcess("stubborn")).process.status, "killed");
		assert.ok(Date.now() - t0 < 8000);
		assert.doesNotMatch((await c.commands.execute("ps -eo args")).stdout, /sleep 3136[23]/);
	});

	it("kill-all kills every running one and counts them", async () => {
		const c = daemon.client(sandboxId("proc-killall"));
		await c.processes.startProcess("sleep 31370", undefined, { processId: "k1" });
		await c.processes.startProcess("sleep 31371", undefined, { processId: "k2" });
		await c.processes.startProcess("true", undefined, { processId: "k3" });
		await waitFor(async () => (await c.processes.getProcess("k3")).process.status === "completed");
		const r = await c.processes.killAllProcesses();
		assert.equal(r.success, true);
		assert.equal(r.cleanedCount, 2);
		const list = (await c.processes.listProcesses()).processes;
		assert.deepEqual(
			list.map((p) => p.status),
			["killed", "killed", "completed"],
		);
		assert.doesNotMatch((await c.commands.execute("ps -eo args")).stdout, /sleep 3137/);
	});

	it("a timeoutMs ends a process with its tree", async () => {
		const c = daemon.client(sandboxId("proc-timeout"));
		await c.processes.startProcess("sleep 31380 & wait", undefined, {
			processId: "bounded",
			timeoutMs: 300,
		});
		const p = await waitFor(async () => {
			const x = (await c.processes.getProcess("bounded")).process;
			return x.status !== "running" && x;
		});
		assert.equal(p.status, "failed");
		assert.equal(p.exitCode, 124);
		assert.doesNotMatch((await c.commands.execute("ps -eo args")).stdout, /sleep 31380/);
	});

	it("unknown ids are ProcessNotFoundError; a running id again is ProcessError", async () => {
		const c = daemon.client(sandboxId("proc-errors"));
		// each call made when it is awaited: one made earlier may reject
		// before anything handles it (an unhandled rejection fails the test)
		for (const call of [
			() => c.processes.getProcess("nope"),
			() => c.processes.killProcess("nope"),
			() => c.processes.getProcessLogs("nope"),
			() => c.processes.streamProcessLogs("nope"),
		])
			await rejectsAs(call(), "ProcessNotFoundError", "PROCESS_NOT_FOUND", 404);
		await c.processes.startProcess("sleep 30", undefined, { processId: "twice" });
		await rejectsAs(
			c.processes.startProcess("sleep 30", undefined, { processId: "twice" }),
			"ProcessError",
			"PROCESS_ERROR",
			500,
		);
		await rejectsAs(
			c.processes.startProcess("true", undefined, { processId: "bad/id" }),
			"ValidationFailedError",
			"VALIDATION_FAILED",
			400,
		);
		await c.processes.killAllProcesses();
	});
});
