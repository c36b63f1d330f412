// The registry's `approve` field: calls it names are never sent without the person's approval. With no
// way to ask them, every path that calls a tool (mcp.call, mcp.acall, mcp.<server>.<tool>(),
// artifact_forward from a cell and as a tool) refuses at once with APPROVAL_REQUIRED, and the peer sees
// nothing; calls the field does not name go through; a bad value is a configuration error.
import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, cellValue as value } from "../support/harness.ts";
import { PeerCalls } from "../support/peer-calls.ts";

let h: Harness | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** The typed fixture peer as "typed", with the given `approve`; its log of every tools/call it received. */
async function start(approve: unknown) {
  const calls = new PeerCalls();
  cleanups.push(() => calls.remove());
  h = await Harness.start({
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { typed: calls.entry({ approve }) } }),
      ),
  });
  const received = () => calls.tools();
  return { harness: h, received };
}

/** [exception type, code, first words of the message] of a call, or ["ok"]. */
const outcome = (call: string) =>
  [
    "try:",
    `    ${call}`,
    "    out = ['ok']",
    "except Exception as e:",
    "    out = [type(e).__name__, getattr(e, 'code', None), str(e)]",
    "out",
  ].join("\n");

/** [exception type, code] of a call that is expected to fail. */
async function kindAndCode(harness: Harness, call: string) {
  return ((await value(harness, outcome(call))) as string[]).slice(0, 2);
}

describe("approve", () => {
  test('"writes": every path refuses an unannotated tool before sending it; read-only tools run', async () => {
    const { harness, received } = await start("writes");
    const refused = [
      "mcp.call('typed', 'create_issue', arguments={'title': 't'})",
      "mcp.typed.create_issue(title='t')",
      "await mcp.acall('typed', 'create_issue', arguments={'title': 't'})",
      "artifact_forward(artifact('body'), 'typed', 'create_issue', 'body', format='text', arguments={'title': 't'})",
    ];
    for (const call of refused) {
      const [kind, code, message] = (await value(harness, outcome(call))) as string[];
      expect([kind, code]).toEqual(["McpToolError", "APPROVAL_REQUIRED"]);
      expect(message).toContain("typed.create_issue");
      expect(message).toContain("nothing was sent");
    }
    // A refusal is catchable as the ToolError every mcp failure is.
    expect(
      await value(
        harness,
        "try:\n    mcp.typed.create_issue(title='t')\nexcept mcp.ToolError:\n    r = 'caught'\nr",
      ),
    ).toBe("caught");
    // Read-only by its server's annotation: sent as before.
    expect(await value(harness, outcome("mcp.typed.search(query='q')"))).toEqual(["ok"]);
    // With the catalogue loaded, mcp.explain reads the annotations too.
    expect(
      await value(harness, "[mcp.explain('typed', t)['approval'] for t in ('create_issue', 'search')]"),
    ).toEqual([
      { rule: "writes", required: true },
      { rule: "writes", required: false },
    ]);
    expect(received()).toEqual(["search"]);
    // Nothing refused was dispatched: the journal says so, with why.
    expect(
      await value(
        harness,
        "[(r['tool'], r['status'], r.get('approval', {}).get('decision')) for r in mcp.journal()]",
      ),
    ).toEqual([
      // The four paths above, and the refusal caught as a ToolError.
      ...[...refused, "caught"].map(() => ["create_issue", "not_approved", "no_channel"]),
      ["search", "completed", null],
    ]);

    // The agent-facing artifact_forward answers with the same code.
    writeFileSync(join(harness.project, "body.txt"), "body");
    const sid: string = (await harness.health()).server.session_id;
    const created = await harness.call("artifact_create", {
      session_id: sid,
      path: "body.txt",
      format: "text",
    });
    const id = (created.structuredContent as { id: string }).id;
    const forwarded = await harness.call("artifact_forward", {
      session_id: sid,
      id,
      server: "typed",
      tool: "create_issue",
      argument: "body",
      format: "text",
      arguments: { title: "t" },
    });
    expect(forwarded.structuredContent).toMatchObject({ error_code: "APPROVAL_REQUIRED" });
    expect(received()).toEqual(["search"]);
  }, 60_000);

  test("patterns: * and ? globs name the tools; others run", async () => {
    const { harness, received } = await start(["delete_*", "update_?ecord"]);
    expect(await kindAndCode(harness, "mcp.typed.delete_everything(confirm=True)")).toEqual([
      "McpToolError",
      "APPROVAL_REQUIRED",
    ]);
    expect(await kindAndCode(harness, "mcp.typed.update_record(id=1, patch={'tags': []})")).toEqual([
      "McpToolError",
      "APPROVAL_REQUIRED",
    ]);
    expect(await value(harness, outcome("mcp.typed.create_issue(title='t')"))).toEqual(["ok"]);
    expect(received()).toEqual(["create_issue"]);
    // mcp.explain says which calls would wait for the person, from the name alone for patterns.
    expect(
      await value(
        harness,
        "[mcp.explain('typed', t)['approval']['required'] for t in ('delete_everything', 'create_issue')]",
      ),
    ).toEqual([true, false]);
  }, 60_000);

  test('"all": even a read-only tool waits for the person', async () => {
    const { harness, received } = await start("all");
    expect(await kindAndCode(harness, "mcp.typed.search(query='q')")).toEqual([
      "McpToolError",
      "APPROVAL_REQUIRED",
    ]);
    expect(received()).toEqual([]);
  }, 60_000);

  test("a bad value is a configuration error naming the server and the field; Python keeps working", async () => {
    const { harness } = await start("sometimes");
    const [kind, code, message] = (await value(harness, outcome("mcp.servers()"))) as string[];
    expect([kind, code]).toEqual(["ToolError", "CONFIG_INVALID"]);
    expect(message).toContain('MCP server "typed"');
    expect(message).toContain('"approve"');
    expect(await value(harness, "6 * 7")).toBe(42);
  }, 60_000);
});
