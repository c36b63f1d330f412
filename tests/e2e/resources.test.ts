// Artifacts as MCP resources: listed, read and announced to a real SDK client, and understood by a
// third-party client (the MCP Inspector's CLI).
import { afterAll, afterEach, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness, tempDir, waitFor } from "../support/harness.ts";
import { runInspector } from "../support/inspector.ts";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

test("auto-artifacts come with a resource_link; resources/list and resources/read serve every artifact", async () => {
  h = await Harness.start();
  const harness = h;
  let changes = 0;
  harness.client.setNotificationHandler("notifications/resources/list_changed", () => {
    changes++;
  });
  expect(harness.client.getServerCapabilities()?.resources).toEqual({ listChanged: true });
  const sid: string = (await harness.health()).server.session_id;
  expect((await harness.client.listResources()).resources).toEqual([]);

  const response = await harness.call("execute_python", { code: "'Ж' * 100000" });
  const reference = response.structuredContent.artifact;
  const uri = `repl-mcp://artifacts/${sid}/${reference.id}`;
  expect(response.content).toHaveLength(2);
  expect(response.content[1]).toMatchObject({
    type: "resource_link",
    uri,
    name: reference.id,
    mimeType: "text/plain",
    size: 200_000,
  });
  expect((response.content[0] as { text: string }).text).toContain(uri);
  await waitFor(() => changes >= 1, { what: "resources/list_changed after the auto-artifact" });

  writeFileSync(join(harness.project, "b.bin"), Buffer.from([0, 255, 1]));
  writeFileSync(join(harness.project, "v.json"), '{"k": [1]}');
  const binary = (await harness.call("artifact_create", { session_id: sid, path: "b.bin", format: "binary" }))
    .structuredContent;
  const json = (await harness.call("artifact_create", { session_id: sid, path: "v.json", format: "json" }))
    .structuredContent;
  const listed = (await harness.client.listResources()).resources;
  expect(listed.map((r) => [r.name, r.mimeType, r.size])).toEqual([
    [reference.id, "text/plain", 200_000],
    [binary.id, "application/octet-stream", 3],
    [json.id, "application/json", 10],
  ]);
  for (const resource of listed) expect(resource.uri).toBe(`repl-mcp://artifacts/${sid}/${resource.name}`);

  const text = await harness.client.readResource({ uri });
  expect(text.contents).toEqual([{ uri, mimeType: "text/plain", text: "Ж".repeat(100_000) }]);
  const blob = await harness.client.readResource({ uri: listed[1]?.uri as string });
  expect(blob.contents[0]).toMatchObject({ mimeType: "application/octet-stream", blob: "AP8B" });
  const parsed = await harness.client.readResource({ uri: listed[2]?.uri as string });
  expect(parsed.contents[0]).toMatchObject({ mimeType: "application/json", text: '{"k": [1]}' });

  // Text whose JSON escaping would not fit one message comes as a blob of the same bytes.
  const controls = (await harness.run("'\\x01' * (500 * 1024)")).artifact;
  const escaped = await harness.client.readResource({ uri: `repl-mcp://artifacts/${sid}/${controls.id}` });
  const content = escaped.contents[0] as { mimeType: string; blob: string };
  expect(content.mimeType).toBe("text/plain");
  expect(Buffer.from(content.blob, "base64").equals(Buffer.alloc(500 * 1024, 1))).toBe(true);

  // Too large for one message, unknown, or under another session's id: clear errors.
  const big = (await harness.run("b'\\x00' * (600 * 1024)")).artifact;
  await expect(harness.client.readResource({ uri: `repl-mcp://artifacts/${sid}/${big.id}` })).rejects.toThrow(
    "artifact_read",
  );
  const other = "00000000-0000-4000-8000-000000000000";
  await expect(
    harness.client.readResource({ uri: `repl-mcp://artifacts/${other}/${json.id}` }),
  ).rejects.toThrow("Artifact unknown, expired, evicted or belongs to another session");
  await expect(harness.client.readResource({ uri: "file:///etc/passwd" })).rejects.toThrow(
    "repl-mcp://artifacts/<session_id>/<artifact id>",
  );

  const before = changes;
  await harness.call("artifact_delete", { session_id: sid, id: json.id });
  await waitFor(() => changes > before, { what: "resources/list_changed after a delete" });
  expect((await harness.client.listResources()).resources.map((r) => r.name)).not.toContain(json.id);
}, 30_000);

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const inspector = (...args: string[]) => runInspector(dir, ...args);

test("the MCP Inspector lists resources and templates, reads them, and accepts resource_link results", async () => {
  const listed = await inspector("--method", "resources/list");
  expect([listed.code, JSON.parse(listed.stdout)]).toEqual([0, { resources: [] }]);
  const templates = await inspector("--method", "resources/templates/list");
  expect(JSON.parse(templates.stdout).resourceTemplates[0].uriTemplate).toBe(
    "repl-mcp://artifacts/{session_id}/{id}",
  );
  const called = await inspector(
    "--method",
    "tools/call",
    "--tool-name",
    "execute_python",
    "--tool-arg",
    "code='x'*100000",
  );
  expect(called.code).toBe(0);
  const result = JSON.parse(called.stdout);
  const link = result.content[1];
  expect(link.type).toBe("resource_link");
  expect(link.uri).toBe(
    `repl-mcp://artifacts/${result.structuredContent.session_id}/${result.structuredContent.artifact.id}`,
  );
  // Each inspector run is a new server: the artifact of the previous one is gone with it.
  const read = await inspector("--method", "resources/read", "--uri", link.uri);
  expect(read.code).not.toBe(0);
  expect(read.stdout + read.stderr).toContain(
    "Artifact unknown, expired, evicted or belongs to another session",
  );
}, 60_000);
