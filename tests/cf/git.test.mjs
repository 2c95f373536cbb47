// git.checkout through the official client. The clone runs inside the
// sandbox (which has no network): a repository made there first, by path
// or file:// URL, is cloned; a remote URL fails as a network error.
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

// A repository at /srv/origin with commits on main and on a branch.
async function makeRepo(c) {
	const r = await c.commands.execute(
		[
			"set -e",
			"git config --global user.email t@example.com",
			"git config --global user.name tester",
			"git init -q -b main /srv/origin",
			"cd /srv/origin",
			"echo 'hello from main' > README.md",
			"git add README.md && git commit -q -m first",
			"git checkout -q -b feature",
			"echo feature > feature.txt",
			"git add feature.txt && git commit -q -m feature",
			"git checkout -q main",
			"git rev-parse HEAD",
		].join("\n"),
		"__DISABLE_SESSION__",
	);
	assert.equal(r.exitCode, 0, r.stderr);
	return r.stdout.trim();
}

describe("git.checkout", () => {
	it("clones a local repository inside the sandbox", async () => {
		const c = daemon.client(sandboxId("git-local"));
		const head = await makeRepo(c);
		const r = await c.git.checkout("/srv/origin", undefined, { targetDir: "/workspace/copy" });
		assert.equal(r.success, true);
		assert.equal(r.repoUrl, "/srv/origin");
		assert.equal(r.branch, "main");
		assert.equal(r.targetDir, "/workspace/copy");
		assert.equal((await c.files.readFile("/workspace/copy/README.md")).content, "hello from main\n");
		const log = await c.commands.execute("git -C /workspace/copy rev-parse HEAD");
		assert.equal(log.stdout.trim(), head);
	});

	it("clones a branch of a file:// URL, into /workspace/<name> by default", async () => {
		const c = daemon.client(sandboxId("git-file"));
		await makeRepo(c);
		const r = await c.git.checkout("file:///srv/origin", undefined, { branch: "feature", depth: 1 });
		assert.equal(r.branch, "feature");
		assert.equal(r.targetDir, "/workspace/origin");
		assert.equal((await c.files.readFile("/workspace/origin/feature.txt")).content, "feature\n");
		const n = await c.commands.execute("git -C /workspace/origin rev-list --count HEAD");
		assert.equal(n.stdout, "1\n"); // depth 1
	});

	it("resolves a relative target against the session's cwd", async () => {
		const c = daemon.client(sandboxId("git-rel"));
		await makeRepo(c);
		await c.utils.createSession({ id: "intmp", cwd: "/tmp" });
		const r = await c.git.checkout("/srv/origin", "intmp", { targetDir: "here" });
		assert.equal(r.targetDir, "/tmp/here");
		assert.equal((await c.files.exists("/tmp/here/README.md")).exists, true);
	});

	it("a remote URL is GitNetworkError: the sandbox has no network", async () => {
		const c = daemon.client(sandboxId("git-remote"));
		const err = await rejectsAs(
			c.git.checkout("https://github.com/cloudflare/sandbox-sdk.git", undefined, {
				targetDir: "/workspace/sdk",
			}),
			"GitNetworkError",
			"GIT_NETWORK_ERROR",
			502,
		);
		assert.equal(err.context.repository, "https://github.com/cloudflare/sandbox-sdk.git");
		assert.equal((await c.files.exists("/workspace/sdk")).exists, false);
		await rejectsAs(
			c.git.checkout("git@github.com:cloudflare/sandbox-sdk.git"),
			"GitNetworkError",
			"GIT_NETWORK_ERROR",
		);
	});

	it("a missing repository, branch or a taken target are their own errors", async () => {
		const c = daemon.client(sandboxId("git-errors"));
		await makeRepo(c);
		await rejectsAs(
			c.git.checkout("/srv/nothing-here", undefined, { targetDir: "/workspace/x" }),
			"GitRepositoryNotFoundError",
			"GIT_REPOSITORY_NOT_FOUND",
			404,
		);
		await rejectsAs(
			c.git.checkout("/srv/origin", undefined, { branch: "no-such-branch", targetDir: "/workspace/y" }),
			"GitBranchNotFoundError",
			"GIT_BRANCH_NOT_FOUND",
			404,
		);
		await c.git.checkout("/srv/origin", undefined, { targetDir: "/workspace/z" });
		await rejectsAs(
			c.git.checkout("/srv/origin", undefined, { targetDir: "/workspace/z" }),
			"GitCloneError",
			"GIT_CLONE_FAILED",
			500,
		);
		await rejectsAs(c.git.checkout("--upload-pack=touch /tmp/pwned"), "InvalidGitUrlError", "INVALID_GIT_URL", 400);
		assert.equal((await c.files.exists("/tmp/pwned")).exists, false);
	});
});
