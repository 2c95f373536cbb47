// The code interpreter through the official client: the interpreter
// sub-client (createCodeContext, runCodeStream, streamCode,
// listCodeContexts, deleteCodeContext) and the package's CodeInterpreter,
// which gathers a cell's output into an Execution as Sandbox.runCode does.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { CodeInterpreter, parseSSEStream } from "@cloudflare/sandbox";

import { Daemon, collect, rejectsAs, sandboxId } from "./harness.mjs";

let daemon;
before(async () => {
	daemon = await Daemon.start();
});
after(async () => {
	await daemon?.stop();
});

// A client of a new sandbox and the package's CodeInterpreter over it.
function fresh(stem) {
	const c = daemon.client(sandboxId(stem));
	return { c, ci: new CodeInterpreter(c.interpreter) };
}

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("python contexts", () => {
	it("keep state from cell to cell; another context has its own", async () => {
		const { ci } = fresh("py-state");
		const ctx = await ci.createCodeContext({ language: "python" });
		assert.match(ctx.id, /\S/);
		assert.equal(ctx.language, "python");
		assert.equal(ctx.cwd, "/workspace");
		const set = await ci.runCode("x = 40", { context: ctx });
		assert.equal(set.error, undefined);
		assert.deepEqual(set.results, []);
		const got = await ci.runCode("x + 2", { context: ctx });
		assert.equal(got.error, undefined);
		assert.equal(got.results.length, 1);
		assert.equal(got.results[0].text, "42");
		assert.deepEqual(got.results[0].formats(), ["text"]);

		const other = await ci.createCodeContext({ language: "python" });
		assert.notEqual(other.id, ctx.id);
		const miss = await ci.runCode("x", { context: other });
		assert.equal(miss.error.name, "NameError");
		assert.match(miss.error.message, /'x' is not defined/);
		// and the first still has it
		assert.equal((await ci.runCode("x", { context: ctx })).results[0].text, "40");
	});

	it("rich results: a dict is json, _repr_html_ is html", async () => {
		const { ci } = fresh("py-rich");
		const ctx = await ci.createCodeContext({ language: "python" });
		const d = await ci.runCode("{'a': 1, 'b': [1, 2], 'c': None}", { context: ctx });
		assert.equal(d.results.length, 1);
		assert.deepEqual(d.results[0].json, { a: 1, b: [1, 2], c: null });
		assert.equal(d.results[0].text, "{'a': 1, 'b': [1, 2], 'c': None}");
		assert.deepEqual(d.results[0].formats(), ["text", "json"]);

		const h = await ci.runCode(
			"class Table:\n" +
				"    def _repr_html_(self):\n" +
				"        return '<table><tr><td>1</td></tr></table>'\n" +
				"Table()",
			{ context: ctx },
		);
		assert.equal(h.results.length, 1);
		assert.equal(h.results[0].html, "<table><tr><td>1</td></tr></table>");
		assert.match(h.results[0].text, /Table object/);
		assert.ok(h.results[0].formats().includes("html"));
	});

	it("a matplotlib plot is a png result that decodes as PNG", async () => {
		const { ci } = fresh("py-plot");
		const ctx = await ci.createCodeContext({ language: "python" });
		const ex = await ci.runCode(
			"import matplotlib.pyplot as plt\n" +
				"plt.plot([1, 2, 3], [1, 4, 9])\n" +
				"plt.title('squares')\n" +
				"plt.show()",
			{ context: ctx },
		);
		assert.equal(ex.error, undefined, JSON.stringify(ex.error));
		const pngs = ex.results.filter((r) => r.png);
		assert.equal(pngs.length, 1);
		const bytes = Buffer.from(pngs[0].png, "base64");
		assert.ok(bytes.length > 1000);
		assert.deepEqual(bytes.subarray(0, 8), PNG_MAGIC);
		assert.ok(pngs[0].formats().includes("png"));
		// the SDK's Execution serializes it too
		assert.equal(ex.toJSON().results.find((r) => r.png).png, pngs[0].png);
	});

	it("output streams as it is written, before the cell ends", async () => {
		const { c } = fresh("py-stream");
		const ctx = await c.interpreter.createCodeContext({ language: "python" });
		const seen = [];
		const t0 = Date.now();
		await c.interpreter.runCodeStream(
			ctx.id,
			"import time\nfor i in range(3):\n    print(f'line {i}')\n    time.sleep(0.6)",
			undefined,
			{ onStdout: (o) => seen.push({ text: o.text, at: Date.now() - t0 }) },
		);
		const end = Date.now() - t0;
		assert.equal(seen.map((s) => s.text).join(""), "line 0\nline 1\nline 2\n");
		const at = (n) => seen.find((s) => s.text.includes(`line ${n}`)).at;
		// each line came about 0.6 s after the one before, the first well
		// before the end (1.8 s of sleeping)
		assert.ok(end - at(0) >= 1000, `line 0 at ${at(0)} ms, the end at ${end} ms`);
		assert.ok(at(1) - at(0) >= 400, JSON.stringify(seen));
		assert.ok(at(2) - at(1) >= 400, JSON.stringify(seen));
		assert.equal(typeof seen[0].at, "number");
	});

	it("stderr and stdout are apart", async () => {
		const { ci } = fresh("py-stderr");
		const ctx = await ci.createCodeContext({ language: "python" });
		const ex = await ci.runCode("import sys\nprint('out')\nprint('err', file=sys.stderr)", {
			context: ctx,
		});
		assert.equal(ex.logs.stdout.join(""), "out\n");
		assert.equal(ex.logs.stderr.join(""), "err\n");
	});

	it("1/0 is a ZeroDivisionError with its traceback; the context goes on", async () => {
		const { c, ci } = fresh("py-error");
		const ctx = await ci.createCodeContext({ language: "python" });
		await ci.runCode("kept = 'yes'", { context: ctx });
		const ex = await ci.runCode("def f():\n    return 1/0\nf()", { context: ctx });
		assert.equal(ex.error.name, "ZeroDivisionError");
		assert.equal(ex.error.message, "division by zero");
		assert.ok(Array.isArray(ex.error.traceback));
		const tb = ex.error.traceback.join("\n");
		assert.match(tb, /Traceback/);
		assert.match(tb, /in f/);
		assert.match(tb, /ZeroDivisionError: division by zero/);
		assert.deepEqual(ex.results, []);
		assert.equal((await ci.runCode("kept", { context: ctx })).results[0].text, "'yes'");

		// the frames themselves: the error ends the stream, no
		// execution_complete after it (as the container)
		const events = await collect(parseSSEStream, await c.interpreter.streamCode(ctx.id, "print('a')\n1/0"));
		assert.deepEqual(
			events.map((e) => e.type),
			["stdout", "error"],
		);
		assert.equal(events[1].ename, "ZeroDivisionError");
		assert.equal(events[1].evalue, "division by zero");
	});

	it("frames of a good cell: output, one result per rich output, execution_complete", async () => {
		const { c } = fresh("py-frames");
		const ctx = await c.interpreter.createCodeContext({ language: "python" });
		const events = await collect(
			parseSSEStream,
			await c.interpreter.streamCode(
				ctx.id,
				"print('hi')\ndisplay({'k': 'v'})\n'last'",
				"python",
			),
		);
		// in the order they happened: the output before the results
		assert.deepEqual(
			events.map((e) => e.type),
			["stdout", "result", "result", "execution_complete"],
		);
		const of = (t) => events.filter((e) => e.type === t);
		assert.deepEqual(of("stdout").map((e) => e.text), ["hi\n"]);
		const results = of("result");
		assert.equal(results.length, 2);
		assert.deepEqual(results[0].json, { k: "v" });
		assert.deepEqual(results[0].metadata, {});
		assert.equal(results[1].text, "'last'");
		// no MIME-typed keys left: they are renamed
		assert.ok(!results.some((r) => Object.keys(r).some((k) => k.includes("/"))));
		const done = events.at(-1);
		assert.equal(done.type, "execution_complete");
		assert.ok(Number.isInteger(done.execution_count) && done.execution_count >= 1);
	});

	it("output and results of a cell arrive in the order they happened", async () => {
		const { c } = fresh("py-order");
		const ctx = await c.interpreter.createCodeContext({ language: "python" });
		const events = await collect(
			parseSSEStream,
			await c.interpreter.streamCode(
				ctx.id,
				"for i in range(5):\n    print('line', i, end='')\n    display(i)",
				"python",
			),
		);
		// one write may come in pieces: join the stdout frames between results
		const seen = [];
		for (const e of events) {
			if (e.type === "stdout" && seen.at(-1)?.startsWith("out:")) seen[seen.length - 1] += e.text;
			else if (e.type === "stdout") seen.push(`out:${e.text}`);
			else seen.push(e.type === "result" ? `result:${e.text}` : e.type);
		}
		const want = [];
		for (let i = 0; i < 5; i++) want.push(`out:line ${i}`, `result:${i}`);
		assert.deepEqual(seen, [...want, "execution_complete"]);
	});

	it("a timeout interrupts the cell and keeps the context's state", async () => {
		const { c, ci } = fresh("py-timeout");
		const ctx = await ci.createCodeContext({ language: "python" });
		await ci.runCode("state = 7", { context: ctx });
		let error;
		const t0 = Date.now();
		await c.interpreter.runCodeStream(
			ctx.id,
			"import time\ntime.sleep(30)",
			"python",
			{ onError: (e) => (error = e) },
			500,
		);
		assert.ok(Date.now() - t0 < 10000);
		assert.equal(error.name, "TimeoutError");
		assert.equal((await ci.runCode("state", { context: ctx })).results[0].text, "7");
	});

	it("a reader that goes away interrupts its cell", async () => {
		const { c, ci } = fresh("py-gone");
		const ctx = await ci.createCodeContext({ language: "python" });
		await ci.runCode("kept = 1", { context: ctx });
		const stream = await c.interpreter.streamCode(
			ctx.id,
			"import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.1)",
		);
		const reader = stream.getReader();
		const first = await reader.read();
		assert.match(new TextDecoder().decode(first.value), /"type":"stdout"/);
		await reader.cancel();
		// a minute of work left: the next cell runs only once it was cut
		const t0 = Date.now();
		const ex = await ci.runCode("kept + 1", { context: ctx });
		assert.ok(Date.now() - t0 < 15000, `the next cell waited ${Date.now() - t0} ms`);
		assert.equal(ex.results[0].text, "2");
		// a silent cell too: the hang-up is seen without a write (the
		// keepalive comes after 5 s). Gone at once: whether the cell had
		// begun or not, the context keeps its state
		const silent = await c.interpreter.streamCode(ctx.id, "import time\ntime.sleep(60)");
		await silent.cancel();
		const t1 = Date.now();
		assert.equal((await ci.runCode("kept", { context: ctx })).results[0].text, "1");
		assert.ok(Date.now() - t1 < 4000, `the next cell waited ${Date.now() - t1} ms`);
	});

	it("a worker that dies fails its cell; the next cell starts afresh and says so on stderr", async () => {
		const { ci } = fresh("py-died");
		const ctx = await ci.createCodeContext({ language: "python" });
		await ci.runCode("lost = 1", { context: ctx });
		const died = await ci.runCode("import os\nos._exit(3)", { context: ctx });
		assert.equal(died.error.name, "WorkerDied");
		const next = await ci.runCode("'lost' in globals()", { context: ctx });
		assert.equal(next.results[0].text, "False");
		assert.match(next.logs.stderr.join(""), /^\[sandboxd\] .*restarted.*gone\n$/);
	});

	it("cwd and envVars of the context", async () => {
		const { c, ci } = fresh("py-env");
		await c.files.mkdir("/workspace/sub");
		const ctx = await ci.createCodeContext({
			language: "python",
			cwd: "/workspace/sub",
			envVars: { GREETING: "hello", SKIPPED: undefined },
		});
		assert.equal(ctx.cwd, "/workspace/sub");
		const ex = await ci.runCode("import os\n(os.getcwd(), os.environ['GREETING'], 'SKIPPED' in os.environ)", {
			context: ctx,
		});
		assert.equal(ex.results[0].text, "('/workspace/sub', 'hello', False)");
	});
});

