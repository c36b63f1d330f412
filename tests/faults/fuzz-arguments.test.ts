// Tool-argument fuzzing: argument objects generated from the input schemas the server publishes (valid,
// boundary and invalid values, wrong types, huge strings, deep nesting, unknown keys, unicode edge
// cases). Every answer must be a -32602 protocol error or a well-formed result that validates against
// the tool's published output schema; the server must never die and must leave no process behind.
// CI runs a fixed seed; REPL_MCP_FUZZ_CASES and REPL_MCP_FUZZ_SEED run longer or other campaigns.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ProtocolError } from "@modelcontextprotocol/client";
import { Ajv } from "@modelcontextprotocol/client/validators/ajv";
import { CallToolResultSchema } from "@modelcontextprotocol/core";
import { Random } from "./random.ts";
import { FaultServer } from "./server.ts";

const CASES = Number(process.env.REPL_MCP_FUZZ_CASES ?? 10_000);
const SEED = Number(process.env.REPL_MCP_FUZZ_SEED ?? 20261130);

type Schema = Record<string, any>;

let server: FaultServer;
afterAll(() => server?.destroy());

beforeAll(async () => {
  server = await FaultServer.start();
});

/** Values for fields that name files: only places inside the test's own directory, never elsewhere. */
function pathPool(base: string): unknown[] {
  const scratch = join(base, "scratch");
  mkdirSync(scratch, { recursive: true });
  writeFileSync(join(scratch, "cell.py"), "print('from a file')\n1 + 1\n");
  return [
    scratch,
    join(scratch, "cell.py"),
    join(scratch, "missing.py"),
    join(scratch, "out.bin"),
    join(scratch, "sub", "deeper", "x"),
    "relative/path",
    "",
    "\u0000",
    "scratch/../scratch",
    join(scratch, "é\u202e名"),
    "python3",
  ];
}

const CODE_POOL = [
  "1 + 1",
  "x = 41\nx + 1",
  "print('hello')",
  "raise ValueError('fuzz')",
  "import sys\nsys.stderr.write('err')",
  "'é' * 10",
  "[i for i in range(100)]",
  "{'a': [1, 2, {'b': None}]}",
  "def f(:",
  "\u0000",
  "await __import__('asyncio').sleep(0)",
  "b'\\xff' * 5",
];

const UNICODE_POOL = [
  "",
  " ",
  "\u0000",
  "\uffff",
  "\ud83d\ude00",
  "\u202e",
  "名前",
  "a".repeat(300),
  "\n\r\t",
];

class Generator {
  constructor(
    private readonly random: Random,
    private readonly paths: unknown[],
  ) {}

