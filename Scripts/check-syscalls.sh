#!/usr/bin/env bash
# One I/O layer (#19): sockets, files, memory maps, sleeping and threads go through Sources/SystemIO (which
# retries EINTR and captures errno in one place), and V4L2's device calls through Sources/V4L2Capture/Kernel.swift.
# This fails, naming file:line, when any other Swift source under Sources/ calls a syscall or libc I/O function
# directly.
#
# Not checked: Sources/SystemIO and Sources/V4L2Capture/Kernel.swift (the two choke points), the C shim targets
# (Sources/C*: C headers, no Swift), and Sources/vivid-check (a linear test script that runs inside the qemu VM
# against the vivid driver, not library code).
#
# A call is the bare name (or `Glibc.name`) followed by `(`: method calls (`writer.write(`, `.close()`),
# declarations (`func write(`), labels (`read:`) and comments do not count.
set -euo pipefail
cd "$(dirname "$0")/.."

names='socket|bind|connect|listen|accept4?|sendto|sendmsg|recvfrom|recvmsg|recv|send|poll|ppoll|select|epoll_[a-z_]+|setsockopt|getsockopt|getsockname|getifaddrs|freeifaddrs|pthread_create|pthread_join|Thread|open|openat|creat|close|read|pread|write|pwrite|fsync|fdatasync|ftruncate|truncate|rename|renameat2?|unlink|unlinkat|mmap|munmap|usleep|nanosleep|clock_nanosleep|sleep|ioctl|v4l2_ioctl|fcntl|eventfd|inotify_[a-z_]+|pipe2?|dup2?|lseek|fopen|fdopen|fwrite|fread|fclose|fflush'
# Not preceded by a letter, digit, `_`, `.` (a method or a member) or `func ` / `init` (a declaration).
pattern="(^|[^A-Za-z0-9_.])(Glibc\.)?($names)[[:space:]]*\("

status=0
while IFS= read -r file; do
    case "$file" in
        Sources/SystemIO/*|Sources/V4L2Capture/Kernel.swift|Sources/vivid-check/*|Sources/C*/*) continue ;;
    esac
    # Strip comments (whole-line and trailing `//`, outside of string literals only roughly: a `//` inside a
    # string would hide the rest of its line, which errs on the side of not flagging) and string literals.
    hits=$(sed -E -e 's/"([^"\\]|\\.)*"/""/g' -e 's#//.*$##' "$file" \
        | grep -nE "$pattern" \
        | grep -vE "func[[:space:]]+($names)[[:space:]]*[(<]" || true)
    if [ -n "$hits" ]; then
        while IFS= read -r hit; do
            echo "$file:${hit%%:*}: direct syscall: $(echo "${hit#*:}" | sed -E 's/^[[:space:]]+//')"
        done <<< "$hits"
        status=1
    fi
done < <(find Sources -name '*.swift' | sort)

if [ "$status" -ne 0 ]; then
    echo "check-syscalls: call these through Sources/SystemIO (or Kernel.swift for V4L2 device calls)" >&2
fi
exit $status
