// libpipewire-0.3 (Debian: libpipewire-0.3-dev), found with pkg-config. Only the C targets CPipeWire and
// pw-test-camera include these headers; Swift code sees PipeWire through CPipeWire's small API.
#include <pipewire/pipewire.h>
