'use strict';
/*
 * sandboxd code interpreter: the JavaScript (and TypeScript) worker.
 *
 * One of these runs per JavaScript or TypeScript context, inside the
 * sandbox; the daemon (src/daemon/interp.c) starts it through a small sh
 * wrapper that moves the protocol pipes off the standard descriptors:
 * fd 3 is the daemon's stdout pipe (protocol out), fd 4 its stdin pipe
 * (protocol in), fd 0 is /dev/null and fds 1 and 2 are the daemon's stderr
 * pipe. The line protocol is the Python worker's (interp/python_worker.py):
 *
 *   daemon -> worker  {"id": N, "code": "..."}
 *                     {"cancel": N}
 *   worker -> daemon  {"type": "ready", "language", "version"}
 *                     {"type": "fatal", "message", "unavailable"}
 *                     {"id": N, "type": "start"}
 *                     {"id": N, "type": "stdout"|"stderr", "text"}
 *                     {"id": N, "type": "result", "data": {mime: value}}
 *                     {"id": N, "type": "error", "ename", "evalue", "traceback"}
 *                     {"id": N, "type": "done", "execution_count": K[, "skipped": true]}
 *
 * "start" says the cell has begun (the daemon interrupts a cell only after
 * it); a cell whose cancel came before it began is skipped: a "done" with
 * "skipped" and nothing else.
 *
 * Cells run in one vm context made once (with the host's globals, as the
 * Node REPL does), so top-level var, let, const, function and class
 * declarations persist from cell to cell; the value of the last expression
 * is the cell's result. A cell with top-level await is rewritten the way
 * the REPL rewrites it (node's own internal/repl/await, when node exposes
 * it). console, process.stdout and process.stderr write protocol messages;
 * what a child process writes to inherited descriptors reaches the daemon
 * raw, as stderr.
 *
 * A timeout is the daemon sending SIGINT: synchronous code is interrupted
 * by vm's breakOnSigint, an awaited cell is abandoned; between cells SIGINT
 * is ignored. A cell that does not stop is killed with its worker.
 */
const fs = require('fs');
const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { Writable } = require('stream');
const { Console } = require('console');
const Module = require('module');

const LANG = process.argv[2] === 'typescript' ? 'typescript' : 'javascript';
const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const parse = JSON.parse;
const inspect = util.inspect;
const bufferFrom = Buffer.from;
const exit = process.exit.bind(process);

function fdOpen(fd) {
  try {
    fs.fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}
// without the wrapper (by hand, for debugging): the standard descriptors
const OUT_FD = fdOpen(3) ? 3 : 1;
const IN_FD = fdOpen(4) ? 4 : 0;

// lone surrogates would make the line invalid UTF-8 for the daemon
const wellFormed = typeof String.prototype.toWellFormed === 'function'
  ? (s) => s.toWellFormed()
  : (s) => s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');

function send(msg) {
  let line;
  try {
    line = stringify(msg, (k, v) => (typeof v === 'string' ? wellFormed(v) : v));
  } catch (e) {
    line = stringify({ id: msg.id, type: 'stderr', text: `sandboxd: cannot encode a ${msg.type} message: ${e}\n` });
  }
  const buf = bufferFrom.call(Buffer, line + '\n', 'utf8');
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(OUT_FD, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
    }
  }
}

let current = null; // the running cell's id
let count = 0;
let interrupt = null; // abandons an awaited cell

function emit(stream, chunk) {
  const text = typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) || chunk instanceof Uint8Array
    ? Buffer.from(chunk).toString('utf8') : String(chunk);
  if (text) send({ id: current, type: stream, text });
}

function outStream(stream, fd) {
  const w = new Writable({
    decodeStrings: false,
    write(chunk, enc, cb) {
      emit(stream, chunk);
      cb();
    },
  });
  w.fd = fd;
  w.isTTY = false;
  return w;
}
const stdout = outStream('stdout', 1);
const stderr = outStream('stderr', 2);
// everything that writes to process.stdout / process.stderr (the global
// console, warnings, user code) goes through the protocol
for (const [name, w] of [['stdout', stdout], ['stderr', stderr]]) {
  Object.defineProperty(process, name, { configurable: true, enumerable: true, get: () => w });
}
const userConsole = new Console({ stdout, stderr, colorMode: false });

