// The viewer's requests: the page and its two files, its event stream, pictures and artifact downloads
// (GET), and cancel and the person's answers (POST, JSON, same origin). Every request passes the guard first; every answer
// carries a Content-Security-Policy that lets the page load only its own script, style and pictures.
import * as v from "valibot";
import {
  ARTIFACT_MAX_BYTES,
  HTTP_BODY_READ_TIMEOUT_MS,
  INPUT_ANSWER_MAX_CHARS,
  VIEWER_BODY_MAX_BYTES,
  VIEWER_STREAMS_MAX,
} from "../limits.ts";
import { DECISIONS } from "../person/questions.ts";
import { readJsonBody } from "../server/http/body.ts";
import { PAGE_CSS, PAGE_HTML, PAGE_SCRIPT } from "./assets.ts";
import type { ViewerGuard } from "./guard.ts";
import type { Hub } from "./hub.ts";
import { PageStream } from "./stream.ts";
import { IMAGE_MIMES } from "./views.ts";

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-resource-policy": "same-origin",
  "cross-origin-opener-policy": "same-origin",
};

const UNAUTHORIZED =
  "repl-mcp viewer: missing or wrong token. Open the URL the server printed on stderr " +
  "(`repl-mcp viewer` lists it; python_health shows it as server.viewer_url).\n";

export function secured(response: Response): Response {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.headers.set(name, value);
  if (!response.headers.has("cache-control")) response.headers.set("cache-control", "no-store");
  return response;
}

const text = (status: number, body: string) =>
  new Response(body, { status, headers: { "content-type": "text/plain; charset=utf-8" } });

export async function route(
  request: Request,
  server: Bun.Server<undefined>,
  guard: ViewerGuard,
  hub: Hub,
): Promise<Response> {
  const url = new URL(request.url);
  const post = request.method === "POST";
  const refusal = guard.checkPlace(request, post);
  if (refusal) return text(refusal.status, `repl-mcp viewer: ${refusal.message}\n`);
  const page = url.pathname === "/";
  if (!guard.authorized(request, url, page && guard.queryToken(url))) return text(401, UNAUTHORIZED);
  if (post) {
    if (url.pathname === "/cancel") return await cancel(request, hub);
    if (url.pathname === "/answer") return await answer(request, hub);
    return text(404, "Not found\n");
  }
  if (request.method !== "GET" && request.method !== "HEAD") return text(405, "Method not allowed\n");
  if (page && guard.queryToken(url)) {
    // The token leaves the address bar (and the history) at once; the cookie carries it from now on.
    return new Response(null, { status: 303, headers: { location: "/", "set-cookie": guard.setCookie() } });
  }
  if (page) return asset(PAGE_HTML, "text/html; charset=utf-8");
  if (url.pathname === "/page.js") return asset(PAGE_SCRIPT, "text/javascript; charset=utf-8");
  if (url.pathname === "/page.css") return asset(PAGE_CSS, "text/css; charset=utf-8");
  if (url.pathname === "/events") return events(request, server, hub);
  const parts = url.pathname.split("/").slice(1);
  if (parts[0] === "display" && parts.length === 4) return await display(hub, parts);
  if (parts[0] === "artifact" && parts.length === 3) return await artifact(hub, parts);
  return text(404, "Not found\n");
}

function asset(body: string, type: string): Response {
  return new Response(body, { headers: { "content-type": type } });
}

function events(request: Request, server: Bun.Server<undefined>, hub: Hub): Response {
  if (hub.pages.size >= VIEWER_STREAMS_MAX) {
    return text(503, `repl-mcp viewer: ${VIEWER_STREAMS_MAX} pages are open already; close one and reload\n`);
  }
  // The stream stays open while nothing happens; its keep-alive comments are the liveness signal.
  server.timeout(request, 0);
  const page = new PageStream((closed) => hub.detach(closed));
  request.signal.addEventListener("abort", () => page.close(), { once: true });
  hub.attach(page);
  return page.response;
}

