// The parts of the Workers runtime module "cloudflare:workers" that
// @cloudflare/sandbox and @cloudflare/containers import. Only the names
// must exist for the modules to load: the Durable Object and RPC classes
// are never instantiated when SandboxClient is used on its own.
export class DurableObject {
	constructor(ctx, env) {
		this.ctx = ctx;
		this.env = env;
	}
}
export class WorkerEntrypoint {
	constructor(ctx, env) {
		this.ctx = ctx;
		this.env = env;
	}
}
export class RpcTarget {}
export const env = {};
// no enterSpan: the SDK checks for it and runs without tracing
export const tracing = {};
export default { DurableObject, WorkerEntrypoint, RpcTarget, env, tracing };
