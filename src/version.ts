import pkg from "../package.json" with { type: "json" };

export const NAME = "repl-mcp";
export const VERSION: string = pkg.version;
