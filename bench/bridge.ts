// mcp.call to a stdio MCP peer, per call, side by side in one run:
//   - repl-mcp: a cell's mcp.call (worker → server's broker → peer and back),
//   - the 1.x build's mcp.call, the same way,
//   - the floor bridge (bench/references/floor-bridge.ts): a cell's call() → a minimal Bun server → the
//     SDK client → the peer, the same process boundaries with nothing else on the way,
//   - the SDK client in this process calling the peer directly.
// Each contender has its own copy of the same peer (bench/references/echo-peer.ts). Cells time their own
// calls with perf_counter; blocks of calls take turns, rotating who goes first, so a machine that changes
// pace slows them all. Traced blocks then split each call into phases from CLOCK_MONOTONIC stamps taken
// in the cell, in the worker (around its frame write and read) and in the peer; a run of calls of its own
// gives each process's CPU time per call.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { type Served, type ServerSpec, start } from "./lib/mcp.ts";
import { cpuUse, processTree } from "./lib/proc.ts";
import { median } from "./lib/stats.ts";
import { progress, rotate } from "./phases.ts";

export const BRIDGE_PLAN = {
  /** Untimed calls first, on every side: a server's broker path is still interpreted for a while. */
  warmup: 1000,
  /** Calls per block; a cell's answer holds them all (a value shows at most 100 items). */
  perBlock: 30,
  blocks: 20,
  tracedBlocks: 10,
  cpuCalls: 600,
};

export type BridgeKey = "repl" | "old" | "floor" | "direct";
type CellKey = Exclude<BridgeKey, "direct">;

export interface BridgeSpecs {
  repl: ServerSpec;
  old: ServerSpec;
  floor: ServerSpec;
  /** The peer's command line, for the direct client (the servers find it in their registry or flags). */
  peer: string[];
  env: Record<string, string>;
}

/** One call split at its stamps, in milliseconds. */
export interface CallPhases {
  /** Cell: the call begins → its request is handed to the writer (checked, registered, not yet encoded). */
  outbound: number;
  /** Handed over → the peer has parsed it: encoding and writing it, the server's work before dispatch, two pipe hops. */
  toPeer: number;
  /** The peer: request parsed → response handed to its transport. */
  peer: number;
  /** Handed over → the worker has read the answer: the server's return path, and two pipe hops. */
  back: number;
  /** The worker has the answer → the call returns in the cell. */
  inbound: number;
  total: number;
}

export interface ProcessCall {
  role: string;
  pid: number;
  cpuUs: number;
  wakeups: number;
}

export interface BridgeResult {
  samples: Record<BridgeKey, number[]>;
  /** Each timed block's median, per contender, in the order the rounds ran. */
  blockMedians: Record<BridgeKey, number[]>;
  phases: Record<CellKey, CallPhases[]>;
  cpu: Record<BridgeKey, ProcessCall[]>;
}

// Cells the contenders run. `_bench_traced` swaps in stamping wrappers around the worker's bridge writer
// (stamped as the request frame is handed to it, before it is encoded and written) and its rpc_result
// handler (stamped once the answer is read and decoded), for the block only; worker.py's Bridge section
// names them. The eval loop stamps the same two points.
const PRODUCT_HELPERS = `
import json, time

def _bench_run(n):
    for _ in range(n):
        mcp.call('peer', 'echo', text='x')

def _bench_block(n):
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        mcp.call('peer', 'echo', text='x')
        samples.append((time.perf_counter() - began) * 1000)
    return samples

def _bench_traced(n):
    bridge = type(mcp).call.__globals__['_BRIDGE']
    handlers = bridge.commands.handlers
    writer, deliver = bridge.writer, handlers['rpc_result']
    sent, got = [], []

    class Stamping:
        def send(self, frame):
            sent.append(time.monotonic_ns())
            return writer.send(frame)

        def __getattr__(self, name):
            return getattr(writer, name)

    def stamped(frame):
        got.append(time.monotonic_ns())
        deliver(frame)

    mcp.call('peer', 'stamps')  # forgets the peer's stamps of earlier calls
    rows = []
    bridge.writer, handlers['rpc_result'] = Stamping(), stamped
    try:
        for _ in range(n):
            began = time.monotonic_ns()
            mcp.call('peer', 'echo', text='x')
            rows.append([began, sent[-1], got[-1], time.monotonic_ns()])
    finally:
        bridge.writer, handlers['rpc_result'] = writer, deliver
    peer = json.loads(mcp.call('peer', 'stamps')['content'][0]['text'])
    return json.dumps([rows, peer['arrived'], peer['left']])
`;

