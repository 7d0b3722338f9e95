"""harness_layers.py: the rooms of harness/ call one another in one direction only, and only the op
table knows the ops (issue 26).

Each room is a folder of harness/; a room may call functions defined in its own folder and in the
rooms below it, never in one above: model < ops < judge < run < report < api < cli. A function is
"defined" in a room where one of its .c files opens a definition of that name (a moects_* or
moects__* name at the start of a line, followed by '('), and "called" where another file names it
followed by '('. Prints every upward call (file -> file: function) and exits 1 if there is one,
0 otherwise. Then it counts the op switches outside the op table: any source or header of harness/
outside harness/ops/ that names an op's enum value (the MOECTS_OP_DEF lines of harness/ops/ops.def);
one is a failure too (the op table is how the harness asks an op anything).

    python3 tests/unit/harness_layers.py [ROOT]
"""
import os
import re
import sys

ORDER = ["model", "ops", "judge", "run", "report", "api", "cli"]


def rooms_of(root):
    """{room: {file name: text}} for the folders of harness/ that ORDER names (others: an error)."""
    h = os.path.join(root, "harness")
    out = {}
    for d in sorted(os.listdir(h)):
        if not os.path.isdir(os.path.join(h, d)):
            continue
        if d not in ORDER:
            sys.exit("harness_layers: harness/%s/: a room this test does not place (ORDER: %s)" % (d, ", ".join(ORDER)))
        out[d] = {f: open(os.path.join(h, d, f)).read() for f in sorted(os.listdir(os.path.join(h, d)))
                  if f.endswith(".c")}
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    rooms = rooms_of(root)
    defined = {}
    definition = re.compile(r"^(?:[a-z_]+\s+\**)+\**(moects_?_?[a-z0-9_]+)\(", re.M)
    for room, files in rooms.items():
        for f, text in files.items():
            for m in definition.finditer(text):
                defined.setdefault(m.group(1), (room, f))
    upward = []
    for room, files in rooms.items():
        for f, text in files.items():
            for name, (droom, df) in defined.items():
                if ORDER.index(droom) > ORDER.index(room) and re.search(r"\b%s\(" % re.escape(name), text):
                    upward.append("harness/%s/%s -> harness/%s/%s: %s" % (room, f, droom, df, name))
    for line in sorted(upward):
        print("upward call: " + line)
    n = sum(len(v) for v in rooms.values())
    print("harness_layers: %d files in %d rooms (%s), %d upward calls" % (n, len(rooms), " < ".join(
        r for r in ORDER if r in rooms), len(upward)))
    switches = op_switches(root)
    for line in switches:
        print("op switch outside the op table: " + line)
    print("harness_layers: %d op switches outside harness/ops/" % len(switches))
    return 1 if upward or switches else 0


def op_switches(root):
    """["harness/FILE:LINE: text"] for every line outside harness/ops/ naming an op's enum value."""
    h = os.path.join(root, "harness")
    ops = re.findall(r"^MOECTS_OP_DEF\((MOECTS_OP_[A-Z0-9_]+),", open(os.path.join(h, "ops", "ops.def")).read(), re.M)
    if not ops:
        sys.exit("harness_layers: harness/ops/ops.def: no MOECTS_OP_DEF line")
    name = re.compile(r"\b(%s)\b" % "|".join(ops))
    out = []
    for d, _, files in sorted(os.walk(h)):
        if os.path.relpath(d, h).split(os.sep)[0] == "ops":
            continue
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(d, f)
                for i, line in enumerate(open(path), 1):
                    if name.search(line):
                        out.append("%s:%d: %s" % (os.path.relpath(path, root), i, line.strip()))
    return out


if __name__ == "__main__":
    sys.exit(main())
