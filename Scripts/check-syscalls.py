#!/usr/bin/env python3
"""One I/O layer (#19, #38), checked at link level: Scripts/check-syscalls.sh runs this after `swift build`.

Swift calls a C function by its C symbol, so every call a module's code makes into the C library is an undefined
symbol of that module's object files, whatever the source looks like (a call wrapped over lines, inside a `try`,
a function reference such as `let f = close`, a name no list foresaw). For each Swift target under Sources/ this
lists the undefined symbols of its objects (.build/debug/<Target>.build/*.o, `nm -u`) and keeps those the C library
defines (the dynamic symbols of libc.so.6, and libv4l2.so.0's v4l2_* device calls), the Swift Glibc overlay's wrappers (`Glibc.open`, `Glibc.fcntl`,
`Glibc.ioctl`, ...: variadic C functions Swift reaches through Swift functions) and the Swift APIs the allowlist
forbids (`forbid` lines: Foundation's Thread). Each must be allowed for its module or object file by
Scripts/syscall-allowlist.txt, else this fails naming module, symbol and object file. A module-scoped allowlist
entry that no object uses any more fails too: the list says what is called, no more.

It checks the debug build CI makes (-Onone: no cross-module inlining, so a SystemIO wrapper's own calls stay in
SystemIO's objects). C targets (Sources/C*) are not checked: they are the thin C shims.

Usage: check-syscalls.py [--build-dir DIR] [--allowlist FILE] [--sources DIR]
Exit 0: clean; 1: calls not allowed (or stale entries); 2: cannot check (no build, bad allowlist).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail_setup(message):
    print(f"check-syscalls: {message}", file=sys.stderr)
    sys.exit(2)


def tool(*names):
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    fail_setup(f"none of {', '.join(names)} is installed")


def default_build_dir():
    """.build/debug (a link SwiftPM makes at the end of a build), else the one .build/<triple>/debug."""
    link = os.path.join(ROOT, ".build", "debug")
    if os.path.isdir(link):
        return link
    found = sorted(d for d in (os.path.join(ROOT, ".build", t, "debug") for t in os.listdir(os.path.join(ROOT, ".build"))) if os.path.isdir(d)) \
        if os.path.isdir(os.path.join(ROOT, ".build")) else []
    return found[0] if len(found) == 1 else link


def swift_targets(sources):
    """Targets under Sources/ with Swift files (the C shims have none)."""
    targets = []
    for name in sorted(os.listdir(sources)):
        d = os.path.join(sources, name)
        if os.path.isdir(d) and any(f.endswith(".swift") for _, _, fs in os.walk(d) for f in fs):
            targets.append(name)
    return targets


def module_objects(build_dir, target):
    """The target's object files: those its output-file-map.json names (a source file removed since an earlier
    build leaves its object behind), else every .o in its folder."""
    d = os.path.join(build_dir, re.sub(r"\W", "_", target) + ".build")  # SwiftPM's folder: a C identifier (vivid_check)
    if not os.path.isdir(d):
        return None
    objects = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".o"))
    mapping = os.path.join(d, "output-file-map.json")
    if os.path.isfile(mapping):
        with open(mapping) as f:
            named = {os.path.realpath(v["object"]) for v in json.load(f).values() if isinstance(v, dict) and "object" in v}
        objects = [o for o in objects if os.path.realpath(o) in named]
    return objects


def library_symbols(soname, at_least):
    """Every function and object a shared library defines (its dynamic symbols, versions stripped), found by
    ldconfig (libc.so.6, libv4l2.so.0)."""
    path = None
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*" + re.escape(soname) + r" \(([^)]*)\) => (\S+)", line)
            if m and ("x86-64" in m.group(1) or "AArch64" in m.group(1) or path is None):
                path = m.group(2)
    except OSError:
        pass
    for lib in ["/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64"]:
        if path is None and os.path.exists(os.path.join(lib, soname)):
            path = os.path.join(lib, soname)
    if path is None:
        fail_setup(f"cannot find {soname}")
    out = subprocess.run([NM, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2].split("@")[0])
    if len(names) < at_least:
        fail_setup(f"{path} defines only {len(names)} symbols: not {soname}?")
    return names


def libc_symbols():
    """The C library's symbols, and libv4l2's: its v4l2_open/v4l2_ioctl/v4l2_mmap... are device calls like the C
    library's (libv4l2 makes the system calls behind them), so they are checked the same way."""
    return library_symbols("libc.so.6", 1000) | library_symbols("libv4l2.so.0", 5)


