// The 2026-07-28 round trip on the wire, from a raw client: a call that needs approval answers
// input_required with one elicitation form and a request state; a forged state, a state for another tool
// and a replayed one are refused with -32602 and send nothing; the genuine retry resumes the parked cell
// (it is not run again) and ends with the cell's result.
import { afterEach, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PeerCalls } from "../support/peer-calls.ts";
import { envelope, RawServer } from "../support/raw.ts";

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
