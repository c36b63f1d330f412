// The 2025-11-25 task methods, spoken by hand: the SDK's 2.x client keeps their schemas as wire vocabulary
// but no longer wraps them (its 1.x `experimental.tasks` API is gone). A task is a `tools/call` whose
// params carry `task`; it is then read with tasks/get and tasks/result, stopped with tasks/cancel and
// listed with tasks/list, each an explicit-schema request.
import type { CallToolResult, Client, JSONRPCMessage, Task } from "@modelcontextprotocol/client";
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  ListTasksResultSchema,
} from "@modelcontextprotocol/core";
import type { ToolResult } from "./harness.ts";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

export type StreamMessage =
  | { type: "taskCreated"; task: Task }
  | { type: "taskStatus"; task: Task }
  | { type: "result"; result: CallToolResult }
  | { type: "error"; error: Error };

export interface CreateOptions {
  /** The `ttl` to ask for; omitted, the task request is `{}` and the server picks it. */
  ttl?: number;
  /** Called with each `notifications/progress` the server sends for this call, for the task's lifetime. */
  onprogress?: (progress: { progress: number; total?: number; message?: string }) => void;
}

export class LegacyTasks {
  private readonly progressListeners = new Map<string, NonNullable<CreateOptions["onprogress"]>>();
  private tapped = false;

  constructor(private readonly client: Client) {}

  /** Starts a tool call as a task and returns the task the server created. */
  async create(name: string, args: Record<string, unknown>, options: CreateOptions = {}): Promise<Task> {
    const params: Record<string, unknown> = {
      name,
      arguments: args,
      task: options.ttl === undefined ? {} : { ttl: options.ttl },
    };
    if (options.onprogress) {
      // The SDK drops its own progress handler when the call's response (the created task) arrives, but
      // in 2025-11-25 the token stays valid for the task's lifetime: this call uses a token of its own.
      const token = `task-progress-${crypto.randomUUID()}`;
      this.listenForProgress();
      this.progressListeners.set(token, options.onprogress);
      params._meta = { progressToken: token };
    }
    const created = await this.client.request({ method: "tools/call", params }, CreateTaskResultSchema, {
      timeout: 60_000,
    });
    return created.task;
  }

  async get(taskId: string): Promise<Task> {
    return await this.client.request({ method: "tasks/get", params: { taskId } }, GetTaskResultSchema);
  }

  async result(taskId: string): Promise<ToolResult> {
    return (await this.client.request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema, {
      timeout: 120_000,
    })) as ToolResult;
  }

  async cancel(taskId: string): Promise<Task> {
    return await this.client.request({ method: "tasks/cancel", params: { taskId } }, CancelTaskResultSchema);
  }

  async list(cursor?: string) {
    const params = cursor === undefined ? {} : { cursor };
    return await this.client.request({ method: "tasks/list", params }, ListTasksResultSchema);
  }

  /**
   * Runs a tool call as a task to its end, as a client polling at the server's interval does: the created
   * task, each status read, then the result (completed) or an error (failed, cancelled).
   */
  async *stream(
    name: string,
    args: Record<string, unknown>,
    options: CreateOptions = {},
  ): AsyncGenerator<StreamMessage> {
    try {
      const created = await this.create(name, args, options);
      yield { type: "taskCreated", task: created };
      for (;;) {
        const task = await this.get(created.taskId);
        yield { type: "taskStatus", task };
        if (TERMINAL.has(task.status)) {
          if (task.status === "completed") yield { type: "result", result: await this.result(task.taskId) };
          else yield { type: "error", error: new Error(`Task ${task.taskId} ${task.status}`) };
          return;
        }
        await Bun.sleep(task.pollInterval ?? 1000);
      }
    } catch (error) {
      yield { type: "error", error: error instanceof Error ? error : new Error(String(error)) };
    }
  }

  /** Sees every progress notification before the SDK does, and hands this helper's own tokens over. */
  private listenForProgress(): void {
    if (this.tapped) return;
    const transport = this.client.transport;
    if (!transport) throw new Error("the client is not connected");
    this.tapped = true;
    const deliver = transport.onmessage;
    transport.onmessage = (message: JSONRPCMessage, extra) => {
      if ("method" in message && message.method === "notifications/progress") {
        const { progressToken, ...progress } = (message.params ?? {}) as Record<string, any>;
        const listener = this.progressListeners.get(String(progressToken));
        if (listener) {
          listener(progress as never);
          return;
        }
      }
      deliver?.(message, extra);
    };
  }
}
