// The harness of the MCP suite: one real sandboxd per test file (its own
// loopback port and temporary state dir), and the official MCP TypeScript
// SDK client (@modelcontextprotocol/sdk, pinned by package-lock.json)
// connected to its /mcp over the Streamable HTTP transport. What the tests
// check is what an agent using the SDK sees.
//
// SBX_BIN names the daemon binary (scripts/run-tests sets it); the default
// is build/sandboxd of this tree.
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SBX_BIN = process.env.SBX_BIN || path.resolve(HERE, "../../build/sandboxd");

async function freePort() {
	const srv = net.createServer();
	srv.listen(0, "127.0.0.1");
	await once(srv, "listening");
	const { port } = srv.address();
	srv.close();
	await once(srv, "close");
	return port;
}

function mountsUnder(dir) {
	const prefix = `${dir.replace(/\/$/, "")}/`;
	return fs
		.readFileSync("/proc/self/mountinfo", "utf8")
		.split("\n")
		.map((l) => l.split(" ")[4]?.replace(/\\040/g, " "))
		.filter((m) => m && (m === dir || m.startsWith(prefix)));
}

export class Daemon {
	static async start(flags = []) {
		const d = new Daemon();
		await d.#start(flags);
		return d;
	}

	async #start(flags) {
		fs.accessSync(SBX_BIN, fs.constants.X_OK);
		this.base = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-mcp-"));
		this.stateDir = path.join(this.base, "state");
		fs.mkdirSync(this.stateDir, { mode: 0o700 });
		this.logPath = path.join(this.base, "sandboxd.log");
		this.port = await freePort();
		this.url = `http://127.0.0.1:${this.port}`;
		const log = fs.openSync(this.logPath, "a");
		this.proc = spawn(
			SBX_BIN,
			["--listen", `127.0.0.1:${this.port}`, "--state-dir", this.stateDir, ...flags],
			{ stdio: ["ignore", log, log] },
		);
		fs.closeSync(log);
		this.exited = once(this.proc, "exit");
		const deadline = Date.now() + 30000;
		for (;;) {
			if (this.proc.exitCode !== null)
				throw new Error(`sandboxd exited during startup:\n${this.logTail()}`);
			try {
				if ((await fetch(`${this.url}/health`)).ok) return;
			} catch {}
			if (Date.now() > deadline) {
				this.proc.kill("SIGKILL");
				throw new Error(`sandboxd did not answer /health in 30 s:\n${this.logTail()}`);
			}
			await new Promise((r) => setTimeout(r, 50));
		}
	}

	logTail(lines = 40) {
		try {
			return fs.readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
		} catch {
			return "(no log)";
		}
	}

	// A connected SDK client; query: the /mcp URL's query string.
	async connect(query = "") {
		const client = new Client({ name: "sandboxd-tests", version: "1.0.0" });
		const transport = new StreamableHTTPClientTransport(new URL(`${this.url}/mcp${query}`));
		await client.connect(transport);
		return { client, transport };
	}

	// SIGTERM; the daemon must exit with status 0.
	async stop() {
		let problem = null;
		if (this.proc.exitCode === null && this.proc.signalCode === null) {
			this.proc.kill("SIGTERM");
			const timer = setTimeout(() => this.proc.kill("SIGKILL"), 15000);
			const [code, signal] = await this.exited;
			clearTimeout(timer);
			if (code !== 0) problem = `sandboxd exited with ${code ?? signal} at stop:\n${this.logTail()}`;
		} else {
			problem = `sandboxd died during the tests (${this.proc.exitCode ?? this.proc.signalCode}):\n${this.logTail()}`;
		}
		const left = mountsUnder(this.base);
		if (left.length) problem = `${problem ?? ""}\nmounts left under ${this.base}: ${left.join(", ")}`;
		else if (!problem) fs.rmSync(this.base, { recursive: true, force: true });
		if (problem) throw new Error(problem);
	}
}

// The text of a tool result's first content item.
export function text(result) {
	const t = result.content.find((c) => c.type === "text");
	return t ? t.text : undefined;
}
