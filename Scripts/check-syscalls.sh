#!/usr/bin/env bash
# One I/O layer (#19, #38), checked at link level after `swift build` (Scripts/test.sh runs it after the build):
# the C library's calls (sockets, files, memory maps, clocks, sleeping, threads, signals, process limits) are made
# in Sources/SystemIO (which retries EINTR and captures errno in one place), V4L2's device calls in
# Sources/V4L2Capture/Kernel.swift, and anywhere else only as Scripts/syscall-allowlist.txt allows, with its reason.
#
# Scripts/check-syscalls.py lists each Swift target's undefined symbols (nm -u over .build/debug/<Target>.build/*.o)
# and fails naming module, symbol and object file for every C-library symbol (anything libc.so.6 defines, the
# Glibc overlay's wrappers, Foundation's Thread) the allowlist does not allow there. Being the linker's view, it
# sees every call however it is written: over two lines, in a `try`, as a function reference (`let f = close`).
# Arguments go to the script (--build-dir DIR, --allowlist FILE). Tests/UsageTests/SyscallCheckTests.swift plants
# calls in a scratch copy of a build and checks that each is caught.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 Scripts/check-syscalls.py "$@"
