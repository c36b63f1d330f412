// `repl-mcp --oauth-login NAME`: no MCP server, no worker; read the registry the server would read,
// run the login for that entry, and exit 0 once the credential file is saved (1 otherwise). Before it
// waits for the browser it writes exactly two lines to stderr: the prompt, then the URL alone.
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { oauthLogin } from "./broker/oauth/login.ts";
import { loadRegistry } from "./broker/registry.ts";
import type { ServeOptions } from "./cli/command.ts";
import { describe } from "./errors.ts";
import { log } from "./log.ts";
import { NAME } from "./version.ts";

function die(message: string): never {
  process.stderr.write(`${NAME}: error: ${message}\n`);
  process.exit(1);
}

export async function login(options: ServeOptions, server: string): Promise<never> {
  // The first two lines on stderr are the prompt and the URL, and nothing comes before them: a library
  // warning goes to the log at debug level instead (--log-level debug shows it after the fact).
  console.warn = (message?: unknown, ...rest: unknown[]) => log.debug(message, ...rest);
  console.log = console.warn;
  let project: string;
  try {
    project = realpathSync(process.cwd());
  } catch (error) {
    die(`cannot resolve the launch directory: ${describe(error)}`);
  }
  try {
    const registry = loadRegistry({
      project,
      configPath: options.config === undefined ? undefined : resolve(project, options.config),
      scopes: options.scopes,
      env: process.env,
    });
    if (registry.error) die(`MCP registry: ${registry.error}`);
    const entry = registry.servers.get(server);
    if (!entry) {
      die(`the registry has no usable server named ${JSON.stringify(server)}; check --config and the entry`);
    }
    await oauthLogin(entry, (lines) => process.stderr.write(`${lines.join("\n")}\n`));
  } catch (error) {
    die(describe(error));
  }
  process.stderr.write(`OAuth grant saved for ${JSON.stringify(server)}.\n`);
  process.exit(0);
}
