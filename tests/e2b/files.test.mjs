// files through the official e2b SDK: envd's /files (multipart and
// octet-stream with gzip) and filesystem.Filesystem (list with depth,
// stat, mkdir, move, remove, watchDir), as user and as root.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, it } from "node:test";

import {
	CommandExitError,
	FileNotFoundError,
	FilesystemEventType,
	InvalidArgumentError,
	Sandbox,
	SandboxError,
} from "e2b";

import { Daemon, rejection, waitFor } from "./harness.mjs";

let daemon, sbx;
before(async () => {
	daemon = await Daemon.start();
	sbx = await Sandbox.create();
});
after(async () => {
	await sbx?.kill();
	await daemon?.stop();
});

describe("read and write", () => {
	it("writes and reads text, relative paths from the user's home", async () => {
		const info = await sbx.files.write("notes/today.txt", "hello\nworld\n");
		assert.equal(info.path, "/home/user/notes/today.txt");
		assert.equal(info.name, "today.txt");
		assert.equal(await sbx.files.read("/home/user/notes/today.txt"), "hello\nworld\n");
		const ls = (await sbx.commands.run("stat -c '%U %s' /home/user/notes/today.txt")).stdout;
		assert.equal(ls, "user 12\n");
	});

	it("round-trips every byte value", async () => {
		const data = new Uint8Array(256 * 4);
		for (let i = 0; i < data.length; i++) data[i] = i % 256;
		await sbx.files.write("/tmp/bin.dat", data);
		const back = await sbx.files.read("/tmp/bin.dat", { format: "bytes" });
		assert.deepEqual(Buffer.from(back), Buffer.from(data));
		const sum = (await sbx.commands.run("sha256sum /tmp/bin.dat")).stdout.split(" ")[0];
		assert.equal(sum, crypto.createHash("sha256").update(data).digest("hex"));
	});

	it("writes 100 MB and reads it back whole", async () => {
		const big = crypto.randomBytes(100 * 1024 * 1024);
		const want = crypto.createHash("sha256").update(big).digest("hex");
		await sbx.files.write("/tmp/big.bin", big);
		const sum = (await sbx.commands.run("sha256sum /tmp/big.bin")).stdout.split(" ")[0];
		assert.equal(sum, want);
		const back = await sbx.files.read("/tmp/big.bin", { format: "bytes" });
		assert.equal(back.length, big.length);
		assert.equal(crypto.createHash("sha256").update(back).digest("hex"), want);
		await sbx.files.remove("/tmp/big.bin");
	});

	it("octet-stream and gzip uploads land as the bytes sent", async () => {
		const text = "compressed? ".repeat(10000);
		await sbx.files.write("/tmp/gz.txt", text, { gzip: true });
		assert.equal(await sbx.files.read("/tmp/gz.txt"), text);
		await sbx.files.write("/tmp/raw.txt", "raw body", { useOctetStream: true });
		assert.equal(await sbx.files.read("/tmp/raw.txt"), "raw body");
	});

	it("writes several files in one request", async () => {
		const infos = await sbx.files.write([
			{ path: "/tmp/multi/a.txt", data: "A" },
			{ path: "/tmp/multi/b.txt", data: "B" },
		]);
		assert.deepEqual(infos.map((i) => i.path), ["/tmp/multi/a.txt", "/tmp/multi/b.txt"]);
		assert.equal(await sbx.files.read("/tmp/multi/b.txt"), "B");
	});

	it("a missing file is FileNotFoundError; a directory is InvalidArgumentError", async () => {
		assert.ok((await rejection(sbx.files.read("/tmp/nope.txt"))) instanceof FileNotFoundError);
		assert.ok((await rejection(sbx.files.read("/tmp"))) instanceof InvalidArgumentError);
	});

	it("user cannot write where only root may; root can", async () => {
		const err = await rejection(sbx.files.write("/etc/e2b-test", "x"));
		assert.ok(err instanceof SandboxError, err.stack);
		await sbx.files.write("/etc/e2b-test", "x", { user: "root" });
		assert.equal(await sbx.files.read("/etc/e2b-test", { user: "root" }), "x");
	});
});

