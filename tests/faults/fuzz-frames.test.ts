// Worker-frame fuzzing: the session's interpreter is a stand-in that answers each cell with random and
// mutated frames (tests/fixtures/workers/frame-fuzzer.py). Every cell must end in a result that
// validates against execute_python's output schema: the stand-in's result when it was valid, otherwise
// an honest failure (a crash report or a timeout), and the server keeps serving its other sessions.
import { afterAll, expect, test } from "bun:test";
import { resolve } from "node:path";
import { Ajv } from "@modelcontextprotocol/client/validators/ajv";
import { CallToolResultSchema } from "@modelcontextprotocol/core";
import { FaultServer } from "./server.ts";

const CASES = Number(process.env.REPL_MCP_FRAME_FUZZ_CASES ?? 80);
const SEED = Number(process.env.REPL_MCP_FUZZ_SEED ?? 20261130);
const DOUBLE = resolve(import.meta.dir, "../fixtures/workers/frame-fuzzer.py");

let server: FaultServer | undefined;
afterAll(() => server?.destroy());

test(
  `worker-frame fuzzing: ${CASES} cells, seed ${SEED}`,
  async () => {
    server = await FaultServer.start({ env: { FRAME_FUZZ_SEED: String(SEED) } });
    const { tools } = await server.client.listTools();
    const schema = tools.find((tool) => tool.name === "execute_python")?.outputSchema;
    const validate = new Ajv({ strict: false }).compile(schema ?? {});
    const opened = await server.call("python_session_open", {
      name: "fuzzed",
      project: server.project,
      python: DOUBLE,
    });
    expect(opened.isError).toBeFalsy();
    const session_id = opened.structuredContent.session_id;

    const problems: string[] = [];
    const outcomes = { success: 0, failure: 0 };
    for (let i = 0; i < CASES && problems.length < 5; i++) {
      const result = await server.client.request(
        {
          method: "tools/call",
          params: { name: "execute_python", arguments: { code: `# case ${i}`, session_id, timeout: 2 } },
        },
        CallToolResultSchema,
        { timeout: 60_000 },
      );
      const structured = result.structuredContent as Record<string, any> | undefined;
      if (!structured || !validate(structured)) {
        problems.push(`case ${i}: invalid result ${JSON.stringify(result).slice(0, 400)}`);
        continue;
      }
      if (structured.success) outcomes.success++;
      else {
        outcomes.failure++;
        if (!structured.error) problems.push(`case ${i}: a failure without an error message`);
      }
      if (Boolean(result.isError) === Boolean(structured.success))
        problems.push(`case ${i}: isError disagrees with success`);
    }
    expect(problems).toEqual([]);
    console.error(`frame fuzzing outcomes: ${JSON.stringify(outcomes)}`);
    expect(outcomes.success).toBeGreaterThan(0);
    expect(outcomes.failure).toBeGreaterThan(0);
    // The default session, on the real worker, is untouched by the other session's chaos.
    await server.assertServing();
    await server.finish();
    expect(server.invalidLines()).toEqual([]);
  },
  { timeout: 900_000 },
);
