// `${NAME}` placeholders in configuration values (the broker's registry, the kernel servers file), filled
// from the environment. Nothing else in a value is special. Each caller words the problems for its file.

export type PlaceholderProblem = "unclosed" | "invalid_name" | "missing" | "empty";

export class PlaceholderError extends Error {
  constructor(
    readonly problem: PlaceholderProblem,
    /** The variable's name (never its value), when the problem is about one. */
    readonly variable?: string,
  ) {
    super(`placeholder ${problem}${variable ? ` ${variable}` : ""}`);
    this.name = "PlaceholderError";
  }
}

export function fillPlaceholders(value: string, env: NodeJS.ProcessEnv): string {
  let out = "";
  let index = 0;
  for (;;) {
    const start = value.indexOf("${", index);
    if (start === -1) return out + value.slice(index);
    const end = value.indexOf("}", start + 2);
    if (end === -1) throw new PlaceholderError("unclosed");
    const name = value.slice(start + 2, end);
    if (!/^[A-Za-z0-9_]+$/.test(name)) throw new PlaceholderError("invalid_name");
    const resolved = env[name];
    if (resolved === undefined) throw new PlaceholderError("missing", name);
    if (resolved === "") throw new PlaceholderError("empty", name);
    out += value.slice(index, start) + resolved;
    index = end + 1;
  }
}

/** The variables a value names (for keeping them from children), whether or not they are set. */
export function placeholderNames(value: string): string[] {
  return [...value.matchAll(/\$\{([A-Za-z0-9_]+)\}/g)].map((match) => match[1] as string);
}
