// Backups through the official client's BackupClient (the container side
// of createBackup/restoreBackup): backup.createArchive writes an archive of
// a directory to a path in the sandbox, backup.restoreArchive replaces a
// directory with one. The archive's bytes go through the file API, as the
// Durable Object moves them to and from R2; here, between two sandboxes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Daemon, rejectsAs, sandboxId } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

const TREE = `mkdir -p /workspace/app/src /workspace/app/node_modules/x &&
cd /workspace/app && echo hello > src/a.txt && head -c 200000 /dev/urandom > blob &&
echo junk > node_modules/x/i.js && ln -s src/a.txt link && chmod 640 src/a.txt`;
const SUMS = "cd /workspace/app && sha256sum blob src/a.txt && readlink link && stat -c %a src/a.txt && ls";

describe("createArchive / restoreArchive", () => {
	it("round-trips a directory between sandboxes, excludes left out", async () => {
		const a = daemon.client(sandboxId("bk-a"));
		const b = daemon.client(sandboxId("bk-b"));
		await a.commands.execute(TREE);
		const before = (await a.commands.execute(SUMS)).stdout;
		const made = await a.backup.createArchive("/workspace/app", "/var/backups/app.archive",
			"default", { excludes: ["node_modules"] });
		assert.equal(made.success, true);
		assert.equal(made.archivePath, "/var/backups/app.archive");
		assert.ok(made.sizeBytes > 200000, JSON.stringify(made));
		const size = (await a.commands.execute("stat -c %s /var/backups/app.archive")).stdout.trim();
		assert.equal(Number(size), made.sizeBytes);
		// the archive, moved as the Durable Object would
		const file = await a.files.readFile("/var/backups/app.archive");
		assert.equal(file.encoding, "base64");
		await b.files.writeFile("/tmp/app.archive", file.content, undefined, { encoding: "base64" });
		await b.commands.execute("mkdir -p /workspace/app && echo stale > /workspace/app/old");
		const restored = await b.backup.restoreArchive("/workspace/app", "/tmp/app.archive", "default");
		assert.equal(restored.success, true);
		assert.equal(restored.dir, "/workspace/app");
		const after = (await b.commands.execute(SUMS)).stdout;
		assert.equal(after, before.replace("node_modules\n", ""));
	});

	it("fails with the protocol's errors", async () => {
		const c = daemon.client(sandboxId("bk-err"));
		await rejectsAs(c.backup.createArchive("/workspace/nope", "/tmp/x.archive", "default"),
			"FileNotFoundError", "FILE_NOT_FOUND", 404);
		await c.commands.execute("echo not an archive > /tmp/bad.archive && mkdir -p /workspace/keep && echo k > /workspace/keep/k");
		await rejectsAs(c.backup.restoreArchive("/workspace/keep", "/tmp/bad.archive", "default"),
			"BackupRestoreError", "BACKUP_RESTORE_FAILED", 500);
		// the directory is as it was
		assert.equal((await c.commands.execute("cat /workspace/keep/k")).stdout, "k\n");
		await rejectsAs(c.backup.uploadParts({ archivePath: "/tmp/bad.archive", parts: [] }, "default"),
			"BackupCreateError", "BACKUP_CREATE_FAILED", 500);
	});
});
