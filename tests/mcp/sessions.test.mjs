// MCP sessions and the transport: each session its own sandbox (or the one
// named by ?sandbox=), cancellation, and the protocol's edges (batches,
// notifications, ping, errors) as raw HTTP where the SDK would hide them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Daemon, text } from "./harness.mjs";

let d;

before(async () => {
	d = await Daemon.start();
});

after(async () => {
	await d?.stop();
});

const HEADERS = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };

async function post(body, sid, extra = {}) {
	const h = { ...HEADERS, ...extra };
	if (sid) h["Mcp-Session-Id"] = sid;
	const r = await fetch(`${d.url}/mcp`, {
		method: "POST", headers: h, body: typeof body === "string" ? body : JSON.stringify(body),
	});
	const t = await r.text();
	let json;
	if (r.headers.get("content-type")?.startsWith("text/event-stream"))
		json = t.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
	else if (t) json = JSON.parse(t);
	return { status: r.status, headers: r.headers, json };
}

async function rawSession(protocolVersion, query = "") {
	const r = await fetch(`${d.url}/mcp${query}`, {
		method: "POST",
		headers: HEADERS,
		body: JSON.stringify({
			jsonrpc: "2.0", id: 0, method: "initialize",
			params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
		}),
	});
	assert.equal(r.status, 200);
	const j = await r.json();
	return { sid: r.headers.get("mcp-session-id"), version: j.result.protocolVersion };
}

async function sandboxes() {
	const r = await fetch(`${d.url}/v1/sandbox`);
	const j = await r.json();
	return j.sandboxes.map((s) => s.id);
}

const sh = (client, command) =>
	client.callTool({ name: "run_command", arguments: { command } }, undefined, { timeout: 120000 });

describe("sessions and sandboxes", () => {
	test("two sessions get two isolated sandboxes; ending one removes its own", async () => {
		const a = await d.connect();
		const b = await d.connect();
		assert.notEqual(a.transport.sessionId, b.transport.sessionId);
		await sh(a.client, "echo from-a > /workspace/secret; echo a > /tmp/who");
		let r = await b.client.callTool({ name: "read_file", arguments: { path: "secret" } });
		assert.equal(r.isError, true);
		r = await sh(b.client, "ls -A /workspace; cat /tmp/who 2>&1 || true");
		assert.doesNotMatch(r.structuredContent.stdout, /secret|^a$/m);
		r = await sh(a.client, "cat /workspace/secret");
		assert.equal(r.structuredContent.stdout, "from-a\n");
		const mine = (await sandboxes()).filter((id) => id.startsWith("mcp-"));
		assert.equal(mine.length, 2);

		const aid = a.transport.sessionId;
		await a.transport.terminateSession();
		await a.client.close();
		assert.equal((await sandboxes()).filter((id) => id.startsWith("mcp-")).length, 1);
		const gone = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, aid);
		assert.equal(gone.status, 404);
		// the other session goes on
		r = await sh(b.client, "echo still here");
		assert.equal(r.structuredContent.stdout, "still here\n");
		await b.transport.terminateSession();
		await b.client.close();
		assert.equal((await sandboxes()).filter((id) => id.startsWith("mcp-")).length, 0);
	});

	test("?sandbox=ID: sessions share that sandbox, which outlives them", async () => {
		const a = await d.connect("?sandbox=shared-box");
		const b = await d.connect("?sandbox=shared-box");
		await sh(a.client, "echo shared > /workspace/s.txt");
		const r = await b.client.callTool({ name: "read_file", arguments: { path: "s.txt" } });
		assert.equal(text(r), "shared\n");
		await a.transport.terminateSession();
		await b.transport.terminateSession();
		await a.client.close();
		await b.client.close();
		assert.ok((await sandboxes()).includes("shared-box"));
		const bad = await fetch(`${d.url}/mcp?sandbox=Not_Valid`, {
			method: "POST", headers: HEADERS,
			body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18" } }),
		});
		assert.equal(bad.status, 400);
	});

	test("?keep=true keeps the session's own sandbox", async () => {
		const before = new Set(await sandboxes());
		const a = await d.connect("?keep=true");
		await sh(a.client, "true");
		await a.transport.terminateSession();
		await a.client.close();
		const kept = (await sandboxes()).filter((id) => !before.has(id));
		assert.equal(kept.length, 1);
		assert.match(kept[0], /^mcp-[0-9a-f]{12}$/);
	});
});

describe("cancellation", () => {
	test("an aborted call ends its command and every process it started", async () => {
		const { client, transport } = await d.connect();
		const ac = new AbortController();
		const call = client.callTool(
			{ name: "run_command", arguments: { command: "sleep 300 & sleep 300", timeout_seconds: 600 } },
			undefined,
			{ signal: ac.signal, timeout: 600000 },
		);
		setTimeout(() => ac.abort("changed my mind"), 1000);
		await assert.rejects(call);
		// the session's next command runs at once (nothing of the first
		// one is left to wait for)
		const r = await sh(client, "ps -eo comm= | grep -cx sleep || true");
		assert.equal(r.structuredContent.stdout, "0\n");
		await transport.terminateSession();
		await client.close();
	});

	test("notifications/cancelled: no response for the call, its process gone", async () => {
		const { sid } = await rawSession("2025-11-25");
		const call = post(
			{ jsonrpc: "2.0", id: "long-1", method: "tools/call",
			  params: { name: "run_command", arguments: { command: "sleep 300", timeout_seconds: 600 } } },
			sid,
		);
		await new Promise((r) => setTimeout(r, 1000));
		const n = await post(
			{ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "long-1", reason: "test" } },
			sid,
		);
		assert.equal(n.status, 202);
		const answered = await call;
		assert.equal(answered.status, 200);
		assert.deepEqual(answered.json ?? [], []);
		const r = await post(
			{ jsonrpc: "2.0", id: 2, method: "tools/call",
			  params: { name: "run_command", arguments: { command: "ps -eo comm= | grep -cx sleep || true" } } },
			sid,
		);
		assert.equal(r.json[0].result.structuredContent.stdout, "0\n");
	});
});