describe("javascript contexts", () => {
	it("variables persist; console.log streams; the last value is the result", async () => {
		const { c, ci } = fresh("js-state");
		const ctx = await ci.createCodeContext({ language: "javascript" });
		assert.equal(ctx.language, "javascript");
		await ci.runCode("let n = 41; const o = { a: 1, b: [2] };", { context: ctx });
		assert.equal((await ci.runCode("n + 1", { context: ctx })).results[0].text, "42");
		const obj = await ci.runCode("o", { context: ctx });
		assert.deepEqual(obj.results[0].json, { a: 1, b: [2] });

		const seen = [];
		const t0 = Date.now();
		await c.interpreter.runCodeStream(
			ctx.id,
			"console.log('first');\nawait new Promise((r) => setTimeout(r, 800));\nconsole.log('second');",
			"javascript",
			{ onStdout: (o) => seen.push({ text: o.text, at: Date.now() - t0 }) },
		);
		const end = Date.now() - t0;
		assert.equal(seen.map((s) => s.text).join(""), "first\nsecond\n");
		assert.ok(end - seen[0].at >= 500, JSON.stringify({ seen, end }));
	});

	it("a thrown error has its name, message and stack", async () => {
		const { ci } = fresh("js-error");
		const ctx = await ci.createCodeContext({ language: "javascript" });
		const ex = await ci.runCode(
			"class MyError extends Error { constructor(m) { super(m); this.name = 'MyError'; } }\n" +
				"function thrower() { throw new MyError('boom'); }\n" +
				"thrower();",
			{ context: ctx },
		);
		assert.equal(ex.error.name, "MyError");
		assert.equal(ex.error.message, "boom");
		const tb = ex.error.traceback.join("\n");
		assert.match(tb, /MyError: boom/);
		assert.match(tb, /at thrower/);
		const te = await ci.runCode("null.x", { context: ctx });
		assert.equal(te.error.name, "TypeError");
	});

	it("typescript: works where the sandbox has a transpiler, else JAVASCRIPT_NOT_AVAILABLE", async () => {
		const { c } = fresh("ts");
		let ctx;
		try {
			ctx = await c.interpreter.createCodeContext({ language: "typescript" });
		} catch (err) {
			assert.equal(err.code, "JAVASCRIPT_NOT_AVAILABLE");
			assert.equal(err.httpStatus, 501);
			assert.match(err.message, /TypeScript/);
			assert.deepEqual(await c.interpreter.listCodeContexts(), []);
			return;
		}
		const ci = new CodeInterpreter(c.interpreter);
		await ci.runCode("const n: number = 41", { context: ctx });
		assert.equal((await ci.runCode("n + 1", { context: ctx })).results[0].text, "42");
	});
});