/** A run's picture, from the history: inline data while it is recent, its artifact once archived. */
async function display(hub: Hub, [, sessionId = "", runId = "", index = ""]: string[]): Promise<Response> {
  const session = hub.session(sessionId);
  const shown = session?.supervisor.history.get(runId)?.displays?.[Number(index)];
  if (!session || !shown || !/^\d+$/.test(index) || !IMAGE_MIMES.has(shown.mime)) {
    return text(404, "Picture not found: its run has left the history\n");
  }
  let bytes: Uint8Array;
  if (shown.data !== undefined) bytes = Buffer.from(shown.data, "base64");
  else if (shown.artifact) {
    try {
      bytes = (await hub.store.readWhole(session.id, shown.artifact.id, ARTIFACT_MAX_BYTES, "too large"))
        .bytes;
    } catch {
      return text(404, "Picture not found: its artifact is gone\n");
    }
  } else return text(404, "Picture not kept\n");
  return new Response(bytes, {
    headers: { "content-type": shown.mime, "cache-control": "private, max-age=3600" },
  });
}

/** A download, never rendered by the browser whatever it holds. */
async function artifact(hub: Hub, [, sessionId = "", id = ""]: string[]): Promise<Response> {
  const session = hub.session(sessionId);
  if (!session) return text(404, "Artifact not found: its session is closed\n");
  try {
    const { reference, bytes } = await hub.store.readWhole(session.id, id, ARTIFACT_MAX_BYTES, "too large");
    const extension = reference.format === "json" ? "json" : reference.format === "text" ? "txt" : "bin";
    return new Response(bytes, {
      headers: {
        "content-type": "application/octet-stream",
        "content-disposition": `attachment; filename="artifact-${reference.id}.${extension}"`,
      },
    });
  } catch (error) {
    return text(404, `Artifact not available: ${(error as Error).message}\n`);
  }
}

const AnswerBody = v.union([
  v.strictObject({ id: v.string(), decision: v.picklist(DECISIONS) }),
  v.strictObject({ id: v.string(), value: v.pipe(v.string(), v.maxLength(INPUT_ANSWER_MAX_CHARS)) }),
  v.strictObject({ id: v.string(), declined: v.literal(true) }),
]);

/** The person's answer to a question on the page: the first answer from any channel wins. */
async function answer(request: Request, hub: Hub): Promise<Response> {
  if (!(request.headers.get("content-type") ?? "").startsWith("application/json")) {
    return text(415, "Content-Type must be application/json\n");
  }
  const body = await readJsonBody(request, VIEWER_BODY_MAX_BYTES, HTTP_BODY_READ_TIMEOUT_MS);
  if ("status" in body) return text(body.status, `${body.message}\n`);
  const parsed = v.safeParse(AnswerBody, body.json);
  if (!parsed.success) {
    return text(
      400,
      'The body must be {"id": "...", "decision": "allow_once" | "allow_session" | "deny"}, {"id": "...", "value": "..."} or {"id": "...", "declined": true}\n',
    );
  }
  const { id, ...reply } = parsed.output;
  if (!hub.answer(id, reply)) {
    return Response.json({ answered: false, error: "This question is no longer open" }, { status: 409 });
  }
  return Response.json({ answered: true });
}

/** The same cancellation as python_cancel: the agent's call returns cancelled, the variables stay. */
async function cancel(request: Request, hub: Hub): Promise<Response> {
  if (!(request.headers.get("content-type") ?? "").startsWith("application/json")) {
    return text(415, "Content-Type must be application/json\n");
  }
  const body = await readJsonBody(request, VIEWER_BODY_MAX_BYTES, HTTP_BODY_READ_TIMEOUT_MS);
  if ("status" in body) return text(body.status, `${body.message}\n`);
  const { session_id, run_id } = (body.json ?? {}) as { session_id?: unknown; run_id?: unknown };
  if (typeof session_id !== "string" || typeof run_id !== "string") {
    return text(400, 'The body must be {"session_id": "...", "run_id": "..."}\n');
  }
  const run = hub.session(session_id)?.supervisor.cancel(run_id);
  if (!run)
    return Response.json({ cancel_requested: false, error: "No matching active run" }, { status: 409 });
  return Response.json({ cancel_requested: true, run_id: run.id });
}