// ---- TypeScript ---------------------------------------------------------
function loadTranspiler(cwd) {
  if (typeof Module.stripTypeScriptTypes === 'function') {
    return (code) => Module.stripTypeScriptTypes(code, { mode: 'transform' });
  }
  const from = [cwd, '/usr/local/lib/node_modules', '/usr/lib/node_modules', ...(Module.globalPaths || [])];
  let ts = null;
  for (const base of from) {
    try {
      const p = require.resolve('typescript', { paths: [base] });
      ts = require(p);
      break;
    } catch {
      // next
    }
  }
  if (!ts) return null;
  return (code, filename) => {
    const out = ts.transpileModule(code, {
      fileName: filename + '.ts',
      reportDiagnostics: true,
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.CommonJS,
        esModuleInterop: true,
        sourceMap: false,
      },
    });
    const errs = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errs.length) {
      const e = new SyntaxError(errs.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'));
      e.stack = `SyntaxError: ${e.message}`;
      throw e;
    }
    return out.outputText;
  };
}

// ---- the context --------------------------------------------------------
const cwd = process.cwd();
const cellFile = path.join(cwd, '[cell]');
let transpile = null;
if (LANG === 'typescript') {
  transpile = loadTranspiler(cwd);
  if (!transpile) {
    send({
      type: 'fatal',
      unavailable: true,
      message: 'TypeScript is not available in this sandbox: no "typescript" package was found '
        + `(looked from ${cwd}, /usr/local/lib/node_modules and /usr/lib/node_modules). `
        + 'Install it (npm install -g typescript, or npm install typescript in the context\'s cwd) '
        + 'and create the context again.',
    });
    exit(3);
  }
}

