// libcamera (Debian: libcamera-dev), found with pkg-config. A C++ library: only the C++ target CLibCameraShim
// includes its headers; Swift code sees libcamera through CLibCameraShim's small C API. This header stays empty so
// that the module can be imported for its link flags without pulling C++ into Swift.
