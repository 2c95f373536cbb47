// The harness of the Cloudflare-protocol suite: one real sandboxd per test
// file (its own loopback port and temporary state dir), and the official
// SandboxClient pointed at one of its sandboxes. Tests talk to the daemon
// only through that client; what they check is what a user of the SDK sees.
//
// The daemon itself is tests/lib/daemon.mjs's, shared with the other node
// suites; SBX_BIN names its binary (scripts/run-tests sets it).
import { SandboxClient } from "@cloudflare/sandbox";

import { Daemon as SandboxDaemon } from "../lib/daemon.mjs";

export class Daemon extends SandboxDaemon {
	static start(flags = []) {
		return super.start(flags, { stem: "sbx-cf-" });
	}

	// The official client for sandbox `id` of this daemon.
	client(id) {
		return new SandboxClient({
			baseUrl: `${this.url}/v1/sandbox/${id}`,
			// sandboxd never answers 503 for a container that is starting
			retryTimeoutMs: 1000,
		});
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
