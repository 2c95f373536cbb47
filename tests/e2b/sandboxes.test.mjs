// The control plane through the official e2b SDK: create (template,
// metadata, envs, timeout), info, list with paging and filters, connect,
// setTimeout then expiry, pause and connect (files kept), metrics, kill,
// API keys as tokens, and what is not offered answering an error.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
	AuthenticationError,
	CommandExitError,
	Sandbox,
	SandboxError,
	SandboxNotFoundError,
} from "e2b";

import { API_KEY, Daemon, rejection, waitFor } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

async function listAll(opts = {}) {
	const p = Sandbox.list(opts);
	const items = [];
	let pages = 0;
	while (p.hasNext) {
		items.push(...(await p.nextItems()));
		pages++;
	}
	return { items, pages };
}

describe("create and info", () => {
	it("creates from the default template with metadata, envs and a timeout", async () => {
		const sbx = await Sandbox.create({
			metadata: { owner: "alice", purpose: "test" },
			envs: { GREETING: "hello from create" },
			timeoutMs: 120_000,
		});
		try {
			assert.match(sbx.sandboxId, /^[a-z0-9]+$/);
			const info = await sbx.getInfo();
			assert.equal(info.sandboxId, sbx.sandboxId);
			assert.equal(info.templateId, "base");
			assert.deepEqual(info.metadata, { owner: "alice", purpose: "test" });
			assert.equal(info.state, "running");
			assert.ok(info.cpuCount >= 1 && info.memoryMB > 0, JSON.stringify(info));
			const left = info.endAt.getTime() - info.startedAt.getTime();
			assert.ok(left >= 119_000 && left <= 121_000, `endAt - startedAt = ${left}`);
			const r = await sbx.commands.run("echo $GREETING");
			assert.equal(r.stdout, "hello from create\n");
		} finally {
			await sbx.kill();
		}
	});

	it("takes the code-interpreter template name, refuses templates it does not have", async () => {
		const sbx = await Sandbox.create("code-interpreter-v1");
		assert.equal((await sbx.getInfo()).templateId, "code-interpreter-v1");
		await sbx.kill();
		const err = await rejection(Sandbox.create("my-custom-template"));
		assert.ok(err instanceof SandboxError, err.stack);
		assert.match(err.message, /^400: .*template 'my-custom-template' is not supported/);
	});

	it("an unknown sandbox is SandboxNotFoundError; kill of it is false", async () => {
		const err = await rejection(Sandbox.getInfo("inosuchsandbox"));
		assert.ok(err instanceof SandboxNotFoundError, err.stack);
		assert.equal(await Sandbox.kill("inosuchsandbox"), false);
		const c = await rejection(Sandbox.connect("inosuchsandbox"));
		assert.ok(c instanceof SandboxNotFoundError, c.stack);
	});
});

