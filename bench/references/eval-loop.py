"""The composed floor's Python side: the least a persistent REPL worker can be.

Reads one JSON object per line on stdin ({"id": N, "code": "..."}), evaluates the code in one
persistent namespace (as an expression if it is one, else as statements), and writes one JSON line
back ({"id": N, "value": repr-or-null} or {"id": N, "error": "..."}). Standard library only.
"""

import json
import sys


def main() -> None:
    namespace = {"__name__": "__main__"}
    out = sys.stdout
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        reply = {"id": request["id"]}
        try:
            source = request["code"]
            try:
                compiled = compile(source, "<cell>", "eval")
            except SyntaxError:
                exec(compile(source, "<cell>", "exec"), namespace)
                reply["value"] = None
            else:
                reply["value"] = repr(eval(compiled, namespace))
        except BaseException as error:  # noqa: BLE001 - a REPL reports every failure
            reply["error"] = f"{type(error).__name__}: {error}"
        out.write(json.dumps(reply) + "\n")
        out.flush()


main()
