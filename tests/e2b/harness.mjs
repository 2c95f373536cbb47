// The harness of the E2B suite: one real sandboxd per test file (its own
// loopback port and temporary state dir), and the official e2b SDKs
// pointed at it the way a user does: E2B_API_URL and E2B_SANDBOX_URL at
// the daemon, E2B_API_KEY an e2b_<hex> key. Tests talk to the daemon only
// through the SDKs (or plain fetch where they check what the SDKs send).
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

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SBX_BIN =
	process.env.SBX_BIN || path.resolve(HERE, "../../build/sandboxd");
export const API_KEY = "e2b_0123456789abcdef0123456789abcdef01234567";

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
	// flags: extra sandboxd flags; tokens: lines of a tokens file
	static async start(flags = [], tokens = null) {
		const d = new Daemon();
		await d.#start(flags, tokens);
		return d;
	}

	async #start(flags, tokens) {
		fs.accessSync(SBX_BIN, fs.constants.X_OK);
		this.base = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-e2b-"));
		this.stateDir = path.join(this.base, "state");
		fs.mkdirSync(this.stateDir, { mode: 0o700 });
		if (tokens) {
			const tf = path.join(this.base, "tokens");
			fs.writeFileSync(tf, tokens.join("\n") + "\n", { mode: 0o600 });
			flags = [...flags, "--tokens", tf];
		}
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
				if ((await fetch(`${this.url}/health`)).ok) break;
			} catch {}
			if (Date.now() > deadline) {
				this.proc.kill("SIGKILL");
				throw new Error(`sandboxd did not answer /health in 30 s:\n${this.logTail()}`);
			}
			await new Promise((r) => setTimeout(r, 50));
		}
		// what a user exports (README); the SDKs read them
		process.env.E2B_API_URL = this.url;
		process.env.E2B_SANDBOX_URL = this.url;
		process.env.E2B_API_KEY = API_KEY;
	}

	logTail(lines = 40) {
		try {
			return fs.readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
		} catch {
			return "(no log)";
		}
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
		else if (!problem)
			fs.rmSync(this.base, { recursive: true, force: true });
		if (problem) throw new Error(problem);
	}
}

// The error a promise rejects with (fails when it resolves).
export async function rejection(promise) {
	try {
		await promise;
	} catch (e) {
		return e;
	}
	throw new Error("expected a rejection, but the call succeeded");
}

// Poll pred (async) until it is true or timeoutMs passes; returns its last value.
export async function waitFor(pred, timeoutMs = 15000, everyMs = 50) {
	const end = Date.now() + timeoutMs;
	for (;;) {
		const v = await pred();
		if (v || Date.now() > end) return v;
		await new Promise((r) => setTimeout(r, everyMs));
	}
}
