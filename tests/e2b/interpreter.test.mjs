// @e2b/code-interpreter against sandboxd: runCode in Python and
// JavaScript (results, logs, errors, execution counts, state kept),
// contexts (create, list, restart, remove).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@e2b/code-interpreter";

import { Daemon, rejection } from "./harness.mjs";

let daemon, sbx;
before(async () => {
	daemon = await Daemon.start();
	sbx = await Sandbox.create();
});
after(async () => {
	await sbx?.kill();
	await daemon?.stop();
});

describe("runCode", () => {
	it("Python: result, stdout, state across runs, execution count", async () => {
		const out = [];
		const e1 = await sbx.runCode("x = 40\nprint('hi')\nx + 2", {
			onStdout: (m) => out.push(m.line),
		});
		assert.equal(e1.text, "42");
		assert.deepEqual(e1.logs.stdout, ["hi\n"]);
		assert.equal(e1.error, undefined);
		assert.deepEqual(out, ["hi\n"]);
		const e2 = await sbx.runCode("x * 2");
		assert.equal(e2.text, "80");
		assert.ok(e2.executionCount > e1.executionCount, `${e1.executionCount} ${e2.executionCount}`);
	});

	it("Python: an exception is the execution's error", async () => {
		const e = await sbx.runCode("raise ValueError('bad value')");
		assert.equal(e.error.name, "ValueError");
		assert.equal(e.error.value, "bad value");
		assert.match(e.error.traceback, /ValueError/);
		assert.equal(e.results.length, 0);
	});

	it("Python: rich results keep their formats", async () => {
		const e = await sbx.runCode(
			"class H:\n    def _repr_html_(self): return '<b>bold</b>'\n" +
				"    def _repr_markdown_(self): return '**bold**'\n" +
				"    def _repr_latex_(self): return '$x$'\n" +
				"    def __repr__(self): return 'H()'\nH()",
		);
		assert.equal(e.results.length, 1);
		assert.equal(e.results[0].html, "<b>bold</b>");
		assert.equal(e.results[0].markdown, "**bold**");
		assert.equal(e.results[0].latex, "$x$");
		assert.equal(e.results[0].text, "H()");
		assert.deepEqual(e.results[0].formats().sort(), ["html", "latex", "markdown"]);
	});

	it("JavaScript: result, console output, errors", async () => {
		const e = await sbx.runCode("const a = 20; console.log('js here'); a + 1", {
			language: "javascript",
		});
		assert.equal(e.text, "21");
		assert.deepEqual(e.logs.stdout, ["js here\n"]);
		const bad = await sbx.runCode("throw new TypeError('nope')", { language: "js" });
		assert.equal(bad.error.name, "TypeError");
		assert.equal(bad.error.value, "nope");
	});
});

describe("contexts", () => {
	it("creates, lists, runs in, restarts and removes a context", async () => {
		const ctx = await sbx.createCodeContext({ language: "python", cwd: "/tmp" });
		assert.equal(ctx.language, "python");
		assert.equal(ctx.cwd, "/tmp");
		const cwd = await sbx.runCode("import os\nos.getcwd()", { context: ctx });
		assert.equal(cwd.text, "'/tmp'");
		await sbx.runCode("y = 5", { context: ctx });
		assert.equal((await sbx.runCode("y", { context: ctx })).text, "5");
		// the default context does not share its state
		const other = await sbx.runCode("y");
		assert.equal(other.error.name, "NameError");
		const listed = await sbx.listCodeContexts();
		assert.ok(listed.some((c) => c.id === ctx.id), JSON.stringify(listed));
		await sbx.restartCodeContext(ctx);
		const after = await sbx.runCode("y", { context: ctx });
		assert.equal(after.error.name, "NameError");
		await sbx.removeCodeContext(ctx);
		assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
		// (a short request timeout: the SDK leaves its timer running on errors)
		const gone = await rejection(sbx.runCode("1", { context: ctx, requestTimeoutMs: 3000 }));
		assert.match(gone.message, /not found/i);
	});
});
