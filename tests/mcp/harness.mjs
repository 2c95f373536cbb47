// The harness of the MCP suite: one real sandboxd per test file (its own
// loopback port and temporary state dir), and the official MCP TypeScript
// SDK client (@modelcontextprotocol/sdk, pinned by package-lock.json)
// connected to its /mcp over the Streamable HTTP transport. What the tests
// check is what an agent using the SDK sees.
//
// The daemon itself is tests/lib/daemon.mjs's, shared with the other node
// suites; SBX_BIN names its binary (scripts/run-tests sets it).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { Daemon as SandboxDaemon } from "../lib/daemon.mjs";

export class Daemon extends SandboxDaemon {
	static start(flags = []) {
		return super.start(flags, { stem: "sbx-mcp-" });
	}

	// A connected SDK client; query: the /mcp URL's query string.
	async connect(query = "") {
		const client = new Client({ name: "sandboxd-tests", version: "1.0.0" });
		const transport = new StreamableHTTPClientTransport(new URL(`${this.url}/mcp${query}`));
		await client.connect(transport);
		return { client, transport };
	}
}

// The text of a tool result's first content item.
export function text(result) {
	const t = result.content.find((c) => c.type === "text");
	return t ? t.text : undefined;
}
