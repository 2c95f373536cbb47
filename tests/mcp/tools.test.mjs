// The MCP server's tools through the official TypeScript SDK client:
// connect, list, call each; seed 004's run_command semantics (the last
// 10,000 characters, marked as cut; a timeout that ends every process).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

import { Daemon, text } from "./harness.mjs";

let d, client, transport;

before(async () => {
	d = await Daemon.start();
	({ client, transport } = await d.connect());
});

after(async () => {
	await client?.close();
	await d?.stop();
});

const run = (command, extra = {}) =>
	client.callTool({ name: "run_command", arguments: { command, ...extra } }, undefined, {
		timeout: 120000,
	});

describe("connect and list", () => {
	test("the session speaks the SDK's latest revision and lists every tool", async () => {
		assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
		assert.ok(transport.sessionId);
		assert.equal(client.getServerVersion().name, "sandboxd");
		assert.ok(client.getServerCapabilities().tools);
		await client.ping();
		const { tools } = await client.listTools();
		assert.deepEqual(tools.map((t) => t.name).sort(), [
			"kill_process", "list_files", "process_logs", "read_file", "run_code",
			"run_command", "start_process", "write_file",
		]);
		for (const t of tools) {
			assert.ok(t.description.length > 40, `${t.name} has a description`);
			assert.equal(t.inputSchema.type, "object");
			for (const [name, prop] of Object.entries(t.inputSchema.properties))
				assert.ok(prop.description, `${t.name}.${name} is described`);
		}
		const rc = tools.find((t) => t.name === "run_command");
		assert.deepEqual(rc.inputSchema.required, ["command"]);
		assert.equal(rc.inputSchema.properties.timeout_seconds.default, 60);
	});
});

describe("run_command", () => {
	test("output, exit code, and state kept between calls", async () => {
		let r = await run("mkdir -p proj && cd proj && echo hello > f && echo out; echo err >&2; exit 3");
		assert.equal(r.isError, undefined);
		assert.deepEqual(r.structuredContent, {
			exitCode: 3, stdout: "out\n", stderr: "err\n",
			stdoutTruncated: false, stderrTruncated: false, timedOut: false,
		});
		assert.deepEqual(JSON.parse(text(r)), r.structuredContent);
		r = await run("pwd; cat f");
		assert.equal(r.structuredContent.stdout, "/workspace/proj\nhello\n");
		r = await run("pwd", { cwd: "/tmp" });
		assert.equal(r.structuredContent.stdout, "/tmp\n");
	});

	test("yes | head -c 50000 returns the last 10,000 characters, marked as cut", async () => {
		const r = await run("yes | head -c 50000");
		const s = r.structuredContent;
		assert.equal(s.exitCode, 0);
		assert.equal(s.stdout.length, 10000);
		assert.equal(s.stdout, "y\n".repeat(5000));
		assert.equal(s.stdoutTruncated, true);
		assert.equal(s.stderrTruncated, false);
		const e = await run("seq 1 20000 >&2");
		assert.equal(e.structuredContent.stderr.length, 10000);
		assert.ok(e.structuredContent.stderr.endsWith("\n19999\n20000\n"));
		assert.equal(e.structuredContent.stderrTruncated, true);
		assert.equal(e.structuredContent.stdoutTruncated, false);
	});

	test("the timeout ends the command and every process it started", async () => {
		const t0 = Date.now();
		const r = await run("sleep 100 & sleep 100", { timeout_seconds: 2 });
		const took = Date.now() - t0;
		assert.equal(r.structuredContent.timedOut, true);
		assert.equal(r.structuredContent.exitCode, 124);
		// far below the 100 s the sleeps asked for (about 2 s here)
		assert.ok(took < 30000, `returned after ${took} ms`);
		const left = await run("ps -eo comm= | grep -cx sleep || true");
		assert.equal(left.structuredContent.stdout, "0\n");
	});

	test("bad arguments are tool errors an agent can act on", async () => {
		let r = await client.callTool({ name: "run_command", arguments: { command: "" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /command must be a non-empty string/);
		r = await run("true", { timeout_seconds: 0 });
		assert.equal(r.isError, true);
		assert.match(text(r), /timeout_seconds/);
		r = await run("true", { cwd: "/no/such/dir" });
		assert.equal(r.isError, true);
		r = await run("true", { bogus: 1 });
		assert.equal(r.isError, true);
		assert.match(text(r), /unknown argument "bogus"/);
	});

	test("an unknown tool is a protocol error", async () => {
		await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }), /Unknown tool/);
	});
});

