// The tool table: only tools that work are listed.
import { artifactCreate, artifactDelete, artifactForward, artifactRead, artifactSave } from "./artifacts.ts";
import { executePython, pythonExecuteFile } from "./execution.ts";
import { pythonHealth } from "./health.ts";
import { pythonCancel, pythonRun, pythonStart } from "./runs.ts";
import {
  pythonSessionClose,
  pythonSessionInspect,
  pythonSessionList,
  pythonSessionOpen,
} from "./sessions.ts";
import type { ListedTool } from "./tool.ts";

export const TOOLS: readonly ListedTool[] = [
  executePython,
  pythonStart,
  pythonRun,
  pythonCancel,
  pythonHealth,
  pythonSessionOpen,
  pythonSessionList,
  pythonSessionInspect,
  pythonSessionClose,
  pythonExecuteFile,
  artifactCreate,
  artifactRead,
  artifactSave,
  artifactDelete,
  artifactForward,
];