class Allowlist:
    def __init__(self, path):
        self.path = path
        self.allowed = {}  # scope ("*", "Module" or "Module/File.swift") -> {symbol: line number}
        self.forbidden = []  # (demangled name, line number)
        with open(path) as f:
            for n, raw in enumerate(f, 1):
                text, _, reason = raw.partition("#")
                words = text.split()
                if not words:
                    continue
                where = f"{path}:{n}"
                if not reason.strip():
                    fail_setup(f"{where}: an entry needs its reason after '#'")
                if words[0] == "allow" and len(words) >= 3:
                    for symbol in words[2:]:
                        self.allowed.setdefault(words[1], {})[symbol] = n
                elif words[0] == "forbid" and len(words) == 2:
                    self.forbidden.append((words[1], n))
                else:
                    fail_setup(f"{where}: expected 'allow SCOPE SYMBOL... # reason' or 'forbid Module.Name # reason'")

    def permits(self, target, obj, symbol):
        """The entry that allows it: (scope, symbol) or None."""
        source = os.path.basename(obj)[: -len(".o")]
        for scope in (f"{target}/{source}", target, "*"):
            entries = self.allowed.get(scope, {})
            for s in (symbol, "*"):
                if s in entries:
                    return (scope, s)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=default_build_dir())
    parser.add_argument("--allowlist", default=os.path.join(ROOT, "Scripts", "syscall-allowlist.txt"))
    parser.add_argument("--sources", default=os.path.join(ROOT, "Sources"))
    args = parser.parse_args()

    allowlist = Allowlist(args.allowlist)
    targets = swift_targets(args.sources)
    objects = {}  # object path -> target
    for t in targets:
        found = module_objects(args.build_dir, t)
        if not found:
            fail_setup(f"no object files for {t} in {args.build_dir}: run `swift build` first")
        for o in found:
            objects[o] = t
    scopes = set(targets) | {f"{t}/{os.path.basename(o)[:-2]}" for o, t in objects.items()} | {"*"}
    for scope, entries in allowlist.allowed.items():
        if scope not in scopes:
            fail_setup(f"{args.allowlist}:{min(entries.values())}: no Swift target or object file {scope}")

    # Undefined symbols of every object, in one nm call: "path.o: symbol U" lines (POSIX format).
    undefined = {}  # object -> set of symbols
    out = subprocess.run([NM, "-u", "-A", "-P", *objects], capture_output=True, text=True)
    if out.returncode != 0:
        fail_setup(f"nm failed: {out.stderr.strip()[:2000]}")
    for line in out.stdout.splitlines():
        obj, _, rest = line.rpartition(": ")
        if not rest:
            continue
        obj = re.sub(r"\[[^\]]*\]$", "", obj)  # "archive[member]" (not made by SwiftPM, but harmless)
        undefined.setdefault(obj, set()).add(rest.split()[0])

    libc = libc_symbols()
    # Swift symbols: the Glibc overlay's functions and the forbidden Swift APIs, by their demangled names.
    swift_symbols = sorted({s for syms in undefined.values() for s in syms if s.startswith("$s")})
    demangled = {}
    if swift_symbols:
        r = subprocess.run([DEMANGLE, "--simplified=false"], input="\n".join(swift_symbols), capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run([DEMANGLE], input="\n".join(swift_symbols), capture_output=True, text=True)
        lines = r.stdout.splitlines()
        if len(lines) != len(swift_symbols):
            fail_setup(f"swift demangle returned {len(lines)} lines for {len(swift_symbols)} symbols")
        demangled = dict(zip(swift_symbols, lines))
    forbidden = [(name, re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")) for name, _ in allowlist.forbidden]

    def checked_name(symbol):
        """The name to check a symbol under, or None when it is not the C library's or a forbidden API."""
        if symbol in libc:
            return symbol
        text = demangled.get(symbol)
        if text is None:
            return None
        m = re.match(r"(?:.* for )?Glibc\.(\w+)\(", text)  # a function (the overlay's constants are getters)
        if m:
            return m.group(1)
        for name, pattern in forbidden:
            if pattern.search(text):
                return name
        return None

    violations = []  # (target, name, object, symbol)
    used = set()  # (scope, symbol) entries that allowed something
    for obj in sorted(objects):
        target = objects[obj]
        for symbol in sorted(undefined.get(obj, ())):
            name = checked_name(symbol)
            if name is None:
                continue
            entry = allowlist.permits(target, obj, name)
            if entry:
                used.add(entry)
            elif not any(v[:3] == (target, name, obj) for v in violations):  # once per name and object
                violations.append((target, name, obj, symbol))

    status = 0
    for target, name, obj, symbol in violations:
        rel = os.path.relpath(obj, ROOT) if obj.startswith(ROOT) else obj
        raw = "" if symbol == name else f" (symbol {symbol})"
        print(f"{target}: uses {name}{raw} in {rel}")
        status = 1
    for scope, entries in sorted(allowlist.allowed.items()):
        if scope == "*":
            continue  # the functions every module may call: not required to be called
        for symbol, n in sorted(entries.items(), key=lambda e: e[1]):
            if (scope, symbol) not in used:
                print(f"{args.allowlist}:{n}: {scope} no longer calls {symbol}: remove it from the allowlist")
                status = 1
    if violations:
        print(
            "check-syscalls: make these calls through Sources/SystemIO (V4L2 device calls: V4L2Capture/Kernel.swift), "
            f"or allow them in {os.path.relpath(args.allowlist, ROOT)} with a reason",
            file=sys.stderr,
        )
    if status == 0:
        print(f"check-syscalls: {len(objects)} object files of {len(targets)} Swift targets call the C library only as allowed")
    return status


NM = tool("llvm-nm", "nm")
DEMANGLE = tool("swift-demangle")
if __name__ == "__main__":
    sys.exit(main())
