// The harness of the Cloudflare-protocol suite: one real sandboxd per test
// file (its own loopback port and temporary state dir), and the official
// SandboxClient pointed at one of its sandboxes. Tests talk to the daemon
// only through that client; what they check is what a user of the SDK sees.
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

import { SandboxClient } from "@cloudflare/sandbox";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SBX_BIN =
	process.env.SBX_BIN || path.resolve(HERE, "../../build/sandboxd");

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
		this.base = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-cf-"));
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

	// The official client for sandbox `id` of this daemon.
	client(id) {
		return new SandboxClient({
			baseUrl: `${this.url}/v1/sandbox/${id}`,
			// sandboxd never answers 503 for a container that is starting
			retryTimeoutMs: 1000,
		});
	}

	// SIGTERM; the daemon must exit with status 0 and leave no mount behind.
	async stop() {
		let problem = null;
		if (this.proc.exitCode === null && this.proc.signalCode === null) {
			this.proc.kill("SIGTERM");
			const timer = setTimeout(() => this.proc.kill("SIGKILL"), 15000);
			const [code, signal] = await this.exited;
			clearTimeout(timer);
			if (code !== 0)
				problem = `sandboxd exited with ${code ?? signal} at stop:\n${this.logTail()}`;
		} else {
			problem = `sandboxd died during the tests (${this.proc.exitCode ?? this.proc.signalCode}):\n${this.logTail()}`;
		}
		const left = mountsUnder(this.base);
		if (left.length)
			problem = `${problem ?? ""}\nmounts left under ${this.base}: ${left.join(", ")}`;
		else if (!problem) // kept for a look when something went wrong
			fs.rmSync(this.base, { recursive: true, force: true });
		if (problem) throw new Error(problem);
	}
}

// A sandbox id unique to this process (and readable in the daemon's log).
let counter = 0;
export function sandboxId(stem) {
	return `${stem}-${process.pid}-${++counter}`.toLowerCase().replace(/[^a-z0-9-]/g, "-");
}

// All events of an SSE stream, parsed by the package's own parser.
export async function collect(parse, stream) {
	const events = [];
	for await (const ev of parse(stream)) events.push(ev);
	return events;
}

// The package maps the protocol's error codes to classes that it does not
// export; a user tells them apart by name (err.name, set by each class).
export async function rejectsAs(promise, name, code, httpStatus) {
	let err;
	try {
		await promise;
	} catch (e) {
		err = e;
	}
	if (!err) throw new Error(`expected ${name} (${code}), but the call succeeded`);
	if (err.name !== name || err.code !== code || (httpStatus && err.httpStatus !== httpStatus))
		throw new Error(
			`expected ${name} ${code} ${httpStatus ?? ""}, got ${err.name} ${err.code} ${err.httpStatus}: ${err.message}`,
		);
	return err;
}
