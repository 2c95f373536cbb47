// The harness of the E2B suite: one real sandboxd per test file (its own
// loopback port and temporary state dir), and the official e2b SDKs
// pointed at it the way a user does: E2B_API_URL and E2B_SANDBOX_URL at
// the daemon, E2B_API_KEY an e2b_<hex> key. Tests talk to the daemon only
// through the SDKs (or plain fetch where they check what the SDKs send).
//
// The daemon itself is tests/lib/daemon.mjs's, shared with the other node
// suites; SBX_BIN names its binary (scripts/run-tests sets it).
import { Daemon as SandboxDaemon } from "../lib/daemon.mjs";

export const API_KEY = "e2b_0123456789abcdef0123456789abcdef01234567";

export class Daemon extends SandboxDaemon {
	// flags: extra sandboxd flags; tokens: lines of a tokens file
	static async start(flags = [], tokens = null) {
		const d = await super.start(flags, { tokens, stem: "sbx-e2b-" });
		// what a user exports (README); the SDKs read them
		process.env.E2B_API_URL = d.url;
		process.env.E2B_SANDBOX_URL = d.url;
		process.env.E2B_API_KEY = API_KEY;
		return d;
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
