// The shape of a doctor report: sections of findings, each finding ok, a plain note, or a problem that
// comes with the action that fixes it. The JSON form carries the same findings plus each section's data.

export type Level = "ok" | "note" | "problem";

export interface Finding {
  level: Level;
  text: string;
  /** What to do about it; always present for a problem. */
  action?: string;
}

export interface Section<Data = unknown> {
  title: string;
  data: Data;
  findings: Finding[];
}

export const ok = (text: string): Finding => ({ level: "ok", text });
export const note = (text: string, action?: string): Finding => ({ level: "note", text, action });
export const problem = (text: string, action: string): Finding => ({ level: "problem", text, action });
