// What every tested agent client must put in front of its model (issue "What the model sees", section 2),
// asserted on what the fake model API received: one set of checks, so each client is held to the same
// promises. A client's own wrapper around a result (Codex's "Wall time: … Output:") is the client's and
// is not counted against our byte budgets.
import { expect, test } from "bun:test";
import type { AgentRun } from "./client.ts";
import type { Seen } from "./script.ts";

export type ModelView = Pick<AgentRun, "seen" | "tools" | "transcript">;

export interface ClientTraits {
  /** The client's own text around each result, removed before measuring ours. */
  wrapper?: RegExp;
  /** Whether the client's model API carries an error flag for a tool result (then it must be set). */
  errorFlag: boolean;
  /** The stateless 2026-07-28 revision (cells must name their session). */
  modern: boolean;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const VALUE_MAX_BYTES = 160;
const HEALTH_MAX_BYTES = 600;

const bytes = (text: string) => Buffer.byteLength(text);

/** Registers the section-2 tests for one client; `view()` is its recorded run (filled in beforeAll). */
export function modelViewTests(view: () => ModelView, traits: ClientTraits): void {
  const seen = (step: string): Seen => {
    const entry = view().seen.get(step);
    if (!entry) throw new Error(`the model never saw a result for step ${step}`);
    return entry;
  };
  const ours = (step: string): string => {
    const text = seen(step).text;
    return traits.wrapper ? text.replace(traits.wrapper, "") : text;
  };
  const failed = (step: string) => {
    if (traits.errorFlag) expect(seen(step).error).toBe(true);
  };

  test("pictures: the plot reaches the model as an image", () => {
    const images = seen("plot").images;
    expect(images.length).toBe(1);
    expect(images[0]?.mimeType).toBe("image/png");
    expect(images[0]?.bytes).toBeGreaterThan(1_000);
  });

  test("essentials: x = 21*2; x is the value, once, in at most 160 bytes, with no identifier", () => {
    const text = ours("value");
    expect(bytes(text)).toBeLessThanOrEqual(VALUE_MAX_BYTES);
    expect(text.match(/42/g)?.length).toBe(1);
    expect(text.match(UUID)).toBeNull();
    expect(seen("value").error).not.toBe(true);
  });

  test("essentials: python_health in at most 600 bytes, with the session id only where the era needs it", () => {
    const text = ours("health");
    expect(bytes(text)).toBeLessThanOrEqual(HEALTH_MAX_BYTES);
    const ids = text.match(UUID) ?? [];
    expect(ids.length).toBe(traits.modern ? 1 : 0);
    expect(text).toContain("/usr/bin/python3");
  });

  test("essentials: printed lines read as lines, then the value", () => {
    const text = ours("prints");
    expect(text).toContain("line 0\nline 1\nline 2\n");
    expect(text).toContain('{"a": 1, "b": [1, 2]}');
    expect(text).not.toContain("\\n");
    expect(text.match(UUID)).toBeNull();
  });

  test("failures: 1/0 is flagged, with its code, exception and traceback", () => {
    failed("zero");
    const text = ours("zero");
    expect(text).toContain("PYTHON_EXCEPTION");
    expect(text).toContain("ZeroDivisionError: division by zero");
    expect(text).toContain("Traceback");
  });

  test("failures: the output printed before an exception comes with it", () => {
    failed("printed-then-raised");
    const text = ours("printed-then-raised");
    expect(text).toContain("before the failure");
    expect(text).toContain("ValueError: bad input 7");
    expect(text).toContain("PYTHON_EXCEPTION");
    expect(text.indexOf("before the failure")).toBeLessThan(text.indexOf("ValueError"));
  });

  test("a 6 s cell ends with its value", () => {
    expect(ours("slow")).toContain("slept");
    expect(seen("slow").error).not.toBe(true);
  });

  test("long work: a started run polled with python_run shows its output so far, its status, then its result", () => {
    const started = ours("start");
    expect(started.match(UUID)?.length).toBe(1);
    expect(started).toContain("python_run");
    const running = ours("poll-running");
    expect(running).toContain("running");
    expect(running).toContain("tick 0");
    expect(running).not.toContain("tick 3");
    const finished = ours("poll-finished");
    expect(finished).toContain("finished");
    expect(finished).toContain("tick 0\ntick 1\ntick 2\ntick 3");
    expect(finished).toContain("done");
  });

  test("long work: the descriptions say when to prefer python_start", () => {
    const described = (name: string) =>
      view().tools.find((tool) => tool.name.endsWith(name))?.description ?? "";
    expect(described("execute_python")).toContain("python_start");
    expect(described("execute_python")).toContain("30 s");
    expect(described("python_start")).toContain("30 s");
  });

  test("a DataFrame preview shows its columns and rows as a table", () => {
    const text = ours("dataframe");
    expect(text).toMatch(/city\s+temp/);
    expect(text).toMatch(/Oslo\s+3\.5/);
    expect(text).not.toContain("\\n");
  });

  test("a large value becomes an artifact, and the text says how to read it", () => {
    const text = ours("large");
    expect(text).toContain("artifact");
    expect(text).toContain("artifact_read");
    expect(bytes(text)).toBeLessThan(1_000);
  });

  test("a cell without session_id: the default session, or (2026) an error that says what to pass", () => {
    const text = ours("no-session");
    if (traits.modern) {
      expect(text).toContain("session_id");
      failed("no-session");
    } else {
      expect(text).toContain("anonymous");
    }
  });

  test("honest capabilities: no tasks announced to a revision without them", () => {
    const answers = view().transcript.filter((line) => line.from === "server" && line.message.result);
    const opening = answers.find(
      (line) => line.message.result.protocolVersion || line.message.result.supportedVersions,
    );
    expect(opening).toBeDefined();
    const result = opening?.message.result;
    if (result.protocolVersion && result.protocolVersion !== "2025-11-25") {
      expect(result.capabilities.tasks).toBeUndefined();
    }
    if (result.supportedVersions) expect(result.capabilities.tasks).toBeUndefined();
  });
}
