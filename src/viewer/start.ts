// --viewer: the page a person watches the agent's work on. It listens on 127.0.0.1 only, at a free
// port, with a token made for this run; the server prints its URL once, python_health shows it, and an
// address file lets `repl-mcp viewer` find it. Loaded only when asked for: without --viewer none of
// this module (nor the page it embeds) is read.
import { describe } from "../errors.ts";
import { VIEWER_IDLE_SECONDS, VIEWER_KEEPALIVE_MS, VIEWER_TOKEN_BYTES } from "../limits.ts";
import { log } from "../log.ts";
import { isLoopback } from "../server/http/token.ts";
import type { Sessions } from "../sessions/registry.ts";
import { publishAddress } from "./address-file.ts";
import { ViewerGuard } from "./guard.ts";
import { Hub } from "./hub.ts";
import { route, secured } from "./routes.ts";
import { KEEPALIVE } from "./stream.ts";

/** A refusal at start: one line on stderr, exit status 2. */
export class ViewerStartError extends Error {}

export interface Viewer {
  url: string;
  close(): void;
}

export function startViewer(sessions: Sessions, options: { project: string; httpHost?: string }): Viewer {
  if (options.httpHost !== undefined && !isLoopback(options.httpHost)) {
    throw new ViewerStartError(
      `--viewer shows and cancels everything the agent runs, so it serves loopback only; it cannot go with ` +
        `--host ${options.httpHost}. Drop --viewer, or serve on 127.0.0.1`,
    );
  }
  const token = Buffer.from(crypto.getRandomValues(new Uint8Array(VIEWER_TOKEN_BYTES))).toString("hex");
  const hub = new Hub(sessions);
  let guard: ViewerGuard | undefined;
  let bun: Bun.Server<undefined>;
  try {
    bun = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: VIEWER_IDLE_SECONDS,
      maxRequestBodySize: 65_536,
      fetch: async (request, server) => {
        try {
          return secured(await route(request, server, guard as ViewerGuard, hub));
        } catch (error) {
          log.error("viewer request failed:", describe(error));
          return secured(new Response("Internal error\n", { status: 500 }));
        }
      },
    });
  } catch (error) {
    throw new ViewerStartError(`the viewer cannot listen on 127.0.0.1: ${describe(error)}`);
  }
  guard = new ViewerGuard(token, bun.port as number);
  sessions.watch(hub);
  const url = `http://127.0.0.1:${bun.port}/?token=${token}`;
  sessions.viewerUrl = url;
  const keepalive = setInterval(() => {
    for (const page of hub.pages) page.send(KEEPALIVE);
  }, VIEWER_KEEPALIVE_MS);
  keepalive.unref();
  let unpublish = () => {};
  try {
    unpublish = publishAddress({ pid: process.pid, project: options.project, started_at: Date.now(), url });
  } catch (error) {
    // The viewer works without it; only `repl-mcp viewer` will not list it.
    log.warn(
      `the viewer's address file could not be written (repl-mcp viewer will not list it): ${describe(error)}`,
    );
  }
  return {
    url,
    close() {
      clearInterval(keepalive);
      unpublish();
      hub.close();
      sessions.viewerUrl = undefined;
      bun.stop(true);
    },
  };
}
