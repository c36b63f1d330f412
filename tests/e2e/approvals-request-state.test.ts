// The 2026-07-28 round trip on the wire, from a raw client: a call that needs approval answers
// input_required with one elicitation form and a request state; a forged state, a state for another tool
// and a replayed one are refused with -32602 and send nothing; the genuine retry resumes the parked cell
// (it is not run again) and ends with the cell's result. A form already sent cannot be taken back: when
// the person allows on the viewer page instead, the client's later answer changes nothing.
import { afterEach, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "../support/harness.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";
import { envelope, RawServer } from "../support/raw.ts";
import { EventReader, parseViewerLine, type ViewerAddress } from "../support/viewer.ts";

let raw: RawServer | undefined;
const calls = new PeerCalls();
afterEach(async () => {
  await raw?.close();
  raw = undefined;
  calls.remove();
});

const received = () => calls.tools().length;

test("input_required, then forged, foreign and replayed states are refused; the genuine retry resumes the cell", async () => {
  raw = await RawServer.start({
    era: "modern",
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }),
      ),
  });
  raw.meta = envelope({ elicitation: { form: {} } });
  const health = await raw.call("python_health", {});
  const sid = health.result.structuredContent.server.session_id as string;
  // The cell counts its own runs: a cell run twice would say 2.
  const code = "runs = globals().get('runs', 0) + 1\nmcp.typed.create_issue(title='t')\nruns";
  const args = { session_id: sid, code };
  const first = await raw.call("execute_python", args);
  expect(first.result.resultType).toBe("input_required");
  const keys = Object.keys(first.result.inputRequests);
  expect(keys).toHaveLength(1);
  const key = keys[0] as string;
  expect(first.result.inputRequests[key].method).toBe("elicitation/create");
  expect(first.result.inputRequests[key].params.requestedSchema.required).toEqual(["decision"]);
  const state = first.result.requestState as string;
  const answers = { [key]: { action: "accept", content: { decision: "allow_once" } } };

  const retry = (name: string, requestState: string) =>
    raw?.request("tools/call", {
      name,
      arguments: name === "python_run" ? { session_id: sid } : args,
      inputResponses: answers,
      requestState,
    });
  const forged = `${state.slice(0, -4)}${state.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
  for (const [name, bad] of [
    ["execute_python", forged],
    ["execute_python", "v1.e30.AAAA"],
    ["python_run", state],
  ] as const) {
    const refused = await retry(name, bad);
    expect(refused?.error?.code).toBe(-32602);
    expect(refused?.error?.message).toContain("requestState");
  }
  expect(received()).toBe(0);

  const done = await retry("execute_python", state);
  expect(done?.result.structuredContent).toMatchObject({ success: true, value: 1 });
  expect(received()).toBe(1);
  const replayed = await retry("execute_python", state);
  expect(replayed?.error?.code).toBe(-32602);
  expect(received()).toBe(1);
}, 60_000);

test("answered on the viewer page meanwhile: the form already sent cannot be withdrawn; the client's late answer changes nothing", async () => {
  raw = await RawServer.start({
    era: "modern",
    args: ["--viewer"],
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }),
      ),
  });
  const server = raw;
  await waitFor(() => parseViewerLine(server.stderr) !== undefined, { what: "the viewer line" });
  const viewer = parseViewerLine(server.stderr) as ViewerAddress;
  const page = new EventReader(viewer);
  try {
    await waitFor(() => page.of("hello").length > 0, { what: "the page's snapshot" });
    server.meta = envelope({ elicitation: { form: {} } });
    const sid = (await server.call("python_health", {})).result.structuredContent.server.session_id as string;
    const args = { session_id: sid, code: createIssueCell("both channels") };
    const first = await server.call("execute_python", args);
    expect(first.result.resultType).toBe("input_required");
    const key = Object.keys(first.result.inputRequests)[0] as string;
    // The person allows on the page while the client still shows its form: the call goes at once.
    await waitFor(() => page.of("question").length > 0, { what: "the card on the page" });
    const answered = await fetch(`${viewer.origin}/answer`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: viewer.origin, cookie: viewer.cookie },
      body: JSON.stringify({ id: page.of("question")[0]?.question.id, decision: "allow_once" }),
    });
    expect(answered.status).toBe(200);
    await waitFor(() => received() === 1, { what: "the allowed call to reach the peer" });
    // Later the person answers the client's form too (deny): the retry gets the call's result.
    const retry = await server.request("tools/call", {
      name: "execute_python",
      arguments: args,
      inputResponses: { [key]: { action: "accept", content: { decision: "deny" } } },
      requestState: first.result.requestState,
    });
    expect(retry.result.structuredContent).toMatchObject({ success: true, value: "sent" });
    expect(received()).toBe(1);
  } finally {
    await page.close();
  }
}, 60_000);