describe("list", () => {
	it("pages through the caller's sandboxes and filters by metadata and state", async () => {
		const tag = `run-${process.pid}`;
		const made = [];
		for (let i = 0; i < 5; i++)
			made.push(await Sandbox.create({ metadata: { tag, n: String(i) } }));
		try {
			const { items, pages } = await listAll({ query: { metadata: { tag } }, limit: 2 });
			assert.equal(pages, 3);
			assert.deepEqual(
				items.map((s) => s.sandboxId).sort(),
				made.map((s) => s.sandboxId).sort(),
			);
			// order over the whole set, before paging: asc is desc reversed
			const desc = (await listAll({ query: { metadata: { tag } }, limit: 2 })).items;
			const asc = (await listAll({ query: { metadata: { tag } }, limit: 2, order: "asc" })).items;
			assert.deepEqual(asc.map((s) => s.sandboxId), desc.map((s) => s.sandboxId).reverse());
			// startedAfter: those started at or after a moment
			const at = asc[2].startedAt;
			const later = await listAll({ query: { metadata: { tag }, startedAfter: at } });
			assert.deepEqual(
				later.items.map((s) => s.sandboxId).sort(),
				asc.filter((s) => s.startedAt >= at).map((s) => s.sandboxId).sort(),
			);
			assert.ok(later.items.length >= 3, String(later.items.length));
			const ci = await Sandbox.create("code-interpreter-v1", { metadata: { tag } });
			made.push(ci);
			const byTpl = await listAll({ query: { metadata: { tag }, template: "code-interpreter-v1" } });
			assert.deepEqual(byTpl.items.map((s) => s.sandboxId), [ci.sandboxId]);
			made.pop();
			await ci.kill();
			const one = await listAll({ query: { metadata: { tag, n: "3" } } });
			assert.deepEqual(one.items.map((s) => s.sandboxId), [made[3].sandboxId]);
			await made[0].pause();
			const paused = await listAll({ query: { metadata: { tag }, state: ["paused"] } });
			assert.deepEqual(paused.items.map((s) => s.sandboxId), [made[0].sandboxId]);
			assert.equal(paused.items[0].state, "paused");
			const running = await listAll({ query: { metadata: { tag }, state: ["running"] } });
			assert.equal(running.items.length, 4);
		} finally {
			for (const s of made) await Sandbox.kill(s.sandboxId);
		}
		const gone = await listAll({ query: { metadata: { tag } } });
		assert.equal(gone.items.length, 0);
	});
});

describe("lifecycle", () => {
	it("a sandbox is killed at its timeout; setTimeout moves the deadline", async () => {
		const sbx = await Sandbox.create({ timeoutMs: 2_000 });
		await sbx.setTimeout(600_000);
		const info = await sbx.getInfo();
		assert.ok(info.endAt.getTime() - Date.now() > 500_000, String(info.endAt));
		await sbx.setTimeout(1_000);
		const gone = await waitFor(async () => !(await sbx.isRunning()), 20_000, 200);
		assert.ok(gone, "still running after its timeout");
		assert.ok((await rejection(sbx.getInfo())) instanceof SandboxNotFoundError);
		assert.equal(await sbx.kill(), false);
	});

	it("pause keeps the files (not the processes); connect resumes", async () => {
		const sbx = await Sandbox.create();
		try {
			await sbx.files.write("/home/user/kept.txt", "still here");
			const bg = await sbx.commands.run("sleep 1000", { background: true });
			assert.ok(bg.pid > 0);
			assert.equal(await sbx.pause(), true);
			assert.equal(await sbx.isRunning(), false);
			assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, "paused");
			// a second pause: already paused
			assert.equal(await Sandbox.pause(sbx.sandboxId), false);
			const again = await Sandbox.connect(sbx.sandboxId);
			assert.equal(await again.isRunning(), true);
			assert.equal(await again.files.read("/home/user/kept.txt"), "still here");
			assert.deepEqual(await again.commands.list(), []);
			assert.equal((await again.getInfo()).state, "running");
		} finally {
			await Sandbox.kill(sbx.sandboxId);
		}
	});

	it("connect to a running sandbox gives a handle that drives it", async () => {
		const sbx = await Sandbox.create();
		try {
			await sbx.commands.run("echo shared > /tmp/x");
			const other = await Sandbox.connect(sbx.sandboxId);
			assert.equal(other.sandboxId, sbx.sandboxId);
			assert.equal((await other.commands.run("cat /tmp/x")).stdout, "shared\n");
		} finally {
			await sbx.kill();
		}
	});

	it("metrics report memory and disk of the sandbox", async () => {
		const sbx = await Sandbox.create();
		try {
			await sbx.commands.run("true");
			const m = await sbx.getMetrics();
			assert.equal(m.length, 1);
			assert.ok(m[0].memTotal > 0 && m[0].cpuCount >= 1, JSON.stringify(m));
			assert.ok(m[0].timestamp instanceof Date);
		} finally {
			await sbx.kill();
		}
	});

	it("two sandboxes do not see each other's files or processes", async () => {
		const a = await Sandbox.create();
		const b = await Sandbox.create();
		try {
			await a.files.write("/home/user/secret.txt", "a's");
			await a.commands.run("sleep 1000", { background: true });
			assert.equal(await b.files.exists("/home/user/secret.txt"), false);
			assert.deepEqual(await b.commands.list(), []);
			const err = await rejection(b.commands.run("pgrep -x sleep"));
			assert.ok(err instanceof CommandExitError);
		} finally {
			await a.kill();
			await b.kill();
		}
	});
});

