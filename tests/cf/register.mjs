// Lets Node load @cloudflare/sandbox, which targets the Workers runtime:
//   node --import ./tests/cf/register.mjs ...
// See loader.mjs for what the hook does.
import { register } from "node:module";

register("./loader.mjs", import.meta.url);
