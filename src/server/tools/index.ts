// The tool table: only tools that work are listed.
import { executePython } from "./execution.ts";
import { pythonHealth } from "./health.ts";
import type { Tool } from "./tool.ts";

export const TOOLS: readonly Tool[] = [executePython, pythonHealth] as unknown as readonly Tool[];
