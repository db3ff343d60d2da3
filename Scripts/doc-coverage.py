#!/usr/bin/python3
"""Doc-comment coverage of the library modules, counted from their symbol graphs.

    Scripts/doc-coverage.py                   # every library module; exit 1 when a declaration has no doc comment
    Scripts/doc-coverage.py --module H264     # one module (repeatable)
    Scripts/doc-coverage.py --symbol-graph-dir DIR   # read graphs already dumped there instead of dumping them
    Scripts/doc-coverage.py --list-modules    # the modules it checks

The modules: the Swift targets of the package's library products and the package's own Swift targets they depend on
(SystemIO), from `swift package describe`. Their symbol graphs come from `swift package dump-symbol-graph
--minimum-access-level public` (which builds what is missing first: after `swift build` it takes seconds), so only
public and open declarations are counted (`package` and SPI ones are not).

What counts, and why:
  - A declaration counts when it is written in the module's own folder, Sources/<Module>/: the symbol has a source
    location there. Extensions of other modules' types (Module@Swift.symbols.json, Module@VideoCapture…) belong to
    the module that writes them.
  - Not counted, because no line of ours declares them: members the compiler synthesizes or copies into our types
    (precise identifiers with ::SYNTHESIZED::: Equatable's !=, Comparable's <=, RawRepresentable's hashValue, a
    protocol extension's default implementation as seen on each conforming type; the original declaration, if it is
    ours, is counted once where it is written), and any symbol without a source location (inherited from another
    module). Names that start with an underscore are hidden by DocC and not counted either.
  - Documented: the declaration has a non-empty doc comment of its own (/// or /** */ right above it), or it
    implements or overrides a requirement and inherits that requirement's documentation (`description`,
    `hash(into:)`, `==`, `encode(to:)`, a NIO handler's `channelRead`…), which DocC shows on the member. Inherited
    ones are counted apart; `--strict` does not accept them.

Each missing one is printed as `Module: path:line: kind name`, then a line per module with documented/total, and the
exit status is 1 if any is missing (2 for a usage or build error).
"""

import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def library_modules():
    """Swift targets of the library products, plus the package's own Swift library targets they depend on."""
    out = subprocess.run(
        ["swift", "package", "--package-path", ROOT, "describe", "--type", "json"],
        check=True, capture_output=True, text=True).stdout
    desc = json.loads(out[out.index("{"):])
    targets = {t["name"]: t for t in desc["targets"]}
    roots = [name for p in desc["products"] if "library" in p["type"] for name in p["targets"]]
    modules, todo = [], list(roots)
    while todo:
        name = todo.pop(0)
        t = targets.get(name)
        if name in modules or t is None or t.get("module_type") != "SwiftTarget" or t.get("type") != "library":
            continue
        modules.append(name)
        todo.extend(t.get("target_dependencies") or [])
    return modules, targets


def dump_symbol_graphs(modules):
    """Dumps the symbol graphs and returns their directory. The dump also tries the test runner's generated modules
    (swift_video_capturePackageTests…), which exist only after a test build and fail otherwise: a failure counts only
    when one of `modules` has no graph written by this run."""
    log = os.path.join(ROOT, ".build", "doc-coverage-dump.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    started = time.time()
    with open(log, "w") as f:
        status = subprocess.run(
            ["swift", "package", "--package-path", ROOT, "dump-symbol-graph", "--minimum-access-level", "public"],
            stdout=f, stderr=subprocess.STDOUT).returncode
    text = open(log).read()
    m = re.search(r"Files written to (\S+)", text)
    def fresh(module):
        graph = os.path.join(m.group(1), f"{module}.symbols.json") if m else ""
        return bool(m) and os.path.exists(graph) and os.path.getmtime(graph) >= started - 1

    stale = [module for module in modules if not fresh(module)]
    if status != 0 and (stale or not m):
        sys.stderr.write(text[-4000:])
        sys.exit(f"doc-coverage: swift package dump-symbol-graph failed ({status}) for {', '.join(stale) or 'the package'}; "
                 f"the whole log: {log}")
    return m.group(1)


def doc_text(doc):
    return "".join(line.get("text", "") for line in (doc or {}).get("lines", [])).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", action="append", help="check only this module (repeatable)")
    ap.add_argument("--symbol-graph-dir", help="read *.symbols.json from here instead of dumping them")
    ap.add_argument("--strict", action="store_true", help="inherited documentation does not count")
    ap.add_argument("--list-modules", action="store_true", help="print the modules checked, one a line, and stop")
    args = ap.parse_args()

    modules, targets = library_modules()
    if args.list_modules:
        print("\n".join(modules))
        return 0
    if args.module:
        unknown = [m for m in args.module if m not in modules]
        if unknown:
            sys.stderr.write(f"doc-coverage: not a library module: {', '.join(unknown)} (modules: {', '.join(modules)})\n")
            return 2
        modules = [m for m in modules if m in args.module]

    directory = args.symbol_graph_dir or dump_symbol_graphs(modules)

    # Every symbol of ours, by module, once (a symbol can be in more than one graph file).
    symbols = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(directory, "*.symbols.json")):
        module = os.path.basename(path).split(".symbols.json")[0].split("@")[0]
        if module not in modules:
            continue
        folder = os.path.join(ROOT, targets[module].get("path", os.path.join("Sources", module))) + os.sep
        for s in json.load(open(path))["symbols"]:
            precise = s["identifier"]["precise"]
            loc = s.get("location")
            if "::SYNTHESIZED::" in precise or not loc or not loc["uri"].startswith("file://"):
                continue
            file = loc["uri"][len("file://"):]
            if not file.startswith(folder) or s["names"]["title"].startswith("_"):
                continue
            symbols[module][precise] = (s, file)

    # Where each file declares something: a doc comment is a declaration's own when it is in the same file, ends
    # above it and no other declaration lies between the two (an inherited one points at the requirement instead).
    lines_by_file = collections.defaultdict(set)
    for table in symbols.values():
        for s, file in table.values():
            lines_by_file[file].add(s["location"]["position"]["line"])

    def own_doc(s, file):
        doc = s.get("docComment")
        if not doc_text(doc) or doc.get("uri") != s["location"]["uri"]:
            return False
        ranges = [line["range"] for line in doc["lines"] if "range" in line]
        if not ranges:
            return False
        end, decl = ranges[-1]["end"]["line"], s["location"]["position"]["line"]
        return end < decl and not any(end < other < decl for other in lines_by_file[file])

    missing_total = 0
    report = []
    for module in modules:
        documented = inherited = 0
        missing = []
        for s, file in symbols[module].values():
            if own_doc(s, file):
                documented += 1
            elif doc_text(s.get("docComment")) and not args.strict:
                inherited += 1
            else:
                pos = s["location"]["position"]
                kind = s["kind"]["identifier"].removeprefix("swift.")
                name = ".".join(s["pathComponents"])
                missing.append((os.path.relpath(file, ROOT), pos["line"] + 1, kind, name))
        for rel, line, kind, name in sorted(missing):
            print(f"{module}: {rel}:{line}: {kind} {name}")
        total = len(symbols[module])
        missing_total += len(missing)
        extra = f" (+{inherited} inheriting a requirement's docs)" if inherited else ""
        report.append(f"  {module}: {documented + inherited}/{total} documented{extra}, {len(missing)} missing")
    print("doc coverage (public declarations with a doc comment):")
    print("\n".join(report))
    if missing_total:
        print(f"doc-coverage: {missing_total} public declaration(s) without a doc comment")
        return 1
    print("doc-coverage: every public declaration has a doc comment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
