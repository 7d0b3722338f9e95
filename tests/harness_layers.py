"""harness_layers.py: the rooms of harness/ call one another in one direction only (issue 26).

Each room is a folder of harness/; a room may call functions defined in its own folder and in the
rooms below it, never in one above: model < judge < run < report < api < cli. A function is
"defined" in a room where one of its .c files opens a definition of that name (a moects_* or
moects__* name at the start of a line, followed by '('), and "called" where another file names it
followed by '('. Prints every upward call (file -> file: function) and exits 1 if there is one,
0 otherwise.

    python3 tests/harness_layers.py [ROOT]
"""
import os
import re
import sys

ORDER = ["model", "judge", "run", "report", "api", "cli"]


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
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
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
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main())