describe("listing and deleting", () => {
	it("list shows every context; delete forgets one; unknown ids are ContextNotFoundError", async () => {
		const { c, ci } = fresh("ctx-list");
		assert.deepEqual(await ci.listCodeContexts(), []);
		const py = await ci.createCodeContext({ language: "python" });
		const js = await ci.createCodeContext({ language: "javascript", cwd: "/tmp" });
		const list = await ci.listCodeContexts();
		assert.deepEqual(
			list.map((x) => [x.id, x.language, x.cwd]),
			[
				[py.id, "python", "/workspace"],
				[js.id, "javascript", "/tmp"],
			],
		);
		await ci.deleteCodeContext(py.id);
		assert.deepEqual(
			(await c.interpreter.listCodeContexts()).map((x) => x.id),
			[js.id],
		);
		const err = await rejectsAs(
			c.interpreter.deleteCodeContext(py.id),
			"ContextNotFoundError",
			"CONTEXT_NOT_FOUND",
			404,
		);
		assert.equal(err.contextId, py.id);
		await rejectsAs(ci.runCode("1", { context: py }), "ContextNotFoundError", "CONTEXT_NOT_FOUND", 404);
		await rejectsAs(
			c.interpreter.streamCode("no-such-context", "1"),
			"ContextNotFoundError",
			"CONTEXT_NOT_FOUND",
			404,
		);
		// the other one is untouched
		assert.equal((await ci.runCode("1 + 1", { context: js })).results[0].text, "2");
	});

	it("deleting a context ends its running cell", async () => {
		const { c } = fresh("ctx-del-running");
		const ctx = await c.interpreter.createCodeContext({ language: "python" });
		let error;
		const running = c.interpreter.runCodeStream(ctx.id, "import time\ntime.sleep(60)", "python", {
			onError: (e) => (error = e),
		});
		await new Promise((r) => setTimeout(r, 500));
		await c.interpreter.deleteCodeContext(ctx.id);
		await running;
		assert.equal(error.name, "ContextDeleted");
	});
});