describe("snapshots and fork", () => {
	it("snapshots a sandbox, lists it, creates from it, forks, deletes", async () => {
		const sbx = await Sandbox.create({ metadata: { snap: "origin" } });
		const made = [];
		try {
			await sbx.files.write("/home/user/state.txt", "v1");
			const snap = await sbx.createSnapshot({ name: "first" });
			assert.match(snap.snapshotId, /^snap_/);
			assert.deepEqual(snap.names, ["first"]);
			await sbx.files.write("/home/user/state.txt", "v2");
			const listed = await sbx.listSnapshots().nextItems();
			assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId]);
			// the snapshot as a template: its files, not the origin's now
			const fromSnap = await Sandbox.create(snap.snapshotId);
			made.push(fromSnap);
			assert.equal(await fromSnap.files.read("/home/user/state.txt"), "v1");
			assert.deepEqual((await fromSnap.getInfo()).metadata, { snap: "origin" });
			// a fork: the origin's files as they are now
			const forks = await sbx.fork({ count: 2 });
			assert.equal(forks.length, 2);
			for (const f of forks) {
				assert.ok(!(f instanceof Error), String(f));
				made.push(f);
				assert.equal(await f.files.read("/home/user/state.txt"), "v2");
			}
			assert.notEqual(forks[0].sandboxId, forks[1].sandboxId);
			await forks[0].files.write("/home/user/state.txt", "fork's own");
			assert.equal(await sbx.files.read("/home/user/state.txt"), "v2");
			assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
			assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
		} finally {
			for (const s of [sbx, ...made]) await Sandbox.kill(s.sandboxId);
		}
	});
});

describe("not offered", () => {
	it("MCP and network rules answer an error, never a fake success", async () => {
		const e2 = await rejection(Sandbox.create({ mcp: { "github/x": {} } }));
		assert.match(e2.message, /400: the MCP gateway is not supported/);
		const sbx = await Sandbox.create();
		try {
			const res = await fetch(`${daemon.url}/sandboxes/${sbx.sandboxId}/network`, {
				method: "PUT",
				headers: { "X-API-Key": API_KEY, "Content-Type": "application/json" },
				body: JSON.stringify({ allowOut: ["1.1.1.1"] }),
			});
			assert.equal(res.status, 501);
			assert.match((await res.json()).message, /not supported/);
		} finally {
			await sbx.kill();
		}
	});
});

describe("API keys", () => {
	it("with --tokens, an e2b_<hex> key is a tenant's token; others are refused", async () => {
		const other = "e2b_ffffffffffffffffffffffffffffffffffffffff";
		const d = await Daemon.start([], [`${API_KEY} alice`, `${other} bob`]);
		try {
			const opts = { apiUrl: d.url, sandboxUrl: d.url };
			const mine = await Sandbox.create({ ...opts, apiKey: API_KEY });
			const err = await rejection(Sandbox.create({ ...opts, apiKey: "e2b_0badbad0" }));
			assert.ok(err instanceof AuthenticationError, err.stack);
			// another tenant neither lists nor reaches it
			const p = Sandbox.list({ ...opts, apiKey: other });
			assert.deepEqual(await p.nextItems(), []);
			assert.ok(
				(await rejection(Sandbox.getInfo(mine.sandboxId, { ...opts, apiKey: other }))) instanceof
					SandboxNotFoundError,
			);
			assert.equal(await Sandbox.kill(mine.sandboxId, { ...opts, apiKey: other }), false);
			assert.equal((await mine.commands.run("echo ok")).stdout, "ok\n");
			await mine.kill();
		} finally {
			await d.stop();
		}
	});
});
