// The protocol's errors as the official client sees them: each error class
// the package maps from sandboxd's codes, the error body's shape, the code
// interpreter's errors (interpreter.test.mjs has the rest), and what has
// no route (port watch, backups, watches).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { SandboxClient } from "@cloudflare/sandbox";

import { Daemon, rejectsAs, sandboxId } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

describe("error classes", () => {
	it("carry the protocol's shape: code, message, context, httpStatus, timestamp", async () => {
		const c = daemon.client(sandboxId("err-shape"));
		const err = await rejectsAs(c.files.readFile("/nowhere/file"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
		assert.match(err.message, /\/nowhere\/file/);
		assert.equal(err.context.path, "/nowhere/file");
		assert.ok(!Number.isNaN(Date.parse(err.timestamp)));
		assert.equal(err.errorResponse.httpStatus, 404);
	});

	it("files: FileNotFound, FileExists, FileTooLarge, PermissionDenied, FileSystem", async () => {
		const c = daemon.client(sandboxId("err-files"));
		await rejectsAs(c.files.deleteFile("/workspace/none"), "FileNotFoundError", "FILE_NOT_FOUND", 404);
		await c.files.mkdir("dir");
		await rejectsAs(c.files.mkdir("dir"), "FileExistsError", "FILE_EXISTS", 409);
		// what readFile carries is limited (as in the container); the stream is not
		await c.commands.execute("head -c 33M /dev/zero > /workspace/huge");
		const big = await rejectsAs(c.files.readFile("huge"), "FileTooLargeError", "FILE_TOO_LARGE", 413);
		assert.equal(big.context.maxSize, 32 << 20);
		// the sandbox's root has no capability to pass over file modes
		await c.commands.execute("echo s > secret && chmod 000 secret && mkdir ro && chmod 555 ro");
		await rejectsAs(c.files.readFile("secret"), "PermissionDeniedError", "PERMISSION_DENIED", 403);
		await rejectsAs(c.files.writeFile("ro/x", "x"), "PermissionDeniedError", "PERMISSION_DENIED", 403);
		await rejectsAs(c.files.readFile("dir"), "FileSystemError", "IS_DIRECTORY", 400);
		await c.files.writeFile("f", "x");
		await rejectsAs(c.files.listFiles("f"), "FileSystemError", "NOT_DIRECTORY", 400);
		await rejectsAs(
			c.files.readFileStream("/workspace/none"),
			"FileNotFoundError",
			"FILE_NOT_FOUND",
			404,
		);
		await rejectsAs(c.files.readFileStream("dir"), "FileSystemError", "IS_DIRECTORY", 400);
	});

	it("commands: CommandError for an empty command", async () => {
		const c = daemon.client(sandboxId("err-cmd"));
		await rejectsAs(c.commands.execute(""), "CommandError", "INVALID_COMMAND", 400);
		await rejectsAs(c.commands.executeStream(""), "CommandError", "INVALID_COMMAND", 400);
	});

	it("requests: ValidationFailedError for what cannot be right", async () => {
		const c = daemon.client(sandboxId("err-valid"));
		await rejectsAs(
			c.commands.execute("true", undefined, { env: { "1-bad": "x" } }),
			"ValidationFailedError",
			"VALIDATION_FAILED",
			400,
		);
		await rejectsAs(
			c.files.writeFile("w", "abc", undefined, { encoding: "hex" }),
			"ValidationFailedError",
			"VALIDATION_FAILED",
		);
		await rejectsAs(
			c.files.writeFile("w", "!!not base64!!", undefined, { encoding: "base64" }),
			"ValidationFailedError",
			"VALIDATION_FAILED",
		);
		await rejectsAs(c.files.readFile(""), "ValidationFailedError", "VALIDATION_FAILED");
		await rejectsAs(c.files.readFile("a\u0001b"), "ValidationFailedError", "VALIDATION_FAILED");
		const bad = daemon.client("Not_A_Valid_Id");
		await rejectsAs(bad.commands.execute("true"), "ValidationFailedError", "VALIDATION_FAILED", 400);
	});

	it("sessions, processes and git have theirs (see their own tests too)", async () => {
		const c = daemon.client(sandboxId("err-misc"));
		await c.utils.createSession({ id: "s" });
		await rejectsAs(c.utils.createSession({ id: "s" }), "SessionAlreadyExistsError", "SESSION_ALREADY_EXISTS", 409);
		await rejectsAs(c.processes.getProcess("p"), "ProcessNotFoundError", "PROCESS_NOT_FOUND", 404);
		await rejectsAs(c.git.checkout("https://example.com/r.git"), "GitNetworkError", "GIT_NETWORK_ERROR", 502);
	});
});

describe("code interpreter", () => {
	it("ContextNotFound, ValidationFailed, and not available only when the runtime is missing", async () => {
		const c = daemon.client(sandboxId("interp"));
		const nf = await rejectsAs(
			c.interpreter.runCodeStream("ctx", "print(1)", "python", {}),
			"ContextNotFoundError",
			"CONTEXT_NOT_FOUND",
			404,
		);
		assert.equal(nf.contextId, "ctx");
		await rejectsAs(c.interpreter.streamCode("ctx", "1"), "ContextNotFoundError", "CONTEXT_NOT_FOUND", 404);
		await rejectsAs(c.interpreter.deleteCodeContext("ctx"), "ContextNotFoundError", "CONTEXT_NOT_FOUND", 404);
		assert.deepEqual(await c.interpreter.listCodeContexts(), []);
		// the raw client sends what it is given; the CodeInterpreter checks first
		await rejectsAs(
			c.interpreter.createCodeContext({ language: "ruby" }),
			"ValidationFailedError",
			"VALIDATION_FAILED",
			400,
		);
		const py = await c.interpreter.createCodeContext({ language: "python" });
		const mix = await rejectsAs(
			c.interpreter.streamCode(py.id, "1", "javascript"),
			"ValidationFailedError",
			"VALIDATION_FAILED",
			400,
		);
		assert.match(mix.message, /created for python, cannot execute javascript/);
		const cwd = await rejectsAs(
			c.interpreter.createCodeContext({ cwd: "/workspace/none" }),
			"FileNotFoundError",
			"FILE_NOT_FOUND",
			404,
		);
		assert.equal(cwd.context.path, "/workspace/none");
		// a runtime that is not on the context's PATH is missing
		const nopy = await rejectsAs(
			c.interpreter.createCodeContext({ language: "python", envVars: { PATH: "/nowhere" } }),
			"SandboxError",
			"PYTHON_NOT_AVAILABLE",
			501,
		);
		assert.match(nopy.message, /python3/);
		const nojs = await rejectsAs(
			c.interpreter.createCodeContext({ language: "javascript", envVars: { PATH: "/nowhere" } }),
			"SandboxError",
			"JAVASCRIPT_NOT_AVAILABLE",
			501,
		);
		assert.match(nojs.message, /node is not installed/);
		// failed contexts are not kept
		assert.deepEqual(
			(await c.interpreter.listCodeContexts()).map((x) => x.id),
			[py.id],
		);
	});
});

describe("routes sandboxd does not have", () => {
	it("answer 404 UNKNOWN_ERROR, as the container's router does", async () => {
		const c = daemon.client(sandboxId("unknown"));
		await rejectsAs(c.ports.watchPort({ port: 8080 }), "SandboxError", "UNKNOWN_ERROR", 404);
		await rejectsAs(c.watch.checkChanges({ path: "/workspace" }), "SandboxError", "UNKNOWN_ERROR", 404);
		// a route with the wrong method is unknown too
		await rejectsAs(c.utils.get("/api/execute"), "SandboxError", "UNKNOWN_ERROR", 404);
	});
});

describe("tokens (--tokens)", () => {
	it("the client sends its bearer token with defaultHeaders; tenants are apart", async () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-cf-tokens-"));
		const file = path.join(dir, "tokens");
		fs.writeFileSync(file, "tok-aaaaaaaaaaaaaaaa alice\ntok-bbbbbbbbbbbbbbbb bob\n", { mode: 0o600 });
		const d = await Daemon.start(["--tokens", file]);
		try {
			const as = (token) =>
				new SandboxClient({
					baseUrl: `${d.url}/v1/sandbox/shared-name`,
					retryTimeoutMs: 1000,
					defaultHeaders: token ? { Authorization: `Bearer ${token}` } : undefined,
				});
			const alice = as("tok-aaaaaaaaaaaaaaaa");
			const bob = as("tok-bbbbbbbbbbbbbbbb");
			await alice.files.writeFile("/workspace/who", "alice");
			assert.equal((await alice.files.readFile("/workspace/who")).content, "alice");
			assert.equal((await bob.files.exists("/workspace/who")).exists, false);
			// the stream routes carry it too
			const stream = await alice.commands.executeStream("cat /workspace/who");
			assert.match(await new Response(stream).text(), /"data":"alice"/);
			// no token: 401 (in /v1's error shape: the router answers it)
			const err = await as(null)
				.commands.execute("true")
				.then(() => null, (e) => e);
			assert.equal(err?.name, "SandboxError");
			assert.equal(err.code, "unauthorized");
		} finally {
			await d.stop();
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});
});
