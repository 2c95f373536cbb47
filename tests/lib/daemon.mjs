// The real sandboxd for the node suites (tests/cf, tests/mcp, tests/e2b):
// one daemon on a free loopback port with its own temporary state dir,
// started before a test file and stopped after it. Each suite's harness.mjs
// extends Daemon with what its client needs (an SDK client, a connection,
// environment variables) and keeps its own helpers.
//
// Only Node's own modules: the suites' package.json files pin their clients,
// this module needs none.
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
export const SBX_BIN = process.env.SBX_BIN || path.resolve(HERE, "../../build/sandboxd");

// A loopback port that was free a moment ago.
export async function freePort() {
	const srv = net.createServer();
	srv.listen(0, "127.0.0.1");
	await once(srv, "listening");
	const { port } = srv.address();
	srv.close();
	await once(srv, "close");
	return port;
}

// The mount points at or below dir.
export function mountsUnder(dir) {
	const prefix = `${dir.replace(/\/$/, "")}/`;
	return fs
		.readFileSync("/proc/self/mountinfo", "utf8")
		.split("\n")
		.map((l) => l.split(" ")[4]?.replace(/\\040/g, " "))
		.filter((m) => m && (m === dir || m.startsWith(prefix)));
}

export class Daemon {
	// flags: extra sandboxd flags; tokens: lines of a tokens file (passed as
	// --tokens); stem: the temporary dir's name prefix (which suite left it).
	// A subclass's start returns an instance of that subclass.
	static async start(flags = [], { tokens = null, stem = "sbx-" } = {}) {
		const d = new this();
		await d.#start(flags, tokens, stem);
		return d;
	}

	async #start(flags, tokens, stem) {
		fs.accessSync(SBX_BIN, fs.constants.X_OK);
		this.base = fs.mkdtempSync(path.join(os.tmpdir(), stem));
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

	// SIGTERM; the daemon must exit with status 0 and leave no mount behind.
	// The temporary dir is removed, or kept for a look when something went
	// wrong.
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
