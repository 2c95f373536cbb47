// Files through the official client: files.writeFile / readFile (text as
// UTF-8, binary as base64), readFileStream (with the package's streamFile
// and collectFile), deleteFile, renameFile, moveFile, mkdir, listFiles,
// exists. Paths are anywhere in the sandbox, or relative to the session.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";

import { collectFile, streamFile } from "@cloudflare/sandbox";

import { Daemon, rejectsAs, sandboxId } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

const sha = async (c, path) =>
	(await c.commands.execute(`sha256sum < '${path}'`)).stdout.split(" ")[0];
const hostSha = async (buf) => {
	const { createHash } = await import("node:crypto");
	return createHash("sha256").update(buf).digest("hex");
};

describe("write and read", () => {
	it("round-trips text, as UTF-8, with its type", async () => {
		const c = daemon.client(sandboxId("rw-text"));
		const text = "héllo wörld — ✓ 😀\nline 2\n";
		const w = await c.files.writeFile("/workspace/notes/hello.txt", text);
		assert.equal(w.success, true);
		assert.equal(w.path, "/workspace/notes/hello.txt");
		const r = await c.files.readFile("/workspace/notes/hello.txt");
		assert.equal(r.content, text);
		assert.equal(r.encoding, "utf-8");
		assert.equal(r.isBinary, false);
		assert.equal(r.mimeType, "text/plain");
		assert.equal(r.size, Buffer.byteLength(text));
		// what the sandbox sees
		assert.equal((await c.commands.execute("cat notes/hello.txt")).stdout, text);
	});

	it("round-trips binary as base64, detected from the bytes", async () => {
		const c = daemon.client(sandboxId("rw-bin"));
		const bytes = randomBytes(70000);
		bytes[0] = 0; // not text
		await c.files.writeFile("blob", bytes.toString("base64"), undefined, { encoding: "base64" });
		const r = await c.files.readFile("blob");
		assert.equal(r.encoding, "base64");
		assert.equal(r.isBinary, true);
		assert.equal(r.mimeType, "application/octet-stream");
		assert.equal(r.size, bytes.length);
		assert.ok(Buffer.from(r.content, "base64").equals(bytes));
		assert.equal(await sha(c, "/workspace/blob"), await hostSha(bytes));
	});

	it("types files by extension, then by magic numbers", async () => {
		const c = daemon.client(sandboxId("rw-types"));
		const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
		await c.files.writeFile("img.dat", png.toString("base64"), undefined, { encoding: "base64" });
		await c.files.writeFile("pic.png", "not really a png");
		await c.files.writeFile("data.json", '{"a":1}');
		await c.files.writeFile("empty", "");
		const img = await c.files.readFile("img.dat");
		assert.equal(img.mimeType, "image/png");
		assert.ok(Buffer.from(img.content, "base64").equals(png));
		const pic = await c.files.readFile("pic.png");
		assert.deepEqual([pic.mimeType, pic.encoding], ["image/png", "base64"]);
		assert.equal(Buffer.from(pic.content, "base64").toString(), "not really a png");
		const json = await c.files.readFile("data.json");
		assert.deepEqual([json.mimeType, json.encoding, json.content], ["application/json", "utf-8", '{"a":1}']);
		const empty = await c.files.readFile("empty");
		assert.deepEqual([empty.content, empty.encoding, empty.size], ["", "utf-8", 0]);
	});

	it("reads with the encoding asked for", async () => {
		const c = daemon.client(sandboxId("rw-enc"));
		await c.files.writeFile("t.txt", "plain");
		const r = await c.files.readFile("t.txt", undefined, { encoding: "base64" });
		assert.equal(r.encoding, "base64");
		assert.equal(Buffer.from(r.content, "base64").toString(), "plain");
	});

	it("replaces a file whole, keeping its mode", async () => {
		const c = daemon.client(sandboxId("rw-replace"));
		await c.files.writeFile("run.sh", "#!/bin/sh\necho one\n");
		await c.commands.execute("chmod 755 run.sh");
		await c.files.writeFile("run.sh", "#!/bin/sh\necho two\n");
		assert.equal((await c.commands.execute("./run.sh")).stdout, "two\n");
	});

	it("moves 10 MiB both ways, whole and streamed", async () => {
		const c = daemon.client(sandboxId("rw-big"));
		const bytes = randomBytes(10 << 20);
		const w = await c.files.writeFile("/workspace/big.bin", bytes.toString("base64"), undefined, {
			encoding: "base64",
		});
		assert.equal(w.success, true);
		assert.equal(await sha(c, "/workspace/big.bin"), await hostSha(bytes));

		const r = await c.files.readFile("/workspace/big.bin");
		assert.equal(r.size, bytes.length);
		assert.ok(Buffer.from(r.content, "base64").equals(bytes));

		const { content, metadata } = await collectFile(await c.files.readFileStream("/workspace/big.bin"));
		assert.equal(metadata.isBinary, true);
		assert.equal(metadata.encoding, "base64");
		assert.equal(metadata.size, bytes.length);
		assert.ok(Buffer.from(content).equals(bytes));
	});

	it("streams text in chunks of whole characters", async () => {
		const c = daemon.client(sandboxId("rw-stream-text"));
		const text = "aé€😀".repeat(40000) + "\n"; // 400 KiB, multibyte across chunk edges
		await c.files.writeFile("/tmp/long.txt", text);
		const chunks = [];
		let meta;
		const gen = streamFile(await c.files.readFileStream("/tmp/long.txt"));
		for (;;) {
			const { value, done } = await gen.next();
			if (done) {
				meta = value;
				break;
			}
			chunks.push(value);
		}
		assert.deepEqual(meta, {
			mimeType: "text/plain",
			size: Buffer.byteLength(text),
			isBinary: false,
			encoding: "utf-8",
		});
		assert.ok(chunks.length > 1);
		for (const ch of chunks) {
			assert.equal(typeof ch, "string");
			assert.ok(!ch.includes("\ufffd"));
		}
		assert.equal(chunks.join(""), text);
	});

	it("streams a small file and an empty one", async () => {
		const c = daemon.client(sandboxId("rw-stream-small"));
		await c.files.writeFile("s.txt", "tiny");
		await c.files.writeFile("e", "");
		assert.deepEqual(await collectFile(await c.files.readFileStream("s.txt")), {
			content: "tiny",
			metadata: { mimeType: "text/plain", size: 4, isBinary: false, encoding: "utf-8" },
		});
		const e = await collectFile(await c.files.readFileStream("e"));
		assert.equal(e.content, "");
		assert.equal(e.metadata.size, 0);
	});

	it("reaches anywhere in the sandbox, through absolute links too", async () => {
		const c = daemon.client(sandboxId("rw-anywhere"));
		assert.equal((await c.files.readFile("/etc/hostname")).content, "sandbox\n");
		await c.commands.execute("mkdir -p /opt/data && ln -s /opt/data /workspace/link");
		await c.files.writeFile("/workspace/link/through.txt", "via link");
		assert.equal((await c.files.readFile("/opt/data/through.txt")).content, "via link");
		// .. never climbs out of the sandbox's root
		assert.equal((await c.files.readFile("/workspace/../../../etc/hostname")).content, "sandbox\n");
	});

	it("never touches the host's files", async () => {
		const c = daemon.client(sandboxId("rw-host"));
		// the daemon's state dir and the host's /etc exist only outside
		assert.equal((await c.files.exists(daemon.stateDir)).exists, false);
		await c.commands.execute("ln -s / /workspace/root");
		const r = await c.files.readFile("/workspace/root/etc/passwd");
		// the sandbox's own passwd, whatever the host's says
		assert.equal(r.content, (await c.commands.execute("cat /etc/passwd")).stdout);
		assert.notEqual(r.content, fs.readFileSync("/etc/passwd", "utf8"));
	});
});