const FLOOR_HELPERS = `
import json, time

def _bench_run(n):
    for _ in range(n):
        call('echo', {'text': 'x'})

def _bench_block(n):
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        call('echo', {'text': 'x'})
        samples.append((time.perf_counter() - began) * 1000)
    return samples

def _bench_traced(n):
    call('stamps')  # forgets the peer's stamps of earlier calls
    rows = []
    for _ in range(n):
        stamps = []
        began = time.monotonic_ns()
        call('echo', {'text': 'x'}, stamps)
        rows.append([began, stamps[0][0], stamps[0][1], time.monotonic_ns()])
    peer = json.loads(call('stamps')['content'][0]['text'])
    return [rows, peer['arrived'], peer['left']]
`;

interface Contender {
  key: BridgeKey;
  run(calls: number): Promise<void>;
  block(calls: number): Promise<number[]>;
  traced?(calls: number): Promise<CallPhases[]>;
  /** The processes whose CPU a call costs. */
  pids(): number[];
}

/** A cell's trailing value: repl-mcp gives it as JSON; the eval loop as repr(), read back here. */
type Evaluate = (expression: string) => Promise<unknown>;

function productEvaluate(served: Served): Evaluate {
  return async (expression) => {
    const result = await served.call("execute_python", { code: expression, timeout: 600 });
    const value = (result.structuredContent as { value?: unknown }).value;
    if (value === undefined || value === null) {
      throw new Error(
        `${served.spec.label}: ${expression} gave no value: ${JSON.stringify(result).slice(0, 500)}`,
      );
    }
    return typeof value === "string" ? JSON.parse(value) : value;
  };
}

/** The eval loop answers statements with nothing, so the value is kept in a name and then read. */
function floorEvaluate(served: Served): Evaluate {
  return async (expression) => {
    await served.call("execute_python", { code: `_bench_out = ${expression}`, timeout: 600 });
    const result = await served.call("execute_python", { code: "_bench_out" });
    const block = result.content.find((item) => item.type === "text");
    return JSON.parse(block && block.type === "text" ? block.text : "null");
  };
}

function phasesOf(traced: unknown, label: string): CallPhases[] {
  const [rows, arrived, left] = traced as [number[][], number[], number[]];
  if (rows.length !== arrived.length || rows.length !== left.length) {
    throw new Error(
      `${label}: ${rows.length} traced calls but the peer stamped ${arrived.length}/${left.length}`,
    );
  }
  const ms = (ns: number) => ns / 1e6;
  return rows.map(([began, sent, got, ended], i) => {
    const reached = arrived[i] as number;
    const answered = left[i] as number;
    return {
      outbound: ms((sent as number) - (began as number)),
      toPeer: ms(reached - (sent as number)),
      peer: ms(answered - reached),
      back: ms((got as number) - answered),
      inbound: ms((ended as number) - (got as number)),
      total: ms((ended as number) - (began as number)),
    };
  });
}

async function cellContender(
  key: CellKey,
  served: Served,
  helpers: string,
  evaluate: Evaluate,
): Promise<Contender> {
  await served.call("execute_python", { code: helpers });
  const numbers = async (expression: string) => {
    const value = await evaluate(expression);
    if (!Array.isArray(value))
      throw new Error(`${served.spec.label}: ${expression} answered ${JSON.stringify(value)}`);
    return value;
  };
  return {
    key,
    run: async (calls) => {
      await served.call("execute_python", { code: `_bench_run(${calls})`, timeout: 600 });
    },
    block: async (calls) => (await numbers(`_bench_block(${calls})`)) as number[],
    traced: async (calls) => phasesOf(await numbers(`_bench_traced(${calls})`), served.spec.label),
    pids: () => processTree(served.pid),
  };
}

