// The web console (/ui/) in a real browser: Debian's chromium, headless,
// driven by playwright-core. One daemon with a tokens file, so that the
// login and the WebSocket tickets are the real thing. What is checked is
// what a user sees on the page: xterm.js draws with its DOM renderer, so
// the terminal's rows are text in the page.
//
// The daemon is tests/lib/daemon.mjs's, shared with the other node suites.
// SBX_BIN names the daemon (scripts/run-tests sets it); SBX_CHROMIUM the
// browser (default: Debian's); SBX_SCREENSHOT where the screenshot of the
// console goes (default: build/console.png; docs/console.png is a copy).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { chromium } from "playwright-core";

import { Daemon, SBX_BIN } from "../lib/daemon.mjs";

const CHROMIUM = process.env.SBX_CHROMIUM ||
	["/usr/lib/chromium/chromium", "/usr/bin/chromium"].find((p) => fs.existsSync(p));
const SHOT = process.env.SBX_SCREENSHOT || path.join(path.dirname(SBX_BIN), "console.png");
const TOKEN = "browser-token-0123456789abcdef";
const T = 60000; // per wait: the machine is shared and busy

let daemon, url, browser;

before(async () => {
	daemon = await Daemon.start([], { tokens: [`${TOKEN} web`], stem: "sbx-browser-" });
	url = daemon.url;
	assert.ok(CHROMIUM, "no chromium (scripts/install-deps installs Debian's)");
	browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
		args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
});

after(async () => {
	if (browser) await browser.close();
	// exit status 0, no mount left behind
	await daemon?.stop();
});

async function logIn(page) {
	await page.goto(url + "/ui/");
	await page.getByLabel("Bearer token").fill(TOKEN);
	await page.getByRole("button", { name: "Log in" }).click();
	await page.getByRole("heading", { name: "Sandboxes" }).waitFor({ timeout: T });
}

// a terminal row whose whole text is `text` (the output line, not the
// command line that typed it)
function rowIs(page, text) {
	return page.waitForFunction((want) =>
		[...document.querySelectorAll("#terminal .xterm-rows > div")]
			.some((d) => d.textContent.trim() === want), text, { timeout: T });
}

async function typeInTerminal(page, line) {
	await page.locator("#terminal .xterm-helper-textarea").focus();
	await page.keyboard.type(line);
	await page.keyboard.press("Enter");
}

test("log in, share a terminal between two pages, upload a file, run code", async () => {
	const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
	const errors = [];
	const page = await context.newPage();
	page.on("pageerror", (e) => errors.push(e.message));
	page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

	// a wrong token is refused, the right one lets us in
	await page.goto(url + "/ui/");
	await page.getByLabel("Bearer token").fill("wrong");
	await page.getByRole("button", { name: "Log in" }).click();
	await page.getByText("That token is not valid.").waitFor({ timeout: T });
	errors.length = 0; // the 401 of the refused login is logged by the browser
	await logIn(page);

	// create a sandbox: it opens with its terminal
	await page.getByLabel("New sandbox ID").fill("browser-demo");
	await page.getByRole("button", { name: "Create" }).click();
	await page.locator("#term-status", { hasText: "Connected to browser-demo" }).waitFor({ timeout: T });
	await page.locator("#sb-table tbody tr", { hasText: "browser-demo" }).waitFor({ timeout: T });

	await typeInTerminal(page, "echo hello-from-browser");
	await rowIs(page, "hello-from-browser");

	// a second page (its own tab: its own login) opens the same terminal
	const page2 = await context.newPage();
	page2.on("pageerror", (e) => errors.push(e.message));
	await logIn(page2);
	await page2.getByRole("button", { name: "Open browser-demo" }).click();
	await page2.locator("#term-status", { hasText: "Connected to browser-demo" }).waitFor({ timeout: T });
	await rowIs(page2, "hello-from-browser"); // the replay
	await typeInTerminal(page2, "echo second-$((6*7))");
	await rowIs(page2, "second-42");
	await rowIs(page, "second-42"); // and the first page sees it live

	// upload in the file browser, cat it in the terminal
	await page.getByRole("tab", { name: "Files" }).click();
	await page.getByLabel("Upload into this folder").setInputFiles({
		name: "note.txt", mimeType: "text/plain",
		buffer: Buffer.from("uploaded-from-the-browser\n") });
	await page.getByRole("button", { name: "Upload", exact: true }).click();
	await page.locator("#files-status", { hasText: "Uploaded 1 file" }).waitFor({ timeout: T });
	await page.locator("#files-table tbody tr", { hasText: "note.txt" }).waitFor({ timeout: T });
	await page.getByRole("tab", { name: "Terminal" }).click();
	await typeInTerminal(page, "cat note.txt");
	await rowIs(page, "uploaded-from-the-browser");
	await rowIs(page2, "uploaded-from-the-browser");

	// the run-code pane
	await page.getByRole("tab", { name: "Run code" }).click();
	await page.getByLabel(/^Code/).fill("x = 6\nprint('printed', x * 7)\nx * 100");
	await page.getByRole("button", { name: "Run", exact: true }).click();
	await page.locator("#run-out", { hasText: "printed 42" }).waitFor({ timeout: T });
	await page.locator("#run-out", { hasText: "600" }).waitFor({ timeout: T });

	// the screenshot of the README: the terminal, shared
	await page.getByRole("tab", { name: "Terminal" }).click();
	await typeInTerminal(page, "uname -sr; ls -l /workspace");
	await rowIs(page, "total 4");
	fs.mkdirSync(path.dirname(SHOT), { recursive: true });
	await page.screenshot({ path: SHOT, fullPage: true });
	assert.ok(fs.statSync(SHOT).size > 10000);

	assert.deepEqual(errors, [], "the pages logged errors");
	await context.close();
});

test("the console's files come from the daemon itself, with a strict CSP", async () => {
	const r = await fetch(url + "/ui/");
	assert.equal(r.status, 200);
	const csp = r.headers.get("content-security-policy");
	assert.match(csp, /default-src 'none'/);
	assert.match(csp, /script-src 'self'(;|$)/);
	const html = await r.text();
	assert.doesNotMatch(html, /https?:\/\//, "the page names no other site");
	for (const f of ["xterm.js", "xterm.css", "addon-fit.js", "app.js", "app.css"])
		assert.equal((await fetch(`${url}/ui/${f}`)).status, 200, f);
	assert.equal((await fetch(url + "/ui/../tokens")).status, 404);
	assert.equal((await fetch(url + "/ui/nothing.js")).status, 404);
});
