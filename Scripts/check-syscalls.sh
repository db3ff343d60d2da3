#!/usr/bin/env bash
# One I/O layer (#19): sockets, files, memory maps, sleeping and threads go through Sources/SystemIO (which
# retries EINTR and captures errno in one place), and V4L2's device calls through Sources/V4L2Capture/Kernel.swift.
# This fails, naming file:line, when any other Swift source under Sources/ calls a system call or libc I/O
# function directly.
#
# Not checked: Sources/SystemIO and Sources/V4L2Capture/Kernel.swift (the two choke points), the C shim targets
# (Sources/C*: C headers and shims, no Swift), and Sources/vivid-check (a linear test script run inside the qemu
# VM against the vivid driver by Scripts/vivid-vm-test.sh; not library code).
#
# A direct call is the bare name (or `Glibc.name`) followed by `(`, with unlabelled arguments, outside comments
# and string literals. Not flagged: method and member calls (`writer.write(`, `.close()`), declarations
# (`func write(`), calls with no arguments or with argument labels (Swift methods: `close()`, `open(device:`,
# `write(data, to:` — C functions imported into Swift have neither), `try` calls (C functions do not throw), and labels (`read:`). `Thread {` and
# `Thread(` (Foundation threads) are flagged too: threads are SystemIO's `WorkerThread`.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
find Sources -name '*.swift' \
    ! -path 'Sources/SystemIO/*' ! -path 'Sources/V4L2Capture/Kernel.swift' ! -path 'Sources/vivid-check/*' ! -path 'Sources/C*/*' \
    | sort | xargs perl -e '
    my @names = qw(socket bind connect listen accept accept4 sendto sendmsg recvfrom recvmsg recv send poll ppoll select
                   setsockopt getsockopt getsockname getpeername getifaddrs freeifaddrs pthread_create pthread_join pthread_detach
                   open openat creat close read pread write pwrite fsync fdatasync ftruncate truncate rename renameat unlink unlinkat
                   mmap munmap mprotect usleep nanosleep clock_nanosleep sleep ioctl v4l2_ioctl fcntl flock fstat lseek eventfd
                   pipe pipe2 dup dup2 epoll_create1 epoll_ctl epoll_wait);
    my $names = join("|", @names) . "|inotify_\\w+";
    my $status = 0;
    for my $file (@ARGV) {
        open(my $fh, "<", $file) or die "$file: $!";
        my $n = 0; my $inBlock = 0;
        while (my $line = <$fh>) {
            $n++;
            my $code = $line;
            # Block comments, then string literals (their text is not code), then line comments.
            if ($inBlock) { if ($code =~ s{^.*?\*/}{}) { $inBlock = 0 } else { next } }
            $code =~ s{/\*.*?\*/}{}g;
            if ($code =~ s{/\*.*$}{}) { $inBlock = 1 }
            $code =~ s{"(?:[^"\\]|\\.)*"}{""}g;
            $code =~ s{//.*$}{};
            my @hits;
            push @hits, "Thread" if $code =~ /(?<![\w.])Thread\s*[({]/ || $code =~ /\bThread\.detachNewThread\b/;
            while ($code =~ /(?<![\w.])(?:Glibc\.)?($names)\s*(\((?:[^()]++|(?2))*\))/g) {
                my ($name, $args) = ($1, $2);
                my $before = substr($code, 0, $-[0]);
                next if $before =~ /\bfunc\s+$/;                 # a declaration
                next if $before =~ /\btry[!?]?\s+$/;             # a throwing call: Swift, not C
                my $inner = substr($args, 1, -1);
                next if $inner =~ /^\s*$/;                          # no arguments: a Swift method
                (my $top = $inner) =~ s/(\((?:[^()\[\]]++|(?1))*\)|\[(?:[^()\[\]]++|(?1))*\])/ /g;   # nested calls and arrays out
                next if $top =~ /(?:^|,)\s*[A-Za-z_]\w*\s*:(?!:)/;  # labelled arguments: a Swift method
                push @hits, $name;
            }
            if (@hits) {
                (my $text = $line) =~ s/^\s+|\s+$//g;
                print "$file:$n: direct call of " . join(", ", @hits) . ": $text\n";
                $status = 1;
            }
        }
    }
    print STDERR "check-syscalls: make these calls through Sources/SystemIO (or Kernel.swift for V4L2 device calls)\n" if $status;
    exit $status;
' || status=1
exit $status
