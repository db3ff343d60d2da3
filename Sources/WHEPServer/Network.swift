import CapturePipeline

/// IPv4 addresses of the interfaces that are up (loopback last), for candidates when listening on 0.0.0.0.
public func interfaceAddresses() -> [String] { upIPv4InterfaceAddresses() }
