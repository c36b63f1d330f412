// Issue 12, defect 6, at the unit level: the execute frame of a cell within the code limit whose JSON
// escaping outgrows the frame is reported as not fitting (the supervisor turns that into a refusal)
// instead of throwing.
import { expect, test } from "bun:test";
import { encodeExecuteFrame } from "../../src/worker/execute-frame.ts";

test("a cell of escaped control characters does not fit; an ordinary cell does", () => {
  const code = `x = "${"\u0001".repeat(200_000)}"`;
  expect(new TextEncoder().encode(code).length).toBeLessThanOrEqual(262_144);
  expect(encodeExecuteFrame("run", { kind: "cell", code }, 120)).toBeUndefined();
  const small = encodeExecuteFrame("run", { kind: "cell", code: "1 + 1" }, 120);
  expect(JSON.parse(new TextDecoder().decode(small))).toEqual({
    type: "execute",
    id: "run",
    timeout: 120,
    code: "1 + 1",
  });
});
