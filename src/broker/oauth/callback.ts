// The loopback listener that receives the browser's return from the authorization server: it binds
// 127.0.0.1 only, answers one GET /callback carrying this login's state (404 elsewhere, non-loopback
// peers ignored), and keeps the browser waiting until the login has decided which page to show. Any
// local process can reach the port, so a callback with another state (or none) gets the failure page
// and is otherwise ignored: it must not end a login the user is still completing in the browser.
import { timingSafeEqual } from "node:crypto";
import { ReplError } from "../../errors.ts";
import { OAUTH_CALLBACK_READ_TIMEOUT_SECONDS, OAUTH_CALLBACK_REQUEST_MAX_BYTES } from "../../limits.ts";

export const SUCCESS_PAGE = "Broker authorized. You may close this tab.";
export const FAILURE_PAGE = "Authorization failed. Return to the terminal.";

export interface Callback {
  params: URLSearchParams;
  /** Sends the success (200) or failure (400) page; the login ends after this. */
  answer(ok: boolean): void;
}

export interface CallbackListener {
  redirectUri: string;
  /** The first callback with this login's state; rejects at `deadline` (epoch ms). */
  next(deadline: number): Promise<Callback>;
  stop(): Promise<void>;
}

const page = (ok: boolean) =>
  new Response(
    `<!doctype html><meta charset="utf-8"><title>repl-mcp</title><p>${ok ? SUCCESS_PAGE : FAILURE_PAGE}</p>\n`,
    { status: ok ? 200 : 400, headers: { "content-type": "text/html; charset=utf-8" } },
  );

function isLoopback(address: string | undefined): boolean {
  return address === "127.0.0.1" || address === "::ffff:127.0.0.1" || address === "::1";
}

function requestBytes(request: Request): number {
  let total = request.url.length;
  request.headers.forEach((value, key) => {
    total += key.length + value.length + 4;
  });
  return total;
}

function sameState(given: string | null, expected: string): boolean {
  const a = Buffer.from(given ?? "");
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `onIgnored` is told the number of foreign callbacks so far, each time one arrives. */
export function listenForCallback(
  port: number,
  state: string,
  onIgnored: (count: number) => void,
): CallbackListener {
  let deliver: ((callback: Callback) => void) | undefined;
  let ignored = 0;
  const arrived: Callback[] = [];
  let taken = false;
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: "127.0.0.1",
      port,
      idleTimeout: OAUTH_CALLBACK_READ_TIMEOUT_SECONDS,
      fetch(request, self) {
        if (!isLoopback(self.requestIP(request)?.address)) return new Response(null, { status: 404 });
        const url = new URL(request.url);
        if (url.pathname !== "/callback" || request.method !== "GET") {
          return new Response("Not found\n", { status: 404 });
        }
        if (taken) return page(false);
        const params =
          requestBytes(request) > OAUTH_CALLBACK_REQUEST_MAX_BYTES ? new URLSearchParams() : url.searchParams;
        if (!sameState(params.get("state"), state)) {
          onIgnored(++ignored);
          return page(false);
        }
        taken = true;
        return new Promise<Response>((resolve) => {
          const callback = { params, answer: (ok: boolean) => resolve(page(ok)) };
          if (deliver) deliver(callback);
          else arrived.push(callback);
        });
      },
    });
  } catch {
    throw new ReplError(
      "OAUTH_FAILED",
      `Cannot listen on 127.0.0.1:${port} for the OAuth callback; choose another oauth.redirectPort (0 picks a free port)`,
    );
  }
  return {
    redirectUri: `http://127.0.0.1:${server.port}/callback`,
    next(deadline) {
      return new Promise<Callback>((resolve, reject) => {
        const early = arrived.shift();
        if (early) return resolve(early);
        const timer = setTimeout(
          () =>
            reject(
              new ReplError(
                "OAUTH_FAILED",
                "OAuth login timed out: the browser did not return to the callback within 300 s; run it again",
              ),
            ),
          Math.max(0, deadline - Date.now()),
        );
        deliver = (callback) => {
          clearTimeout(timer);
          resolve(callback);
        };
      });
    },
    async stop() {
      // Graceful: a page already being answered reaches the browser before the socket closes.
      await server.stop();
    },
  };
}