describe("tree operations", () => {
	it("mkdir: one level, or recursive", async () => {
		const c = daemon.client(sandboxId("mkdir"));
		const m = await c.files.mkdir("/workspace/a/b/c", undefined, { recursive: true });
		assert.deepEqual([m.success, m.recursive], [true, true]);
		await c.files.mkdir("/workspace/a/b/c", undefined, { recursive: true }); // again: fine
		await c.files.mkdir("single");
		assert.equal((await c.commands.execute("test -d a/b/c && test -d single && echo yes")).stdout, "yes\n");
		await rejectsAs(c.files.mkdir("x/y"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
		await rejectsAs(c.files.mkdir("single"), "FileExistsError", "FILE_EXISTS", 409);
		await c.files.writeFile("plain", "f");
		await rejectsAs(c.files.mkdir("plain", undefined, { recursive: true }), "FileExistsError", "FILE_EXISTS");
	});

	it("listFiles gives FileInfo, one level or the tree, hidden names on request", async () => {
		const c = daemon.client(sandboxId("list"));
		await c.commands.execute(
			"mkdir -p proj/src/.cache proj/.git && echo hi > proj/src/main.c && " +
				"echo x > proj/.env && echo y > proj/src/.cache/z && chmod 751 proj/src && " +
				"ln -s src/main.c proj/link && touch -d '2024-01-02T03:04:05Z' proj/src/main.c",
		);
		const top = await c.files.listFiles("/workspace/proj");
		assert.equal(top.success, true);
		assert.equal(top.path, "/workspace/proj");
		assert.deepEqual(
			top.files.map((f) => [f.name, f.type]),
			[
				["link", "symlink"],
				["src", "directory"],
			],
		);
		assert.equal(top.count, 2);
		const src = top.files[1];
		assert.equal(src.absolutePath, "/workspace/proj/src");
		assert.equal(src.relativePath, "src");
		assert.equal(src.mode, "rwxr-x--x");
		assert.deepEqual(src.permissions, { readable: true, writable: true, executable: true });

		const tree = await c.files.listFiles("proj", undefined, { recursive: true });
		assert.deepEqual(
			tree.files.map((f) => f.relativePath),
			["link", "src", "src/main.c"],
		);
		const main = tree.files[2];
		assert.deepEqual(
			[main.name, main.absolutePath, main.type, main.size, main.mode, main.modifiedAt],
			["main.c", "/workspace/proj/src/main.c", "file", 3, "rw-r--r--", "2024-01-02T03:04:05.000Z"],
		);
		assert.deepEqual(main.permissions, { readable: true, writable: true, executable: false });

		const all = await c.files.listFiles("proj", undefined, { recursive: true, includeHidden: true });
		assert.deepEqual(
			all.files.map((f) => f.relativePath),
			[".env", ".git", "link", "src", "src/.cache", "src/.cache/z", "src/main.c"],
		);
	});

	it("listFiles of a file or of nothing is an error", async () => {
		const c = daemon.client(sandboxId("list-err"));
		await c.files.writeFile("f.txt", "x");
		await rejectsAs(c.files.listFiles("f.txt"), "FileSystemError", "NOT_DIRECTORY", 400);
		await rejectsAs(c.files.listFiles("missing"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
	});

	it("exists tells files, directories and nothing apart from errors", async () => {
		const c = daemon.client(sandboxId("exists"));
		await c.files.writeFile("yes.txt", "1");
		const y = await c.files.exists("yes.txt");
		assert.deepEqual([y.success, y.exists], [true, true]);
		assert.equal((await c.files.exists("/workspace")).exists, true);
		assert.equal((await c.files.exists("no.txt")).exists, false);
		assert.equal((await c.files.exists("yes.txt/below")).exists, false);
	});

	it("renameFile and moveFile (into a directory, as mv)", async () => {
		const c = daemon.client(sandboxId("mv"));
		await c.files.writeFile("one.txt", "1");
		const r = await c.files.renameFile("one.txt", "two.txt");
		assert.deepEqual([r.success, r.path, r.newPath], [true, "one.txt", "two.txt"]);
		assert.equal((await c.files.exists("one.txt")).exists, false);
		assert.equal((await c.files.readFile("two.txt")).content, "1");

		await c.files.mkdir("dest");
		const m = await c.files.moveFile("two.txt", "/workspace/dest");
		assert.equal(m.success, true);
		assert.equal((await c.files.readFile("dest/two.txt")).content, "1");
		await c.files.moveFile("dest/two.txt", "/tmp/three.txt");
		assert.equal((await c.files.readFile("/tmp/three.txt")).content, "1");
		// directories move too
		await c.files.moveFile("dest", "/tmp/dest2");
		assert.equal((await c.files.exists("/tmp/dest2")).exists, true);
		await rejectsAs(c.files.renameFile("nothing", "x"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
	});

	it("deleteFile removes files, not directories", async () => {
		const c = daemon.client(sandboxId("rm"));
		await c.files.writeFile("d/f.txt", "x");
		const d = await c.files.deleteFile("d/f.txt");
		assert.deepEqual([d.success, d.path], [true, "d/f.txt"]);
		assert.equal((await c.files.exists("d/f.txt")).exists, false);
		await rejectsAs(c.files.deleteFile("d"), "FileSystemError", "IS_DIRECTORY", 400);
		await rejectsAs(c.files.deleteFile("d/f.txt"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
		// a link is removed, not what it points to
		await c.commands.execute("echo keep > /tmp/target && ln -s /tmp/target lnk");
		await c.files.deleteFile("lnk");
		assert.equal((await c.files.readFile("/tmp/target")).content, "keep\n");
	});
});