async function directContender(
  specs: BridgeSpecs,
): Promise<{ contender: Contender; close: () => Promise<void> }> {
  const [command, ...args] = specs.peer as [string, ...string[]];
  const transport = new StdioClientTransport({ command, args, env: specs.env, stderr: "ignore" });
  const client = new Client({ name: "repl-mcp-bench", version: "0.0.0" }, { capabilities: {} });
  await client.connect(transport);
  const call = () => client.callTool({ name: "echo", arguments: { text: "x" } });
  const contender: Contender = {
    key: "direct",
    run: async (calls) => {
      for (let i = 0; i < calls; i++) await call();
    },
    block: async (calls) => {
      const times: number[] = [];
      for (let i = 0; i < calls; i++) {
        const began = performance.now();
        await call();
        times.push(performance.now() - began);
      }
      return times;
    },
    pids: () => [process.pid, transport.pid as number],
  };
  return { contender, close: () => client.close() };
}

function roleOf(pid: number, root: number): string {
  if (pid === process.pid) return "client (this benchmark)";
  if (pid === root) return "server";
  let command = "";
  try {
    command = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {}
  if (command.includes("echo-peer")) return "peer";
  if (/python/.test(command.split("\0")[0] ?? "")) return "Python (worker or eval loop)";
  return "guardian";
}

async function cpuPerCall(contender: Contender, calls: number): Promise<ProcessCall[]> {
  const pids = contender.pids();
  const before = pids.map(cpuUse);
  await contender.run(calls);
  const root = pids[0] as number;
  return pids.map((pid, index) => {
    const after = cpuUse(pid);
    const start = before[index] as { cpuUs: number; wakeups: number };
    return {
      role: contender.key === "direct" ? roleOf(pid, -1) : roleOf(pid, root),
      pid,
      cpuUs: (after.cpuUs - start.cpuUs) / calls,
      wakeups: (after.wakeups - start.wakeups) / calls,
    };
  });
}

export async function brokeredCalls(specs: BridgeSpecs, plan = BRIDGE_PLAN): Promise<BridgeResult> {
  progress(
    `mcp.call: ${plan.blocks}×${plan.perBlock} timed and ${plan.tracedBlocks}×${plan.perBlock} traced calls ` +
      `per contender, after ${plan.warmup} untimed`,
  );
  const repl = (await start(specs.repl)).served;
  const old = (await start(specs.old)).served;
  const floor = (await start(specs.floor)).served;
  const direct = await directContender(specs);
  try {
    const cells = [
      await cellContender("repl", repl, PRODUCT_HELPERS, productEvaluate(repl)),
      await cellContender("old", old, PRODUCT_HELPERS, productEvaluate(old)),
      await cellContender("floor", floor, FLOOR_HELPERS, floorEvaluate(floor)),
    ];
    const all = [...cells, direct.contender];
    for (const contender of all) await contender.run(plan.warmup);
    const samples: BridgeResult["samples"] = { repl: [], old: [], floor: [], direct: [] };
    const blockMedians: BridgeResult["blockMedians"] = { repl: [], old: [], floor: [], direct: [] };
    for (let block = 0; block < plan.blocks; block++) {
      for (const contender of rotate(all, block)) {
        const times = await contender.block(plan.perBlock);
        samples[contender.key].push(...times);
        blockMedians[contender.key].push(median(times));
      }
    }
    const phases: BridgeResult["phases"] = { repl: [], old: [], floor: [] };
    for (let block = 0; block < plan.tracedBlocks; block++) {
      for (const contender of rotate(cells, block)) {
        phases[contender.key as CellKey].push(...((await contender.traced?.(plan.perBlock)) ?? []));
      }
    }
    const cpu = {} as BridgeResult["cpu"];
    for (const contender of all) cpu[contender.key] = await cpuPerCall(contender, plan.cpuCalls);
    return { samples, blockMedians, phases, cpu };
  } finally {
    await Promise.all([repl.stop(), old.stop(), floor.stop(), direct.close()]);
  }
}