describe("filesystem", () => {
	it("lists with depth, stats, checks existence", async () => {
		await sbx.files.write("/tmp/tree/a/b/c.txt", "deep");
		await sbx.files.write("/tmp/tree/top.txt", "top");
		const one = await sbx.files.list("/tmp/tree");
		assert.deepEqual(one.map((e) => `${e.type} ${e.path}`).sort(), [
			"dir /tmp/tree/a",
			"file /tmp/tree/top.txt",
		]);
		const two = await sbx.files.list("/tmp/tree", { depth: 2 });
		assert.deepEqual(two.map((e) => e.path).sort(), [
			"/tmp/tree/a",
			"/tmp/tree/a/b",
			"/tmp/tree/top.txt",
		]);
		const info = await sbx.files.getInfo("/tmp/tree/top.txt");
		assert.equal(info.size, 3);
		assert.equal(info.type, "file");
		assert.equal(info.name, "top.txt");
		assert.ok(info.modifiedTime instanceof Date);
		assert.equal(await sbx.files.exists("/tmp/tree/top.txt"), true);
		assert.equal(await sbx.files.exists("/tmp/tree/none"), false);
		assert.ok((await rejection(sbx.files.list("/tmp/tree/top.txt"))) instanceof InvalidArgumentError);
	});

	it("makeDir is true when made, false when it existed", async () => {
		assert.equal(await sbx.files.makeDir("/tmp/made/x/y"), true);
		assert.equal(await sbx.files.makeDir("/tmp/made/x/y"), false);
		assert.equal((await sbx.files.getInfo("/tmp/made/x/y")).type, "dir");
	});

	it("rename moves and returns the new entry; remove deletes trees", async () => {
		await sbx.files.write("/tmp/mv/from.txt", "moving");
		const e = await sbx.files.rename("/tmp/mv/from.txt", "/tmp/mv/to.txt");
		assert.equal(e.path, "/tmp/mv/to.txt");
		assert.equal(await sbx.files.read("/tmp/mv/to.txt"), "moving");
		assert.equal(await sbx.files.exists("/tmp/mv/from.txt"), false);
		await sbx.files.remove("/tmp/mv");
		assert.equal(await sbx.files.exists("/tmp/mv"), false);
		const err = await rejection(sbx.files.remove("/tmp/mv"));
		assert.ok(err instanceof SandboxError, err.stack);
	});
});

describe("watchDir", () => {
	it("reports create, write, rename and remove, recursively", async () => {
		await sbx.files.makeDir("/home/user/w/sub");
		const events = [];
		const h = await sbx.files.watchDir("/home/user/w", (e) => events.push(e), {
			recursive: true,
		});
		try {
			await sbx.commands.run(
				"cd /home/user/w && echo 1 > f.txt && echo 2 >> f.txt && mv f.txt g.txt && rm g.txt && touch sub/deep.txt",
			);
			const has = (type, name) => events.some((e) => e.type === type && e.name === name);
			assert.ok(await waitFor(() => has(FilesystemEventType.CREATE, "sub/deep.txt")), JSON.stringify(events));
			assert.ok(has(FilesystemEventType.CREATE, "f.txt"), JSON.stringify(events));
			assert.ok(has(FilesystemEventType.WRITE, "f.txt"), JSON.stringify(events));
			assert.ok(has(FilesystemEventType.RENAME, "f.txt"), JSON.stringify(events));
			assert.ok(has(FilesystemEventType.REMOVE, "g.txt"), JSON.stringify(events));
		} finally {
			await h.stop();
		}
	});

	it("a missing directory fails the watch", async () => {
		const err = await rejection(sbx.files.watchDir("/home/user/nowhere", () => {}));
		assert.ok(err instanceof SandboxError, err.stack);
	});
});