describe("files", () => {
	test("write, read, list; a bad path is an isError result", async () => {
		let r = await client.callTool({
			name: "write_file", arguments: { path: "notes/a.txt", content: "line 1\nline 2\n" },
		});
		assert.equal(r.isError, undefined, text(r));
		assert.match(text(r), /wrote 14 bytes to \/workspace\/notes\/a.txt/);
		r = await client.callTool({ name: "read_file", arguments: { path: "/workspace/notes/a.txt" } });
		assert.equal(text(r), "line 1\nline 2\n");
		r = await client.callTool({ name: "list_files", arguments: { path: "notes" } });
		assert.equal(text(r), "file 14 a.txt\n");
		r = await client.callTool({ name: "list_files", arguments: { recursive: true } });
		assert.match(text(r), /^directory \d+ notes\/$/m);
		assert.match(text(r), /^file 14 notes\/a.txt$/m);

		r = await client.callTool({ name: "read_file", arguments: { path: "/no/such/file.txt" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /No such file or directory/);
		r = await client.callTool({ name: "read_file", arguments: { path: "notes" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /directory/);
		r = await client.callTool({ name: "list_files", arguments: { path: "notes/a.txt" } });
		assert.equal(r.isError, true);
		r = await client.callTool({ name: "read_file", arguments: {} });
		assert.equal(r.isError, true);
	});

	test("binary content: base64 in, an image out as MCP image content", async () => {
		const png = Buffer.from(
			"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
			"base64",
		);
		let r = await client.callTool({
			name: "write_file", arguments: { path: "dot.png", content: png.toString("base64"), base64: true },
		});
		assert.equal(r.isError, undefined, text(r));
		r = await client.callTool({ name: "read_file", arguments: { path: "dot.png" } });
		assert.deepEqual(r.content, [{ type: "image", data: png.toString("base64"), mimeType: "image/png" }]);
		const bin = Buffer.from([0, 1, 2, 255, 254]);
		await client.callTool({
			name: "write_file", arguments: { path: "b.bin", content: bin.toString("base64"), base64: true },
		});
		r = await client.callTool({ name: "read_file", arguments: { path: "b.bin" } });
		assert.ok(text(r).endsWith(bin.toString("base64")), text(r));
	});

	test("a file over 1 MiB is refused with its size; a listing stops at 2000 entries", async () => {
		let r = await run(
			"head -c 2000000 /dev/zero > /workspace/big.bin && mkdir /workspace/many && " +
				"(cd /workspace/many && seq -w 1 2100 | xargs touch)",
		);
		assert.equal(r.structuredContent.exitCode, 0, text(r));
		r = await client.callTool({ name: "read_file", arguments: { path: "big.bin" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /the file is 2000000 bytes, more than read_file returns/);
		r = await client.callTool({ name: "list_files", arguments: { path: "many" } });
		assert.equal(r.isError, undefined, text(r));
		const lines = text(r).trimEnd().split("\n");
		assert.equal(lines.length, 2001);
		assert.match(lines[0], /^file 0 \d{4}$/);
		assert.equal(lines[2000], "... (more entries: list a subdirectory)");
		r = await client.callTool({ name: "read_file", arguments: { path: "big.bin" } });
		assert.equal(r.isError, true, "the daemon still answers after the stopped builtins");
	});
});

describe("run_code", () => {
	test("python keeps state and returns the last value; errors are isError", async () => {
		let r = await client.callTool({ name: "run_code", arguments: { language: "python", code: "x = 20\nprint('hi')" } });
		assert.equal(r.isError, undefined, JSON.stringify(r));
		assert.equal(text(r), "hi\n");
		r = await client.callTool({ name: "run_code", arguments: { language: "python", code: "x * 2 + 2" } });
		assert.deepEqual(r.content, [{ type: "text", text: "42" }]);
		r = await client.callTool({ name: "run_code", arguments: { language: "python", code: "1/0" } });
		assert.equal(r.isError, true);
		assert.match(text(r), /ZeroDivisionError/);
		r = await client.callTool({ name: "run_code", arguments: { language: "ruby", code: "1" } });
		assert.equal(r.isError, true);
	});

	test("a matplotlib figure comes back as an image", async () => {
		const r = await client.callTool(
			{
				name: "run_code",
				arguments: {
					language: "python",
					code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
				},
			},
			undefined,
			{ timeout: 120000 },
		);
		assert.equal(r.isError, undefined, JSON.stringify(r).slice(0, 500));
		const img = r.content.find((c) => c.type === "image");
		assert.ok(img, JSON.stringify(r).slice(0, 500));
		assert.equal(img.mimeType, "image/png");
		assert.equal(Buffer.from(img.data, "base64").subarray(1, 4).toString(), "PNG");
	});

	test("javascript", async () => {
		const r = await client.callTool({ name: "run_code", arguments: { language: "javascript", code: "[1, 2, 3].map((x) => x * 2)" } });
		assert.equal(r.isError, undefined, JSON.stringify(r));
		assert.match(text(r), /2,\s*4,\s*6/);
	});
});

describe("background processes", () => {
	test("start, read the logs, kill", async () => {
		let r = await client.callTool({
			name: "start_process", arguments: { command: "echo started; sleep 1000" },
		});
		assert.equal(r.isError, undefined, text(r));
		const { id, pid } = JSON.parse(text(r));
		assert.ok(id && pid > 0);
		let logs;
		for (let i = 0; i < 200; i++) {
			logs = JSON.parse(text(await client.callTool({ name: "process_logs", arguments: { id } })));
			if (logs.stdout) break;
			await new Promise((res) => setTimeout(res, 50));
		}
		assert.equal(logs.stdout, "started\n");
		assert.equal(logs.status, "running");
		r = await client.callTool({ name: "kill_process", arguments: { id } });
		assert.equal(r.isError, undefined);
		for (let i = 0; i < 200 && logs.status === "running"; i++) {
			await new Promise((res) => setTimeout(res, 50));
			logs = JSON.parse(text(await client.callTool({ name: "process_logs", arguments: { id } })));
		}
		assert.equal(logs.status, "killed");
		const left = await run("ps -eo comm= | grep -cx sleep || true");
		assert.equal(left.structuredContent.stdout, "0\n");
		r = await client.callTool({ name: "process_logs", arguments: { id: "nope" } });
		assert.equal(r.isError, true);
	});
});
