// worker.py imported as a module (what a host with its own transport, such as a Jupyter kernel, will
// do) changes nothing process-wide: the standard descriptors stay where they were, SIGINT keeps its
// handler, input() stays the builtin, and the engine's pieces are there to use. Run as the server runs
// it (__main__), it still takes the descriptors over: every other test shows that.
import { expect, test } from "bun:test";
import { resolve } from "node:path";

const WORKER = resolve(import.meta.dir, "../../worker.py");
const PYTHON = Bun.which("python3") ?? "/usr/bin/python3";

const CHECK = `
import builtins, importlib.util, json, os, signal, sys
def state():
    return [os.fstat(0).st_ino, os.fstat(1).st_ino, os.fstat(2).st_ino, repr(signal.getsignal(signal.SIGINT)),
            builtins.input is ORIGINAL_INPUT, len(sys.meta_path)]
ORIGINAL_INPUT = builtins.input
before = state()
spec = importlib.util.spec_from_file_location("repl_mcp_engine", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({"same": state() == before, "process": module.WORKER_PROCESS, "fds": [module.COMMAND_FD, module.PROTOCOL_FD],
                  "engine": all(hasattr(module, name) for name in ("_Session", "_compile_cell", "_Bridge", "_Displays"))}))
`;

test("importing worker.py takes over no descriptor, signal or builtin", () => {
  const result = Bun.spawnSync([PYTHON, "-c", CHECK, WORKER], { stderr: "pipe" });
  expect(result.stderr.toString()).toBe("");
  expect(JSON.parse(result.stdout.toString())).toEqual({
    same: true,
    process: false,
    fds: [null, null],
    engine: true,
  });
});