let processTopLevelAwait = null;
try {
  // the REPL's own rewriting (needs --expose-internals)
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch {
  processTopLevelAwait = null;
}

const userModule = new Module(cellFile, null);
userModule.filename = cellFile;
userModule.paths = Module._nodeModulePaths(cwd);
userModule.loaded = true;

const context = vm.createContext({}, { name: 'sandboxd' });
const own = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', context));
for (const name of Object.getOwnPropertyNames(globalThis)) {
  if (own.has(name)) continue;
  Object.defineProperty(context, name, { __proto__: null, ...Object.getOwnPropertyDescriptor(globalThis, name) });
}
const contextObjectProto = vm.runInContext('Object.prototype', context);
Object.assign(context, {
  global: context,
  console: userConsole,
  require: Module.createRequire(cellFile),
  module: userModule,
  exports: userModule.exports,
  __filename: cellFile,
  __dirname: cwd,
  display: (...vals) => {
    for (const v of vals) send({ id: current, type: 'result', data: bundle(v) });
  },
});

// import() in a cell loads modules as the main context would; using the
// option is what node calls experimental: that warning is not the user's
const importModuleDynamically = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  if (String(warning && warning.message !== undefined ? warning.message : warning)
    .includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
  return emitWarning.call(this, warning, ...rest);
};

// ---- results and errors -------------------------------------------------
function isPlainData(v) {
  if (Array.isArray(v)) return true;
  if (v === null || typeof v !== 'object') return false;
  const p = Object.getPrototypeOf(v);
  return p === null || p === Object.prototype || p === contextObjectProto;
}

function bundle(v) {
  const b = { 'text/plain': inspect(v, { colors: false, depth: 6, maxArrayLength: 1000, breakLength: 80 }) };
  if (isPlainData(v)) {
    try {
      const s = stringify(v);
      if (s !== undefined) b['application/json'] = parse(s);
    } catch {
      // circular, BigInt: text/plain only
    }
  }
  return b;
}

const INTERNAL_FRAME = /^\s+at (.*\()?(node:|.*node_worker\.js)/;

function errorMessage(e) {
  if (e && typeof e === 'object' && typeof e.stack === 'string') {
    if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      return { ename: 'Interrupted', evalue: 'Script execution was interrupted by SIGINT', traceback: [] };
    }
    let name = 'Error';
    let value = '';
    try {
      name = String(e.name || (e.constructor && e.constructor.name) || 'Error');
      value = e.message === undefined ? '' : String(e.message);
    } catch {
      // a hostile getter: keep the defaults
    }
    const traceback = e.stack.split('\n').filter((l) => !INTERNAL_FRAME.test(l));
    return { ename: name, evalue: value, traceback };
  }
  const text = inspect(e, { colors: false });
  return { ename: 'Error', evalue: text, traceback: [`Uncaught ${text}`] };
}

class Interrupted extends Error {
  constructor() {
    super('the cell was interrupted while it awaited (SIGINT)');
    this.name = 'Interrupted';
    this.stack = `${this.name}: ${this.message}`;
  }
}

// ---- running a cell -----------------------------------------------------
function compile(code, filename) {
  // "{ a: 1 }" is an object, not a block (as in the REPL)
  if (/^\s*\{/.test(code) && !/;\s*$/.test(code)) {
    try {
      return new vm.Script(`(${code.trim()})\n`, { filename, importModuleDynamically });
    } catch {
      // a block after all
    }
  }
  return new vm.Script(code, { filename, importModuleDynamically });
}

const cancelled = new Set(); // cells cancelled before they began

async function runCell(msg) {
  const id = msg.id;
  if (typeof id === 'number') {
    for (const n of cancelled) if (n < id) cancelled.delete(n);
  }
  if (cancelled.has(id)) {
    send({ id, type: 'done', execution_count: count, skipped: true });
    return;
  }
  current = id;
  count += 1;
  const filename = `<cell-${count}>`;
  let value;
  let failed = null;
  try {
    let code = String(msg.code);
    if (transpile) code = transpile(code, filename);
    let awaited = false;
    if (processTopLevelAwait && code.includes('await')) {
      try {
        const wrapped = processTopLevelAwait(code);
        if (wrapped !== null) {
          code = wrapped;
          awaited = true;
        }
      } catch {
        // not parseable by acorn: let V8 say what is wrong below
      }
    }
    const script = compile(code, filename);
    // as late as can be: a SIGINT before runInContext would be lost
    send({ id, type: 'start' });
    value = script.runInContext(context, { breakOnSigint: true });
    if (awaited) {
      value = await new Promise((resolve, reject) => {
        interrupt = () => reject(new Interrupted());
        Promise.resolve(value).then(resolve, reject);
      });
      value = value && value.value;
    }
  } catch (e) {
    failed = { e };
  } finally {
    interrupt = null;
  }
  try {
    if (!failed && value !== undefined) send({ id, type: 'result', data: bundle(value) });
  } catch (e) {
    failed = { e };
  }
  if (failed) send({ id, type: 'error', ...errorMessage(failed.e) });
  send({ id, type: 'done', execution_count: count });
  current = null;
}

process.on('SIGINT', () => {
  if (interrupt) interrupt();
});
// an error thrown later by a cell's callbacks must not end the worker
process.on('uncaughtException', (e) => {
  const m = errorMessage(e);
  emit('stderr', `Uncaught ${m.traceback.length ? m.traceback.join('\n') : `${m.ename}: ${m.evalue}`}\n`);
});
process.on('unhandledRejection', (e) => {
  const m = errorMessage(e);
  emit('stderr', `Unhandled rejection: ${m.traceback.length ? m.traceback.join('\n') : `${m.ename}: ${m.evalue}`}\n`);
});

let queue = Promise.resolve();
let pending = '';
const input = new net.Socket({ fd: IN_FD, readable: true, writable: false });
input.setEncoding('utf8');
input.on('data', (chunk) => {
  pending += chunk;
  let nl;
  while ((nl = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    let msg;
    try {
      msg = parse(line);
    } catch {
      continue;
    }
    if (msg && typeof msg === 'object' && typeof msg.cancel === 'number') {
      cancelled.add(msg.cancel);
    } else if (msg && typeof msg === 'object' && typeof msg.code === 'string') {
      queue = queue.then(() => runCell(msg));
    }
  }
});
// the daemon closed the protocol: leave, whatever timers remain
input.on('end', () => exit(0));
input.on('error', () => exit(0));

send({ type: 'ready', language: LANG, version: process.version, pid: process.pid });
