// What the person is shown of a call waiting for approval never carries a credential of the registry
// entry, whichever field it came from: a cell that copies an HTTP peer's bearer token (from `${NAME}` in
// its headers, without the "Bearer " in front) or a stdio peer's env secret into the arguments sees it
// replaced by ‹hidden› in the client's form and on the viewer's card, and the journal has none of it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cellValue, Harness, waitFor } from "../support/harness.ts";
import { PeerCalls } from "../support/peer-calls.ts";
import { EventReader, viewerOf } from "../support/viewer.ts";

const HTTP_PEER = resolve(import.meta.dir, "../fixtures/peers/http-peer.ts");
const WEB_TOKEN = "tok-web-7f3a9c21e5";
const LOCAL_TOKEN = "tok-local-b81d44a0";

const calls = new PeerCalls();
let peer: ReturnType<typeof Bun.spawn>;
let port: number;
let h: Harness;
const forms: string[] = [];

beforeAll(async () => {
  peer = Bun.spawn([process.execPath, HTTP_PEER, "0"], {
    env: { ...process.env, PEER_TOKEN: WEB_TOKEN },
    stdout: "pipe",
    stderr: "ignore",
  });
  const first = new TextDecoder().decode((await (peer.stdout as ReadableStream).getReader().read()).value);
  port = JSON.parse(first.split("\n")[0] as string).port;
  h = await Harness.start({
    args: ["--viewer"],
    env: { WEB_TOKEN, LOCAL_TOKEN },
    capabilities: { elicitation: { form: {} } },
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({
          mcpServers: {
            web: {
              type: "http",
              url: `http://127.0.0.1:${port}/mcp`,
              headers: { Authorization: "Bearer ${WEB_TOKEN}" },
              approve: ["echo"],
            },
            local: {
              ...calls.entry({ approve: ["create_*"] }),
              env: { PEER_CALL_LOG: calls.log, API_TOKEN: "${LOCAL_TOKEN}" },
            },
          },
        }),
      ),
    beforeConnect: (client) =>
      client.setRequestHandler("elicitation/create", async (request) => {
        forms.push((request.params as { message: string }).message);
        return { action: "accept", content: { decision: "deny" } } as never;
      }),
  });
});
afterAll(async () => {
  await h?.close();
  peer?.kill();
  await peer?.exited;
  calls.remove();
});

test("a copied bearer token or env secret is ‹hidden› in the form, on the card and in the journal", async () => {
  const page = new EventReader(await viewerOf(h));
  try {
    await waitFor(() => page.of("hello").length > 0, { what: "the page's snapshot" });
    // The cell got hold of the credentials (here written in; a cell could read them from a file).
    const code = [
      `web, local = ${JSON.stringify(WEB_TOKEN)}, ${JSON.stringify(LOCAL_TOKEN)}`,
      "out = []",
      "for call in (lambda: mcp.web.echo(text='token ' + web), lambda: mcp.local.create_issue(title=local)):",
      "    try:",
      "        call()",
      "        out.append('sent')",
      "    except mcp.McpToolError as e:",
      "        out.append(e.code)",
      "out",
    ].join("\n");
    expect(await cellValue(h, code)).toEqual(["APPROVAL_DENIED", "APPROVAL_DENIED"]);
    expect(forms).toHaveLength(2);
    expect(forms[0]).toContain("web.echo");
    expect(forms[0]).toContain('"text":"token ‹hidden›"');
    expect(forms[1]).toContain('"title":"‹hidden›"');
    // The page's event stream is read on its own schedule: its second card may come after the cell's end.
    await waitFor(() => page.of("question").length >= 2, { what: "both questions on the page" });
    const cards = page.of("question").map((event) => JSON.stringify(event.question));
    expect(cards).toHaveLength(2);
    const journal = JSON.stringify(await cellValue(h, "mcp.journal()"));
    for (const shown of [...forms, ...cards, journal]) {
      expect(shown).not.toContain(WEB_TOKEN);
      expect(shown).not.toContain(LOCAL_TOKEN);
    }
    expect(calls.tools()).toEqual([]);
  } finally {
    await page.close();
  }
}, 60_000);
