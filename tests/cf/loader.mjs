// An ESM loader hook (registered by register.mjs) for running the official
// @cloudflare/sandbox client under Node:
//  - the module "cloudflare:workers" exists only in the Workers runtime; it
//    is mapped to workers-stub.mjs (SandboxClient itself needs nothing
//    from it: its HTTP transport is plain fetch);
//  - @cloudflare/containers imports its own files without extensions
//    ("./lib/container"), which Node's ESM resolver refuses; a failed
//    relative import is retried with ".js".
const STUB = new URL("./workers-stub.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
	if (specifier === "cloudflare:workers")
		return { url: STUB, shortCircuit: true };
	try {
		return await nextResolve(specifier, context);
	} catch (err) {
		const relative = specifier.startsWith("./") || specifier.startsWith("../");
		if (!relative || err?.code !== "ERR_MODULE_NOT_FOUND" || specifier.endsWith(".js"))
			throw err;
		return nextResolve(`${specifier}.js`, context);
	}
}