  /** Something of the wrong kind for any schema. */
  junk(depth = 0): unknown {
    const r = this.random;
    switch (r.int(10)) {
      case 0:
        return null;
      case 1:
        return r.pick([true, false]);
      case 2:
        return r.pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, 2 ** 64]);
      case 3:
        return r.pick(UNICODE_POOL);
      case 4:
        return "z".repeat(r.pick([1_000, 70_000, 300_000]));
      case 5:
        return depth < 3 ? [this.junk(depth + 1), this.junk(depth + 1)] : [];
      case 6:
        return depth < 3 ? { [r.pick(UNICODE_POOL)]: this.junk(depth + 1) } : {};
      case 7:
        return this.deep(r.pick([10, 100, 1_000]));
      default:
        return r.pick(this.paths);
    }
  }

  deep(levels: number): unknown {
    let value: unknown = 1;
    for (let i = 0; i < levels; i++) value = this.random.int(2) ? [value] : { k: value };
    return value;
  }

  string(name: string, schema: Schema): unknown {
    const r = this.random;
    if (/path|project|python|destination|file|cwd/i.test(name)) return r.pick(this.paths);
    if (name === "code") return r.int(20) === 0 ? r.pick(UNICODE_POOL) : r.pick(CODE_POOL);
    const min = schema.minLength ?? 0;
    const max = Math.min(schema.maxLength ?? 64, 512);
    switch (r.int(6)) {
      case 0:
        return "x".repeat(min);
      case 1:
        return "x".repeat(max);
      case 2:
        return "x".repeat(max + 1);
      case 3:
        return r.pick(UNICODE_POOL);
      case 4:
        return crypto.randomUUID();
      default:
        return "y".repeat(r.int(max + 1));
    }
  }

  number(schema: Schema, integer: boolean): unknown {
    const r = this.random;
    const min = schema.minimum ?? schema.exclusiveMinimum ?? -1e6;
    const max = schema.maximum ?? schema.exclusiveMaximum ?? 1e6;
    const candidates = [min, max, min - 1, max + 1, 0, -1, 1, (min + max) / 2, 0.5, 1.0, 2 ** 64];
    const value = r.pick(candidates);
    return integer && r.int(4) !== 0 ? Math.trunc(value) : value;
  }

  /** A value for `schema`; `valid` steers toward values the schema accepts. */
  value(name: string, schema: Schema, valid: boolean): unknown {
    const r = this.random;
    if (!valid && r.int(3) === 0) return this.junk();
    if (Array.isArray(schema.enum)) return valid || r.int(2) ? r.pick(schema.enum) : "not-a-member";
    const type = Array.isArray(schema.type) ? r.pick(schema.type) : schema.type;
    if (schema.anyOf || schema.oneOf) return this.value(name, r.pick(schema.anyOf ?? schema.oneOf), valid);
    switch (type) {
      case "string":
        return this.string(name, schema);
      case "integer":
        return this.number(schema, true);
      case "number":
        return this.number(schema, false);
      case "boolean":
        // Resets restart the worker: keep them rare so the campaign stays short.
        return name === "reset" ? r.int(50) === 0 : r.pick([true, false]);
      case "array": {
        const n = r.int(4);
        return Array.from({ length: n }, () =>
          schema.items ? this.value(name, schema.items, valid) : this.junk(),
        );
      }
      case "object":
        return this.object(schema, valid);
      case "null":
        return null;
      default:
        return this.junk();
    }
  }

  object(schema: Schema, valid: boolean): Record<string, unknown> {
    const r = this.random;
    const out: Record<string, unknown> = {};
    const required = new Set<string>(schema.required ?? []);
    for (const [key, property] of Object.entries<Schema>(schema.properties ?? {})) {
      const include = required.has(key) ? valid || r.int(8) !== 0 : r.int(3) === 0;
      if (include) out[key] = this.value(key, property, valid);
    }
    if (!valid && r.int(4) === 0) out[r.pick(["unknown", "__proto__", "constructor", "é"])] = this.junk();
    return out;
  }
}

test(
  `tool-argument fuzzing: ${CASES} cases, seed ${SEED}`,
  async () => {
    const random = new Random(SEED);
    const generator = new Generator(random, pathPool(server.dir));
    const { tools } = await server.client.listTools();
    const ajv = new Ajv({ strict: false, allErrors: false });
    const validators = new Map(tools.map((tool) => [tool.name, ajv.compile(tool.outputSchema ?? {})]));
    const problems: string[] = [];
    const tally = { protocolError: 0, result: 0, isError: 0 };

    for (let i = 0; i < CASES && problems.length < 5; i++) {
      const roll = random.int(100);
      const tool = roll === 0 ? { name: "no_such_tool", inputSchema: {} } : random.pick(tools);
      const valid = random.int(3) !== 0;
      let args: unknown = generator.object(tool.inputSchema as Schema, valid);
      if (roll === 1) args = random.pick([[], "text", 7, null, [1, 2]]);
      try {
        const result = await server.client.request(
          { method: "tools/call", params: { name: tool.name, arguments: args as Record<string, unknown> } },
          CallToolResultSchema,
          { timeout: 60_000 },
        );
        tally.result++;
        if (result.isError) tally.isError++;
        const validate = validators.get(tool.name);
        const structured = result.structuredContent;
        if (!structured) problems.push(`#${i} ${tool.name}: result without structuredContent`);
        else if (validate && !validate(structured))
          problems.push(
            `#${i} ${tool.name}: output violates its schema: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(structured).slice(0, 300)}`,
          );
        if (result.content[0]?.type !== "text") problems.push(`#${i} ${tool.name}: first block is not text`);
      } catch (error) {
        if (error instanceof ProtocolError && error.code === -32602) tally.protocolError++;
        else
          problems.push(
            `#${i} ${tool.name} ${JSON.stringify(args).slice(0, 200)}: ${error instanceof ProtocolError ? error.code : ""} ${String(error).slice(0, 300)}`,
          );
      }
      if (server.exited()) {
        problems.push(`#${i} ${tool.name}: the server exited`);
        break;
      }
    }

    expect(problems).toEqual([]);
    // The campaign exercised both sides of the contract.
    expect(tally.protocolError).toBeGreaterThan(CASES / 20);
    expect(tally.result - tally.isError).toBeGreaterThan(CASES / 50);
    await server.assertServing();
    await server.finish();
    expect(server.invalidLines()).toEqual([]);
  },
  { timeout: 900_000 },
);
