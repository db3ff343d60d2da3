// libFuzzer's driver entry point (compiler-rt, LLVM ≥ 11): runs the fuzzing loop with our callback.
// SwiftPM links executables with their own `main` (renamed <Module>_main), so each target's main.swift calls
// this instead of relying on libFuzzer's `main`.
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