describe("ending a session under a running call", () => {
	test("DELETE while a command runs: the call ends unanswered, the sandbox goes", async () => {
		const { sid } = await rawSession("2025-11-25");
		const known = new Set(await sandboxes());
		const first = await post(
			{ jsonrpc: "2.0", id: 1, method: "tools/call",
			  params: { name: "run_command", arguments: { command: "true" } } },
			sid,
		);
		assert.equal(first.status, 200);
		const box = (await sandboxes()).find((id) => !known.has(id));
		assert.ok(box);
		const call = post(
			{ jsonrpc: "2.0", id: 2, method: "tools/call",
			  params: { name: "run_command", arguments: { command: "sleep 300 & sleep 300", timeout_seconds: 600 } } },
			sid,
		);
		await new Promise((r) => setTimeout(r, 1000));
		const del = await fetch(`${d.url}/mcp`, { method: "DELETE", headers: { "Mcp-Session-Id": sid } });
		assert.equal(del.status, 204);
		const answered = await call;
		assert.deepEqual(answered.json ?? [], []);
		assert.ok(!(await sandboxes()).includes(box));
		assert.equal((await fetch(`${d.url}/health`)).status, 200);
	});
});

describe("protocol", () => {
	test("version negotiation", async () => {
		assert.equal((await rawSession("2025-03-26")).version, "2025-03-26");
		assert.equal((await rawSession("2024-11-05")).version, "2024-11-05");
		assert.equal((await rawSession("1999-01-01")).version, "2025-11-25");
	});

	test("session header rules, GET, DELETE", async () => {
		let r = await post({ jsonrpc: "2.0", id: 1, method: "ping" });
		assert.equal(r.status, 400);
		assert.equal(r.json.error.code, -32000);
		r = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, "0123456789abcdef01234567");
		assert.equal(r.status, 404);
		const { sid } = await rawSession("2025-11-25");
		r = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, sid, { "MCP-Protocol-Version": "2000-01-01" });
		assert.equal(r.status, 400);
		r = await post({ jsonrpc: "2.0", id: 7, method: "ping" }, sid, { "MCP-Protocol-Version": "2025-11-25" });
		assert.deepEqual(r.json, { jsonrpc: "2.0", id: 7, result: {} });
		const g = await fetch(`${d.url}/mcp`, { headers: { Accept: "text/event-stream", "Mcp-Session-Id": sid } });
		assert.equal(g.status, 405);
		await g.text();
		const del = await fetch(`${d.url}/mcp`, { method: "DELETE", headers: { "Mcp-Session-Id": sid } });
		assert.equal(del.status, 204);
		r = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, sid);
		assert.equal(r.status, 404);
	});

	test("JSON-RPC errors, notifications, responses", async () => {
		const { sid } = await rawSession("2025-11-25");
		let r = await post("{not json", sid);
		assert.equal(r.status, 400);
		assert.equal(r.json.error.code, -32700);
		r = await post({ jsonrpc: "2.0", id: 3, method: "resources/list" }, sid);
		assert.deepEqual(r.json.error.code, -32601);
		assert.equal(r.json.id, 3);
		r = await post({ jsonrpc: "1.0", id: 4, method: "ping" }, sid);
		assert.equal(r.json.error.code, -32600);
		r = await post({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "nope" } }, sid);
		assert.equal(r.json.error.code, -32602);
		r = await post({ jsonrpc: "2.0", id: 6, method: "tools/call", params: "x" }, sid);
		assert.equal(r.json.error.code, -32602);
		r = await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sid);
		assert.equal(r.status, 202);
		r = await post({ jsonrpc: "2.0", id: 99, result: {} }, sid);
		assert.equal(r.status, 202);
		r = await post([{ jsonrpc: "2.0", id: 1, method: "ping" }], sid);
		assert.equal(r.status, 400, "no batches after 2025-03-26");
	});

	test("batches, for sessions of 2025-03-26", async () => {
		const { sid } = await rawSession("2025-03-26");
		let r = await post([
			{ jsonrpc: "2.0", id: 1, method: "ping" },
			{ jsonrpc: "2.0", method: "notifications/initialized" },
			{ jsonrpc: "2.0", id: 2, method: "tools/list" },
			{ jsonrpc: "2.0", id: 3, method: "nope" },
		], sid);
		assert.equal(r.status, 200);
		assert.deepEqual(r.json.map((m) => m.id), [1, 2, 3]);
		assert.equal(r.json[1].result.tools.length, 8);
		assert.equal(r.json[2].error.code, -32601);
		r = await post([
			{ jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "run_command", arguments: { command: "echo one" } } },
			{ jsonrpc: "2.0", id: "b", method: "ping" },
		], sid);
		assert.deepEqual(r.json.map((m) => m.id).sort(), ["a", "b"]);
		assert.equal(r.json.find((m) => m.id === "a").result.structuredContent.stdout, "one\n");
		r = await post([], sid);
		assert.equal(r.status, 400);
		r = await post([{ jsonrpc: "2.0", method: "notifications/initialized" }], sid);
		assert.equal(r.status, 202);
	});
});
